// config.json of a Hugging Face decoder checkpoint (llama, mistral, qwen2, qwen3, gemma), read
// with each family's defaults and traps: the family from model_type or architectures, head_dim
// when given, both rope_scaling layouts, tied heads, Qwen2's implicit q/k/v biases, Gemma's
// norms, activation and embedding scale, and the sliding window of each layer. Anything
// ReluLens does not implement is refused by name.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "core/model_config.h"
#include "core/model_info.h"

namespace relulens::core {

struct RopeScaling {
    enum class Kind { None, Linear, Llama3 } kind = Kind::None;
    double factor = 1.0;
    double lowFrequencyFactor = 1.0, highFrequencyFactor = 4.0;
    int64_t originalMaxPositions = 8192;
};

struct HfConfig {
    std::string family;  // llama | mistral | qwen2 | qwen3 | gemma
    int64_t hidden = 0, intermediate = 0, layers = 0, heads = 0, kvHeads = 0, headDim = 0;
    int64_t vocab = 0, maxPositions = 0;
    double rmsEps = 1e-6;
    double ropeTheta = 10000.0;
    RopeScaling ropeScaling;
    bool tied = false;
    bool qkvBias = false;     // q/k/v projections carry biases
    bool outputBias = false;  // o_proj carries a bias
    bool mlpBias = false;
    bool qkNorm = false;  // per-head RMSNorm on q and k (qwen3)
    bool gemma = false;   // (1 + w) norms and embeddings scaled by sqrt(hidden)
    FfnKind activation = FfnKind::Silu;
    std::vector<int64_t> windows;  // per layer, 0: full attention
    int64_t bosId = -1;
    RunSpec trained;          // softmax and the activation, unless a "relulens" block says
    std::string storageHint;  // torch_dtype, informational only
};

// Reads and checks config.json.
Result<HfConfig> hfConfigFromJson(const nlohmann::json& json);
// True when config.json describes a Hugging Face checkpoint rather than a ReluLens model.
bool isHfConfig(const nlohmann::json& json);

// Every tensor a checkpoint of this config holds (lm_head.weight only when untied).
std::vector<TensorShape> hfTensorShapes(const HfConfig& config);
ModelInfo hfModelInfo(const HfConfig& config, const std::string& name);

// Rotary inverse frequencies (head_dim / 2) with the config's scaling applied.
std::vector<double> hfRopeFrequencies(const HfConfig& config);

}  // namespace relulens::core
