// What every view, command and JSON needs to know about a loaded model, whatever its family:
// its shapes, the variants it was trained with and which FFN variants it accepts.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/variants.h"

namespace relulens::core {

struct ModelInfo {
    std::string family = "relulens";  // relulens | llama | mistral | qwen2 | qwen3 | gemma
    std::string name = "model";
    std::string description;
    int64_t vocabSize = 0;
    int64_t dModel = 0;
    int64_t nLayers = 0;
    int64_t nHeads = 0;
    int64_t nKvHeads = 0;  // grouped-query attention: query head h reads kv head kvHeadOf(h)
    int64_t headDim = 0;
    int64_t dFf = 0;            // memory slots per layer
    int64_t contextLength = 0;  // trained at (or the position limit the config gives)
    RunSpec trained;
    bool gatedFfn = false;  // down(act(gate·x) ⊙ up·x): the slot is act(gate_i·x)·(up_i·x)
    std::vector<int64_t> windows;  // per layer: sliding-window length, 0 for none
    int64_t parameters = 0;
    std::string storage;  // dtype on disk: F32, F16, BF16 (mixed: the most common)

    int64_t kvHeadOf(int64_t head) const { return head / (nHeads / nKvHeads); }
    int64_t window(int64_t layer) const {
        return layer >= 0 && layer < int64_t(windows.size()) ? windows[size_t(layer)] : 0;
    }
    // The FFN variants this model runs: relu, gelu, softmax, softmax_ln for ungated memories;
    // the gate's activation (silu, gelu, gelu_tanh, relu) for gated ones.
    std::vector<FfnKind> ffnChoices() const;
};

nlohmann::json modelInfoToJson(const ModelInfo& info);

}  // namespace relulens::core
