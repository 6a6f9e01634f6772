#include "core/hf_checkpoint.h"

#include <sys/mman.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <torch/csrc/autograd/grad_mode.h>
#include <nlohmann/json.hpp>

#include "core/hf_config.h"
#include "core/llama_model.h"
#include "core/safetensors.h"

namespace relulens::core {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string shapeText(const std::vector<int64_t>& shape) {
    std::string s;
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "×" : "") + std::to_string(shape[i]);
    return s.empty() ? "scalar" : s;
}

bool endsWith(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() &&
           s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

Result<json> readJson(const std::string& path) {
    std::ifstream in(path);
    if (!in) return Error{path + ": cannot open the file"};
    try {
        json j;
        in >> j;
        return j;
    } catch (const json::exception& e) {
        return Error{path + ": not valid JSON (" + e.what() + ")"};
    }
}

// One allocation holds every float32 weight, backed by huge pages where the kernel allows:
// touching a few gigabytes of fresh 4 KB pages cost more (measured 15.8 s for 4 GB) than reading
// and converting the weights; with huge pages 4.2 s.
class WeightArena : public std::enable_shared_from_this<WeightArena> {
public:
    static std::shared_ptr<WeightArena> create(size_t bytes) {
        auto arena = std::shared_ptr<WeightArena>(new WeightArena);
        arena->bytes_ = std::max<size_t>(bytes, 1);
        void* p = mmap(nullptr, arena->bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        if (p == MAP_FAILED) return nullptr;
        madvise(p, arena->bytes_, MADV_HUGEPAGE);
        arena->base_ = static_cast<char*>(p);
        return arena;
    }
    ~WeightArena() {
        if (base_) munmap(base_, bytes_);
    }
    static size_t footprint(int64_t elements) { return (size_t(elements) * 4 + 63) / 64 * 64; }
    // A tensor of `shape` in the next free part of the arena, which it keeps alive.
    torch::Tensor take(const std::vector<int64_t>& shape, int64_t elements) {
        float* at = reinterpret_cast<float*>(base_ + used_);
        used_ += footprint(elements);
        auto self = shared_from_this();
        return torch::from_blob(
            at, shape, [self](void*) {}, torch::TensorOptions().dtype(torch::kFloat32));
    }

private:
    WeightArena() = default;
    char* base_ = nullptr;
    size_t bytes_ = 0, used_ = 0;
};

struct Located {
    const SafetensorsMapping* file = nullptr;
    const SafetensorsEntry* entry = nullptr;
};

struct OpenFolder {
    HfConfig config;
    ModelInfo info;
    std::vector<std::shared_ptr<SafetensorsMapping>> files;
    std::map<std::string, Located> tensors;  // every tensor the model uses
    std::string listing;                     // the file that lists the tensors (for messages)
    Tokenizer tokenizer;
};

// The safetensors files of the folder, each opened (header read and checked, data mapped).
Result<std::vector<std::shared_ptr<SafetensorsMapping>>> openWeights(const fs::path& dir,
                                                                     std::string* listing,
                                                                     json* weightMap) {
    std::error_code ec;
    const fs::path index = dir / "model.safetensors.index.json";
    const fs::path single = dir / "model.safetensors";
    std::vector<std::string> names;
    if (fs::exists(index, ec)) {
        auto j = readJson(index.string());
        if (!j) return Error{j.error()};
        if (!j->is_object() || !j->contains("weight_map") || !(*j)["weight_map"].is_object()) {
            return Error{index.string() + ": no weight_map object"};
        }
        *weightMap = (*j)["weight_map"];
        std::set<std::string> unique;
        for (auto it = weightMap->begin(); it != weightMap->end(); ++it) {
            if (!it.value().is_string())
                return Error{index.string() + ": weight_map entries must be file names"};
            const std::string file = it.value().get<std::string>();
            if (file.find('/') != std::string::npos || file == "..") {
                return Error{index.string() + ": weight_map names '" + file +
                             "', outside the folder"};
            }
            if (unique.insert(file).second) names.push_back(file);
        }
        *listing = index.string();
    } else if (fs::exists(single, ec)) {
        names.push_back("model.safetensors");
        *listing = single.string();
    } else {
        for (const auto& entry : fs::directory_iterator(dir, ec)) {
            const std::string name = entry.path().filename().string();
            if (name.rfind("pytorch_model", 0) == 0 && endsWith(name, ".bin")) {
                return Error{(dir / name).string() +
                             ": a pickle checkpoint, which ReluLens never opens (it can run code); "
                             "convert it to model.safetensors first"};
            }
        }
        return Error{single.string() + ": missing (nor is there a model.safetensors.index.json)"};
    }
    std::vector<std::shared_ptr<SafetensorsMapping>> files;
    for (const auto& name : names) {
        const fs::path path = dir / name;
        if (!fs::exists(path, ec)) {
            return Error{path.string() + ": missing (" + fs::path(*listing).filename().string() +
                         " names it)"};
        }
        auto file = SafetensorsMapping::open(path.string());
        if (!file) return Error{file.error()};
        files.push_back(*file);
    }
    return files;
}

Status locateTensors(OpenFolder& f, const json& weightMap) {
    std::map<std::string, Located> all;
    if (!weightMap.is_null()) {
        for (auto it = weightMap.begin(); it != weightMap.end(); ++it) {
            const std::string fileName = it.value().get<std::string>();
            const SafetensorsMapping* file = nullptr;
            for (const auto& m : f.files) {
                if (fs::path(m->path()).filename() == fileName) file = m.get();
            }
            const auto* entry = file ? file->find(it.key()) : nullptr;
            if (!entry) {
                return Error{f.listing + ": names tensor '" + it.key() + "' in " + fileName +
                             ", which does not hold it"};
            }
            all[it.key()] = {file, entry};
        }
    }
    for (const auto& file : f.files) {
        for (const auto& e : file->entries()) {
            if (!all.count(e.name)) all[e.name] = {file.get(), &e};
        }
    }
    const auto& c = f.config;
    std::set<std::string> expected;
    for (const auto& t : hfTensorShapes(c)) {
        expected.insert(t.name);
        auto it = all.find(t.name);
        if (it == all.end()) {
            if (t.name == "lm_head.weight") continue;  // absent: the embedding serves (tied)
            return Error{f.listing + ": tensor '" + t.name +
                         "' is missing (config.json expects it)"};
        }
        if (it->second.entry->shape != t.shape) {
            return Error{it->second.file->path() + ": tensor '" + t.name + "' has shape " +
                         shapeText(it->second.entry->shape) + ", config says " +
                         shapeText(t.shape)};
        }
        f.tensors[t.name] = it->second;
    }
    for (const auto& [name, where] : all) {
        if (expected.count(name) || endsWith(name, "rotary_emb.inv_freq")) continue;
        if (name == "lm_head.weight" && c.tied) continue;  // tied: the embedding is the head
        return Error{where.file->path() + ": unexpected tensor '" + name + "' (not part of a " +
                     c.family + " model with this config.json)"};
    }
    return {};
}

// Llama 3's original/tokenizer.model is a tiktoken file: lines of "<base64 piece> <rank>".
bool looksLikeTiktoken(const fs::path& path) {
    std::ifstream in(path);
    std::string line;
    if (!std::getline(in, line)) return false;
    const auto space = line.find(' ');
    if (space == std::string::npos || space == 0) return false;
    for (size_t i = 0; i < space; ++i) {
        const char c = line[i];
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '/' && c != '=')
            return false;
    }
    return line.find_first_not_of("0123456789", space + 1) == std::string::npos;
}

// tokenizer.model when it is SentencePiece, else tokenizer.json (byte-level BPE).
Result<Tokenizer> chooseTokenizer(const fs::path& dir) {
    std::error_code ec;
    const fs::path model = dir / "tokenizer.model", json = dir / "tokenizer.json";
    const fs::path config = dir / "tokenizer_config.json";
    const bool hasJson = fs::exists(json, ec);
    std::string modelProblem;
    if (fs::exists(model, ec)) {
        auto spm = Tokenizer::load(model.string());
        if (spm) return spm;
        modelProblem = looksLikeTiktoken(model)
                           ? model.string() + " is a tiktoken vocabulary, not a SentencePiece model"
                           : spm.error();
        if (!hasJson) return Error{modelProblem + ", and there is no tokenizer.json beside it"};
    }
    if (!hasJson)
        return Error{model.string() +
                     ": missing (no tokenizer.model or tokenizer.json in the folder)"};
    return Tokenizer::loadJson(json.string(),
                               fs::exists(config, ec) ? config.string() : std::string());
}

Status openTokenizer(OpenFolder& f, const fs::path& dir) {
    auto tokenizer = chooseTokenizer(dir);
    if (!tokenizer) return Error{tokenizer.error()};
    if (tokenizer->vocabSize() > f.config.vocab) {
        return Error{tokenizer->path() + ": the tokenizer has " +
                     std::to_string(tokenizer->vocabSize()) +
                     " pieces, config.json says vocab_size " + std::to_string(f.config.vocab)};
    }
    if (tokenizer->kind() == "bpe") {  // its template and tokenizer_config.json chose the BOS
        f.tokenizer = std::move(*tokenizer);
        return {};
    }
    // SentencePiece: tokenizer_config.json's add_bos_token, else the family's habit (llama,
    // mistral and gemma add it; qwen has none).
    bool addBos = f.config.family != "qwen2" && f.config.family != "qwen3";
    std::string bosPiece;
    std::error_code ec;
    const fs::path tokenizerConfig = dir / "tokenizer_config.json";
    if (fs::exists(tokenizerConfig, ec)) {
        auto j = readJson(tokenizerConfig.string());
        if (!j) return Error{j.error()};
        if (j->contains("add_bos_token") && (*j)["add_bos_token"].is_boolean()) {
            addBos = (*j)["add_bos_token"].get<bool>();
        }
        if (j->contains("bos_token")) {
            const auto& b = (*j)["bos_token"];
            if (b.is_string())
                bosPiece = b.get<std::string>();
            else if (b.is_object() && b.contains("content") && b["content"].is_string())
                bosPiece = b["content"].get<std::string>();
        }
    }
    if (addBos) {
        int64_t bos = f.config.bosId;
        if (bos < 0 && !bosPiece.empty()) bos = tokenizer->pieceId(bosPiece);
        if (bos < 0 || bos >= tokenizer->vocabSize()) {
            return Error{
                dir.string() + ": the tokenizer should add a BOS token, but " +
                (bos < 0
                     ? std::string(
                           "neither config.json (bos_token_id) nor tokenizer_config.json names one")
                     : "bos_token_id " + std::to_string(bos) + " is outside the tokenizer's " +
                           std::to_string(tokenizer->vocabSize()) + " pieces")};
        }
        tokenizer->setBos(bos);
    }
    f.tokenizer = std::move(*tokenizer);
    return {};
}

Result<OpenFolder> openFolder(const std::string& folder) {
    const fs::path dir(folder);
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return Error{folder + ": no such model folder"};
    const std::string configPath = (dir / "config.json").string();
    auto j = readJson(configPath);
    if (!j) return Error{j.error()};
    auto config = hfConfigFromJson(*j);
    if (!config) return Error{configPath + ": " + config.error()};
    OpenFolder f;
    f.config = std::move(*config);
    std::string name = dir.filename().string();
    if (name.empty()) name = dir.parent_path().filename().string();
    f.info = hfModelInfo(f.config, name);
    json weightMap;
    auto files = openWeights(dir, &f.listing, &weightMap);
    if (!files) return Error{files.error()};
    f.files = std::move(*files);
    if (auto s = locateTensors(f, weightMap); !s) return Error{s.error()};
    std::map<std::string, int64_t> dtypes;
    for (const auto& [n, where] : f.tensors) dtypes[where.entry->dtype] += where.entry->elements();
    for (const auto& [dtype, count] : dtypes) {
        if (f.info.storage.empty() || count > dtypes[f.info.storage]) f.info.storage = dtype;
    }
    if (auto s = checkMemoryFor(folder, f.info.parameters); !s) return Error{s.error()};
    if (auto s = openTokenizer(f, dir); !s) return Error{s.error()};
    return f;
}

}  // namespace

