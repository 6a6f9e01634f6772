// The body of rowPass (core/row_pass.h), written so that the compiler runs it in vector lanes.
// Compiled as is by core/row_pass.cpp (and core/predictions.cpp, for its lane helpers), and by
// core/row_pass_avx2.cpp for AVX2 and FMA (eight lanes). Everything here has internal linkage and
// uses no standard-library template, so that the two compilations share no symbol the linker could
// mix up.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/row_pass.h"

namespace relulens::core::rows {
namespace {

// The loops work on kLanes floats at a time through the compiler's generic vectors (GCC and
// Clang turn them into SSE or AVX instructions): a running float sum is otherwise a chain of
// dependent additions the compiler must keep in order, one entry at a time. The lanes are added
// in double at the end.
#if defined(__AVX2__)
constexpr int64_t kLanes = 8;
#else
constexpr int64_t kLanes = 4;
#endif
using Floats = float __attribute__((vector_size(kLanes * sizeof(float))));
using Ints = int32_t __attribute__((vector_size(kLanes * sizeof(float))));

inline Floats load(const float* x) {
    Floats v;
    std::memcpy(&v, x, sizeof v);
    return v;
}

inline void store(float* x, Floats v) {
    std::memcpy(x, &v, sizeof v);
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

inline Floats reversed(Floats v) {
#if defined(__AVX2__)
    return __builtin_shufflevector(v, v, 7, 6, 5, 4, 3, 2, 1, 0);
#else
    return __builtin_shufflevector(v, v, 3, 2, 1, 0);
#endif
}

inline double laneSum(Floats v) {
    double sum = 0;
    for (int64_t k = 0; k < kLanes; ++k) sum += v[k];
    return sum;
}

inline float laneMax(Floats v) {
    float best = v[0];
    for (int64_t k = 1; k < kLanes; ++k) best = v[k] > best ? v[k] : best;
    return best;
}

inline int64_t laneTotal(Ints v) {
    int64_t total = 0;
    for (int64_t k = 0; k < kLanes; ++k) total += v[k];
    return total;
}

inline bool anyLane(Ints v) {
    int32_t any = 0;
    for (int64_t k = 0; k < kLanes; ++k) any |= v[k];
    return any != 0;
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

inline bool sparse(float v, bool exactZero, float tau) {
    return exactZero ? v == 0.0f : v < tau;
}

// One read of each entry: the sums, the maximum, the sparse count, the distance totals and the
// candidates for the largest entries.
template <bool ExactZero>
RowPassOutput rowPassKernel(const RowPassInput& in) {
    const float* x = in.x;
    const int64_t m = in.m;
    Floats sum{}, positive{}, xlogx{}, best = splat(-__builtin_inff());
    Ints count{}, equal{};
    const Floats zero{}, tiny = splat(1e-30f), tau = splat(in.tau), threshold = splat(in.threshold);
    float* candidates = in.candidates;
    int64_t kept = 0;
    int64_t j = 0;
    for (; j + kLanes <= m; j += kLanes) {
        const Floats v = load(x + j);
        const Floats p = maximum(v, zero);
        sum += v;
        positive += p;
        xlogx += p * logPositive(maximum(p, tiny));
        best = maximum(best, v);
        if constexpr (ExactZero) {  // lanes of −1 where true
            count -= v == zero;
        } else {
            count -= v < tau;
        }
        float* t = in.totals + (m - j - kLanes);  // entry j + c is at distance m − 1 − j − c
        store(t, load(t) + reversed(v));
        const Ints above = v > threshold;
        equal -= v == threshold;
        if (anyLane(above)) {
            for (int64_t c = 0; c < kLanes; ++c) {
                candidates[kept] = v[c];
                kept -= above[c];
            }
        }
    }
    RowPassOutput out;
    out.sum = laneSum(sum);
    out.positiveSum = laneSum(positive);
    out.positiveXLogX = laneSum(xlogx);
    out.best = laneMax(best);
    out.counted = laneTotal(count);
    out.equal = laneTotal(equal);
    for (; j < m; ++j) {
        const float v = x[j];
        const float p = v > 0.0f ? v : 0.0f;
        out.sum += v;
        out.positiveSum += p;
        out.positiveXLogX += p > 0.0f ? double(p) * std::log(double(p)) : 0.0;
        out.best = v > out.best ? v : out.best;
        out.counted += sparse(v, ExactZero, in.tau) ? 1 : 0;
        in.totals[m - 1 - j] += v;
        if (v > in.threshold) candidates[kept++] = v;
        out.equal += v == in.threshold ? 1 : 0;
    }
    // Entries before the window are not visible: they do not count.
    for (int64_t i = 0; i < in.first && i < m; ++i) {
        out.counted -= sparse(x[i], ExactZero, in.tau) ? 1 : 0;
    }
    out.candidates = kept;
    return out;
}

inline RowPassOutput rowPassAnyRule(const RowPassInput& in) {
    return in.exactZero ? rowPassKernel<true>(in) : rowPassKernel<false>(in);
}

}  // namespace
}  // namespace relulens::core::rows
