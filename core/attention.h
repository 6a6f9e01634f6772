// Attention weights from raw scores for every variant of PAPERS.md, under the causal mask.
// Row i (absolute position p = rowOffset + i) sees keys j <= p, so n_i = p + 1; under a sliding
// window of W keys it sees p - W < j <= p, so n_i = min(p + 1, W).
// Masked entries are exactly zero after the activation for every variant.
#pragma once
#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::core {

// scores: (heads, rows, keys) = q·k / sqrt(d_head); gamma: (heads) ReLUFormer scale.
// Returns weights of the same shape. mayOverwrite lets the papers' variants write them in the
// scores' memory. window: 0 for none.
torch::Tensor attentionWeights(const torch::Tensor& scores, const AttentionSpec& spec,
                               const torch::Tensor& gamma, int64_t rowOffset = 0,
                               bool mayOverwrite = false, int64_t window = 0);

// The weights of heads h0..h0+n-1 of `layer` under the run's overrides and ablations.
// scores: (B·n, rows, keys), entry i holding head h0 + (i mod n); gamma: (B·n) or undefined.
// A layer without overrides takes attentionWeights with run.attention in one call.
torch::Tensor layerAttentionWeights(const torch::Tensor& scores, const RunSpec& run, int64_t layer,
                                    int64_t h0, int64_t n, const torch::Tensor& gamma,
                                    int64_t rowOffset = 0, bool mayOverwrite = false,
                                    int64_t window = 0);

// (rows, keys) boolean: key j visible from row i.
torch::Tensor causalMask(int64_t rows, int64_t keys, int64_t rowOffset, const torch::Device& device,
                         int64_t window = 0);

// (rows, 1) float: n_i, the number of keys row i sees.
torch::Tensor visibleCounts(int64_t rows, int64_t rowOffset, const torch::Device& device,
                            int64_t window = 0);

}  // namespace relulens::core
