// The feed-forward block as a key-value memory (PAPERS.md): keys W1 (d_ff, d), values W2ᵀ.
#pragma once
#include "core/torch_include.h"
#include "core/variants.h"

namespace relulens::core {

struct FfnWeights {
    torch::Tensor w1;   // (d_ff, d)
    torch::Tensor b1;   // (d_ff)
    torch::Tensor w2;   // (d, d_ff)
    torch::Tensor b2;   // (d)
    torch::Tensor lnW;  // (d) layer norm after the memory, softmax_ln only
    torch::Tensor lnB;  // (d)
    double eps = 1e-5;
};

// A gated FFN (Hugging Face decoders): down(act(gate·x) ⊙ up·x). Memory slot i is column i of
// down; its coefficient for token t is m_ti = act(gate_i·x_t) · (up_i·x_t).
struct GatedFfnWeights {
    torch::Tensor gate;      // (d_ff, d)
    torch::Tensor up;        // (d_ff, d)
    torch::Tensor down;      // (d, d_ff)
    torch::Tensor gateBias;  // (d_ff) or undefined
    torch::Tensor upBias;    // (d_ff) or undefined
    torch::Tensor downBias;  // (d) or undefined
};

// x: (..., d) -> (..., d_ff). kind is the gate's activation (silu, gelu, gelu_tanh, relu).
torch::Tensor gatedSlotActivations(const torch::Tensor& x, const GatedFfnWeights& w, FfnKind kind);
// m: (..., d_ff) -> (..., d)
torch::Tensor gatedFfnOutput(const torch::Tensor& slots, const GatedFfnWeights& w);

// Memory-slot activations m = φ(x·W1ᵀ + b1) (softmax variants: softmax over slots of x·W1ᵀ).
// x: (..., d) -> (..., d_ff)
torch::Tensor ffnSlotActivations(const torch::Tensor& x, const FfnWeights& w, FfnKind kind);

// The activation alone, from pre-activations (x·W1ᵀ + b1, or x·W1ᵀ for the softmax variants).
torch::Tensor ffnActivation(const torch::Tensor& pre, FfnKind kind);
// The pre-activations ffnActivation expects.
torch::Tensor ffnPreActivations(const torch::Tensor& x, const FfnWeights& w, FfnKind kind);

// Output from slot activations: m·W2ᵀ (+ b2 for relu/gelu; layer norm for softmax_ln).
// m: (..., d_ff) -> (..., d)
torch::Tensor ffnOutput(const torch::Tensor& slots, const FfnWeights& w, FfnKind kind);

}  // namespace relulens::core
