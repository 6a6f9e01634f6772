// One pass over a row of attention weights on the CPU: everything the attention diagnostics
// read from it (core/diagnostics.cpp), in vector lanes, four floats wide on any x86-64 and eight
// where the processor has AVX2 and FMA (chosen at run time); and the sums over arrays of floats
// the other diagnostics need. Internal to core.
#pragma once
#include <cstdint>
#include <limits>
#include <vector>

namespace relulens::core {

struct RowPassInput {
    const float* x = nullptr;  // the row's entries 0..m − 1 (m: the query's position + 1)
    int64_t m = 0;
    int64_t first = 0;       // the first visible key (0 without a window); earlier entries are 0
    bool exactZero = false;  // count the visible entries that are exactly 0, or those below tau
    float tau = 0;
    float* totals = nullptr;  // totals[m − 1 − j] += x[j]: the weights by distance from the query
    // Entries above threshold are copied to candidates (room for m floats); +inf copies none.
    float threshold = std::numeric_limits<float>::infinity();
    float* candidates = nullptr;
};

struct RowPassOutput {
    double sum = 0, positiveSum = 0, positiveXLogX = 0;  // Σ w, Σ w⁺, Σ w⁺ log w⁺ (0 log 0 = 0)
    float best = -std::numeric_limits<float>::infinity();  // the largest entry
    int64_t counted = 0;                                   // sparse entries among x[first..m)
    int64_t candidates = 0;                                // entries copied to candidates
    int64_t equal = 0;                                     // entries equal to the threshold
};

enum class RowPassPath { Best, Portable, Avx2 };

// Path Avx2 on a processor without it (avx2KernelsRun, core/cpu_kernels.h) runs the portable
// path.
RowPassOutput rowPass(const RowPassInput& in, RowPassPath path = RowPassPath::Best);

// A threshold that about twice k of x[0..n) (and a margin) exceed, from an evenly spaced sample,
// for rowPass's candidates; +inf when the row is too short for a sample to pay.
float largestThreshold(const float* x, int64_t n, int64_t k);

// The sum of a row's k largest entries from the candidates a pass kept: the `count` entries
// above `threshold` and the number `equal` to it. When count + equal < k the candidates cannot
// tell (the threshold was above the k-th largest) and nothing is returned. kth: the k-th
// largest. Reorders the candidates.
struct LargestSum {
    double sum = 0;
    float kth = 0;
};
bool sumOfLargestCandidates(float* candidates, int64_t count, int64_t equal, float threshold,
                            int64_t k, LargestSum& out);
// Copies the entries of x[0..n) above threshold to candidates (room for n floats); returns how
// many, and adds the entries equal to it to *equal.
int64_t candidatesAbove(const float* x, int64_t n, float threshold, float* candidates,
                        int64_t* equal);
// Sum of the k largest of x[0..n), k <= n, through a min-heap of the k largest so far.
double sumOfLargest(const float* x, int64_t n, int64_t k, std::vector<float>& heap);

// Σ x over x[0..n), in double.
double sumOf(const float* x, int64_t n);
// Σ (x − mean)² and Σ (x − mean)⁴ over x[0..n), in double.
struct CentralSums {
    double squares = 0, fourth = 0;
};
CentralSums centralSums(const float* x, int64_t n, double mean);
// The entries of x[0..n), n < 2^31, that are exactly 0 (exactZero), or else whose magnitude is
// below tau.
int64_t countSparse(const float* x, int64_t n, bool exactZero, float tau);

}  // namespace relulens::core
