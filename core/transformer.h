// A decoder-only causal transformer (pre-LN, rotary positions, tied input/output embedding)
// whose attention and FFN activations are chosen per forward pass on the same weights.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/model_config.h"
#include "core/safetensors.h"
#include "core/torch_include.h"

namespace relulens::core {

// What a forward pass keeps of each layer. Tensors keep the batch dimension B.
struct TraceOptions {
    bool scores = false;           // raw q·k/sqrt(d_head), masked entries included
    bool weights = false;          // attention weights after the activation
    bool headOutputs = false;      // per-head attention output α·v
    bool queriesKeys = false;      // q and k after rotary, enough to rebuild any map
    bool ffn = false;              // FFN input, pre-activations and slot activations
    bool rowMass = false;          // Σ_j α_ij, for the ReLUFormer regulariser
};

struct LayerTrace {
    torch::Tensor scores;          // (B, H, L, L)
    torch::Tensor weights;         // (B, H, L, L)
    torch::Tensor headOutputs;     // (B, H, L, d_head)
    torch::Tensor q, k;            // (B, H, L, d_head)
    torch::Tensor ffnInput;        // (B, L, d) layer-normed input of the FFN
    torch::Tensor slotActivations; // (B, L, d_ff)
    torch::Tensor rowMass;         // (B, H, L)
};

struct ForwardTrace {
    TraceOptions options;
    std::vector<LayerTrace> layers;
    // Attention runs over blocks of query rows, each against only the keys it can see, so no
    // (L, L) map exists unless scores or weights are traced. When set, every block of weights
    // (B, H, R, K) of rows rowOffset..rowOffset+R-1 and keys 0..K-1 is handed here.
    std::function<void(int64_t layer, int64_t rowOffset, const torch::Tensor& weights)>
        onAttentionBlock;
    int64_t blockRows = 0;  // rows per block; 0 chooses from the input length
    // Polled between blocks; when it returns true the pass stops and forward() returns an
    // undefined tensor.
    std::function<bool()> cancelled;
};

// Rows per attention block: the whole input when it is short, otherwise as many rows (at least
// 64) as keep one block of all heads' weights near a quarter-million floats.
int64_t attentionBlockRows(int64_t heads, int64_t tokens);

class Transformer {
public:
    // Random initialisation: matrices normal(0, std), residual projections scaled by
    // 1/sqrt(2·layers), norms 1, biases 0, γ 1. `perturbAll` also randomises norms, biases and
    // γ (test fixtures, so that every tensor influences the output).
    static Transformer initialise(const ModelConfig& config, uint64_t seed, double std = 0.02,
                                  bool perturbAll = false);
    // Takes tensors already validated against the config (see checkpoint.h).
    static Transformer fromTensors(const ModelConfig& config, TensorMap tensors);

    // ids: (B, L) int64 -> logits (B, L, vocab)
    torch::Tensor forward(const torch::Tensor& ids, const RunSpec& run,
                          ForwardTrace* trace = nullptr) const;

    const ModelConfig& config() const { return config_; }
    const TensorMap& tensors() const { return tensors_; }
    const torch::Tensor& tensor(const std::string& name) const;
    std::vector<torch::Tensor> parameters() const;
    torch::Device device() const;
    void to(const torch::Device& device);
    void setRequiresGrad(bool requiresGrad);

private:
    ModelConfig config_;
    TensorMap tensors_;
};

// Rotary position embedding on (..., L, d_head), positions offset..offset+L-1.
torch::Tensor applyRotary(const torch::Tensor& x, int64_t offset, double base);

}  // namespace relulens::core
