#include "core/llama2c.h"

#include <filesystem>
#include <fstream>

#include <torch/csrc/autograd/grad_mode.h>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/model_folder.h"
#include "core/tokenizer.h"

namespace relulens::core {

namespace fs = std::filesystem;

namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42"
constexpr int64_t kV1Header = 256;

class Reader {
public:
    Reader(std::ifstream& in, std::string path) : in_(in), path_(std::move(path)) {}
    // The next shape.product() floats as a tensor.
    Result<torch::Tensor> floats(std::vector<int64_t> shape, const std::string& what) {
        auto t = torch::empty(shape, torch::kFloat32);
        in_.read(reinterpret_cast<char*>(t.data_ptr<float>()), std::streamsize(t.numel() * 4));
        if (!in_) return Error{path_ + ": the file ends inside " + what};
        if (!torch::isfinite(t).all().item<bool>()) {
            return Error{path_ + ": " + what + " holds NaN or infinite values"};
        }
        return t;
    }
    void skip(int64_t floats) { in_.seekg(floats * 4, std::ios::cur); }

private:
    std::ifstream& in_;
    std::string path_;
};

// llama2.c rotates pairs (2i, 2i+1) of each head; Hugging Face rotates (i, i + d/2). Row
// h·d + j·d/2 + i of the result is row h·d + 2i + j of w.
torch::Tensor toRotateHalf(const torch::Tensor& w, int64_t heads) {
    const int64_t rows = w.size(0), in = w.size(1), d = rows / heads;
    return w.view({heads, d / 2, 2, in}).transpose(1, 2).reshape({rows, in}).contiguous();
}

Status writeJson(const fs::path& path, const nlohmann::json& j) {
    return writeTextAtomically(path.string(), j.dump(2) + "\n");
}

}  // namespace

