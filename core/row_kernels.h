// The attention diagnostics' per-row arithmetic on the CPU (sums, maximum, Σ w log w, the top
// 1 % and the distance totals of one row of weights), written so that the compiler runs it in
// vector lanes. Internal to core/diagnostics.cpp.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

namespace relulens::core::rows {

// The per-row loops below work on kLanes floats at a time through the compiler's generic
// vectors (GCC and Clang turn them into SSE/AVX instructions): a running float sum is a chain of
// dependent additions the compiler must otherwise keep in order, one entry at a time. The lanes
// are added in double at the end.
constexpr int64_t kLanes = 4;
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = int32_t __attribute__((vector_size(kLanes * sizeof(float))));

inline Floats load(const float* x) {
    Floats v;
    std::memcpy(&v, x, sizeof v);
    return v;
}

inline Floats splat(float x) {
    return Floats{} + x;
}

// a where the mask's lane is all ones, b where it is zero (masks from vector comparisons).
inline Floats select(Ints mask, Floats a, Floats b) {
    return (Floats)(((Ints)a & mask) | ((Ints)b & ~mask));
}

inline Floats maximum(Floats a, Floats b) {
    return select(a > b, a, b);
}

inline double laneSum(Floats v) {
    double sum = 0;
    for (int64_t k = 0; k < kLanes; ++k) sum += v[k];
    return sum;
}

inline float laneMax(Floats v) {
    float best = v[0];
    for (int64_t k = 1; k < kLanes; ++k) best = std::max(best, v[k]);
    return best;
}

// Sum of the k largest of x[0..n), k <= n, through a min-heap of the k largest so far: most
// entries are compared with the heap's smallest once and rejected, kLanes at a time when their
// largest is no larger. The row is read from its end, where a query's nearest keys (often its
// largest weights) are, so that the heap fills with large values early.
inline double sumOfLargest(const float* x, int64_t n, int64_t k, std::vector<float>& heap) {
    heap.assign(x + n - k, x + n);
    std::make_heap(heap.begin(), heap.end(), std::greater<float>());
    float smallest = heap.front();
    auto consider = [&](float v) {
        if (v > smallest) {
            std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
            heap.back() = v;
            std::push_heap(heap.begin(), heap.end(), std::greater<float>());
            smallest = heap.front();
        }
    };
    int64_t end = n - k;  // x[0..end) are still to be considered
    for (; end >= kLanes; end -= kLanes) {
        if (!(laneMax(load(x + end - kLanes)) > smallest)) continue;
        for (int64_t c = 1; c <= kLanes; ++c) consider(x[end - c]);
    }
    for (; end > 0; --end) consider(x[end - 1]);
    double sum = 0;
    for (float v : heap) sum += v;
    return sum;
}

// Natural log of positive normal floats, lane by lane: the exponent from the bits and Cephes's
// polynomial for the mantissa, accurate to about one unit in the last place.
inline Floats logPositive(Floats x) {
    const Ints bits = (Ints)x;
    Ints exponent = ((bits >> 23) & 0xff) - 126;
    const Floats m = (Floats)((bits & 0x7fffff) | 0x3f000000);  // in [0.5, 1)
    const Ints low = m < splat(0.707106781186547524f);          // then 2m − 1, like m − 1
    exponent += low;                                            // (−1 where low)
    const Floats f = m + select(low, m, Floats{}) - 1.0f;       // in [−0.29, 0.41]
    const Floats z = f * f;
    Floats y = splat(7.0376836292e-2f);
    y = y * f - 1.1514610310e-1f;
    y = y * f + 1.1676998740e-1f;
    y = y * f - 1.2420140846e-1f;
    y = y * f + 1.4249322787e-1f;
    y = y * f - 1.6668057665e-1f;
    y = y * f + 2.0000714765e-1f;
    y = y * f - 2.4999993993e-1f;
    y = y * f + 3.3333331174e-1f;
    y *= f * z;
    const Floats e = __builtin_convertvector(exponent, Floats);
    y += e * -2.12194440e-4f;
    y -= 0.5f * z;
    return f + y + e * 0.693359375f;
}

// One row's sum, sum of positive entries, largest entry and Σ w⁺ log w⁺ (0 log 0 = 0), over
// x[0..m).
struct RowSums {
    double sum = 0, positiveSum = 0, positiveXLogX = 0;
    float best = -std::numeric_limits<float>::infinity();
};

inline RowSums rowSums(const float* x, int64_t m) {
    Floats sum{}, positive{}, xlogx{}, best = splat(-std::numeric_limits<float>::infinity());
    const Floats zero{}, tiny = splat(1e-30f);
    int64_t j = 0;
    for (; j + kLanes <= m; j += kLanes) {
        const Floats v = load(x + j);
        const Floats p = maximum(v, zero);
        sum += v;
        positive += p;
        xlogx += p * logPositive(maximum(p, tiny));
        best = maximum(best, v);
    }
    RowSums out;
    out.sum = laneSum(sum);
    out.positiveSum = laneSum(positive);
    out.positiveXLogX = laneSum(xlogx);
    out.best = laneMax(best);
    for (; j < m; ++j) {
        const float p = std::max(x[j], 0.0f);
        out.sum += x[j];
        out.positiveSum += p;
        out.positiveXLogX += p > 0.0f ? double(p) * std::log(double(p)) : 0.0;
        out.best = std::max(out.best, x[j]);
    }
    return out;
}

// totals[m − 1 − j] += x[j] for j < m: a row's weights added to the totals by distance from the
// query (the query's own key is at distance 0).
inline void addReversed(float* __restrict totals, const float* __restrict x, int64_t m) {
    for (int64_t t = 0; t < m; ++t) totals[t] += x[m - 1 - t];
}

inline int64_t countZeros(const float* __restrict x, int64_t n) {
    int64_t count = 0;
    for (int64_t j = 0; j < n; ++j) count += x[j] == 0.0f ? 1 : 0;
    return count;
}

inline int64_t countBelow(const float* __restrict x, int64_t n, float tau) {
    int64_t count = 0;
    for (int64_t j = 0; j < n; ++j) count += x[j] < tau ? 1 : 0;
    return count;
}

}  // namespace relulens::core::rows
