#include "core/hf_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

namespace relulens::core {

using nlohmann::json;

namespace {

const char* kSupported = "llama, mistral, qwen2, qwen3 and gemma";

// model_type, or the family of the first architecture when model_type is absent.
std::string familyOf(const json& j) {
    if (j.contains("model_type") && j["model_type"].is_string())
        return j["model_type"].get<std::string>();
    if (j.contains("architectures") && j["architectures"].is_array() &&
        !j["architectures"].empty() && j["architectures"][0].is_string()) {
        const std::string a = j["architectures"][0].get<std::string>();
        const std::pair<const char*, const char*> known[] = {
            {"LlamaForCausalLM", "llama"},  {"MistralForCausalLM", "mistral"},
            {"Qwen2ForCausalLM", "qwen2"},  {"Qwen3ForCausalLM", "qwen3"},
            {"GemmaForCausalLM", "gemma"},  {"Gemma2ForCausalLM", "gemma2"},
            {"Gemma3ForCausalLM", "gemma3"}};
        for (const auto& [arch, family] : known) {
            if (a == arch) return family;
        }
        return a;
    }
    return "";
}

Result<int64_t> integer(const json& j, const char* key, int64_t lo, int64_t hi) {
    if (!j.contains(key) || j[key].is_null())
        return Error{std::string("missing key '") + key + "'"};
    if (!j[key].is_number_integer()) return Error{std::string("'") + key + "' must be an integer"};
    const int64_t v = j[key].get<int64_t>();
    if (v < lo || v > hi) {
        return Error{std::string(key) + " = " + std::to_string(v) + " is outside [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]"};
    }
    return v;
}

Result<double> number(const json& j, const char* key, double fallback) {
    if (!j.contains(key) || j[key].is_null()) return fallback;
    if (!j[key].is_number()) return Error{std::string("'") + key + "' must be a number"};
    return j[key].get<double>();
}

bool flag(const json& j, const char* key, bool fallback) {
    return j.contains(key) && j[key].is_boolean() ? j[key].get<bool>() : fallback;
}

Result<FfnKind> activationOf(const std::string& family, const json& j) {
    if (family == "gemma") return FfnKind::GeluTanh;  // whatever hidden_act says (HF forces it)
    const std::string act = j.value("hidden_act", std::string("silu"));
    if (act == "silu" || act == "swish") return FfnKind::Silu;
    if (act == "gelu") return FfnKind::Gelu;
    if (act == "gelu_pytorch_tanh" || act == "gelu_new") return FfnKind::GeluTanh;
    if (act == "relu") return FfnKind::Relu;
    return Error{"hidden_act '" + act + "' is not supported (silu, gelu, gelu_pytorch_tanh, relu)"};
}

Status readRope(const json& j, HfConfig& c) {
    // transformers v5 may group the rope settings under rope_parameters.
    const json* parameters = j.contains("rope_parameters") && j["rope_parameters"].is_object()
                                 ? &j["rope_parameters"]
                                 : nullptr;
    auto theta =
        number(j, "rope_theta", parameters ? parameters->value("rope_theta", 10000.0) : 10000.0);
    if (!theta) return Error{theta.error()};
    c.ropeTheta = *theta;
    if (!(c.ropeTheta > 1.0) || !std::isfinite(c.ropeTheta)) return Error{"rope_theta must be > 1"};
    const json* scaling = j.contains("rope_scaling") && j["rope_scaling"].is_object()
                              ? &j["rope_scaling"]
                              : parameters;
    if (!scaling) return {};
    std::string type = scaling->value("rope_type", scaling->value("type", std::string("default")));
    if (type == "default") return {};
    auto factor = number(*scaling, "factor", 1.0);
    if (!factor) return Error{"rope_scaling: " + factor.error()};
    c.ropeScaling.factor = *factor;
    if (!(*factor >= 1.0) || !std::isfinite(*factor))
        return Error{"rope_scaling: factor must be >= 1"};
    if (type == "linear") {
        c.ropeScaling.kind = RopeScaling::Kind::Linear;
        return {};
    }
    if (type == "llama3") {
        c.ropeScaling.kind = RopeScaling::Kind::Llama3;
        auto low = number(*scaling, "low_freq_factor", 1.0);
        auto high = number(*scaling, "high_freq_factor", 4.0);
        if (!low || !high)
            return Error{"rope_scaling: low_freq_factor and high_freq_factor must be numbers"};
        c.ropeScaling.lowFrequencyFactor = *low;
        c.ropeScaling.highFrequencyFactor = *high;
        if (!(*high > *low) || !(*low > 0))
            return Error{"rope_scaling: need 0 < low_freq_factor < high_freq_factor"};
        auto original = integer(*scaling, "original_max_position_embeddings", 1, 1 << 24);
        if (!original) return Error{"rope_scaling: " + original.error()};
        c.ropeScaling.originalMaxPositions = *original;
        return {};
    }
    return Error{"rope_scaling type '" + type + "' is not supported (default, linear, llama3)"};
}

// Sliding windows per layer, with each family's rules.
Status readWindows(const json& j, HfConfig& c) {
    c.windows.assign(size_t(c.layers), 0);
    int64_t window = 0;
    if (c.family == "mistral") {
        if (!j.contains("sliding_window"))
            window = 4096;  // the class default when the key is absent
        else if (!j["sliding_window"].is_null()) {
            auto w = integer(j, "sliding_window", 1, int64_t(1) << 30);
            if (!w) return Error{w.error()};
            window = *w;
        }
        c.windows.assign(size_t(c.layers), window);
        return {};
    }
    if (c.family != "qwen2" && c.family != "qwen3") return {};
    if (!flag(j, "use_sliding_window", false) || !j.contains("sliding_window") ||
        j["sliding_window"].is_null()) {
        return {};
    }
    auto w = integer(j, "sliding_window", 1, int64_t(1) << 30);
    if (!w) return Error{w.error()};
    if (j.contains("layer_types") && j["layer_types"].is_array()) {
        const auto& types = j["layer_types"];
        if (int64_t(types.size()) != c.layers) return Error{"layer_types has the wrong length"};
        for (int64_t l = 0; l < c.layers; ++l) {
            if (types[size_t(l)] == "sliding_attention") c.windows[size_t(l)] = *w;
        }
        return {};
    }
    const int64_t first = j.value("max_window_layers", c.layers);
    for (int64_t l = std::max<int64_t>(first, 0); l < c.layers; ++l) c.windows[size_t(l)] = *w;
    return {};
}

}  // namespace

bool isHfConfig(const json& j) {
    return j.is_object() && (j.contains("model_type") || j.contains("architectures")) &&
           !j.contains("d_model");
}

Result<HfConfig> hfConfigFromJson(const json& j) {
    if (!j.is_object()) return Error{"expected a JSON object"};
    HfConfig c;
    c.family = familyOf(j);
    if (c.family == "gemma2" || c.family == "gemma3") {
        return Error{
            "model_type '" + c.family +
            "' uses attention and final-logit soft-capping and extra norms, which ReluLens "
            "does not implement; it opens " +
            kSupported + " checkpoints"};
    }
    if (c.family != "llama" && c.family != "mistral" && c.family != "qwen2" &&
        c.family != "qwen3" && c.family != "gemma") {
        return Error{"model_type '" + c.family + "' is not supported; ReluLens opens " +
                     kSupported + " checkpoints (and its own models)"};
    }
    try {
        struct Field {
            const char* key;
            int64_t* target;
            int64_t lo, hi;
        };
        for (const Field& f : {Field{"hidden_size", &c.hidden, 2, 65536},
                               Field{"intermediate_size", &c.intermediate, 1, 1 << 20},
                               Field{"num_hidden_layers", &c.layers, 1, 512},
                               Field{"num_attention_heads", &c.heads, 1, 1024},
                               Field{"vocab_size", &c.vocab, 2, 4'000'000}}) {
            auto v = integer(j, f.key, f.lo, f.hi);
            if (!v) return Error{v.error()};
            *f.target = *v;
        }
        c.kvHeads = c.heads;
        if (j.contains("num_key_value_heads") && !j["num_key_value_heads"].is_null()) {
            auto v = integer(j, "num_key_value_heads", 1, c.heads);
            if (!v) return Error{v.error()};
            c.kvHeads = *v;
        }
        if (c.heads % c.kvHeads != 0) {
            return Error{"num_attention_heads " + std::to_string(c.heads) +
                         " is not a multiple of num_key_value_heads " + std::to_string(c.kvHeads)};
        }
        c.headDim = c.hidden / c.heads;
        if (j.contains("head_dim") && !j["head_dim"].is_null()) {
            auto v = integer(j, "head_dim", 2, 4096);
            if (!v) return Error{v.error()};
            c.headDim = *v;
        } else if (c.hidden % c.heads != 0) {
            return Error{
                "hidden_size is not a multiple of num_attention_heads and no head_dim is given"};
        }
        if (c.headDim % 2 != 0)
            return Error{"head_dim " + std::to_string(c.headDim) +
                         " is odd; rotary positions need it even"};
        c.maxPositions = j.value("max_position_embeddings", int64_t(2048));
        if (c.maxPositions < 1) return Error{"max_position_embeddings must be positive"};
        auto eps = number(j, "rms_norm_eps", 1e-6);
        if (!eps) return Error{eps.error()};
        c.rmsEps = *eps;
        if (!(c.rmsEps > 0) || c.rmsEps > 1) return Error{"rms_norm_eps must be in (0, 1]"};
        if (auto s = readRope(j, c); !s) return Error{s.error()};
        c.gemma = c.family == "gemma";
        c.tied = flag(j, "tie_word_embeddings", c.gemma);
        if (c.family == "qwen2") {
            c.qkvBias = true;  // always on in Qwen2, with no config key; o_proj has none
        } else {
            c.qkvBias = c.outputBias = flag(j, "attention_bias", false);
        }
        c.mlpBias = flag(j, "mlp_bias", false);
        c.qkNorm = c.family == "qwen3";
        auto act = activationOf(c.family, j);
        if (!act) return Error{act.error()};
        c.activation = *act;
        if (auto s = readWindows(j, c); !s) return Error{s.error()};
        if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) {
            c.bosId = j["bos_token_id"].get<int64_t>();
        }
        c.storageHint = j.value("torch_dtype", j.value("dtype", std::string()));
        c.trained.attention = AttentionSpec{};
        c.trained.ffn = c.activation;
        // A checkpoint trained with another attention in the HF layout says so here.
        if (j.contains("relulens") && j["relulens"].is_object()) {
            const auto& r = j["relulens"];
            if (r.contains("attention")) {
                auto spec = attentionSpecFromJson(r["attention"]);
                if (!spec) return Error{"relulens.attention: " + spec.error()};
                c.trained.attention = *spec;
            }
            if (r.contains("ffn")) {
                if (!r["ffn"].is_string()) return Error{"relulens.ffn must be a variant name"};
                auto ffn = parseFfnKind(r["ffn"].get<std::string>());
                if (!ffn) return Error{"relulens.ffn: " + ffn.error()};
                c.trained.ffn = *ffn;
            }
        }
    } catch (const json::exception& e) {
        return Error{e.what()};
    }
    // Computed in double so that absurd sizes are refused before anything overflows.
    const double H = double(c.hidden), A = double(c.heads * c.headDim),
                 KV = double(c.kvHeads * c.headDim);
    const double perLayer = H * (A + 2 * KV) + A * H + 3 * H * double(c.intermediate);
    const double total = double(c.layers) * perLayer + double(c.vocab) * H * (c.tied ? 1 : 2);
    if (total > 2e11)
        return Error{"the model would have " + std::to_string(int64_t(total)) + " parameters"};
    return c;
}

