#include "core/fused_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include <c10/core/GradMode.h>

#include "core/second_core.h"

// The kernels are x86-64 AVX2 and FMA code, chosen at run time; elsewhere every layer takes the
// blocked path.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RELULENS_FUSED_ATTENTION 1
#include <immintrin.h>
#endif

namespace relulens::core {
#if defined(RELULENS_FUSED_ATTENTION)
namespace {

// Query rows and keys of one tile: its scores (128 KB) stay in the second-level cache from the
// product that makes them to the product with the values.
constexpr int64_t kTileRows = 64;
constexpr int64_t kTileKeys = 512;
// Keys are packed in panels of 16 (two vectors): the scores' kernel reads one panel's
// d_head × 16 floats in order.
constexpr int64_t kPanel = 16;

bool processorHasAvx2() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}

// How a tile's scores become weights.
enum class Activation { Softmax, Relu, Relu2 };

#define RELULENS_AVX2 __attribute__((target("avx2,fma")))

// e^x for x ≤ 0, eight at a time: x = n·ln 2 + r with |r| ≤ ln 2 / 2, e^r by Cephes's degree-6
// polynomial (relative error near 1e-7), 2^n put in the exponent bits. Below -87.3 (where e^x
// leaves the normal floats) it returns e^-87.3 ≈ 1.2e-38: weights that small add nothing.
RELULENS_AVX2 inline __m256 expNonPositive(__m256 x) {
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

RELULENS_AVX2 inline float horizontalSum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

RELULENS_AVX2 inline float horizontalMax(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

RELULENS_AVX2 float rowMax(const float* s, int64_t n) {
    __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(s + j));
    float best = horizontalMax(m);
    for (; j < n; ++j) best = std::max(best, s[j]);
    return best;
}

// s[j] = e^(s[j] - max) in place; returns their sum.
RELULENS_AVX2 float exponentiate(float* s, int64_t n, float max) {
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
        return horizontalSum(sum) + rest;
    }
    return horizontalSum(sum);
}

// s[j] = factor · h(s[j]) in place, h = relu or relu².
RELULENS_AVX2 void rectify(float* s, int64_t n, float factor, bool squared) {
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

RELULENS_AVX2 void scaleRow(float* o, int64_t n, float factor) {
    const __m256 f = _mm256_set1_ps(factor);
    int64_t j = 0;
    for (; j + 8 <= n; j += 8) _mm256_storeu_ps(o + j, _mm256_mul_ps(_mm256_loadu_ps(o + j), f));
    for (; j < n; ++j) o[j] *= factor;
}

// scores[r][0..16) = Σ_d q[r][d] · panel[d][0..16) for ROWS query rows (ROWS × 2
// accumulators held in registers through the d_head products).
template <int ROWS>
RELULENS_AVX2 void scorePanel(const float* q, int64_t dh, const float* panel, float* scores,
                              int64_t ldScores) {
    __m256 acc[ROWS][2];
    for (int r = 0; r < ROWS; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t d = 0; d < dh; ++d) {
        const __m256 k0 = _mm256_loadu_ps(panel + d * kPanel);
        const __m256 k1 = _mm256_loadu_ps(panel + d * kPanel + 8);
        for (int r = 0; r < ROWS; ++r) {
            const __m256 x = _mm256_broadcast_ss(q + r * dh + d);
            acc[r][0] = _mm256_fmadd_ps(x, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(x, k1, acc[r][1]);
        }
    }
    for (int r = 0; r < ROWS; ++r) {
        _mm256_storeu_ps(scores + r * ldScores, acc[r][0]);
        _mm256_storeu_ps(scores + r * ldScores + 8, acc[r][1]);
    }
}

// out[r][0..8·VECS) += Σ_j weights[r][j] · v[j][0..8·VECS) over T keys, for ROWS rows.
template <int ROWS, int VECS>
RELULENS_AVX2 void accumulateValues(const float* weights, int64_t ldWeights, int64_t T,
                                    const float* v, int64_t ldv, float* out, int64_t ldOut) {
    __m256 acc[ROWS][VECS];
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < VECS; ++c) acc[r][c] = _mm256_loadu_ps(out + r * ldOut + 8 * c);
    for (int64_t j = 0; j < T; ++j) {
        __m256 values[VECS];
        for (int c = 0; c < VECS; ++c) values[c] = _mm256_loadu_ps(v + j * ldv + 8 * c);
        for (int r = 0; r < ROWS; ++r) {
            const __m256 w = _mm256_broadcast_ss(weights + r * ldWeights + j);
            for (int c = 0; c < VECS; ++c) acc[r][c] = _mm256_fmadd_ps(w, values[c], acc[r][c]);
        }
    }
    for (int r = 0; r < ROWS; ++r)
        for (int c = 0; c < VECS; ++c) _mm256_storeu_ps(out + r * ldOut + 8 * c, acc[r][c]);
}

// Six rows at a time (12 accumulators of the 16 vector registers), then what is left.
RELULENS_AVX2 void scoreTile(const float* q, int64_t R, int64_t dh, const float* panels,
                             int64_t nPanels, float* scores) {
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
RELULENS_AVX2 void accumulateRows(const float* w, int64_t T, const float* v, int64_t ldv,
                                  float* out, int64_t width) {
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
RELULENS_AVX2 void valueTile(const float* weights, int64_t R, int64_t T, const float* v,
                             int64_t ldv, float* out, int64_t width) {
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

// What one layer's pass reads: contiguous (B, H, Q, dh) queries, the keys in panels, the
// values with rows `ldv` apart, and how each row's weights are made.
struct Layer {
    const float *q, *panels, *v;
    float* out;
    int64_t B, H, Hkv, Q, L, dh, window;
    int64_t width;          // d_head rounded up to a multiple of 8: the values' padded width
    int64_t ldv;            // floats from one key's values to the next
    int64_t panelsPerHead;  // ⌈L / 16⌉
    float scale;
    Activation activation;
    double lengthExponent;  // the ReLU family's weights are divided by n_i^a
    bool reluFormer;        // ... or by γ_h √(n_i / 2)
    const float* gamma;     // (H) or null for ones
};

// Scratch of one core: a tile's scores, the block's scaled queries, its output rows (width
// wide) as they accumulate, and each row's running maximum and sum.
struct Scratch {
    std::vector<float> scores, queries, out, maxima, sums;
    explicit Scratch(const Layer& a)
        : scores(size_t(kTileRows * kTileKeys)),
          queries(size_t(kTileRows * a.dh)),
          out(size_t(kTileRows * a.width)),
          maxima(kTileRows),
          sums(kTileRows) {}
};

// The rows r0 .. r0 + R - 1 of head h of text b.
RELULENS_AVX2 void attendRows(const Layer& a, int64_t b, int64_t h, int64_t r0, int64_t R,
                              Scratch& scratch) {
    const int64_t dh = a.dh, past = a.L - a.Q, width = a.width;
    const int64_t kv = b * a.Hkv + h / (a.H / a.Hkv);
    const float* q = a.q + ((b * a.H + h) * a.Q + r0) * dh;
    const float* panels = a.panels + kv * a.panelsPerHead * dh * kPanel;
    const float* v = a.v + kv * a.L * a.ldv;
    float* out = a.out + ((b * a.H + h) * a.Q + r0) * dh;
    float *scores = scratch.scores.data(), *queries = scratch.queries.data();
    float *acc = scratch.out.data(), *maxima = scratch.maxima.data(), *sums = scratch.sums.data();
    for (int64_t i = 0; i < R * dh; ++i) queries[i] = q[i] * a.scale;
    std::memset(acc, 0, sizeof(float) * size_t(R * width));
    // Row i (position past + r0 + i) sees keys first(i) .. past + r0 + i.
    auto first = [&](int64_t i) {
        const int64_t last = past + r0 + i;
        return a.window > 0 ? std::max<int64_t>(0, last - a.window + 1) : int64_t(0);
    };
    const bool softmax = a.activation == Activation::Softmax;
    for (int64_t i = 0; i < R; ++i) {
        maxima[i] = -std::numeric_limits<float>::infinity();
        sums[i] = 0;
    }
    const int64_t keyEnd = past + r0 + R;
    for (int64_t t0 = first(0) / kPanel * kPanel; t0 < keyEnd; t0 += kTileKeys) {
        const int64_t T = std::min(kTileKeys, keyEnd - t0);
        scoreTile(queries, R, dh, panels + t0 * dh, (T + kPanel - 1) / kPanel, scores);
        for (int64_t i = 0; i < R; ++i) {
            float* s = scores + i * kTileKeys;
            const int64_t lo = std::max(first(i), t0) - t0;
            const int64_t hi = std::min(past + r0 + i + 1, t0 + T) - t0;  // end, exclusive
            if (hi <= lo) {
                std::memset(s, 0, sizeof(float) * size_t(T));
                continue;
            }
            std::memset(s, 0, sizeof(float) * size_t(lo));
            std::memset(s + hi, 0, sizeof(float) * size_t(T - hi));
            if (softmax) {
                const float m = std::max(maxima[i], rowMax(s + lo, hi - lo));
                const float sum = exponentiate(s + lo, hi - lo, m);
                if (m > maxima[i] && sums[i] > 0) {
                    const float shrink = std::exp(maxima[i] - m);
                    scaleRow(acc + i * width, width, shrink);
                    sums[i] *= shrink;
                }
                maxima[i] = m;
                sums[i] += sum;
            } else {
                const double n = double(past + r0 + i + 1 - first(i));  // keys the row sees
                double divisor = std::pow(n, a.lengthExponent);
                if (a.reluFormer) divisor = (a.gamma ? a.gamma[h] : 1.0) * std::sqrt(n / 2.0);
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

// Keys (n, L, dh) into panels (n, ⌈L / 16⌉, dh, 16), keys past L zero.
void packKeys(const float* k, int64_t L, int64_t dh, int64_t n, float* panels) {
    const int64_t perHead = (L + kPanel - 1) / kPanel * dh * kPanel;
    std::memset(panels, 0, sizeof(float) * size_t(n * perHead));
    for (int64_t head = 0; head < n; ++head) {
        const float* key = k + head * L * dh;
        float* to = panels + head * perHead;
        for (int64_t j = 0; j < L; ++j) {
            float* panel = to + (j / kPanel) * dh * kPanel + j % kPanel;
            for (int64_t d = 0; d < dh; ++d) panel[d * kPanel] = key[j * dh + d];
        }
    }
}

}  // namespace

bool fusedAttentionApplies(const torch::Tensor& q, const RunSpec& run, int64_t layer) {
    if (!q.is_cpu() || q.scalar_type() != torch::kFloat32 || c10::GradMode::is_enabled())
        return false;
    if (!processorHasAvx2() || run.overridesLayer(layer)) return false;
    const auto& spec = run.attention;
    switch (spec.kind) {
        case AttentionKind::Softmax:
        case AttentionKind::Relu:
        case AttentionKind::ReluLen:
        case AttentionKind::ReluFormer:
            return true;
        case AttentionKind::Family:
            return spec.familyFunction == FamilyFunction::Relu ||
                   spec.familyFunction == FamilyFunction::Relu2;
        default:
            return false;
    }
}

torch::Tensor fusedAttention(const torch::Tensor& qIn, const torch::Tensor& kIn,
                             const torch::Tensor& vIn, const AttentionSpec& spec,
                             const torch::Tensor& gammaIn, double scale, int64_t window,
                             const std::function<bool()>& cancelled) {
    const auto q = qIn.contiguous(), k = kIn.contiguous();
    const auto gamma =
        gammaIn.defined() ? gammaIn.to(torch::kCPU, torch::kFloat32).contiguous() : gammaIn;
    const int64_t B = q.size(0), Hkv = k.size(1), L = k.size(2), dh = q.size(3);
    const int64_t width = (dh + 7) / 8 * 8;
    // Values padded with zeros to a multiple of 8 floats where d_head is not one.
    const auto v =
        width == dh ? vIn.contiguous() : torch::constant_pad_nd(vIn, {0, width - dh}).contiguous();
    const int64_t panelsPerHead = (L + kPanel - 1) / kPanel;
    auto panels = torch::empty({B * Hkv, panelsPerHead, dh, kPanel}, q.options());
    auto out = torch::empty_like(q, at::MemoryFormat::Contiguous);
    Layer a{q.data_ptr<float>(),
            panels.data_ptr<float>(),
            v.data_ptr<float>(),
            out.data_ptr<float>(),
            B,
            q.size(1),
            Hkv,
            q.size(2),
            L,
            dh,
            window,
            width,
            width,
            panelsPerHead,
            float(scale),
            Activation::Softmax,
            spec.lengthExponent,
            false,
            gamma.defined() ? gamma.data_ptr<float>() : nullptr};
    {
        // The keys of each head packed once for all its blocks of rows, half on each core.
        const int64_t heads = B * Hkv, half = heads / 2;
        const float* keys = k.data_ptr<float>();
        float* to = panels.data_ptr<float>();
        const int64_t perHead = panelsPerHead * dh * kPanel;
        runOnTwoCores(
            [&] { packKeys(keys, L, dh, half, to); },
            [&] { packKeys(keys + half * L * dh, L, dh, heads - half, to + half * perHead); });
    }
    switch (spec.kind) {
        case AttentionKind::Softmax:
            break;
        case AttentionKind::Relu:
            a.activation = Activation::Relu;
            a.lengthExponent = 0;
            break;
        case AttentionKind::ReluLen:
            a.activation = Activation::Relu;
            break;
        case AttentionKind::ReluFormer:
            a.activation = Activation::Relu;
            a.reluFormer = true;
            break;
        default:  // Family, relu or relu² (fusedAttentionApplies)
            a.activation =
                spec.familyFunction == FamilyFunction::Relu2 ? Activation::Relu2 : Activation::Relu;
            break;
    }
    // Work items are (row block, text, head), the costliest (last) row blocks first, taken in
    // turn by the two cores so that neither waits long for the other at the end.
    const int64_t blocks = (a.Q + kTileRows - 1) / kTileRows;
    const int64_t items = blocks * a.B * a.H;
    std::atomic<int64_t> next{0};
    std::atomic<bool> stopped{false};
    auto work = [&] {
        std::optional<Scratch> room;
        try {
            room.emplace(a);
        } catch (...) {
            stopped = true;  // the other core stops too; runOnTwoCores rethrows this
            throw;
        }
        Scratch& scratch = *room;
        for (int64_t item = next++; item < items && !stopped; item = next++) {
            if (cancelled && cancelled()) {
                stopped = true;
                return;
            }
            const int64_t block = blocks - 1 - item / (a.B * a.H);
            const int64_t b = item % (a.B * a.H) / a.H, h = item % a.H;
            const int64_t r0 = block * kTileRows;
            attendRows(a, b, h, r0, std::min(kTileRows, a.Q - r0), scratch);
        }
    };
    runOnTwoCores(work, work);
    if (stopped) return {};
    return out;
}

#else

bool fusedAttentionApplies(const torch::Tensor&, const RunSpec&, int64_t) {
    return false;
}

torch::Tensor fusedAttention(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                             const AttentionSpec&, const torch::Tensor&, double, int64_t,
                             const std::function<bool()>&) {
    TORCH_CHECK(false, "the fused attention kernel runs on x86-64 processors only");
}

#endif
}  // namespace relulens::core
