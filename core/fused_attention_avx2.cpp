// The fused attention's kernels (core/fused_attention_kernels.h), compiled for AVX2 and FMA:
// core/fused_attention.cpp calls them only on a processor that has both (avx2KernelsRun). So that
// no symbol of this compilation can stand in for one of another, everything but attendRows has
// internal linkage and nothing here instantiates a standard-library template or calls an inline
// library function (the C library's memset, expf, pow and sqrt only).
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "core/fused_attention_kernels.h"
#include "core/row_kernels.h"

namespace relulens::core::fused {
namespace {

// std::max and std::min without their templates: the first argument when neither is larger.
inline int64_t larger(int64_t x, int64_t y) {
    return x < y ? y : x;
}
inline float larger(float x, float y) {
    return x < y ? y : x;
}
inline int64_t smaller(int64_t x, int64_t y) {
    return y < x ? y : x;
}

// e^x for x ≤ 0, eight at a time: x = n·ln 2 + r with |r| ≤ ln 2 / 2, e^r by Cephes's degree-6
// polynomial (relative error near 1e-7), 2^n put in the exponent bits. Below -87.3 (where e^x
// leaves the normal floats) it returns e^-87.3 ≈ 1.2e-38: weights that small add nothing.
inline __m256 expNonPositive(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-87.33654f), x);  // a NaN stays one (max takes the second)
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

float rowMax(const float* s, int64_t n) {
    __m256 m = _mm256_set1_ps(-HUGE_VALF);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
    float best = rows::laneMax(m);
    for (; j < n; ++j) best = larger(best, s[j]);
    return best;
}

// s[j] = e^(s[j] - max) in place; returns their sum.
float exponentiate(float* s, int64_t n, float max) {
    const __m256 m = _mm256_set1_ps(max);
    __m256 sum = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 e = expNonPositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), m));
        _mm256_storeu_ps(s + j, e);
        sum = _mm256_add_ps(sum, e);
    }
    if (j < n) {  // the tail through a padded vector, so that it gets the same e^x
        alignas(32) float tail[8];
        for (int64_t i = 0; i < 8; ++i) tail[i] = j + i < n ? s[j + i] - max : 0.0f;
        _mm256_store_ps(tail, expNonPositive(_mm256_load_ps(tail)));
        float rest = 0;
        for (int64_t i = 0; j + i < n; ++i) {
            s[j + i] = tail[i];
            rest += tail[i];
        }
        return float(rows::laneSum(sum)) + rest;
    }
    return float(rows::laneSum(sum));
}

// s[j] = factor · h(s[j]) in place, h = relu or relu².
void rectify(float* s, int64_t n, float factor, bool squared) {
    const __m256 f = _mm256_set1_ps(factor), zero = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) {
        __m256 x = _mm256_max_ps(zero, _mm256_loadu_ps(s + j));  // NaN stays, as in torch::relu
        if (squared) x = _mm256_mul_ps(x, x);
        _mm256_storeu_ps(s + j, _mm256_mul_ps(x, f));
    }
    for (; j < n; ++j) {
        float x = s[j] < 0 ? 0.0f : s[j];
        if (squared) x *= x;
        s[j] = x * factor;
    }
}

void scaleRow(float* o, int64_t n, float factor) {
    const __m256 f = _mm256_set1_ps(factor);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(o + j, _mm256_mul_ps(_mm256_loadu_ps(o + j), f));
    for (; j < n; ++j) o[j] *= factor;
}

