#include "core/model_info.h"

#include <nlohmann/json.hpp>

#include "core/model_config.h"

namespace relulens::core {

std::vector<FfnKind> ModelInfo::ffnChoices() const {
    std::vector<FfnKind> choices;
    if (gatedFfn) {
        choices = {FfnKind::Silu, FfnKind::Gelu, FfnKind::GeluTanh, FfnKind::Relu};
    } else {
        choices = {FfnKind::Relu, FfnKind::Gelu, FfnKind::Softmax, FfnKind::SoftmaxLn};
    }
    bool trainedListed = false;
    for (auto kind : choices) trainedListed |= kind == trained.ffn;
    if (!trainedListed) choices.insert(choices.begin(), trained.ffn);
    return choices;
}

nlohmann::json modelInfoToJson(const ModelInfo& m) {
    const nlohmann::json attention = attentionSpecToJson(m.trained.attention);
    nlohmann::json out = {{"family", m.family},
                          {"name", m.name},
                          {"description", m.description},
                          {"vocab_size", m.vocabSize},
                          {"d_model", m.dModel},
                          {"n_layers", m.nLayers},
                          {"n_heads", m.nHeads},
                          {"n_kv_heads", m.nKvHeads},
                          {"head_dim", m.headDim},
                          {"d_ff", m.dFf},
                          {"gated_ffn", m.gatedFfn},
                          {"context_length", m.contextLength},
                          {"parameters", m.parameters},
                          {"attention", attention},
                          {"ffn", ffnKindName(m.trained.ffn)}};
    if (!m.storage.empty()) out["storage"] = m.storage;
    bool windowed = false;
    for (auto w : m.windows) windowed |= w > 0;
    if (windowed) out["sliding_windows"] = m.windows;
    return out;
}

}  // namespace relulens::core
