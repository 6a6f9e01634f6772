// The Hugging Face decoder family (llama, mistral, qwen2, qwen3, gemma): RMSNorm in float32,
// grouped-query attention with rotate-half rotary positions, optional q/k/v/o biases and
// per-head q/k norms, sliding windows, a gated FFN and a tied or untied output layer. Computed
// in float32; any attention variant of PAPERS.md runs on the same weights.
#pragma once
#include <vector>

#include "core/ffn.h"
#include "core/hf_config.h"
#include "core/language_model.h"

namespace relulens::core {

class LlamaModel : public LanguageModel {
public:
    // One layer's weights, resolved once from the checkpoint's tensor names.
    struct Layer {
        torch::Tensor inputNorm, postNorm;  // (d) multiplied as is (Gemma's 1 + w already added)
        torch::Tensor wq;                   // (H·dh, d)
        torch::Tensor wk, wv;               // (H_kv·dh, d)
        torch::Tensor wo;                   // (d, H·dh)
        torch::Tensor bq, bk, bv, bo;       // biases, or undefined
        torch::Tensor qNorm, kNorm;         // (dh) per-head RMSNorm, or undefined
        GatedFfnWeights ffn;
    };
    struct Weights {
        torch::Tensor embedding;  // (vocab, d)
        torch::Tensor finalNorm;  // (d)
        torch::Tensor output;     // (vocab, d): lm_head, or the embedding when tied
        std::vector<Layer> layers;
    };

    LlamaModel(HfConfig config, ModelInfo info, Weights weights);

    const ModelInfo& info() const override { return info_; }
    torch::Tensor forward(const torch::Tensor& ids, const RunSpec& run,
                          ForwardTrace* trace = nullptr) const override;
    torch::Tensor attentionGamma(int64_t layer) const override;
    FfnDiagnostics ffnDiagnostics(int64_t layer, const torch::Tensor& input,
                                  const torch::Tensor& slots, const torch::Tensor& output,
                                  FfnKind kind, double tauScale) const override;
    torch::Tensor slotValues(int64_t layer) const override;
    torch::Tensor outputEmbedding() const override { return weights_.output; }
    torch::Tensor logitsFromResidual(const torch::Tensor& stream) const override;
    torch::Device device() const override { return weights_.embedding.device(); }
    void to(const torch::Device& device) override;

    const HfConfig& config() const { return config_; }

private:
    torch::Tensor rmsNorm(const torch::Tensor& x, const torch::Tensor& weight) const;

    HfConfig config_;
    ModelInfo info_;
    Weights weights_;
    torch::Tensor frequencies_;  // (dh / 2) rotary inverse frequencies, scaling applied
    torch::Tensor gamma_;        // (H) ones: these models have no ReLUFormer scale
};

}  // namespace relulens::core
