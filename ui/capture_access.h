// Reading views' data out of a capture: one head's (or the head mean's) map and scores.
#pragma once
#include <QString>

#include "core/capture.h"

namespace relulens::ui {

// (L, L) CPU float weights of layer/head (head -1: mean over heads); undefined when the
// capture lacks them.
torch::Tensor headWeights(const core::CaptureResult& result, int layer, int head);
torch::Tensor headScores(const core::CaptureResult& result, int layer, int head);

// Per-token value of a diagnostic for layer/head (head -1: mean over heads): (L)
torch::Tensor rowSparsity(const core::CaptureResult& result, int layer, int head);
torch::Tensor rowEntropy(const core::CaptureResult& result, int layer, int head);

QString headLabel(int head);

}  // namespace relulens::ui
