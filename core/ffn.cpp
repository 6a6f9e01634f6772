#include "core/ffn.h"

namespace relulens::core {

torch::Tensor ffnPreActivations(const torch::Tensor& x, const FfnWeights& w, FfnKind kind) {
    const bool softmax = kind == FfnKind::Softmax || kind == FfnKind::SoftmaxLn;
    return softmax ? torch::linear(x, w.w1) : torch::linear(x, w.w1, w.b1);
}

torch::Tensor ffnActivation(const torch::Tensor& pre, FfnKind kind) {
    switch (kind) {
        case FfnKind::Relu:
            return torch::relu(pre);
        case FfnKind::Gelu:
            return torch::gelu(pre);
        case FfnKind::Silu:
            return torch::silu(pre);
        case FfnKind::GeluTanh:
            return torch::gelu(pre, "tanh");
        case FfnKind::Softmax:
        case FfnKind::SoftmaxLn:
            return torch::softmax(pre, -1);
    }
    return pre;
}

torch::Tensor ffnSlotActivations(const torch::Tensor& x, const FfnWeights& w, FfnKind kind) {
    return ffnActivation(ffnPreActivations(x, w, kind), kind);
}

torch::Tensor ffnOutput(const torch::Tensor& slots, const FfnWeights& w, FfnKind kind) {
    switch (kind) {
        case FfnKind::Relu:
        case FfnKind::Gelu:
        case FfnKind::Silu:
        case FfnKind::GeluTanh:
            return torch::linear(slots, w.w2, w.b2);
        case FfnKind::Softmax:
            return torch::linear(slots, w.w2);
        case FfnKind::SoftmaxLn:
            return torch::layer_norm(torch::linear(slots, w.w2), {w.w2.size(0)}, w.lnW, w.lnB,
                                     w.eps);
    }
    return slots;
}

torch::Tensor gatedSlotActivations(const torch::Tensor& x, const GatedFfnWeights& w, FfnKind kind) {
    return ffnActivation(torch::linear(x, w.gate, w.gateBias), kind) *
           torch::linear(x, w.up, w.upBias);
}

torch::Tensor gatedFfnOutput(const torch::Tensor& slots, const GatedFfnWeights& w) {
    return torch::linear(slots, w.down, w.downBias);
}

}  // namespace relulens::core
