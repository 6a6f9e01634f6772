// ReluLens's own model family: a decoder-only causal transformer (pre-LN, rotary positions, tied
// input/output embedding, ungated FFN memory) whose attention and FFN activations are chosen per
// forward pass on the same weights. The trainer trains this family.
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ffn.h"
#include "core/language_model.h"
#include "core/model_config.h"
#include "core/safetensors.h"
#include "core/torch_include.h"

namespace relulens::core {

class Transformer : public LanguageModel {
public:
    // One layer's weights, resolved from the tensor map once when the model is built.
    struct Layer {
        torch::Tensor ln1Weight, ln1Bias;  // (d)
        torch::Tensor wq, wk, wv, wo;      // (d, d)
        torch::Tensor gamma;               // (H) ReLUFormer scale
        torch::Tensor ln2Weight, ln2Bias;  // (d)
        FfnWeights ffn;
    };

    // Random initialisation: matrices normal(0, std), residual projections scaled by
    // 1/sqrt(2·layers), norms 1, biases 0, γ 1. `perturbAll` also randomises norms, biases and
    // γ (test fixtures, so that every tensor influences the output).
    static Transformer initialise(const ModelConfig& config, uint64_t seed, double std = 0.02,
                                  bool perturbAll = false);
    // Takes tensors already validated against the config (see checkpoint.h).
    static Transformer fromTensors(const ModelConfig& config, TensorMap tensors);

    const ModelInfo& info() const override { return info_; }
    torch::Tensor forward(const torch::Tensor& ids, const RunSpec& run,
                          ForwardTrace* trace = nullptr) const override;
    torch::Tensor attentionGamma(int64_t layer) const override;
    FfnDiagnostics ffnDiagnostics(int64_t layer, const torch::Tensor& input,
                                  const torch::Tensor& slots, const torch::Tensor& output,
                                  FfnKind kind, double tauScale) const override;
    torch::Tensor slotValues(int64_t layer) const override;
    torch::Tensor outputEmbedding() const override;
    torch::Tensor logitsFromResidual(const torch::Tensor& stream) const override;
    torch::Device device() const override;
    void to(const torch::Device& device) override;

    const ModelConfig& config() const { return config_; }
    const TensorMap& tensors() const { return tensors_; }
    std::vector<torch::Tensor> parameters() const;
    void setRequiresGrad(bool requiresGrad);

private:
    void resolve();  // fills layers_ and the embedding from tensors_
    // forward on a CPU without autograd: each layer's row-wise work (norms, projections,
    // rotary, FFN, residual) and the logits in two halves of the rows on two cores, the
    // attention between them in two halves of the heads (blockedAttention).
    torch::Tensor forwardOnTwoCores(const torch::Tensor& ids, const RunSpec& run,
                                    ForwardTrace* trace) const;

    ModelConfig config_;
    ModelInfo info_;
    TensorMap tensors_;
    torch::Tensor embedding_;  // (vocab, d), also the output layer
    torch::Tensor lnFWeight_, lnFBias_;
    std::vector<Layer> layers_;
    torch::Tensor frequencies_;  // (d_head / 2) rotary inverse frequencies
};

// ModelInfo of a ReluLens config.
ModelInfo modelInfoOf(const ModelConfig& config);

}  // namespace relulens::core
