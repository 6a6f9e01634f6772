// The architecture and training variant of a model, as stored in a model folder's config.json.
// Parsing validates every field and refuses absurd sizes before anything is allocated.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "core/variants.h"

namespace relulens::core {

struct TensorShape {
    std::string name;
    std::vector<int64_t> shape;
};

struct ModelConfig {
    std::string name = "model";  // short name shown in the model picker
    int64_t vocabSize = 0;
    int64_t dModel = 0;
    int64_t nLayers = 0;
    int64_t nHeads = 0;
    int64_t dFf = 0;
    int64_t contextLength = 0;  // length trained at; rotary positions allow longer inputs
    double ropeBase = 10000.0;
    double normEps = 1e-5;
    RunSpec trained;  // the variants the weights were trained with
    std::string description;

    int64_t headDim() const { return dModel / nHeads; }
    // Every tensor a checkpoint of this config holds, in a fixed order.
    std::vector<TensorShape> tensorShapes() const;
    int64_t parameterCount() const;
};

// Largest model ReluLens will load: refuses configs that would exhaust memory.
constexpr int64_t kMaxParameters = 2'000'000'000;

Result<ModelConfig> configFromJson(const nlohmann::json& json);
// "softmax", or {"variant": "family", "h": "relu2", "a": 0.5}: the form config files use.
// Also {"variant": "sigmoid", "bias": -2.0 | "-log n"} and {"variant": "ssmax", "sigma": 0.43}.
Result<AttentionSpec> attentionSpecFromJson(const nlohmann::json& json);
// The object form of the above, with exactly the constants the variant uses.
nlohmann::json attentionSpecToJson(const AttentionSpec& spec);
Result<ModelConfig> loadConfigFile(const std::string& path);
nlohmann::json configToJson(const ModelConfig& config);
Status validateConfig(const ModelConfig& config);

}  // namespace relulens::core
