#include "core/slot_vocabulary.h"

#include <torch/csrc/autograd/grad_mode.h>

namespace relulens::core {

SlotVocabulary computeSlotVocabulary(const Transformer& model, int64_t k,
                                     const std::vector<int64_t>& excluded) {
    torch::NoGradGuard noGrad;
    const auto& c = model.config();
    const auto& embedding = model.tensor("tok_emb.weight");  // (V, d)
    std::vector<torch::Tensor> ids, logits;
    for (int64_t l = 0; l < c.nLayers; ++l) {
        const auto& w2 = model.tensor("layers." + std::to_string(l) + ".ffn.w2");  // (d, d_ff)
        auto projected = torch::matmul(w2.t(), embedding.t());                    // (d_ff, V)
        if (!excluded.empty()) {
            projected.index_fill_(1, torch::tensor(excluded, torch::kLong).to(projected.device()),
                                  -std::numeric_limits<float>::infinity());
        }
        auto [values, indices] = projected.topk(std::min(k, c.vocabSize), -1);
        ids.push_back(indices.to(torch::kCPU));
        logits.push_back(values.to(torch::kCPU));
    }
    return {torch::stack(ids), torch::stack(logits)};
}

}  // namespace relulens::core
