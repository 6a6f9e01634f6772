// Reading and writing the safetensors format: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then raw little-endian data.
// Reading validates every bound before touching data; nothing in the file is executed.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/torch_include.h"

namespace relulens::core {

enum class StorageType { F32, F16, BF16 };

using TensorMap = std::map<std::string, torch::Tensor>;

struct SafetensorsFile {
    TensorMap tensors;  // converted to float32 on the CPU
    std::map<std::string, std::string> metadata;
};

// One tensor's place in a safetensors file.
struct SafetensorsEntry {
    std::string name;
    std::string dtype;  // F32, F16 or BF16
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;  // byte range in the data section
    int64_t elements() const;
};

// A safetensors file whose header is read and checked, and whose data is memory-mapped: a
// tensor's bytes are read only when it is converted, and given back to the system after.
class SafetensorsMapping {
public:
    ~SafetensorsMapping();
    SafetensorsMapping(const SafetensorsMapping&) = delete;
    SafetensorsMapping& operator=(const SafetensorsMapping&) = delete;

    static Result<std::shared_ptr<SafetensorsMapping>> open(const std::string& path);
    const std::string& path() const { return path_; }
    const std::vector<SafetensorsEntry>& entries() const { return entries_; }
    const SafetensorsEntry* find(const std::string& name) const;
    const std::map<std::string, std::string>& metadata() const { return metadata_; }
    // A float32 CPU copy of the tensor; its mapped pages are released afterwards. Counts the
    // NaN and infinite values into *nonFinite when given (in the same pass).
    torch::Tensor toFloat32(const SafetensorsEntry& entry, int64_t* nonFinite = nullptr) const;
    // The same into `into` (entry.elements() floats); returns the count of NaN and infinities.
    int64_t convert(const SafetensorsEntry& entry, float* into) const;

private:
    SafetensorsMapping() = default;
    std::string path_;
    std::vector<SafetensorsEntry> entries_;
    std::map<std::string, std::string> metadata_;
    const unsigned char* data_ = nullptr;  // start of the data section
    void* map_ = nullptr;
    size_t mapBytes_ = 0;
    uint64_t dataStart_ = 0;
};

Result<SafetensorsFile> readSafetensors(const std::string& path);
// Writes atomically (temporary file, then rename). Tensors are converted to `type`.
Status writeSafetensors(const std::string& path, const TensorMap& tensors, StorageType type,
                        const std::map<std::string, std::string>& metadata = {});

Result<StorageType> parseStorageType(const std::string& name);

}  // namespace relulens::core
