#include "core/map_source.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace relulens::core {

MapSource::MapSource(int64_t tokens, std::vector<HeadMap> requested,
                     std::shared_ptr<const AttentionMaps> lazy,
                     std::vector<torch::Tensor> overviews)
    : tokens_(tokens),
      requested_(std::move(requested)),
      lazy_(std::move(lazy)),
      overviews_(std::move(overviews)) {}

torch::Tensor MapSource::overview(int64_t layer) const {
    return layer >= 0 && layer < int64_t(overviews_.size()) ? overviews_[size_t(layer)]
                                                            : torch::Tensor();
}

torch::Tensor MapSource::requestedMap(int64_t layer, int64_t head, bool scores) const {
    std::vector<torch::Tensor> maps;
    for (const auto& m : requested_) {
        if (m.ref.layer != layer || (head >= 0 && m.ref.head != head)) continue;
        const auto& t = scores ? m.scores : m.weights;
        if (t.defined()) maps.push_back(t);
    }
    if (maps.empty()) return {};
    return maps.size() == 1 ? maps[0] : torch::stack(maps).mean(0);
}

bool MapSource::has(int64_t layer, int64_t head) const {
    if (lazy_) return layer >= 0 && layer < lazy_->layers() && head >= -1 && head < lazy_->heads();
    return requestedMap(layer, head, false).defined();
}

torch::Tensor MapSource::weights(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                                 int64_t keyBegin, int64_t keyEnd) const {
    if (rowBegin < 0 || keyBegin < 0 || rowEnd > tokens_ || keyEnd > tokens_ ||
        rowBegin >= rowEnd || keyBegin >= keyEnd) {
        return {};
    }
    if (lazy_) {
        if (!has(layer, head)) return {};
        return lazy_->weights(layer, head, rowBegin, rowEnd, keyBegin, keyEnd);
    }
    const auto full = requestedMap(layer, head, false);
    if (!full.defined()) return {};
    return full.slice(0, rowBegin, rowEnd).slice(1, keyBegin, keyEnd).contiguous();
}

torch::Tensor MapSource::weights(int64_t layer, int64_t head) const {
    return weights(layer, head, 0, tokens_, 0, tokens_);
}

torch::Tensor MapSource::scores(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                                int64_t keyBegin, int64_t keyEnd) const {
    if (rowBegin < 0 || keyBegin < 0 || rowEnd > tokens_ || keyEnd > tokens_ ||
        rowBegin >= rowEnd || keyBegin >= keyEnd) {
        return {};
    }
    if (lazy_) {
        if (!has(layer, head)) return {};
        return lazy_->scores(layer, head, rowBegin, rowEnd, keyBegin, keyEnd);
    }
    const auto full = requestedMap(layer, head, true);
    if (!full.defined()) return {};
    return full.slice(0, rowBegin, rowEnd).slice(1, keyBegin, keyEnd).contiguous();
}

double MapSource::weightAt(int64_t layer, int64_t head, int64_t query, int64_t key) const {
    const auto t = weights(layer, head, query, query + 1, key, key + 1);
    return t.defined() ? t.item<double>() : std::numeric_limits<double>::quiet_NaN();
}

double MapSource::scoreAt(int64_t layer, int64_t head, int64_t query, int64_t key) const {
    const auto t = scores(layer, head, query, query + 1, key, key + 1);
    return t.defined() ? t.item<double>() : std::numeric_limits<double>::quiet_NaN();
}

torch::Tensor MapSource::pooled(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                                int64_t keyBegin, int64_t keyEnd, int64_t outRows, int64_t outKeys,
                                Pooling pooling) const {
    const int64_t L = tokens_;
    // The whole map, max-pooled: from the overview the forward pass made, when there is one.
    const auto whole = overview(layer);
    if (pooling == Pooling::Max && head >= 0 && whole.defined() && head < whole.size(0) &&
        rowBegin == 0 && keyBegin == 0 && rowEnd == L && keyEnd == L) {
        const auto cells = whole[head];
        const int64_t o = cells.size(0);
        if (o == L || (o % outRows == 0 && o % outKeys == 0))
            return maxPoolCells(cells, outRows, outKeys);
        // finer than asked for but not evenly divisible: as it is, each cell still the max of
        // its own entries
        return cells;
    }
    if (lazy_) {
        if (!has(layer, head)) return {};
        return lazy_->pooled(layer, head, rowBegin, rowEnd, keyBegin, keyEnd, outRows, outKeys,
                             pooling);
    }
    const auto full = requestedMap(layer, head, false);
    if (!full.defined()) return {};
    PooledMap map(1, rowBegin, rowEnd, keyBegin, keyEnd, outRows, outKeys, pooling, torch::kCPU);
    map.add(full.unsqueeze(0), 0);
    return map.finish()[0];
}

ValueRange valueRange(const torch::Tensor& values) {
    const auto v = values.to(torch::kCPU, torch::kFloat32).contiguous();
    const float* p = v.data_ptr<float>();
    float low = std::numeric_limits<float>::infinity(), high = -low, lowPositive = low;
    bool any = false;
    for (int64_t i = 0, n = v.numel(); i < n; ++i) {
        const float x = p[i];
        if (std::isnan(x)) continue;
        any = true;
        low = std::min(low, x);
        high = std::max(high, x);
        if (x > 0) lowPositive = std::min(lowPositive, x);
    }
    ValueRange out;
    out.any = any;
    if (!any) return out;
    out.min = low;
    out.max = high;
    out.minPositive = std::isinf(lowPositive) ? std::nan("") : double(lowPositive);
    return out;
}

int64_t MapSource::bytes() const {
    int64_t total = lazy_ ? lazy_->bytes() : 0;
    auto add = [&](const torch::Tensor& t) {
        if (t.defined()) total += t.numel() * int64_t(t.element_size());
    };
    for (const auto& m : requested_) {
        add(m.weights);
        add(m.scores);
    }
    for (const auto& o : overviews_) add(o);
    return total;
}

}  // namespace relulens::core
