// Validation loss and perplexity of a model at several context lengths (rotary positions let a
// model run past the length it was trained at).
#pragma once
#include <vector>

#include "core/error.h"
#include "core/language_model.h"

namespace relulens::core {

struct ContextLoss {
    int64_t context = 0;
    double loss = 0;        // mean next-token cross-entropy (nats) over every position
    double perplexity = 0;  // exp(loss)
    int64_t windows = 0;    // non-overlapping windows evaluated
    int64_t tokens = 0;     // predictions averaged
    // Each window's mean cross-entropy, in text order, and the standard error of `loss` over
    // them: the sample standard deviation of the window losses ÷ √windows (0 for one window).
    std::vector<double> windowLosses;
    double standardError = 0;
};

// Splits `tokens` into non-overlapping windows of context + 1 ids, at most maxTokens
// predictions per context length.
Result<std::vector<ContextLoss>> evaluateContexts(const LanguageModel& model,
                                                  const std::vector<int64_t>& tokens,
                                                  const std::vector<int64_t>& contexts,
                                                  const RunSpec& run, int64_t maxTokens,
                                                  int64_t batch = 4);

}  // namespace relulens::core
