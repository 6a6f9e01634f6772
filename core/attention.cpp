#include "core/attention.h"

#include <cmath>

#include <torch/csrc/autograd/grad_mode.h>

namespace relulens::core {

torch::Tensor causalMask(int64_t rows, int64_t keys, int64_t rowOffset,
                         const torch::Device& device, int64_t window) {
    auto options = torch::TensorOptions().dtype(torch::kLong).device(device);
    auto i = torch::arange(rows, options).unsqueeze(1) + rowOffset;
    auto j = torch::arange(keys, options).unsqueeze(0);
    if (window > 0) return (j <= i).logical_and(j > i - window);
    return j <= i;
}

torch::Tensor visibleCounts(int64_t rows, int64_t rowOffset, const torch::Device& device,
                            int64_t window) {
    auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    auto n = torch::arange(rows, options) + double(rowOffset + 1);
    if (window > 0) n = n.clamp_max(double(window));
    return n.unsqueeze(1);
}

namespace {

torch::Tensor applyFamily(const torch::Tensor& s, FamilyFunction h) {
    switch (h) {
        case FamilyFunction::Relu: return torch::relu(s);
        case FamilyFunction::Relu2: return torch::relu(s).square();
        case FamilyFunction::Gelu: return torch::gelu(s);
        case FamilyFunction::Softplus: return torch::softplus(s);
        case FamilyFunction::Sigmoid: return torch::sigmoid(s);
    }
    return torch::relu(s);
}

}  // namespace

torch::Tensor attentionWeights(const torch::Tensor& scores, const AttentionSpec& spec,
                               const torch::Tensor& gamma, int64_t rowOffset, bool mayOverwrite,
                               int64_t window) {
    const int64_t rows = scores.size(-2);
    const int64_t keys = scores.size(-1);
    const bool tracked = torch::GradMode::is_enabled() && scores.requires_grad();
    // A window only matters once a row sees more than `window` keys.
    if (window >= rowOffset + rows) window = 0;
    if (keys == rowOffset + rows && !tracked && window == 0) {
        // Every row sees keys 0..rowOffset; only the last `rows` keys hold the causal boundary,
        // so only that square is masked (no mask over the whole block), in place. Training
        // (autograd) takes the general path below, which never writes into a tensor.
        const auto above = torch::ones({rows, rows}, torch::TensorOptions().dtype(torch::kBool)
                                                         .device(scores.device())).triu(1);
        auto maskTail = [&](torch::Tensor t, double value) {
            t.narrow(-1, rowOffset, rows).masked_fill_(above, value);
            return t;
        };
        auto divided = [&](torch::Tensor t) {  // by n_i^a
            if (spec.a == 0) return t;
            return t.div_(visibleCounts(rows, rowOffset, scores.device()).pow(spec.a));
        };
        switch (spec.kind) {
            case AttentionKind::Softmax: {
                auto s = mayOverwrite ? scores : scores.clone();
                return torch::softmax(maskTail(s, -std::numeric_limits<float>::infinity()), -1);
            }
            case AttentionKind::Relu: return maskTail(torch::relu(scores), 0);
            case AttentionKind::ReluLen: return divided(maskTail(torch::relu(scores), 0));
            case AttentionKind::ReluFormer: {
                const auto n = visibleCounts(rows, rowOffset, scores.device());
                auto g = gamma.defined() ? gamma.to(scores.dtype())
                                         : torch::ones({scores.size(0)}, scores.options());
                const auto scale = g.view({-1, 1, 1}) * torch::sqrt(n / 2.0).unsqueeze(0);
                return maskTail(torch::relu(scores), 0).div_(scale);
            }
            case AttentionKind::Family:
                return divided(maskTail(applyFamily(scores, spec.h), 0));
        }
    }
    const auto mask = causalMask(rows, keys, rowOffset, scores.device(), window);  // (rows, keys)
    const auto zero = torch::zeros({}, scores.options());
    switch (spec.kind) {
        case AttentionKind::Softmax:
            return torch::softmax(
                scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity()),
                -1);
        case AttentionKind::Relu: return torch::where(mask, torch::relu(scores), zero);
        case AttentionKind::ReluLen: {
            const auto n = visibleCounts(rows, rowOffset, scores.device(), window);  // (rows, 1)
            return torch::where(mask, torch::relu(scores), zero) / n.pow(spec.a);
        }
        case AttentionKind::ReluFormer: {
            const auto n = visibleCounts(rows, rowOffset, scores.device(), window);
            auto g = gamma.defined() ? gamma.to(scores.dtype()) : torch::ones({scores.size(0)},
                                                                              scores.options());
            const auto scale = g.view({-1, 1, 1}) * torch::sqrt(n / 2.0).unsqueeze(0);
            return torch::where(mask, torch::relu(scores), zero) / scale;
        }
        case AttentionKind::Family: {
            const auto n = visibleCounts(rows, rowOffset, scores.device(), window);
            return torch::where(mask, applyFamily(scores, spec.h), zero) / n.pow(spec.a);
        }
    }
    return scores;
}

}  // namespace relulens::core