Result<ModelInfo> checkHfFolder(const std::string& folder) {
    auto f = openFolder(folder);
    if (!f) return Error{f.error()};
    return f->info;
}

Result<LoadedModel> loadHfFolder(const std::string& folder, const LoadOptions& options) {
    auto opened = openFolder(folder);
    if (!opened) return Error{opened.error()};
    OpenFolder& f = *opened;
    torch::NoGradGuard noGrad;
    uint64_t total = 0, done = 0;
    size_t arenaBytes = 0;
    for (const auto& [name, where] : f.tensors) {
        total += where.entry->end - where.entry->begin;
        arenaBytes += WeightArena::footprint(where.entry->elements());
    }
    auto arena = WeightArena::create(arenaBytes);
    if (!arena)
        return Error{folder + ": cannot allocate " + std::to_string(arenaBytes >> 20) +
                     " MB for the weights"};
    auto read = [&](const std::string& name) -> Result<torch::Tensor> {
        if (options.cancel && options.cancel->load())
            return Error{"loading " + folder + " was cancelled"};
        const Located& where = f.tensors.at(name);
        auto t = arena->take(where.entry->shape, where.entry->elements());
        const int64_t bad = where.file->convert(*where.entry, t.data_ptr<float>());
        if (bad > 0) {
            return Error{where.file->path() + ": tensor '" + name + "' holds " +
                         std::to_string(bad) + " NaN or infinite value(s)"};
        }
        done += where.entry->end - where.entry->begin;
        if (options.progress) options.progress(total ? double(done) / double(total) : 1.0, name);
        return t;
    };
    auto optional = [&](const std::string& name) -> Result<torch::Tensor> {
        if (!f.tensors.count(name)) return torch::Tensor();
        return read(name);
    };
    const auto& c = f.config;
    // Gemma stores its norm weights zero-centred and multiplies by (1 + w).
    auto norm = [&](const std::string& name) -> Result<torch::Tensor> {
        auto t = read(name);
        if (t && c.gemma) t->add_(1.0);
        return t;
    };
    LlamaModel::Weights w;
    struct Slot {
        std::string name;
        torch::Tensor* target;
        bool isNorm;
        bool required;
    };
    std::vector<Slot> slots;
    slots.push_back({"model.embed_tokens.weight", &w.embedding, false, true});
    w.layers.resize(size_t(c.layers));
    for (int64_t l = 0; l < c.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        auto& L = w.layers[size_t(l)];
        slots.push_back({p + "input_layernorm.weight", &L.inputNorm, true, true});
        slots.push_back({p + "post_attention_layernorm.weight", &L.postNorm, true, true});
        slots.push_back({p + "self_attn.q_proj.weight", &L.wq, false, true});
        slots.push_back({p + "self_attn.k_proj.weight", &L.wk, false, true});
        slots.push_back({p + "self_attn.v_proj.weight", &L.wv, false, true});
        slots.push_back({p + "self_attn.o_proj.weight", &L.wo, false, true});
        slots.push_back({p + "self_attn.q_proj.bias", &L.bq, false, false});
        slots.push_back({p + "self_attn.k_proj.bias", &L.bk, false, false});
        slots.push_back({p + "self_attn.v_proj.bias", &L.bv, false, false});
        slots.push_back({p + "self_attn.o_proj.bias", &L.bo, false, false});
        slots.push_back({p + "self_attn.q_norm.weight", &L.qNorm, false, false});
        slots.push_back({p + "self_attn.k_norm.weight", &L.kNorm, false, false});
        slots.push_back({p + "mlp.gate_proj.weight", &L.ffn.gate, false, true});
        slots.push_back({p + "mlp.up_proj.weight", &L.ffn.up, false, true});
        slots.push_back({p + "mlp.down_proj.weight", &L.ffn.down, false, true});
        slots.push_back({p + "mlp.gate_proj.bias", &L.ffn.gateBias, false, false});
        slots.push_back({p + "mlp.up_proj.bias", &L.ffn.upBias, false, false});
        slots.push_back({p + "mlp.down_proj.bias", &L.ffn.downBias, false, false});
    }
    slots.push_back({"model.norm.weight", &w.finalNorm, true, true});
    if (!c.tied) slots.push_back({"lm_head.weight", &w.output, false, false});
    for (const auto& s : slots) {
        auto t = s.isNorm ? norm(s.name) : s.required ? read(s.name) : optional(s.name);
        if (!t) return Error{t.error()};
        *s.target = std::move(*t);
    }
    if (!w.output.defined()) w.output = w.embedding;  // tied, or no lm_head in the files
    f.files.clear();  // unmapped: every weight is a float32 tensor now
    auto model = std::make_shared<LlamaModel>(f.config, f.info, std::move(w));
    return LoadedModel{folder, std::move(model), std::move(f.tokenizer)};
}

}  // namespace relulens::core
