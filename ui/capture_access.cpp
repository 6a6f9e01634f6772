#include "ui/capture_access.h"

#include <QString>

namespace relulens::ui {

namespace {

torch::Tensor gather(const core::CaptureResult& result, int layer, int head, bool scores) {
    std::vector<torch::Tensor> maps;
    for (const auto& m : result.maps) {
        if (m.ref.layer != layer || (head >= 0 && m.ref.head != head)) continue;
        const auto& t = scores ? m.scores : m.weights;
        if (t.defined()) maps.push_back(t);
    }
    if (maps.empty()) return {};
    if (maps.size() == 1) return maps[0];
    return torch::stack(maps).mean(0);
}

torch::Tensor perRow(const torch::Tensor& rows, int head) {
    if (!rows.defined()) return {};
    return head < 0 ? rows.mean(0) : rows[head];
}

}  // namespace

torch::Tensor headWeights(const core::CaptureResult& result, int layer, int head) {
    return gather(result, layer, head, false);
}

torch::Tensor headScores(const core::CaptureResult& result, int layer, int head) {
    return gather(result, layer, head, true);
}

torch::Tensor rowSparsity(const core::CaptureResult& result, int layer, int head) {
    if (layer < 0 || layer >= int(result.layers.size())) return {};
    return perRow(result.layers[size_t(layer)].attention.rowSparsity, head);
}

torch::Tensor rowEntropy(const core::CaptureResult& result, int layer, int head) {
    if (layer < 0 || layer >= int(result.layers.size())) return {};
    return perRow(result.layers[size_t(layer)].attention.rowEntropy, head);
}

QString headLabel(int head) { return head < 0 ? QStringLiteral("mean of heads") : QString("head %1").arg(head); }

}  // namespace relulens::ui