std::vector<TensorShape> hfTensorShapes(const HfConfig& c) {
    const int64_t H = c.hidden, A = c.heads * c.headDim, KV = c.kvHeads * c.headDim,
                  I = c.intermediate;
    std::vector<TensorShape> shapes;
    shapes.push_back({"model.embed_tokens.weight", {c.vocab, H}});
    for (int64_t l = 0; l < c.layers; ++l) {
        const std::string p = "model.layers." + std::to_string(l) + ".";
        shapes.push_back({p + "input_layernorm.weight", {H}});
        shapes.push_back({p + "self_attn.q_proj.weight", {A, H}});
        shapes.push_back({p + "self_attn.k_proj.weight", {KV, H}});
        shapes.push_back({p + "self_attn.v_proj.weight", {KV, H}});
        shapes.push_back({p + "self_attn.o_proj.weight", {H, A}});
        if (c.qkvBias) {
            shapes.push_back({p + "self_attn.q_proj.bias", {A}});
            shapes.push_back({p + "self_attn.k_proj.bias", {KV}});
            shapes.push_back({p + "self_attn.v_proj.bias", {KV}});
        }
        if (c.outputBias) shapes.push_back({p + "self_attn.o_proj.bias", {H}});
        if (c.qkNorm) {
            shapes.push_back({p + "self_attn.q_norm.weight", {c.headDim}});
            shapes.push_back({p + "self_attn.k_norm.weight", {c.headDim}});
        }
        shapes.push_back({p + "post_attention_layernorm.weight", {H}});
        shapes.push_back({p + "mlp.gate_proj.weight", {I, H}});
        shapes.push_back({p + "mlp.up_proj.weight", {I, H}});
        shapes.push_back({p + "mlp.down_proj.weight", {H, I}});
        if (c.mlpBias) {
            shapes.push_back({p + "mlp.gate_proj.bias", {I}});
            shapes.push_back({p + "mlp.up_proj.bias", {I}});
            shapes.push_back({p + "mlp.down_proj.bias", {H}});
        }
    }
    shapes.push_back({"model.norm.weight", {H}});
    if (!c.tied) shapes.push_back({"lm_head.weight", {c.vocab, H}});
    return shapes;
}

