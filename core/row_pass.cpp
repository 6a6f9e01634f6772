#include "core/row_pass.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>

#include "core/cpu_kernels.h"
#include "core/row_kernels.h"

namespace relulens::core {

#if defined(RELULENS_AVX2_KERNELS)
RowPassOutput rowPassAvx2(const RowPassInput& in);  // core/row_pass_avx2.cpp
#endif

RowPassOutput rowPass(const RowPassInput& in, RowPassPath path) {
#if defined(RELULENS_AVX2_KERNELS)
    if (path != RowPassPath::Portable && avx2KernelsRun()) return rowPassAvx2(in);
#else
    (void)path;
#endif
    return rows::rowPassAnyRule(in);
}

float largestThreshold(const float* x, int64_t n, int64_t k) {
    constexpr int64_t kMaxSample = 256;
    const int64_t samples = std::min(kMaxSample, n / 4);
    if (samples < 64 || k * 8 > n) return std::numeric_limits<float>::infinity();
    float sample[kMaxSample];
    const int64_t stride = n / samples;
    for (int64_t s = 0; s < samples; ++s) sample[s] = x[s * stride];
    // The sample's m-th largest: about n·m / samples entries reach it, twice k and a margin.
    // (Rows whose largest entries are few and equal, like ReLU rows of zeros, are caught by the
    // count of entries equal to the threshold.)
    const int64_t m = std::min(samples, (2 * k * samples + n - 1) / n + 4);
    std::nth_element(sample, sample + m - 1, sample + samples, std::greater<float>());
    return sample[m - 1];
}

bool sumOfLargestCandidates(float* candidates, int64_t count, int64_t equal, float threshold,
                            int64_t k, LargestSum& out) {
    if (count + equal < k) return false;
    double sum = 0;
    if (count >= k) {
        std::nth_element(candidates, candidates + (k - 1), candidates + count,
                         std::greater<float>());
        for (int64_t c = 0; c < k; ++c) sum += candidates[c];
        out.kth = candidates[k - 1];
    } else {  // every candidate, and k − count entries equal to the threshold
        for (int64_t c = 0; c < count; ++c) sum += candidates[c];
        sum += double(k - count) * double(threshold);
        out.kth = threshold;
    }
    out.sum = sum;
    return true;
}

int64_t candidatesAbove(const float* x, int64_t n, float threshold, float* candidates,
                        int64_t* equal) {
    int64_t kept = 0, same = 0;
    for (int64_t j = 0; j < n; ++j) {
        candidates[kept] = x[j];
        kept += x[j] > threshold ? 1 : 0;
        same += x[j] == threshold ? 1 : 0;
    }
    *equal += same;
    return kept;
}

double sumOfLargest(const float* x, int64_t n, int64_t k, std::vector<float>& heap) {
    heap.assign(x + n - k, x + n);
    std::make_heap(heap.begin(), heap.end(), std::greater<float>());
    float smallest = heap.front();
    // Read from the row's end, where a query's nearest keys (often its largest weights) are, so
    // that the heap fills with large values early and most entries are rejected at once.
    for (int64_t j = n - k - 1; j >= 0; --j) {
        if (x[j] > smallest) {
            std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
            heap.back() = x[j];
            std::push_heap(heap.begin(), heap.end(), std::greater<float>());
            smallest = heap.front();
        }
    }
    double sum = 0;
    for (float v : heap) sum += v;
    return sum;
}

namespace {

// Floats read four at a time and added in double, two lanes per vector (what SSE2 holds).
using Floats4 = float __attribute__((vector_size(4 * sizeof(float))));
using Floats2 = float __attribute__((vector_size(2 * sizeof(float))));
using Doubles = double __attribute__((vector_size(2 * sizeof(double))));

struct FourDoubles {
    Doubles low, high;
};

FourDoubles loadDoubles(const float* x) {
    Floats4 v;
    std::memcpy(&v, x, sizeof v);
    return {__builtin_convertvector(__builtin_shufflevector(v, v, 0, 1), Doubles),
            __builtin_convertvector(__builtin_shufflevector(v, v, 2, 3), Doubles)};
}

double total(Doubles a, Doubles b) {
    return (a[0] + b[0]) + (a[1] + b[1]);
}

}  // namespace

double sumOf(const float* x, int64_t n) {
    Doubles low{}, high{};
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const FourDoubles v = loadDoubles(x + j);
        low += v.low;
        high += v.high;
    }
    double out = total(low, high);
    for (; j < n; ++j) out += x[j];
    return out;
}

CentralSums centralSums(const float* x, int64_t n, double mean) {
    Doubles squaresLow{}, squaresHigh{}, fourthLow{}, fourthHigh{};
    const Doubles centre = Doubles{} + mean;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        const FourDoubles v = loadDoubles(x + j);
        const Doubles low = v.low - centre, high = v.high - centre;
        const Doubles low2 = low * low, high2 = high * high;
        squaresLow += low2;
        squaresHigh += high2;
        fourthLow += low2 * low2;
        fourthHigh += high2 * high2;
    }
    CentralSums out{total(squaresLow, squaresHigh), total(fourthLow, fourthHigh)};
    for (; j < n; ++j) {
        const double c = double(x[j]) - mean, c2 = c * c;
        out.squares += c2;
        out.fourth += c2 * c2;
    }
    return out;
}

int64_t countSparse(const float* x, int64_t n, bool exactZero, float tau) {
    int32_t count = 0;  // (32 bits: the compiler keeps four counts in one vector)
    if (exactZero) {
        for (int64_t j = 0; j < n; ++j) count += x[j] == 0.0f ? 1 : 0;
    } else {
        for (int64_t j = 0; j < n; ++j) count += std::abs(x[j]) < tau ? 1 : 0;
    }
    return count;
}

}  // namespace relulens::core
