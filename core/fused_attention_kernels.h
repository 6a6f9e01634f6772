// The fused attention's tiles (core/fused_attention.h): what core/fused_attention.cpp hands to
// the AVX2 and FMA kernels of core/fused_attention_avx2.cpp (compiled with -mavx2 -mfma, so
// nothing here is a template or needs one: the two compilations share no symbol the linker could
// mix up). Internal to those two files.
#pragma once
#include <cstdint>

namespace relulens::core::fused {

// Query rows and keys of one tile: its scores (128 KB) stay in the second-level cache from the
// product that makes them to the product with the values.
constexpr int64_t kTileRows = 64;
constexpr int64_t kTileKeys = 512;
// Keys are packed in panels of 16 (two vectors): the scores' kernel reads one panel's
// d_head × 16 floats in order.
constexpr int64_t kPanel = 16;

// How a tile's scores become weights.
enum class Activation { Softmax, Relu, Relu2 };

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

// Room of one core: a tile's scores (kTileRows × kTileKeys), the block's scaled queries
// (kTileRows × dh), its output rows (kTileRows × width) as they accumulate, and each row's running
// maximum and sum (kTileRows each).
struct Room {
    float *scores, *queries, *out, *maxima, *sums;
};

// The rows r0 .. r0 + R - 1 (R ≤ kTileRows) of head h of text b, into a.out.
void attendRows(const Layer& a, int64_t b, int64_t h, int64_t r0, int64_t R, const Room& room);

}  // namespace relulens::core::fused
