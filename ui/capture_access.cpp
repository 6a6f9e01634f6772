#include "ui/capture_access.h"

#include <QString>
#include <limits>

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

static bool hasLazyMap(const core::CaptureResult& result, int layer, int head) {
    const auto& maps = result.attentionMaps;
    return maps && layer >= 0 && layer < maps->layers() && head >= -1 && head < maps->heads();
}

torch::Tensor headWeights(const core::CaptureResult& result, int layer, int head) {
    if (hasLazyMap(result, layer, head)) return result.attentionMaps->weights(layer, head);
    return gather(result, layer, head, false);
}

torch::Tensor headScores(const core::CaptureResult& result, int layer, int head) {
    if (hasLazyMap(result, layer, head)) {
        const int64_t L = result.attentionMaps->tokens();
        return result.attentionMaps->scores(layer, head, 0, L, 0, L);
    }
    return gather(result, layer, head, true);
}

namespace {

double entry(const core::CaptureResult& result, int layer, int head, int query, int key,
             bool scores) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    if (query < 0 || key < 0) return nan;
    if (hasLazyMap(result, layer, head)) {
        const auto& maps = *result.attentionMaps;
        if (query >= maps.tokens() || key >= maps.tokens()) return nan;
        auto t = scores ? maps.scores(layer, head, query, query + 1, key, key + 1)
                        : maps.weights(layer, head, query, query + 1, key, key + 1);
        return t[0][0].item<double>();
    }
    const auto t = gather(result, layer, head, scores);
    if (!t.defined() || query >= t.size(0) || key >= t.size(1)) return nan;
    return t[query][key].item<double>();
}

}  // namespace

double weightAt(const core::CaptureResult& result, int layer, int head, int query, int key) {
    return entry(result, layer, head, query, key, false);
}

double scoreAt(const core::CaptureResult& result, int layer, int head, int query, int key) {
    return entry(result, layer, head, query, key, true);
}

torch::Tensor pooledWeights(const core::CaptureResult& result, int layer, int head,
                            int64_t rowBegin, int64_t rowEnd, int64_t keyBegin, int64_t keyEnd,
                            int64_t outRows, int64_t outKeys, core::Pooling pooling) {
    // The whole map, max-pooled: from the overview the forward pass made, when that is exact.
    const int64_t L = int64_t(result.tokens.size());
    if (pooling == core::Pooling::Max && head >= 0 && layer >= 0 &&
        layer < int(result.overviews.size()) && rowBegin == 0 && keyBegin == 0 && rowEnd == L &&
        keyEnd == L) {
        const auto overview = result.overviews[size_t(layer)][head];
        const int64_t o = overview.size(0);
        if (o == L || (o % outRows == 0 && o % outKeys == 0)) {
            return core::maxPoolCells(overview, outRows, outKeys);
        }
        // finer than asked for but not evenly divisible: drawn as is, each cell still the
        // max of its own entries
        return overview;
    }
    if (hasLazyMap(result, layer, head)) {
        return result.attentionMaps->pooled(layer, head, rowBegin, rowEnd, keyBegin, keyEnd,
                                            outRows, outKeys, pooling);
    }
    const auto full = gather(result, layer, head, false);
    if (!full.defined()) return {};
    core::PooledMap map(1, rowBegin, rowEnd, keyBegin, keyEnd, outRows, outKeys, pooling,
                        torch::kCPU);
    map.add(full.unsqueeze(0), 0);
    return map.result()[0];
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

QString headLabel(const core::ModelInfo& model, int head) {
    if (head < 0 || model.nKvHeads <= 0 || model.nKvHeads == model.nHeads) return headLabel(head);
    return QString("query head %1 · kv head %2").arg(head).arg(model.kvHeadOf(head));
}

}  // namespace relulens::ui
