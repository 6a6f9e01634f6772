#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"

namespace relulens::core {

using nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u * 1024u * 1024u;

struct DtypeInfo {
    const char* name;
    torch::ScalarType scalar;
    size_t bytes;
};

const DtypeInfo kDtypes[] = {
    {"F32", torch::kFloat32, 4}, {"F16", torch::kFloat16, 2}, {"BF16", torch::kBFloat16, 2}};

const DtypeInfo* dtypeByName(const std::string& name) {
    for (const auto& d : kDtypes) {
        if (name == d.name) return &d;
    }
    return nullptr;
}

const DtypeInfo& dtypeOf(StorageType type) {
    switch (type) {
        case StorageType::F16:
            return kDtypes[1];
        case StorageType::BF16:
            return kDtypes[2];
        default:
            return kDtypes[0];
    }
}

std::string shapeText(const std::vector<int64_t>& shape) {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "×" : "") + std::to_string(shape[i]);
    return s.empty() ? "scalar" : s;
}

struct Entry {
    std::string name;
    const DtypeInfo* dtype;
    std::vector<int64_t> shape;
    uint64_t begin, end;
};

Result<Entry> parseEntry(const std::string& path, const std::string& name, const json& value,
                         uint64_t dataBytes) {
    const std::string where = path + ": tensor '" + name + "'";
    if (!value.is_object() || !value.contains("dtype") || !value.contains("shape") ||
        !value.contains("data_offsets")) {
        return Error{where + " lacks dtype, shape or data_offsets"};
    }
    const auto& dtype = value["dtype"];
    if (!dtype.is_string()) return Error{where + ": dtype must be a string"};
    Entry e{name, dtypeByName(dtype.get<std::string>()), {}, 0, 0};
    if (!e.dtype) {
        return Error{where + " has dtype " + dtype.get<std::string>() +
                     "; ReluLens reads F32, F16 and BF16"};
    }
    const auto& shape = value["shape"];
    if (!shape.is_array() || shape.size() > 8) return Error{where + ": bad shape"};
    constexpr uint64_t kMaxElements = 1ull << 40;
    uint64_t elements = 1;
    for (const auto& d : shape) {
        if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxElements) {
            return Error{where + ": bad shape entry " + d.dump()};
        }
        const uint64_t size = d.get<uint64_t>();
        e.shape.push_back(static_cast<int64_t>(size));
        // Checked before multiplying: the product of two allowed sizes can wrap around to 0.
        if (size != 0 && elements > kMaxElements / size) return Error{where + ": shape too large"};
        elements *= size;
    }
    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned()) {
        return Error{where + ": data_offsets must be two non-negative integers"};
    }
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    if (e.begin > e.end || e.end > dataBytes) {
        return Error{where + ": data_offsets [" + std::to_string(e.begin) + ", " +
                     std::to_string(e.end) + "] lie outside the " + std::to_string(dataBytes) +
                     " data bytes (file truncated?)"};
    }
    if (e.end - e.begin != elements * e.dtype->bytes) {
        return Error{where + ": shape " + shapeText(e.shape) + " of " + e.dtype->name + " needs " +
                     std::to_string(elements * e.dtype->bytes) + " bytes, data_offsets give " +
                     std::to_string(e.end - e.begin)};
    }
    return e;
}

}  // namespace

Result<StorageType> parseStorageType(const std::string& name) {
    if (name == "f32" || name == "F32") return StorageType::F32;
    if (name == "f16" || name == "F16") return StorageType::F16;
    if (name == "bf16" || name == "BF16") return StorageType::BF16;
    return Error{"unknown storage type '" + name + "' (expected f32, f16 or bf16)"};
}

