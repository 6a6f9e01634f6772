// Attention maps on demand. A capture keeps every layer's queries and keys (a few MB even at
// 8,192 tokens) instead of layers × heads × L² weights (4.3 GB there); any head's map, or a tile
// of it, is rebuilt from them with the same arithmetic as the forward pass. Maps larger than the
// screen are shown pooled: each cell summarises a block of entries by their maximum or mean.
#pragma once
#include <string>
#include <vector>

#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::core {

enum class Pooling { Max, Mean };
std::string poolingName(Pooling pooling);  // "max" or "mean"

// Row or column a of n output cells over `extent` inputs covers inputs
// floor(a · extent / n) .. floor((a + 1) · extent / n) - 1.
int64_t poolEdge(int64_t a, int64_t extent, int64_t n);

// Pools already pooled cells further, (..., rows, keys) -> (..., outRows, outKeys) with the same
// edges as PooledMap, taking the max and ignoring NaN (cells without visible entries). Exact
// when each input cell is one entry, or when the output divides the input evenly.
torch::Tensor maxPoolCells(const torch::Tensor& cells, int64_t outRows, int64_t outKeys);

// The region rows [rowBegin, rowEnd) × keys [keyBegin, keyEnd) of H maps pooled to
// outRows × outKeys cells (each at most the region's size). Blocks of rows arrive in any order;
// entries a row cannot see (key > row) are left out, and a cell with no visible entry is NaN.
class PooledMap {
public:
    PooledMap(int64_t heads, int64_t rowBegin, int64_t rowEnd, int64_t keyBegin, int64_t keyEnd,
              int64_t outRows, int64_t outKeys, Pooling pooling, const torch::Device& device);
    // The whole map of `tokens` tokens max-pooled to cells of w × w tokens, w the smallest power
    // of two that needs at most maxCells a side (the last cell may be narrower). Because the
    // cells do not move as tokens are added, extended() can grow it.
    static PooledMap overview(int64_t heads, int64_t tokens, int64_t maxCells,
                              const torch::Device& device);
    // An overview of a longer input sharing this one's first tokens (rows 0..tokens()-1 already
    // added), with cells widened as overview() would choose them; add() then takes the new rows.
    PooledMap extended(int64_t tokens) const;
    PooledMap copy() const;  // with its own running values
    // values: (H, R, K), rows rowOffset..rowOffset+R-1 against keys 0..K-1; keys from K on are
    // taken as masked. With headBegin > 0 they are heads headBegin..headBegin+H-1 of a block
    // whose heads from 0 are added too (only those count the cells' entries). Disjoint heads of
    // the same rows may be added from two threads at once.
    void add(const torch::Tensor& values, int64_t rowOffset, int64_t headBegin = 0);
    torch::Tensor result() const;  // (H, outRows, outKeys) CPU float
    // The same, made in the map's own storage: no second tensor of the map's size. The map is
    // spent afterwards (no add, result or finish after it). (A 1,024-token map pooled to 941 ×
    // 755 cells: 1 ms; the tensor expression's four temporaries took 1–17 ms, the slow runs in
    // fresh pages.)
    torch::Tensor finish();
    int64_t outRows() const { return outRows_; }
    int64_t outKeys() const { return outKeys_; }
    int64_t cellWidth() const { return cell_; }  // tokens per cell of an overview, else 0

private:
    PooledMap(int64_t heads, int64_t tokens, int64_t cell, int64_t maxCells,
              const torch::Device& device);
    void init(const torch::Device& device);
    int64_t edge(int64_t a, int64_t extent, int64_t n) const;  // first input of cell a
    // out (H, outRows, outKeys) = each cell's maximum or mean, NaN where it saw no entry (CPU)
    void finishInto(torch::Tensor& out) const;
    // add() for an overview on the CPU: rows a..b-1 of the block (H, R, K) of rows r0...
    void addOverviewRows(const torch::Tensor& block, int64_t r0, int64_t a, int64_t b,
                         int64_t headBegin);
    void addRegionRows(const torch::Tensor& block, int64_t r0, int64_t a, int64_t b,
                       int64_t available, int64_t headBegin);

    int64_t heads_, rowBegin_, rowEnd_, keyBegin_, keyEnd_, outRows_, outKeys_;
    Pooling pooling_;
    int64_t cell_ = 0;  // uniform cells of this many tokens (overviews), else 0
    int64_t maxCells_ = 0;
    torch::Tensor keyIndex_;  // (outKeys · width) region columns gathered per cell
    torch::Tensor keyValid_;  // (outKeys, width) 1 for a real column, 0 for padding
    int64_t width_ = 1;
    torch::Tensor values_;  // (H, outRows, outKeys) running max, or sums for the mean
    torch::Tensor counts_;  // (outRows, outKeys) visible entries per cell (mean)
    torch::Tensor seen_;    // (outRows, outKeys) any visible entry (max)
};

class AttentionMaps {
public:
    struct Layer {
        torch::Tensor q;      // (H, L, d_head) after rotary
        torch::Tensor k;      // (H_kv, L, d_head): query head h reads kv head h / (H / H_kv)
        torch::Tensor gamma;  // (H) ReLUFormer scale
        int64_t window = 0;   // sliding window (0: none)
    };
    // `run` says which variant (or ablation) each head ran with.
    AttentionMaps(std::vector<Layer> layers, RunSpec run, double scale);

    int64_t layers() const { return int64_t(layers_.size()); }
    int64_t heads() const;
    int64_t tokens() const;
    int64_t bytes() const;  // what the kept queries and keys take

    // Weights (or raw scores q·k / sqrt(d_head)) of rows [rowBegin, rowEnd) against keys
    // [keyBegin, keyEnd) of one head, or of the mean of the layer's heads for head -1:
    // (R, C) CPU float. Weights are 0 where a row cannot see the key; scores are not masked.
    torch::Tensor weights(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                          int64_t keyBegin, int64_t keyEnd) const;
    torch::Tensor scores(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                         int64_t keyBegin, int64_t keyEnd) const;
    torch::Tensor weights(int64_t layer, int64_t head) const;  // the whole (L, L) map

    // The region pooled to at most outRows × outKeys cells (fewer when the region is smaller):
    // (rows, keys) CPU float, NaN where a cell holds only masked entries.
    torch::Tensor pooled(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                         int64_t keyBegin, int64_t keyEnd, int64_t outRows, int64_t outKeys,
                         Pooling pooling) const;

private:
    // (h, L, d_head) keys of query heads [h0, h0 + h).
    torch::Tensor keys(int64_t layer, int64_t h0, int64_t h) const;
    // (h, R, K) weights of rows [r0, r0 + R) against keys [0, K) for heads [h0, h0 + h).
    torch::Tensor rowWeights(int64_t layer, int64_t h0, int64_t h, int64_t r0, int64_t R,
                             int64_t K) const;
    void checkRegion(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                     int64_t keyBegin, int64_t keyEnd) const;

    std::vector<Layer> layers_;
    RunSpec run_;
    double scale_;
};

}  // namespace relulens::core