ModelInfo hfModelInfo(const HfConfig& c, const std::string& name) {
    ModelInfo info;
    info.family = c.family;
    info.name = name;
    info.description = c.family + " checkpoint (Hugging Face layout)";
    info.vocabSize = c.vocab;
    info.dModel = c.hidden;
    info.nLayers = c.layers;
    info.nHeads = c.heads;
    info.nKvHeads = c.kvHeads;
    info.headDim = c.headDim;
    info.dFf = c.intermediate;
    info.contextLength = c.maxPositions;
    info.trained = c.trained;
    info.gatedFfn = true;
    info.windows = c.windows;
    for (const auto& t : hfTensorShapes(c)) {
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        info.parameters += n;
    }
    return info;
}

std::vector<double> hfRopeFrequencies(const HfConfig& c) {
    const int64_t d = c.headDim;
    std::vector<double> inv;
    for (int64_t i = 0; i < d / 2; ++i)
        inv.push_back(1.0 / std::pow(c.ropeTheta, double(2 * i) / double(d)));
    const auto& s = c.ropeScaling;
    if (s.kind == RopeScaling::Kind::Linear) {
        for (auto& f : inv) f /= s.factor;
    } else if (s.kind == RopeScaling::Kind::Llama3) {
        const double original = double(s.originalMaxPositions);
        const double lowWavelength = original / s.lowFrequencyFactor;
        const double highWavelength = original / s.highFrequencyFactor;
        for (auto& f : inv) {
            const double wavelength = 2.0 * M_PI / f;
            if (wavelength < highWavelength) continue;
            if (wavelength > lowWavelength) {
                f /= s.factor;
                continue;
            }
            const double smooth = (original / wavelength - s.lowFrequencyFactor) /
                                  (s.highFrequencyFactor - s.lowFrequencyFactor);
            f = (1.0 - smooth) * f / s.factor + smooth * f;
        }
    }
    return inv;
}

}  // namespace relulens::core
