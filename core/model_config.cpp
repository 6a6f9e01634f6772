#include "core/model_config.h"

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace relulens::core {

using nlohmann::json;

std::vector<TensorShape> ModelConfig::tensorShapes() const {
    std::vector<TensorShape> shapes;
    shapes.push_back({"tok_emb.weight", {vocabSize, dModel}});
    for (int64_t l = 0; l < nLayers; ++l) {
        const std::string p = "layers." + std::to_string(l) + ".";
        shapes.push_back({p + "ln1.weight", {dModel}});
        shapes.push_back({p + "ln1.bias", {dModel}});
        shapes.push_back({p + "attn.wq", {dModel, dModel}});
        shapes.push_back({p + "attn.wk", {dModel, dModel}});
        shapes.push_back({p + "attn.wv", {dModel, dModel}});
        shapes.push_back({p + "attn.wo", {dModel, dModel}});
        shapes.push_back({p + "attn.gamma", {nHeads}});
        shapes.push_back({p + "ln2.weight", {dModel}});
        shapes.push_back({p + "ln2.bias", {dModel}});
        shapes.push_back({p + "ffn.w1", {dFf, dModel}});
        shapes.push_back({p + "ffn.b1", {dFf}});
        shapes.push_back({p + "ffn.w2", {dModel, dFf}});
        shapes.push_back({p + "ffn.b2", {dModel}});
        shapes.push_back({p + "ffn.ln.weight", {dModel}});
        shapes.push_back({p + "ffn.ln.bias", {dModel}});
    }
    shapes.push_back({"ln_f.weight", {dModel}});
    shapes.push_back({"ln_f.bias", {dModel}});
    return shapes;
}

int64_t ModelConfig::parameterCount() const {
    int64_t total = 0;
    for (const auto& t : tensorShapes()) {
        int64_t n = 1;
        for (auto d : t.shape) n *= d;
        total += n;
    }
    return total;
}

Status validateConfig(const ModelConfig& c) {
    auto bad = [](const std::string& what) { return Status(Error{"config: " + what}); };
    struct Limit {
        const char* key;
        int64_t value, lo, hi;
    };
    const Limit limits[] = {{"vocab_size", c.vocabSize, 2, 1'000'000},
                            {"d_model", c.dModel, 2, 16'384},
                            {"n_layers", c.nLayers, 1, 256},
                            {"n_heads", c.nHeads, 1, 256},
                            {"d_ff", c.dFf, 1, 131'072},
                            {"context_length", c.contextLength, 1, 1'048'576}};
    for (const auto& l : limits) {
        if (l.value < l.lo || l.value > l.hi) {
            return bad(std::string(l.key) + " = " + std::to_string(l.value) + " is outside [" +
                       std::to_string(l.lo) + ", " + std::to_string(l.hi) + "]");
        }
    }
    if (c.dModel % c.nHeads != 0) {
        return bad("d_model " + std::to_string(c.dModel) + " is not divisible by n_heads " +
                   std::to_string(c.nHeads));
    }
    if (c.headDim() % 2 != 0) {
        return bad("head size " + std::to_string(c.headDim()) +
                   " is odd; rotary positions need an even head size");
    }
    // Computed in double so that absurd sizes cannot overflow before being refused.
    const double d = double(c.dModel), L = double(c.nLayers);
    const double params = double(c.vocabSize) * d + L * (4 * d * d + 2 * d * double(c.dFf) +
                                                         double(c.dFf) + 8 * d + double(c.nHeads));
    if (params > double(kMaxParameters)) {
        return bad("the model would have " + std::to_string(int64_t(params)) +
                   " parameters, more than ReluLens loads (" + std::to_string(kMaxParameters) +
                   ")");
    }
    if (!(c.ropeBase > 1.0) || !(c.normEps > 0.0) || c.normEps > 1.0) {
        return bad("rope_base must be > 1 and norm_eps in (0, 1]");
    }
    if (auto s = validateAttentionSpec(c.trained.attention); !s) return bad(s.error());
    return {};
}

Result<AttentionSpec> attentionSpecFromJson(const json& attention) {
    AttentionSpec spec;
    try {
        if (attention.is_string()) {
            auto kind = parseAttentionKind(attention.get<std::string>());
            if (!kind) return Error{kind.error()};
            spec.kind = *kind;
        } else if (attention.is_object()) {
            auto kind = parseAttentionKind(attention.value("variant", std::string()));
            if (!kind) return Error{kind.error()};
            spec.kind = *kind;
            auto h = parseFamilyFunction(attention.value("h", std::string("relu")));
            if (!h) return Error{h.error()};
            spec.familyFunction = *h;
            spec.lengthExponent = attention.value("a", 1.0);
            if (attention.contains("bias")) {
                const auto& bias = attention.at("bias");
                if (bias.is_number()) {
                    spec.sigmoidBias = bias.get<double>();
                } else if (!(bias.is_string() && bias.get<std::string>() == "-log n")) {
                    return Error{"'bias' must be a number or \"-log n\""};
                }
            }
            spec.ssmaxSigma = attention.value("sigma", AttentionSpec::kDefaultSsmaxSigma);
        } else {
            return Error{"'attention' must be a variant name or an object"};
        }
    } catch (const json::exception& e) {
        return Error{e.what()};
    }
    if (auto s = validateAttentionSpec(spec); !s) return Error{s.error()};
    return spec;
}

json attentionSpecToJson(const AttentionSpec& spec) {
    json attention = {{"variant", spec.name()}};
    switch (spec.kind) {
        case AttentionKind::Family:
            attention["h"] = familyFunctionName(spec.familyFunction);
            attention["a"] = spec.lengthExponent;
            break;
        case AttentionKind::ReluLen:
            attention["a"] = spec.lengthExponent;
            break;
        case AttentionKind::Sigmoid:
            if (spec.sigmoidBias) {
                attention["bias"] = *spec.sigmoidBias;
            } else {
                attention["bias"] = "-log n";
            }
            break;
        case AttentionKind::Ssmax:
            attention["sigma"] = spec.ssmaxSigma;
            break;
        default:
            break;
    }
    return attention;
}

Result<ModelConfig> configFromJson(const json& j) {
    if (!j.is_object()) return Error{"config: expected a JSON object"};
    ModelConfig c;
    try {
        const char* required[] = {"vocab_size", "d_model",        "n_layers",  "n_heads",
                                  "d_ff",       "context_length", "attention", "ffn"};
        for (const char* key : required) {
            if (!j.contains(key)) return Error{std::string("config: missing key '") + key + "'"};
        }
        auto integer = [&](const char* key) -> Result<int64_t> {
            const auto& v = j.at(key);
            if (!v.is_number_integer()) {
                return Error{std::string("config: '") + key + "' must be an integer"};
            }
            return v.get<int64_t>();
        };
        struct Field {
            const char* key;
            int64_t* target;
        };
        for (const Field& f : {Field{"vocab_size", &c.vocabSize}, Field{"d_model", &c.dModel},
                               Field{"n_layers", &c.nLayers}, Field{"n_heads", &c.nHeads},
                               Field{"d_ff", &c.dFf}, Field{"context_length", &c.contextLength}}) {
            auto value = integer(f.key);
            if (!value) return Error{value.error()};
            *f.target = *value;
        }
        c.name = j.value("name", std::string("model"));
        c.description = j.value("description", std::string());
        c.ropeBase = j.value("rope_base", 10000.0);
        c.normEps = j.value("norm_eps", 1e-5);

        auto attention = attentionSpecFromJson(j.at("attention"));
        if (!attention) return Error{"config: " + attention.error()};
        c.trained.attention = *attention;
        if (!j.at("ffn").is_string()) return Error{"config: 'ffn' must be a variant name"};
        auto ffn = parseFfnKind(j.at("ffn").get<std::string>());
        if (!ffn) return Error{"config: " + ffn.error()};
        c.trained.ffn = *ffn;
    } catch (const json::exception& e) {
        return Error{std::string("config: ") + e.what()};
    }
    if (auto s = validateConfig(c); !s) return Error{s.error()};
    return c;
}

Result<ModelConfig> loadConfigFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) return Error{path + ": cannot open the file"};
    json j;
    try {
        in >> j;
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
        return Error{path + ": not valid JSON (" + e.what() + ")"};
    }
    auto config = configFromJson(j);
    if (!config) return Error{path + ": " + config.error()};
    return config;
}

json configToJson(const ModelConfig& c) {
    const json attention = attentionSpecToJson(c.trained.attention);
    return json{{"format", "relulens-model"},
                {"format_version", 1},
                {"name", c.name},
                {"description", c.description},
                {"vocab_size", c.vocabSize},
                {"d_model", c.dModel},
                {"n_layers", c.nLayers},
                {"n_heads", c.nHeads},
                {"d_ff", c.dFf},
                {"context_length", c.contextLength},
                {"rope_base", c.ropeBase},
                {"norm_eps", c.normEps},
                {"positions", "rotary"},
                {"tied_embeddings", true},
                {"attention", attention},
                {"ffn", ffnKindName(c.trained.ffn)}};
}

}  // namespace relulens::core