Result<Llama2cSummary> importLlama2c(const Llama2cImport& r) {
    torch::NoGradGuard noGrad;
    std::ifstream in(r.model, std::ios::binary | std::ios::ate);
    if (!in) return Error{r.model + ": cannot open the file"};
    const int64_t fileSize = int64_t(in.tellg());
    in.seekg(0);
    Llama2cSummary s;
    int32_t header[9] = {0};
    if (fileSize < 28) return Error{r.model + ": too short for a llama2.c header"};
    in.read(reinterpret_cast<char*>(header), 28);
    int64_t dataStart = 28;
    const int32_t* sizes = header;
    if (uint32_t(header[0]) == kMagic) {
        if (header[1] != 1) {
            return Error{r.model + ": llama2.c format version " + std::to_string(header[1]) +
                         " (ReluLens reads version 0 and 1; version 2 is quantised)"};
        }
        in.seekg(8);
        in.read(reinterpret_cast<char*>(header), 28);
        uint8_t shared = 0;
        in.read(reinterpret_cast<char*>(&shared), 1);
        s.version = 1;
        s.tied = shared != 0;
        dataStart = kV1Header;
    }
    s.dim = sizes[0], s.hiddenDim = sizes[1], s.layers = sizes[2], s.heads = sizes[3];
    s.kvHeads = sizes[4], s.vocab = sizes[5], s.seqLen = sizes[6];
    if (s.version == 0) {
        s.tied = s.vocab > 0;
        s.vocab = std::abs(s.vocab);
    }
    auto bad = [&](const std::string& why) {
        return Error{r.model + ": not a llama2.c model (" + why + ")"};
    };
    if (s.dim < 2 || s.dim > 65536 || s.hiddenDim < 1 || s.hiddenDim > 1 << 20 || s.layers < 1 ||
        s.layers > 512 || s.heads < 1 || s.heads > s.dim || s.kvHeads < 1 || s.kvHeads > s.heads ||
        s.vocab < 2 || s.vocab > 4'000'000 || s.seqLen < 1 || s.seqLen > 1 << 24) {
        return bad("sizes dim " + std::to_string(s.dim) + ", hidden " +
                   std::to_string(s.hiddenDim) + ", layers " + std::to_string(s.layers) +
                   ", heads " + std::to_string(s.heads) + "/" + std::to_string(s.kvHeads) +
                   ", vocab " + std::to_string(s.vocab));
    }
    if (s.dim % s.heads != 0 || s.heads % s.kvHeads != 0 || (s.dim / s.heads) % 2 != 0) {
        return bad("dim must split into heads of even size, and heads into kv heads");
    }
    const int64_t d = s.dim, hd = d / s.heads, kv = hd * s.kvHeads, L = s.layers, F = s.hiddenDim;
    const int64_t params =
        s.vocab * d * (s.tied ? 1 : 2) + L * (2 * d + d * d * 2 + kv * d * 2 + 3 * F * d) + d;
    const int64_t expected = dataStart + 4 * (params + (s.version == 0 ? s.seqLen * hd : 0));
    if (fileSize != expected) {
        return bad("the file has " + std::to_string(fileSize) + " bytes; a v" +
                   std::to_string(s.version) + " model of these sizes has " +
                   std::to_string(expected));
    }
    if (auto m = checkMemoryFor(r.model, params * 2); !m) return Error{m.error()};
    auto tokenizer = Tokenizer::load(r.tokenizer);
    if (!tokenizer) return Error{tokenizer.error()};
    if (tokenizer->vocabSize() != s.vocab) {
        return Error{r.tokenizer + ": the tokenizer has " + std::to_string(tokenizer->vocabSize()) +
                     " pieces, the model " + std::to_string(s.vocab)};
    }
    const fs::path out(r.out);
    std::error_code ec;
    if (fs::exists(out / "config.json", ec) && !r.force) {
        return Error{r.out + " already holds a model; add --force to replace it"};
    }

    in.seekg(dataStart);
    Reader read(in, r.model);
    TensorMap raw;
    // Arrays stacked over layers, in each version's order.
    struct Array {
        const char* name;
        std::vector<int64_t> shape;
    };
    const std::vector<Array> v0 = {{"tok_embeddings", {s.vocab, d}},
                                   {"rms_att", {L, d}},
                                   {"wq", {L, d, d}},
                                   {"wk", {L, kv, d}},
                                   {"wv", {L, kv, d}},
                                   {"wo", {L, d, d}},
                                   {"rms_ffn", {L, d}},
                                   {"w1", {L, F, d}},
                                   {"w2", {L, d, F}},
                                   {"w3", {L, F, d}},
                                   {"rms_final", {d}}};
    const std::vector<Array> v1 = {{"rms_att", {L, d}}, {"rms_ffn", {L, d}},
                                   {"rms_final", {d}},  {"tok_embeddings", {s.vocab, d}},
                                   {"wq", {L, d, d}},   {"wk", {L, kv, d}},
                                   {"wv", {L, kv, d}},  {"wo", {L, d, d}},
                                   {"w1", {L, F, d}},   {"w2", {L, d, F}},
                                   {"w3", {L, F, d}}};
    for (const auto& a : s.version == 0 ? v0 : v1) {
        auto t = read.floats(a.shape, a.name);
        if (!t) return Error{t.error()};
        raw[a.name] = *t;
    }
    if (s.version == 0) read.skip(s.seqLen * hd);  // freq_cis_real and freq_cis_imag: unused
    if (!s.tied) {
        auto t = read.floats({s.vocab, d}, "wcls");
        if (!t) return Error{t.error()};
        raw["wcls"] = *t;
    }

    TensorMap hf;
    hf["model.embed_tokens.weight"] = raw["tok_embeddings"];
    hf["model.norm.weight"] = raw["rms_final"];
    if (!s.tied) hf["lm_head.weight"] = raw["wcls"];
    for (int64_t l = 0; l < L; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        hf[p + "input_layernorm.weight"] = raw["rms_att"][l];
        hf[p + "post_attention_layernorm.weight"] = raw["rms_ffn"][l];
        hf[p + "self_attn.q_proj.weight"] = toRotateHalf(raw["wq"][l], s.heads);
        hf[p + "self_attn.k_proj.weight"] = toRotateHalf(raw["wk"][l], s.kvHeads);
        hf[p + "self_attn.v_proj.weight"] = raw["wv"][l];
        hf[p + "self_attn.o_proj.weight"] = raw["wo"][l];
        hf[p + "mlp.gate_proj.weight"] = raw["w1"][l];
        hf[p + "mlp.down_proj.weight"] = raw["w2"][l];
        hf[p + "mlp.up_proj.weight"] = raw["w3"][l];
    }
    fs::create_directories(out, ec);
    if (ec) return Error{r.out + ": cannot create the folder (" + ec.message() + ")"};
    if (auto w = writeSafetensors((out / "model.safetensors").string(), hf, r.storage,
                                  {{"format", "pt"}});
        !w) {
        return Error{w.error()};
    }
    const nlohmann::json config = {
        {"architectures", {"LlamaForCausalLM"}},
        {"model_type", "llama"},
        {"hidden_size", d},
        {"intermediate_size", F},
        {"num_hidden_layers", L},
        {"num_attention_heads", s.heads},
        {"num_key_value_heads", s.kvHeads},
        {"vocab_size", s.vocab},
        {"max_position_embeddings", s.seqLen},
        {"rms_norm_eps", 1e-5},
        {"rope_theta", 10000.0},
        {"hidden_act", "silu"},
        {"tie_word_embeddings", s.tied},
        {"bos_token_id", 1},
        {"eos_token_id", 2},
        {"torch_dtype", r.storage == StorageType::F32   ? "float32"
                        : r.storage == StorageType::F16 ? "float16"
                                                        : "bfloat16"},
        {"relulens_imported_from", fs::path(r.model).filename().string()}};
    if (auto w = writeJson(out / "config.json", config); !w) return Error{w.error()};
    if (auto w = writeJson(out / "tokenizer_config.json",
                           {{"add_bos_token", true}, {"add_eos_token", false}});
        !w) {
        return Error{w.error()};
    }
    const fs::path target = out / "tokenizer.model";
    if (!(fs::exists(target, ec) && fs::equivalent(r.tokenizer, target, ec))) {
        fs::copy_file(r.tokenizer, target, fs::copy_options::overwrite_existing, ec);
        if (ec)
            return Error{target.string() + ": cannot copy the tokenizer (" + ec.message() + ")"};
    }
    return s;
}

}  // namespace relulens::core
