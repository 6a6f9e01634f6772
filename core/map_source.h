// The one place a capture's attention maps come from. A view asks for a head's weights over a
// region, exact or pooled to at most so many cells by max or mean, or for the mean of a layer's
// heads; the source answers from whatever the capture kept — maps materialised on request, the
// queries and keys that rebuild any map, or the max-pooled overviews made during the forward
// pass — and the caller never decides between them.
#pragma once
#include <memory>
#include <vector>

#include "core/attention_maps.h"
#include "core/torch_include.h"

namespace relulens::core {

struct HeadRef {
    int64_t layer = 0;
    int64_t head = 0;
};

struct HeadMap {
    HeadRef ref;
    torch::Tensor weights;  // (L, L) CPU float, masked entries 0
    torch::Tensor scores;   // (L, L) CPU float, raw q·k/sqrt(d_head) (masked entries included)
};

class MapSource {
public:
    // overviews: per layer (H, o, o), each head's map max-pooled to o cells a side (NaN where a
    // cell holds only masked entries), or empty.
    MapSource(int64_t tokens, std::vector<HeadMap> requested,
              std::shared_ptr<const AttentionMaps> lazy, std::vector<torch::Tensor> overviews);

    int64_t tokens() const { return tokens_; }
    // The maps the request asked to materialise (inspect --maps / --all-maps).
    const std::vector<HeadMap>& requested() const { return requested_; }
    // The kept queries and keys, or null when the capture did not keep them.
    const AttentionMaps* lazy() const { return lazy_.get(); }
    // Layer l's overview (H, o, o), or undefined.
    torch::Tensor overview(int64_t layer) const;

    // Whether weights of layer/head (head -1: the mean of the layer's heads) can be answered.
    bool has(int64_t layer, int64_t head) const;
    // (rowEnd - rowBegin, keyEnd - keyBegin) CPU float, 0 where a row cannot see the key;
    // undefined when the head is not available.
    torch::Tensor weights(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                          int64_t keyBegin, int64_t keyEnd) const;
    torch::Tensor weights(int64_t layer, int64_t head) const;  // (L, L)
    // Raw scores of the region (masked entries included), or undefined.
    torch::Tensor scores(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                         int64_t keyBegin, int64_t keyEnd) const;
    // One entry, or NaN when unavailable.
    double weightAt(int64_t layer, int64_t head, int64_t query, int64_t key) const;
    double scoreAt(int64_t layer, int64_t head, int64_t query, int64_t key) const;
    // The region pooled to at most outRows × outKeys cells (fewer when the region is smaller;
    // the whole map, max-pooled, may come coarser from the overview), NaN where a cell holds only
    // masked entries; undefined when unavailable.
    torch::Tensor pooled(int64_t layer, int64_t head, int64_t rowBegin, int64_t rowEnd,
                         int64_t keyBegin, int64_t keyEnd, int64_t outRows, int64_t outKeys,
                         Pooling pooling) const;

    int64_t bytes() const;  // what the kept tensors take

private:
    // The requested maps of layer/head (all heads of the layer for head -1), averaged; or
    // undefined.
    torch::Tensor requestedMap(int64_t layer, int64_t head, bool scores) const;

    int64_t tokens_;
    std::vector<HeadMap> requested_;
    std::shared_ptr<const AttentionMaps> lazy_;
    std::vector<torch::Tensor> overviews_;
};

// The range of a map's values (a pooled or exact region), in one pass: cells that are NaN (only
// masked entries) left out; minPositive is NaN when no value is above 0.
struct ValueRange {
    bool any = false;  // some value is not NaN
    double min = 0, max = 0, minPositive = 0;
};
ValueRange valueRange(const torch::Tensor& values);

}  // namespace relulens::core
