#include "core/attention.h"

#include <cmath>

namespace relulens::core {

torch::Tensor causalMask(int64_t rows, int64_t keys, int64_t rowOffset,
                         const torch::Device& device) {
    auto options = torch::TensorOptions().dtype(torch::kLong).device(device);
    auto i = torch::arange(rows, options).unsqueeze(1) + rowOffset;
    auto j = torch::arange(keys, options).unsqueeze(0);
    return j <= i;
}

torch::Tensor visibleCounts(int64_t rows, int64_t rowOffset, const torch::Device& device) {
    auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    return (torch::arange(rows, options) + double(rowOffset + 1)).unsqueeze(1);
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
                               const torch::Tensor& gamma, int64_t rowOffset) {
    const int64_t rows = scores.size(-2);
    const int64_t keys = scores.size(-1);
    const auto mask = causalMask(rows, keys, rowOffset, scores.device());  // (rows, keys)
    const auto zero = torch::zeros({}, scores.options());
    switch (spec.kind) {
        case AttentionKind::Softmax:
            return torch::softmax(
                scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity()),
                -1);
        case AttentionKind::Relu: return torch::where(mask, torch::relu(scores), zero);
        case AttentionKind::ReluLen: {
            const auto n = visibleCounts(rows, rowOffset, scores.device());  // (rows, 1)
            return torch::where(mask, torch::relu(scores), zero) / n.pow(spec.a);
        }
        case AttentionKind::ReluFormer: {
            const auto n = visibleCounts(rows, rowOffset, scores.device());
            auto g = gamma.defined() ? gamma.to(scores.dtype()) : torch::ones({scores.size(0)},
                                                                              scores.options());
            const auto scale = g.view({-1, 1, 1}) * torch::sqrt(n / 2.0).unsqueeze(0);
            return torch::where(mask, torch::relu(scores), zero) / scale;
        }
        case AttentionKind::Family: {
            const auto n = visibleCounts(rows, rowOffset, scores.device());
            return torch::where(mask, applyFamily(scores, spec.h), zero) / n.pow(spec.a);
        }
    }
    return scores;
}

}  // namespace relulens::core
