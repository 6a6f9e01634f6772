// Reading views' data out of a capture: one head's (or the head mean's) map and scores.
#pragma once
#include <QString>

#include "core/capture.h"

namespace relulens::ui {

// (L, L) CPU float weights of layer/head (head -1: mean over heads), rebuilt on demand when the
// capture kept queries and keys; undefined when the capture has neither.
torch::Tensor headWeights(const core::CaptureResult& result, int layer, int head);
torch::Tensor headScores(const core::CaptureResult& result, int layer, int head);

// One entry, weight and raw score (NaN when unavailable).
double weightAt(const core::CaptureResult& result, int layer, int head, int query, int key);
double scoreAt(const core::CaptureResult& result, int layer, int head, int query, int key);

// The region rows [rowBegin, rowEnd) × keys [keyBegin, keyEnd) pooled to at most
// outRows × outKeys cells, NaN where a cell holds only masked entries; undefined without maps.
torch::Tensor pooledWeights(const core::CaptureResult& result, int layer, int head,
                            int64_t rowBegin, int64_t rowEnd, int64_t keyBegin, int64_t keyEnd,
                            int64_t outRows, int64_t outKeys, core::Pooling pooling);

// Per-token value of a diagnostic for layer/head (head -1: mean over heads): (L)
torch::Tensor rowSparsity(const core::CaptureResult& result, int layer, int head);
torch::Tensor rowEntropy(const core::CaptureResult& result, int layer, int head);

QString headLabel(int head);
// "query head 5 · kv head 1" under grouped-query attention, else "head 5" ("mean of heads").
QString headLabel(const core::ModelInfo& model, int head);

}  // namespace relulens::ui