// scores[r][0..16) = Σ_d q[r][d] · panel[d][0..16) for ROWS query rows (ROWS × 2
// accumulators held in registers through the d_head products).
// (The loops over rows and vectors are unrolled whole by pragma: otherwise GCC 12 keeps a copy of
// the accumulators on the stack, stored at every step, and the kernel ran at 84 GFLOP/s, not 140.)
template <int ROWS>
void scorePanel(const float* q, int64_t dh, const float* panel, float* scores, int64_t ldScores) {
    __m256 acc[ROWS][2];
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < dh; ++d) {
        const __m256 k0 = _mm256_loadu_ps(panel + d * kPanel);
        const __m256 k1 = _mm256_loadu_ps(panel + d * kPanel + 8);
#pragma GCC unroll 8
        for (int r = 0; r < ROWS; ++r) {
            const __m256 x = _mm256_broadcast_ss(q + r * dh + d);
            acc[r][0] = _mm256_fmadd_ps(x, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, k1, acc[r][1]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r) {
        _mm256_storeu_ps(scores + r * ldScores, acc[r][0]);
        _mm256_storeu_ps(scores + r * ldScores + 8, acc[r][1]);
    }
}

// out[r][0..8·VECS) += Σ_j weights[r][j] · v[j][0..8·VECS) over T keys, for ROWS rows.
template <int ROWS, int VECS>
void accumulateValues(const float* weights, int64_t ldWeights, int64_t T, const float* v,
                      int64_t ldv, float* out, int64_t ldOut) {
    __m256 acc[ROWS][VECS];
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < VECS; ++c) acc[r][c] = _mm256_loadu_ps(out + r * ldOut + 8 * c);
    for (int64_t j = 0; j < T; ++j) {
        __m256 values[VECS];
#pragma GCC unroll 8
        for (int c = 0; c < VECS; ++c) values[c] = _mm256_loadu_ps(v + j * ldv + 8 * c);
#pragma GCC unroll 8
        for (int r = 0; r < ROWS; ++r) {
            const __m256 w = _mm256_broadcast_ss(weights + r * ldWeights + j);
#pragma GCC unroll 8
            for (int c = 0; c < VECS; ++c) acc[r][c] = _mm256_fmadd_ps(w, values[c], acc[r][c]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < VECS; ++c) _mm256_storeu_ps(out + r * ldOut + 8 * c, acc[r][c]);
}

// Six rows at a time (12 accumulators of the 16 vector registers), then what is left.
void scoreTile(const float* q, int64_t R, int64_t dh, const float* panels, int64_t nPanels,
               float* scores) {
    for (int64_t p = 0; p < nPanels; ++p) {
        const float* panel = panels + p * dh * kPanel;
        float* s = scores + p * kPanel;
        int64_t r = 0;
        for (; r + 6 <= R; r += 6)
            scorePanel<6>(q + r * dh, dh, panel, s + r * kTileKeys, kTileKeys);
        const float* qr = q + r * dh;
        float* sr = s + r * kTileKeys;
        switch (R - r) {
            case 5:
                scorePanel<5>(qr, dh, panel, sr, kTileKeys);
                break;
            case 4:
                scorePanel<4>(qr, dh, panel, sr, kTileKeys);
                break;
            case 3:
                scorePanel<3>(qr, dh, panel, sr, kTileKeys);
                break;
            case 2:
                scorePanel<2>(qr, dh, panel, sr, kTileKeys);
                break;
            case 1:
                scorePanel<1>(qr, dh, panel, sr, kTileKeys);
                break;
            default:
                break;
        }
    }
}

template <int ROWS>
void accumulateRows(const float* w, int64_t T, const float* v, int64_t ldv, float* out,
                    int64_t width) {
    int64_t c = 0;
    for (; c + 24 <= width; c += 24)
        accumulateValues<ROWS, 3>(w, kTileKeys, T, v + c, ldv, out + c, width);
    for (; c + 16 <= width; c += 16)
        accumulateValues<ROWS, 2>(w, kTileKeys, T, v + c, ldv, out + c, width);
    for (; c + 8 <= width; c += 8)
        accumulateValues<ROWS, 1>(w, kTileKeys, T, v + c, ldv, out + c, width);
}

// out (R × width, width a multiple of 8) += weights (R × T, rows kTileKeys apart) · v (T ×
// width, rows ldv apart), four rows at a time (12 accumulators and 3 vectors of values).
void valueTile(const float* weights, int64_t R, int64_t T, const float* v, int64_t ldv, float* out,
               int64_t width) {
    int64_t r = 0;
    for (; r + 4 <= R; r += 4)
        accumulateRows<4>(weights + r * kTileKeys, T, v, ldv, out + r * width, width);
    const float* wr = weights + r * kTileKeys;
    float* o = out + r * width;
    switch (R - r) {
        case 3:
            accumulateRows<3>(wr, T, v, ldv, o, width);
            break;
        case 2:
            accumulateRows<2>(wr, T, v, ldv, o, width);
            break;
        case 1:
            accumulateRows<1>(wr, T, v, ldv, o, width);
            break;
        default:
            break;
    }
}

}  // namespace

void attendRows(const Layer& a, int64_t b, int64_t h, int64_t r0, int64_t R, const Room& room) {
    const int64_t dh = a.dh, past = a.L - a.Q, width = a.width;
    const int64_t kv = b * a.Hkv + h / (a.H / a.Hkv);
    const float* q = a.q + ((b * a.H + h) * a.Q + r0) * dh;
    const float* panels = a.panels + kv * a.panelsPerHead * dh * kPanel;
    const float* v = a.v + kv * a.L * a.ldv;
    float* out = a.out + ((b * a.H + h) * a.Q + r0) * dh;
    float *scores = room.scores, *queries = room.queries, *acc = room.out, *maxima = room.maxima,
          *sums = room.sums;
    for (int64_t i = 0; i < R * dh; ++i) queries[i] = q[i] * a.scale;
    memset(acc, 0, sizeof(float) * size_t(R * width));
    // Row i (position past + r0 + i) sees keys first(i) .. past + r0 + i.
    auto first = [&](int64_t i) {
        const int64_t last = past + r0 + i;
        return a.window > 0 ? larger(int64_t(0), last - a.window + 1) : int64_t(0);
    };
    const bool softmax = a.activation == Activation::Softmax;
    for (int64_t i = 0; i < R; ++i) {
        maxima[i] = -HUGE_VALF;
        sums[i] = 0;
    }
    const int64_t keyEnd = past + r0 + R;
    for (int64_t t0 = first(0) / kPanel * kPanel; t0 < keyEnd; t0 += kTileKeys) {
        const int64_t T = smaller(kTileKeys, keyEnd - t0);
        scoreTile(queries, R, dh, panels + t0 * dh, (T + kPanel - 1) / kPanel, scores);
        for (int64_t i = 0; i < R; ++i) {
            float* s = scores + i * kTileKeys;
            const int64_t lo = larger(first(i), t0) - t0;
            const int64_t hi = smaller(past + r0 + i + 1, t0 + T) - t0;  // end, exclusive
            if (hi <= lo) {
                memset(s, 0, sizeof(float) * size_t(T));
                continue;
            }
            memset(s, 0, sizeof(float) * size_t(lo));
            memset(s + hi, 0, sizeof(float) * size_t(T - hi));
            if (softmax) {
                const float m = larger(maxima[i], rowMax(s + lo, hi - lo));
                const float sum = exponentiate(s + lo, hi - lo, m);
                if (m > maxima[i] && sums[i] > 0) {
                    const float shrink = expf(maxima[i] - m);
                    scaleRow(acc + i * width, width, shrink);
                    sums[i] *= shrink;
                }
                maxima[i] = m;
                sums[i] += sum;
            } else {
                const double n = double(past + r0 + i + 1 - first(i));  // keys the row sees
                double divisor = pow(n, a.lengthExponent);
                if (a.reluFormer) divisor = (a.gamma ? a.gamma[h] : 1.0) * sqrt(n / 2.0);
                rectify(s + lo, hi - lo, float(1.0 / divisor), a.activation == Activation::Relu2);
            }
        }
        valueTile(scores, R, T, v + t0 * a.ldv, a.ldv, acc, width);
    }
    for (int64_t i = 0; i < R; ++i) {
        const float factor = softmax ? 1.0f / sums[i] : 1.0f;
        for (int64_t c = 0; c < dh; ++c) out[i * dh + c] = acc[i * width + c] * factor;
    }
}

}  // namespace relulens::core::fused
