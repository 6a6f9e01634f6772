// Next-token predictions read from logits: the top k tokens of each row with their
// probabilities.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

#include "core/tokenizer.h"

namespace relulens::core {

struct Prediction {
    int64_t id = 0;
    std::string piece;
    std::string readable;  // as a person reads it (Tokenizer::readable)
    double probability = 0;
};

// The top k next tokens of each row of logits (L, V), with their probabilities.
std::vector<std::vector<Prediction>> topPredictions(const torch::Tensor& logits, int k,
                                                    const Tokenizer& tokenizer);

}  // namespace relulens::core
