// Reading views' per-token diagnostics out of a capture, and how heads are named. (Maps come
// from the capture's MapSource.)
#pragma once
#include <QString>

#include "core/capture.h"

namespace relulens::ui {

// Per-token value of a diagnostic for layer/head (head -1: mean over heads): (L)
torch::Tensor rowSparsity(const core::CaptureResult& result, int layer, int head);
torch::Tensor rowEntropy(const core::CaptureResult& result, int layer, int head);

QString headLabel(int head);
// "query head 5 · kv head 1" under grouped-query attention, else "head 5" ("mean of heads").
QString headLabel(const core::ModelInfo& model, int head);

}  // namespace relulens::ui
