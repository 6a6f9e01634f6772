// Attention weights from raw scores for every variant of PAPERS.md, under the causal mask.
// Row i (absolute position rowOffset + i) sees keys j <= rowOffset + i, so n_i = rowOffset + i + 1.
// Masked entries are exactly zero after the activation for every variant.
#pragma once
#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::core {

// scores: (heads, rows, keys) = q·k / sqrt(d_head); gamma: (heads) ReLUFormer scale.
// Returns weights of the same shape. mayOverwrite lets softmax reuse the scores' memory.
torch::Tensor attentionWeights(const torch::Tensor& scores, const AttentionSpec& spec,
                               const torch::Tensor& gamma, int64_t rowOffset = 0,
                               bool mayOverwrite = false);

// (rows, keys) boolean: key j visible from row i.
torch::Tensor causalMask(int64_t rows, int64_t keys, int64_t rowOffset,
                         const torch::Device& device);

// (rows, 1) float: n_i, the number of keys row i sees.
torch::Tensor visibleCounts(int64_t rows, int64_t rowOffset, const torch::Device& device);

}  // namespace relulens::core
