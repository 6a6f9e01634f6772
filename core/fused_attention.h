// Attention of one layer for a forward pass that keeps no maps: the scores, the weights and
// their product with the values are made one tile (64 query rows × 512 keys) at a time, in the
// processor's cache, and never written out whole, by kernels of our own that read each head's
// keys packed once for all its rows. The softmax runs online over the key tiles
// (each row's running maximum and sum; the output rescaled when the maximum grows, and divided
// by the sum at the end); the ReLU family needs no running state, as its weights are each
// score's activation times a factor of the row. The blocked path (language_model.h,
// blockedAttention) remains for every pass that keeps maps, hands blocks to diagnostics, or
// runs a variant or processor this one does not take.
#pragma once
#include <cstdint>
#include <functional>

#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::core {

// Whether fusedAttention computes this layer: float32 CPU tensors without autograd, a
// processor with AVX2 and FMA, and every head of the layer running one of softmax, relu,
// relu_len, reluformer, or family with relu or relu2 (no override, no ablation).
bool fusedAttentionApplies(const torch::Tensor& q, const RunSpec& run, int64_t layer);

// Causal attention of one layer, as blockedAttention computes it for run.attention.
// q: (B, H, Q, dh), rows at positions L - Q .. L - 1; k, v: (B, H_kv, L, dh), H a multiple
// of H_kv; gamma: (H) ReLUFormer scales, or undefined for ones; window > 0 limits each row to
// its last `window` keys. Runs on two cores where there are two. Returns (B, H, Q, dh), or an
// undefined tensor once `cancelled` (polled between tiles' rows, from both cores) says so.
torch::Tensor fusedAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                             const AttentionSpec& spec, const torch::Tensor& gamma, double scale,
                             int64_t window, const std::function<bool()>& cancelled);

// How many layers fusedAttention has computed in this process (not counting cancelled ones): which
// path a pass took, for the tests.
int64_t fusedAttentionLayers();

}  // namespace relulens::core
