#include "core/predictions.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/row_kernels.h"

namespace relulens::core {

namespace {

// On the CPU, each row's k largest entries of x (rows, V), largest first (of equal ones the
// lower index first): one pass per row through a heap of the k best so far, whose worst most
// entries are compared with once and rejected.
std::pair<torch::Tensor, torch::Tensor> topOfRows(const torch::Tensor& x, int64_t k) {
    const int64_t rows = x.size(0), V = x.size(1);
    auto values = torch::empty({rows, k}, torch::kFloat32);
    auto ids = torch::empty({rows, k}, torch::kLong);
    const float* in = x.data_ptr<float>();
    float* value = values.data_ptr<float>();
    int64_t* id = ids.data_ptr<int64_t>();
    using Entry = std::pair<float, int64_t>;
    const auto better = [](const Entry& a, const Entry& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    std::vector<Entry> heap;
    for (int64_t r = 0; r < rows; ++r) {
        const float* row = in + r * V;
        heap.clear();
        for (int64_t j = 0; j < k; ++j) heap.emplace_back(row[j], j);
        std::make_heap(heap.begin(), heap.end(), better);  // the front is the worst kept
        auto consider = [&](int64_t j) {
            if (row[j] > heap.front().first) {
                std::pop_heap(heap.begin(), heap.end(), better);
                heap.back() = {row[j], j};
                std::push_heap(heap.begin(), heap.end(), better);
            }
        };
        int64_t j = k;
        // kLanes entries at a time: most groups hold nothing above the worst kept.
        for (; j + rows::kLanes <= V; j += rows::kLanes) {
            if (!(rows::laneMax(rows::load(row + j)) > heap.front().first)) continue;
            for (int64_t c = 0; c < rows::kLanes; ++c) consider(j + c);
        }
        for (; j < V; ++j) consider(j);
        std::sort_heap(heap.begin(), heap.end(), better);  // the best first
        for (int64_t j = 0; j < k; ++j) {
            value[r * k + j] = heap[size_t(j)].first;
            id[r * k + j] = heap[size_t(j)].second;
        }
    }
    return {values, ids};
}

// log Σ_j exp(x_rj) of each row (rows, V) given its largest entry (rows, 1): as exp(x − max)
// summed, in blocks of rows small enough to stay in the cache (a pass over the whole matrix
// at once is several times slower).
torch::Tensor logSumExp(const torch::Tensor& x, const torch::Tensor& largest) {
    constexpr int64_t kRows = 32;
    const int64_t rows = x.size(0);
    auto out = torch::empty({rows, 1}, x.options());
    auto buffer = torch::empty({std::min(kRows, rows), x.size(1)}, x.options());
    for (int64_t r = 0; r < rows; r += kRows) {
        const int64_t n = std::min(kRows, rows - r);
        auto b = buffer.narrow(0, 0, n);
        at::sub_out(b, x.narrow(0, r, n), largest.narrow(0, r, n));
        b.exp_();
        auto sums = out.narrow(0, r, n);
        at::sum_out(sums, b, {-1}, /*keepdim=*/true);
    }
    return out.log_().add_(largest);
}

}  // namespace

std::vector<std::vector<Prediction>> topPredictions(const torch::Tensor& logitsIn, int k,
                                                    const Tokenizer& tokenizer) {
    // logits: (L, V). Rows past the tokenizer's pieces pad the embedding (some checkpoints
    // round their vocabulary up) and are never predicted.
    auto logits = logitsIn.to(torch::kFloat32);
    if (tokenizer.vocabSize() < logits.size(-1))
        logits = logits.narrow(-1, 0, tokenizer.vocabSize());
    const int64_t K = std::min<int64_t>(k, logits.size(-1));
    std::vector<std::vector<Prediction>> out(size_t(logits.size(0)));
    if (K <= 0 || logits.size(0) == 0) return out;
    // The k largest logits are the k most probable tokens, and p = exp(logit − log Σ exp):
    // the rows' softmax is never materialised.
    torch::Tensor top, indices, probabilities;
    if (logits.is_cpu()) {
        logits = logits.contiguous();
        std::tie(top, indices) = topOfRows(logits, K);
        probabilities = (top - logSumExp(logits, top.narrow(-1, 0, 1))).exp_();
    } else {
        std::tie(top, indices) = logits.topk(K, -1);
        probabilities = (top - logits.logsumexp(-1, /*keepdim=*/true)).exp().to(torch::kCPU);
        indices = indices.to(torch::kCPU);
    }
    probabilities = probabilities.contiguous();
    indices = indices.contiguous();
    const float* probability = probabilities.data_ptr<float>();
    const int64_t* id = indices.data_ptr<int64_t>();
    for (int64_t i = 0; i < logits.size(0); ++i) {
        auto& row = out[size_t(i)];
        row.reserve(size_t(K));
        for (int64_t j = 0; j < K; ++j) {
            const int64_t token = id[i * K + j];
            row.push_back({token, tokenizer.piece(token), tokenizer.readable(token),
                           double(probability[i * K + j])});
        }
    }
    return out;
}

}  // namespace relulens::core
