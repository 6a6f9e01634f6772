#include "ui/capture_access.h"

#include <QString>

namespace relulens::ui {

namespace {

torch::Tensor perRow(const torch::Tensor& rows, int head) {
    if (!rows.defined()) return {};
    return head < 0 ? rows.mean(0) : rows[head];
}

}  // namespace

torch::Tensor rowSparsity(const core::CaptureResult& result, int layer, int head) {
    if (layer < 0 || layer >= int(result.layers.size())) return {};
    return perRow(result.layers[size_t(layer)].attentionDiagnostics.rowSparsity, head);
}

torch::Tensor rowEntropy(const core::CaptureResult& result, int layer, int head) {
    if (layer < 0 || layer >= int(result.layers.size())) return {};
    return perRow(result.layers[size_t(layer)].attentionDiagnostics.rowEntropy, head);
}

QString headLabel(int head) {
    return head < 0 ? QStringLiteral("mean of heads") : QString("head %1").arg(head);
}

QString headLabel(const core::ModelInfo& model, int head) {
    if (head < 0 || model.nKvHeads <= 0 || model.nKvHeads == model.nHeads) return headLabel(head);
    return QString("query head %1 · kv head %2").arg(head).arg(model.kvHeadOf(head));
}

}  // namespace relulens::ui
