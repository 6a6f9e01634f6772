// Two lenses on a capture: what a run's overrides change at every token (against the same run
// without them), and the logit lens (each layer's residual stream read as next-token predictions).
#pragma once
#include <vector>

#include "core/capture.h"

namespace relulens::core {

// changed, unchanged: logits (L, V) of the same tokens with and without the overrides.
ChangeEffect changeEffect(const torch::Tensor& changed, const torch::Tensor& unchanged,
                          const std::vector<int64_t>& ids, int topK, const Tokenizer& tokenizer);

// afterLayer[l]: the residual stream (L, d) after layer l (the last one before the final norm).
// positions: where to list each layer's top k (-1: the last token; out-of-range ones are
// refused by the caller).
LogitLens logitLens(const LanguageModel& model, const std::vector<torch::Tensor>& afterLayer,
                    const std::vector<int64_t>& ids, const std::vector<int64_t>& positions,
                    int topK, const Tokenizer& tokenizer);

}  // namespace relulens::core
