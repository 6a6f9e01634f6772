#include "core/attention_maps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "core/attention.h"

namespace relulens::core {

std::string poolingName(Pooling pooling) {
    return pooling == Pooling::Max ? "max" : "mean";
}

int64_t poolEdge(int64_t a, int64_t extent, int64_t n) {
    return a * extent / n;
}

namespace {

constexpr int64_t kChunkFloats = int64_t(1) << 18;  // per rebuilt block of rows (cache-sized)

torch::Tensor longTensor(const std::vector<int64_t>& values, const torch::Device& device) {
    return torch::tensor(values, torch::kLong).to(device);
}

}  // namespace

torch::Tensor maxPoolCells(const torch::Tensor& cellsIn, int64_t outRows, int64_t outKeys) {
    auto cells = cellsIn.to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t rows = cells.size(-2), keys = cells.size(-1);
    outRows = std::clamp<int64_t>(outRows, 1, rows);
    outKeys = std::clamp<int64_t>(outKeys, 1, keys);
    const int64_t maps = cells.numel() / (rows * keys);
    auto shape = cells.sizes().vec();
    shape[shape.size() - 2] = outRows;
    shape[shape.size() - 1] = outKeys;
    auto out = torch::empty(shape, torch::kFloat32);
    const float* in = cells.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (int64_t m = 0; m < maps; ++m) {
        for (int64_t a = 0; a < outRows; ++a) {
            for (int64_t b = 0; b < outKeys; ++b) {
                float best = nan;
                for (int64_t i = poolEdge(a, rows, outRows); i < poolEdge(a + 1, rows, outRows);
                     ++i) {
                    for (int64_t j = poolEdge(b, keys, outKeys); j < poolEdge(b + 1, keys, outKeys);
                         ++j) {
                        const float v = in[(m * rows + i) * keys + j];
                        if (!std::isnan(v) && (std::isnan(best) || v > best)) best = v;
                    }
                }
                o[(m * outRows + a) * outKeys + b] = best;
            }
        }
    }
    return out;
}

PooledMap::PooledMap(int64_t heads, int64_t rowBegin, int64_t rowEnd, int64_t keyBegin,
                     int64_t keyEnd, int64_t outRows, int64_t outKeys, Pooling pooling,
                     const torch::Device& device)
    : heads_(heads),
      rowBegin_(rowBegin),
      rowEnd_(rowEnd),
      keyBegin_(keyBegin),
      keyEnd_(keyEnd),
      outRows_(std::clamp<int64_t>(outRows, 1, std::max<int64_t>(1, rowEnd - rowBegin))),
      outKeys_(std::clamp<int64_t>(outKeys, 1, std::max<int64_t>(1, keyEnd - keyBegin))),
      pooling_(pooling) {
    if (rowEnd <= rowBegin || keyEnd <= keyBegin) throw std::invalid_argument("empty map region");
    init(device);
}

PooledMap::PooledMap(int64_t heads, int64_t tokens, int64_t cell, int64_t maxCells,
                     const torch::Device& device)
    : heads_(heads),
      rowBegin_(0),
      rowEnd_(tokens),
      keyBegin_(0),
      keyEnd_(tokens),
      outRows_((tokens + cell - 1) / cell),
      outKeys_(outRows_),
      pooling_(Pooling::Max),
      cell_(cell),
      maxCells_(maxCells) {
    if (tokens <= 0) throw std::invalid_argument("empty map region");
    init(device);
}

namespace {

int64_t overviewCell(int64_t tokens, int64_t maxCells) {
    int64_t cell = 1;
    while ((tokens + cell - 1) / cell > std::max<int64_t>(1, maxCells)) cell *= 2;
    return cell;
}

}  // namespace

PooledMap PooledMap::overview(int64_t heads, int64_t tokens, int64_t maxCells,
                              const torch::Device& device) {
    return PooledMap(heads, tokens, overviewCell(tokens, maxCells), maxCells, device);
}

PooledMap PooledMap::extended(int64_t tokens) const {
    if (cell_ == 0 || tokens < rowEnd_) throw std::logic_error("only an overview can grow");
    PooledMap out(heads_, tokens, std::max(cell_, overviewCell(tokens, maxCells_)), maxCells_,
                  values_.device());
    // Cells of a power-of-two width nest: each new cell is the union of f × f old ones.
    const int64_t f = out.cell_ / cell_, n = outRows_, m = (n + f - 1) / f;
    const float lowest = -std::numeric_limits<float>::infinity();
    auto values = torch::constant_pad_nd(values_, {0, m * f - n, 0, m * f - n}, lowest);
    auto counts = torch::constant_pad_nd(counts_, {0, m * f - n, 0, m * f - n}, 0);
    values = values.view({heads_, m, f, m, f}).amax({2, 4});
    counts = counts.view({m, f, m, f}).sum({1, 3});
    out.values_.narrow(1, 0, m).narrow(2, 0, m).copy_(values);
    out.counts_.narrow(0, 0, m).narrow(1, 0, m).copy_(counts);
    return out;
}

void PooledMap::addOverviewRows(const torch::Tensor& block, int64_t r0, int64_t a, int64_t b,
                                int64_t headBegin) {
    // One pass over each row's visible entries (keys 0..i): a running maximum per cell of
    // cell_ keys, and the cell's count of visible entries. (The general path's gathers make
    // several passes over the whole block: 4 s of an 8,192-token capture.)
    const int64_t K = block.size(2), R = block.size(1), H = block.size(0);
    const float* in = block.data_ptr<float>();
    float* v = values_.data_ptr<float>() + headBegin * outRows_ * outKeys_;
    float* counts = counts_.data_ptr<float>();
    for (int64_t i = a; i < b; ++i) {
        const int64_t visible = std::min(i + 1, K);  // keys 0..i, as far as the block holds them
        const int64_t rowCell = i / cell_, cells = (visible + cell_ - 1) / cell_;
        for (int64_t c = 0; c < cells && headBegin == 0; ++c) {
            counts[rowCell * outKeys_ + c] += float(std::min(visible, (c + 1) * cell_) - c * cell_);
        }
        for (int64_t h = 0; h < H; ++h) {
            const float* x = in + (h * R + (i - r0)) * K;
            float* into = v + (h * outRows_ + rowCell) * outKeys_;
            for (int64_t c = 0; c < cells; ++c) {
                const int64_t hi = std::min(visible, (c + 1) * cell_);
                float best = into[c];
                for (int64_t j = c * cell_; j < hi; ++j) best = std::max(best, x[j]);
                into[c] = best;
            }
        }
    }
}

void PooledMap::addRegionRows(const torch::Tensor& block, int64_t r0, int64_t a, int64_t b,
                              int64_t available, int64_t headBegin) {
    // As addOverviewRows, for cells of uneven widths (a zoomed region pooled to the plot's
    // pixels): each row's visible columns once, cell by cell. (The general path's gathers and
    // masks make several passes over the whole block, 50 ms for a 1,024-token map.)
    const int64_t K = block.size(2), R = block.size(1), C = keyEnd_ - keyBegin_;
    const int64_t H = block.size(0), extent = rowEnd_ - rowBegin_;
    std::vector<int64_t> edges(size_t(outKeys_ + 1));
    for (int64_t c = 0; c <= outKeys_; ++c) edges[size_t(c)] = poolEdge(c, C, outKeys_);
    const float* in = block.data_ptr<float>();
    float* v = values_.data_ptr<float>() + headBegin * outRows_ * outKeys_;
    float* counts = counts_.data_ptr<float>();
    const bool maximum = pooling_ == Pooling::Max;
    for (int64_t i = a; i < b; ++i) {
        // Region columns 0..seen-1 are keys this row sees (keyBegin + t <= i) that the block holds.
        const int64_t seen = std::min(available, i - keyBegin_ + 1);
        if (seen <= 0) continue;
        const int64_t rowCell = ((i - rowBegin_ + 1) * outRows_ - 1) / extent;
        int64_t cells = 0;
        while (cells < outKeys_ && edges[size_t(cells)] < seen) ++cells;
        for (int64_t c = 0; c < cells && headBegin == 0; ++c) {
            counts[rowCell * outKeys_ + c] +=
                float(std::min(edges[size_t(c + 1)], seen) - edges[size_t(c)]);
        }
        for (int64_t h = 0; h < H; ++h) {
            const float* x = in + (h * R + (i - r0)) * K + keyBegin_;
            float* into = v + (h * outRows_ + rowCell) * outKeys_;
            for (int64_t c = 0; c < cells; ++c) {
                const int64_t lo = edges[size_t(c)], hi = std::min(edges[size_t(c + 1)], seen);
                if (maximum) {
                    float best = into[c];
                    for (int64_t j = lo; j < hi; ++j) best = std::max(best, x[j]);
                    into[c] = best;
                } else {
                    float sum = 0;
                    for (int64_t j = lo; j < hi; ++j) sum += x[j];
                    into[c] += sum;
                }
            }
        }
    }
}

PooledMap PooledMap::copy() const {
    PooledMap out = *this;
    out.values_ = values_.clone();
    out.counts_ = counts_.clone();
    return out;
}

int64_t PooledMap::edge(int64_t a, int64_t extent, int64_t n) const {
    return cell_ > 0 ? std::min(a * cell_, extent) : poolEdge(a, extent, n);
}

void PooledMap::init(const torch::Device& device) {
    const int64_t C = keyEnd_ - keyBegin_;
    for (int64_t b = 0; b < outKeys_; ++b) {
        width_ = std::max(width_, edge(b + 1, C, outKeys_) - edge(b, C, outKeys_));
    }
    // Every cell gathers `width_` columns; narrower cells repeat their last column, which the
    // maximum ignores and the validity mask removes from sums and counts.
    std::vector<int64_t> index;
    std::vector<float> valid;
    for (int64_t b = 0; b < outKeys_; ++b) {
        const int64_t lo = edge(b, C, outKeys_), hi = edge(b + 1, C, outKeys_);
        for (int64_t t = 0; t < width_; ++t) {
            index.push_back(std::min(lo + t, hi - 1));
            valid.push_back(lo + t < hi ? 1.0f : 0.0f);
        }
    }
    keyIndex_ = longTensor(index, device);
    keyValid_ = torch::tensor(valid).view({outKeys_, width_}).to(device);
    auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    values_ = pooling_ == Pooling::Max
                  ? torch::full({heads_, outRows_, outKeys_},
                                -std::numeric_limits<float>::infinity(), options)
                  : torch::zeros({heads_, outRows_, outKeys_}, options);
    counts_ = torch::zeros({outRows_, outKeys_}, options);
}

void PooledMap::add(const torch::Tensor& valuesIn, int64_t r0, int64_t headBegin) {
    const int64_t H = valuesIn.size(0), R = valuesIn.size(1), K = valuesIn.size(2);
    const int64_t a = std::max(r0, rowBegin_), b = std::min(r0 + R, rowEnd_);
    if (a >= b) return;
    const int64_t Rs = b - a, C = keyEnd_ - keyBegin_;
    // Only the region's first `available` keys exist in this block (keys from K on are masked),
    // so only the cells over them are touched.
    const int64_t available = std::clamp<int64_t>(K - keyBegin_, 0, C);
    if (available == 0) return;
    const int64_t cells =
        cell_ > 0 ? (available + cell_ - 1) / cell_ : (available * outKeys_ - 1) / C + 1;
    const auto device = valuesIn.device();
    if (values_.is_cpu() && device.is_cpu()) {
        const auto block = valuesIn.to(torch::kFloat32).contiguous();
        if (cell_ > 0) {
            addOverviewRows(block, r0, a, b, headBegin);
        } else {
            addRegionRows(block, r0, a, b, available, headBegin);
        }
        return;
    }
    const auto region =
        valuesIn.to(torch::kFloat32).narrow(1, a - r0, Rs).narrow(2, keyBegin_, available);
    const auto index = keyIndex_.narrow(0, 0, cells * width_);  // region columns
    const auto inBlock = index < available;                     // (cells · width)
    const auto gathered =
        region.index_select(-1, index.clamp_max(available - 1));  // (H, Rs, cells · width)
    auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
    const auto rows = torch::arange(a, b, longs).unsqueeze(1);  // (Rs, 1)
    const auto visible =
        ((index + keyBegin_).unsqueeze(0) <= rows).logical_and(inBlock);  // (Rs, cells · width)
    const auto valid = keyValid_.narrow(0, 0, cells).flatten();           // duplicates: 0
    std::vector<int64_t> rowCell;
    const int64_t extent = rowEnd_ - rowBegin_;
    for (int64_t i = a; i < b; ++i) {
        // the cell c with edge(c) <= i - rowBegin < edge(c + 1)
        rowCell.push_back(cell_ > 0 ? (i - rowBegin_) / cell_
                                    : ((i - rowBegin_ + 1) * outRows_ - 1) / extent);
    }
    const auto rowIndex = longTensor(rowCell, device);  // (Rs)
    if (headBegin == 0) {
        counts_.narrow(1, 0, cells)
            .index_add_(0, rowIndex,
                        (visible.to(torch::kFloat32) * valid).view({Rs, cells, width_}).sum(-1));
    }
    auto heads = values_.narrow(0, headBegin, H);
    if (pooling_ == Pooling::Max) {
        const auto masked = torch::where(
            visible, gathered,
            torch::full({}, -std::numeric_limits<float>::infinity(), gathered.options()));
        const auto best =
            masked.view({H, Rs, cells, width_}).amax(-1).contiguous();  // (H, Rs, cells)
        if (values_.is_cpu()) {
            // Rows fall into consecutive cells: a running maximum row by row (scatter_reduce
            // is several times slower here).
            const float* c = best.data_ptr<float>();
            float* v = heads.data_ptr<float>();
            for (int64_t h = 0; h < H; ++h) {
                for (int64_t i = 0; i < Rs; ++i) {
                    const float* from = c + (h * Rs + i) * cells;
                    float* into = v + (h * outRows_ + rowCell[size_t(i)]) * outKeys_;
                    for (int64_t k = 0; k < cells; ++k) into[k] = std::max(into[k], from[k]);
                }
            }
        } else {
            heads.narrow(2, 0, cells)
                .scatter_reduce_(1, rowIndex.view({1, Rs, 1}).expand({H, Rs, cells}), best, "amax",
                                 /*include_self=*/true);
        }
    } else {
        const auto masked =
            torch::where(visible, gathered, torch::zeros({}, gathered.options())) * valid;
        heads.narrow(2, 0, cells)
            .index_add_(1, rowIndex, masked.view({H, Rs, cells, width_}).sum(-1));
    }
}

void PooledMap::finishInto(torch::Tensor& out) const {
    const float* v = values_.data_ptr<float>();
    const float* counts = counts_.data_ptr<float>();
    float* o = out.data_ptr<float>();
    const int64_t cells = outRows_ * outKeys_;
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const bool mean = pooling_ == Pooling::Mean;
    for (int64_t h = 0; h < heads_; ++h) {
        const float* vh = v + h * cells;
        float* oh = o + h * cells;
        for (int64_t c = 0; c < cells; ++c) {
            oh[c] = counts[c] == 0 ? nan : mean ? vh[c] / counts[c] : vh[c];
        }
    }
}

torch::Tensor PooledMap::finish() {
    if (!values_.is_cpu()) return result();
    finishInto(values_);
    return values_;
}

torch::Tensor PooledMap::result() const {
    if (values_.is_cpu()) {
        auto out = torch::empty_like(values_);
        finishInto(out);
        return out;
    }
    const auto empty = (counts_ == 0).unsqueeze(0);
    const auto nan = torch::full({}, std::numeric_limits<float>::quiet_NaN(), values_.options());
    auto out = pooling_ == Pooling::Max ? values_ : values_ / counts_.clamp_min(1).unsqueeze(0);
    return torch::where(empty, nan, out).to(torch::kCPU).contiguous();
}

AttentionMaps::AttentionMaps(std::vector<Layer> layers, RunSpec run, double scale)
    : layers_(std::move(layers)), run_(std::move(run)), scale_(scale) {}

int64_t AttentionMaps::bytes() const {
    int64_t total = 0;
    for (const auto& l : layers_)
        total += (l.q.numel() + l.k.numel()) * int64_t(l.q.element_size());
    return total;
}

int64_t AttentionMaps::heads() const {
    return layers_.empty() ? 0 : layers_[0].q.size(0);
}
int64_t AttentionMaps::tokens() const {
    return layers_.empty() ? 0 : layers_[0].q.size(1);
}

void AttentionMaps::checkRegion(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                                int64_t keyBegin, int64_t keyEnd) const {
    const int64_t L = tokens();
    if (layer < 0 || layer >= layers() || head < -1 || head >= heads() || rowBegin < 0 ||
        rowEnd > L || rowBegin >= rowEnd || keyBegin < 0 || keyEnd > L || keyBegin >= keyEnd) {
        throw std::out_of_range("attention map region outside layer " + std::to_string(layer) +
                                ", head " + std::to_string(head) + " of " + std::to_string(L) +
                                " tokens");
    }
}

torch::Tensor AttentionMaps::keys(int64_t layer, int64_t h0, int64_t h) const {
    const auto& k = layers_[size_t(layer)].k;
    const int64_t group = heads() / k.size(0);
    if (group == 1) return k.narrow(0, h0, h);
    if (h == 1) return k.narrow(0, h0 / group, 1);
    return k.repeat_interleave(group, 0).narrow(0, h0, h);
}

torch::Tensor AttentionMaps::rowWeights(int64_t layer, int64_t h0, int64_t h, int64_t r0, int64_t R,
                                        int64_t K) const {
    const auto& t = layers_[size_t(layer)];
    auto s = torch::matmul(t.q.narrow(0, h0, h).narrow(1, r0, R),
                           keys(layer, h0, h).narrow(1, 0, K).transpose(-1, -2)) *
             scale_;
    return layerAttentionWeights(s, run_, layer, h0, h, t.gamma.narrow(0, h0, h), r0,
                                 /*mayOverwrite=*/true, t.window);
}

torch::Tensor AttentionMaps::weights(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                                     int64_t keyBegin, int64_t keyEnd) const {
    checkRegion(layer, head, rowBegin, rowEnd, keyBegin, keyEnd);
    const int64_t h0 = head < 0 ? 0 : head, h = head < 0 ? heads() : 1;
    const int64_t C = keyEnd - keyBegin;
    std::vector<torch::Tensor> parts;
    const int64_t chunk = std::max<int64_t>(1, kChunkFloats / (h * rowEnd));
    for (int64_t r0 = rowBegin; r0 < rowEnd; r0 += chunk) {
        const int64_t R = std::min(chunk, rowEnd - r0);
        // Keys past the chunk's last row are masked; softmax needs every key a row sees.
        const int64_t K = r0 + R;
        auto w = rowWeights(layer, h0, h, r0, R, K).mean(0);  // (R, K)
        const int64_t available = std::clamp<int64_t>(K - keyBegin, 0, C);
        torch::Tensor part =
            available > 0 ? w.narrow(1, keyBegin, available) : torch::zeros({R, 0}, w.options());
        if (available < C) part = torch::constant_pad_nd(part, {0, C - available});
        parts.push_back(part.to(torch::kCPU));
    }
    return (parts.size() == 1 ? parts[0] : torch::cat(parts, 0)).contiguous();
}

torch::Tensor AttentionMaps::scores(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                                    int64_t keyBegin, int64_t keyEnd) const {
    checkRegion(layer, head, rowBegin, rowEnd, keyBegin, keyEnd);
    const auto& t = layers_[size_t(layer)];
    const int64_t h0 = head < 0 ? 0 : head, h = head < 0 ? heads() : 1;
    auto s =
        torch::matmul(t.q.narrow(0, h0, h).narrow(1, rowBegin, rowEnd - rowBegin),
                      keys(layer, h0, h).narrow(1, keyBegin, keyEnd - keyBegin).transpose(-1, -2)) *
        scale_;
    return s.mean(0).to(torch::kCPU).contiguous();
}

torch::Tensor AttentionMaps::weights(int64_t layer, int64_t head) const {
    return weights(layer, head, 0, tokens(), 0, tokens());
}

torch::Tensor AttentionMaps::pooled(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                                    int64_t keyBegin, int64_t keyEnd, int64_t outRows,
                                    int64_t outKeys, Pooling pooling) const {
    checkRegion(layer, head, rowBegin, rowEnd, keyBegin, keyEnd);
    const int64_t h0 = head < 0 ? 0 : head, h = head < 0 ? heads() : 1;
    const auto device = layers_[size_t(layer)].q.device();
    PooledMap map(1, rowBegin, rowEnd, keyBegin, keyEnd, outRows, outKeys, pooling, device);
    const int64_t chunk = std::max<int64_t>(1, kChunkFloats / (h * rowEnd));
    for (int64_t r0 = rowBegin; r0 < rowEnd; r0 += chunk) {
        const int64_t R = std::min(chunk, rowEnd - r0);
        const auto w = rowWeights(layer, h0, h, r0, R, r0 + R);  // (h, R, K)
        map.add(h == 1 ? w : w.mean(0, /*keepdim=*/true), r0);
    }
    return map.finish()[0];
}

}  // namespace relulens::core