int64_t SafetensorsEntry::elements() const {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

SafetensorsMapping::~SafetensorsMapping() {
    if (map_) munmap(map_, mapBytes_);
}

Result<std::shared_ptr<SafetensorsMapping>> SafetensorsMapping::open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Error{path + ": cannot open the file"};
    struct FdCloser {
        int fd;
        ~FdCloser() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return Error{path + ": not a regular file"};
    const uint64_t fileSize = uint64_t(st.st_size);
    if (fileSize < 8) {
        return Error{path + ": file is " + std::to_string(fileSize) +
                     " bytes, too short for a safetensors header"};
    }
    unsigned char lengthBytes[8];
    if (pread(fd, lengthBytes, 8, 0) != 8) return Error{path + ": cannot read the header"};
    uint64_t headerLength = 0;
    for (int i = 7; i >= 0; --i) headerLength = (headerLength << 8) | lengthBytes[i];
    if (headerLength > fileSize - 8) {
        return Error{path + ": header length " + std::to_string(headerLength) +
                     " runs past the end of the " + std::to_string(fileSize) + "-byte file"};
    }
    if (headerLength > kMaxHeaderBytes) {
        return Error{path + ": header length " + std::to_string(headerLength) +
                     " exceeds the 100 MB limit"};
    }
    std::string headerText(headerLength, '\0');
    if (pread(fd, headerText.data(), headerLength, 8) != ssize_t(headerLength)) {
        return Error{path + ": cannot read the header"};
    }
    json header;
    try {
        header = json::parse(headerText);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
        return Error{path + ": the header is not valid JSON (" + std::string(e.what()) + ")"};
    }
    if (!header.is_object()) return Error{path + ": the header is not a JSON object"};

    std::shared_ptr<SafetensorsMapping> file(new SafetensorsMapping);
    file->path_ = path;
    file->dataStart_ = 8 + headerLength;
    const uint64_t dataBytes = fileSize - file->dataStart_;
    std::vector<Entry> entries;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it.value().is_object()) return Error{path + ": __metadata__ is not an object"};
            for (auto m = it.value().begin(); m != it.value().end(); ++m) {
                if (m.value().is_string()) file->metadata_[m.key()] = m.value().get<std::string>();
            }
            continue;
        }
        auto entry = parseEntry(path, it.key(), it.value(), dataBytes);
        if (!entry) return Error{entry.error()};
        entries.push_back(std::move(*entry));
    }
    auto byBegin = entries;
    std::sort(byBegin.begin(), byBegin.end(),
              [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
    for (size_t i = 1; i < byBegin.size(); ++i) {
        if (byBegin[i].begin < byBegin[i - 1].end) {
            return Error{path + ": tensors '" + byBegin[i - 1].name + "' and '" + byBegin[i].name +
                         "' overlap"};
        }
    }
    for (const auto& e : entries) {
        file->entries_.push_back({e.name, e.dtype->name, e.shape, e.begin, e.end});
    }
    file->mapBytes_ = size_t(fileSize);
    void* map = mmap(nullptr, file->mapBytes_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) return Error{path + ": cannot map the file into memory"};
    file->map_ = map;
    file->data_ = static_cast<const unsigned char*>(map) + file->dataStart_;
    return file;
}

const SafetensorsEntry* SafetensorsMapping::find(const std::string& name) const {
    for (const auto& e : entries_) {
        if (e.name == name) return &e;
    }
    return nullptr;
}

torch::Tensor SafetensorsMapping::toFloat32(const SafetensorsEntry& e, int64_t* nonFinite) const {
    auto out = torch::empty(e.shape, torch::kFloat32);
    const int64_t bad = convert(e, out.data_ptr<float>());
    if (nonFinite) *nonFinite = bad;
    return out;
}

int64_t SafetensorsMapping::convert(const SafetensorsEntry& e, float* to) const {
    const unsigned char* bytes = data_ + e.begin;
    const int64_t n = e.elements();
    if (n == 0) return 0;  // an empty tensor (its float storage may be null)
    int64_t bad = 0;
    // One pass converts and counts values whose exponent bits are all ones (NaN or infinite).
    // Bytes are copied with memcpy: data offsets need not be aligned.
    if (e.dtype == "BF16") {
        constexpr int64_t kChunk = 4096;
        uint16_t in[kChunk];
        for (int64_t i = 0; i < n; i += kChunk) {
            const int64_t m = std::min(kChunk, n - i);
            std::memcpy(in, bytes + 2 * i, size_t(m) * 2);
            for (int64_t j = 0; j < m; ++j) {
                const uint32_t bits = uint32_t(in[j]) << 16;
                std::memcpy(to + i + j, &bits, 4);
                bad += (in[j] & 0x7F80) == 0x7F80;
            }
        }
    } else if (e.dtype == "F16") {
        auto raw = torch::from_blob(const_cast<unsigned char*>(bytes), {n}, torch::kFloat16);
        torch::from_blob(to, {n}, torch::kFloat32).copy_(raw);
        for (int64_t i = 0; i < n; ++i) {
            uint16_t h;
            std::memcpy(&h, bytes + 2 * i, 2);
            bad += (h & 0x7C00) == 0x7C00;
        }
    } else {
        std::memcpy(to, bytes, size_t(n) * 4);
        const uint32_t* bits = reinterpret_cast<const uint32_t*>(to);
        for (int64_t i = 0; i < n; ++i) bad += (bits[i] & 0x7F800000u) == 0x7F800000u;
    }
    // The pages this tensor occupied are no longer needed: give them back, so that resident
    // memory holds each weight once (as float32), not also its bytes on disk.
    const long page = sysconf(_SC_PAGESIZE);
    const uintptr_t first = (reinterpret_cast<uintptr_t>(bytes) + page - 1) / page * page;
    const uintptr_t last = (reinterpret_cast<uintptr_t>(bytes) + (e.end - e.begin)) / page * page;
    if (last > first) madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
    return bad;
}

Result<SafetensorsFile> readSafetensors(const std::string& path) {
    auto mapping = SafetensorsMapping::open(path);
    if (!mapping) return Error{mapping.error()};
    SafetensorsFile file;
    file.metadata = (*mapping)->metadata();
    for (const auto& e : (*mapping)->entries()) file.tensors[e.name] = (*mapping)->toFloat32(e);
    return file;
}

Status writeSafetensors(const std::string& path, const TensorMap& tensors, StorageType type,
                        const std::map<std::string, std::string>& metadata) {
    const DtypeInfo& dtype = dtypeOf(type);
    json header = json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::vector<torch::Tensor> ordered;
    uint64_t offset = 0;
    for (const auto& [name, tensor] : tensors) {
        auto data = tensor.detach().to(torch::kCPU).to(dtype.scalar).contiguous();
        const uint64_t bytes = static_cast<uint64_t>(data.numel()) * dtype.bytes;
        header[name] = {{"dtype", dtype.name},
                        {"shape", data.sizes().vec()},
                        {"data_offsets", {offset, offset + bytes}}};
        offset += bytes;
        ordered.push_back(data);
    }
    std::string headerText = header.dump();
    while ((8 + headerText.size()) % 8 != 0) headerText.push_back(' ');  // align data to 8 bytes
    return writeFileAtomically(path, [&](std::ostream& out) {
        uint64_t length = headerText.size();
        unsigned char lengthBytes[8];
        for (int i = 0; i < 8; ++i) lengthBytes[i] = static_cast<unsigned char>(length >> (8 * i));
        out.write(reinterpret_cast<const char*>(lengthBytes), 8);
        out.write(headerText.data(), static_cast<std::streamsize>(headerText.size()));
        for (const auto& data : ordered) {
            out.write(static_cast<const char*>(data.data_ptr()),
                      static_cast<std::streamsize>(data.numel() * dtype.bytes));
        }
    });
}

}  // namespace relulens::core
