#include "core/attention.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/csrc/autograd/grad_mode.h>

namespace relulens::core {

torch::Tensor causalMask(int64_t rows, int64_t keys, int64_t rowOffset, const torch::Device& device,
                         int64_t window) {
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

// h(s), in s's place when `inPlace` and h has an in-place form.
torch::Tensor applyFamily(torch::Tensor s, FamilyFunction h, bool inPlace) {
    switch (h) {
        case FamilyFunction::Relu:
            return inPlace ? s.relu_() : torch::relu(s);
        case FamilyFunction::Relu2:
            return inPlace ? s.relu_().square_() : torch::relu(s).square();
        case FamilyFunction::Gelu:
            return torch::gelu(s);
        case FamilyFunction::Softplus:
            return torch::softplus(s);
        case FamilyFunction::Sigmoid:
            return inPlace ? s.sigmoid_() : torch::sigmoid(s);
    }
    return torch::relu(s);
}

// Sorts each row's visible scores (the hidden ones were set to -inf) in descending order.
// Returns the sorted values with the hidden places set to 0, the mask of places holding a visible
// score, and k = 1, 2, ... along the last dimension.
struct SortedRows {
    torch::Tensor values, valid, k;
};

SortedRows sortVisible(const torch::Tensor& z) {
    auto sorted = std::get<0>(z.sort(-1, /*descending=*/true));
    auto valid = sorted > -std::numeric_limits<float>::infinity();
    auto k = torch::arange(1, z.size(-1) + 1, z.options());
    return {torch::where(valid, sorted, torch::zeros({}, z.options())), valid, k};
}

// sparsemax: [z - tau]_+ with tau from the sorted row (Martins & Astudillo 2016).
torch::Tensor sparsemaxThreshold(const torch::Tensor& z) {
    const auto r = sortVisible(z);
    const auto cumulative = r.values.cumsum(-1);
    const auto support = ((1 + r.k * r.values > cumulative) & r.valid).sum(-1, true);  // k* >= 1
    return (cumulative.gather(-1, support - 1) - 1) / support.to(z.dtype());
}

// 1.5-entmax: [z - tau]_+^2 with tau from the sorted row (Peters, Niculae & Martins 2019): for
// the k largest, tau_k = mean_k - sqrt((1 - k * (mean of squares_k - mean_k^2)) / k); the support
// is the k with tau_k <= z_(k).
torch::Tensor entmax15Threshold(const torch::Tensor& z) {
    const auto r = sortVisible(z);
    const auto mean = r.values.cumsum(-1) / r.k;
    const auto meanSquare = r.values.square().cumsum(-1) / r.k;
    const auto delta = (1 - r.k * (meanSquare - mean.square())) / r.k;
    const auto tau = mean - delta.clamp_min(0).sqrt();
    const auto support = ((tau <= r.values) & r.valid).sum(-1, true);
    return tau.gather(-1, support - 1);
}

// The variants of PAPERS.md's "Beyond the two papers", on scores (heads, rows, keys) with the
// visible keys `mask` (rows, keys) and their counts n (rows, 1). Hidden entries are exactly 0 and
// never enter a maximum or a sum.
torch::Tensor laterVariantWeights(const torch::Tensor& s, const AttentionSpec& spec,
                                  const torch::Tensor& mask, const torch::Tensor& n) {
    constexpr float inf = std::numeric_limits<float>::infinity();
    const auto zero = torch::zeros({}, s.options());
    const auto hidden = mask.logical_not();
    switch (spec.kind) {
        case AttentionKind::Sigmoid: {  // sigma(s + b), b = -log n_i unless given
            auto b = spec.sigmoidBias ? torch::full({}, *spec.sigmoidBias, s.options()) : -n.log();
            return torch::where(mask, torch::sigmoid(s + b), zero);
        }
        case AttentionKind::Softpick: {  // relu(e^(s-m) - e^(-m)) / (sum |e^(s-m) - e^(-m)| + eps)
            const auto m = s.masked_fill(hidden, -inf).amax(-1, true);
            const auto d =
                torch::where(mask, (s.masked_fill(hidden, -inf) - m).exp() - (-m).exp(), zero);
            return torch::relu(d) / (d.abs().sum(-1, true) + 1e-8);
        }
        case AttentionKind::Softmax1: {  // e^s / (1 + sum e^s), shifted by max(0, max s)
            const auto visible = s.masked_fill(hidden, -inf);
            const auto m = visible.amax(-1, true).clamp_min(0);
            const auto e = (visible - m).exp();
            return e / ((-m).exp() + e.sum(-1, true));
        }
        case AttentionKind::Sparsemax: {
            auto z = s.masked_fill(hidden, -inf);
            z = z - z.amax(-1, true);
            return torch::where(mask, (z - sparsemaxThreshold(z)).clamp_min(0), zero);
        }
        case AttentionKind::Entmax15: {
            auto z = (s / 2).masked_fill(hidden, -inf);
            z = z - z.amax(-1, true);
            return torch::where(mask, (z - entmax15Threshold(z)).clamp_min(0).square(), zero);
        }
        case AttentionKind::Ssmax: {  // softmax(sigma * log n_i * s) over the visible keys
            // The row maximum comes off before scaling: s - m is exact for scores near the
            // maximum, where scaling first would round away their differences at |s| ~ 1e4.
            const auto m = s.masked_fill(hidden, -inf).amax(-1, true);
            return torch::softmax(((s - m) * (n.log() * spec.ssmaxSigma)).masked_fill(hidden, -inf),
                                  -1);
        }
        case AttentionKind::StickBreaking: {
            // log alpha_ij = log sigma(s_ij) + sum_{j<k<=i} log sigma(-s_ik): the sum over the
            // keys after j is a reversed running sum, shifted by one so that it excludes j.
            const auto lost = torch::where(mask, torch::log_sigmoid(-s), zero);
            const auto after = lost.flip(-1).cumsum(-1).flip(-1);  // sum over k >= j
            const int64_t K = s.size(-1);
            const auto later = torch::cat(
                {after.narrow(-1, 1, K - 1), torch::zeros_like(after.narrow(-1, 0, 1))}, -1);
            return torch::where(mask, (torch::log_sigmoid(s) + later).exp(), zero);
        }
        default:
            break;
    }
    throw std::logic_error("laterVariantWeights: not one of the later variants");
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
    if (keys == rowOffset + rows && !tracked && window == 0 && isPapersVariant(spec.kind)) {
        // Every row sees keys 0..rowOffset; only the last `rows` keys hold the causal boundary,
        // so only that square is masked (no mask over the whole block), in place. Training
        // (autograd) takes the general path below, which never writes into a tensor.
        const auto above =
            torch::ones({rows, rows},
                        torch::TensorOptions().dtype(torch::kBool).device(scores.device()))
                .triu(1);
        auto maskTail = [&](torch::Tensor t, double value) {
            t.narrow(-1, rowOffset, rows).masked_fill_(above, value);
            return t;
        };
        auto relu = [&] { return mayOverwrite ? scores.relu_() : torch::relu(scores); };
        auto divided = [&](torch::Tensor t) {  // by n_i^a
            if (spec.lengthExponent == 0) return t;
            return t.div_(visibleCounts(rows, rowOffset, scores.device()).pow(spec.lengthExponent));
        };
        switch (spec.kind) {
            case AttentionKind::Softmax: {
                if (!mayOverwrite) {
                    return torch::softmax(
                        maskTail(scores.clone(), -std::numeric_limits<float>::infinity()), -1);
                }
                // In place: the softmax reads each row before it writes it.
                auto s = maskTail(scores, -std::numeric_limits<float>::infinity());
                return at::_softmax_out(s, s, -1, /*half_to_float=*/false);
            }
            case AttentionKind::Relu:
                return maskTail(relu(), 0);
            case AttentionKind::ReluLen:
                return divided(maskTail(relu(), 0));
            case AttentionKind::ReluFormer: {
                const auto n = visibleCounts(rows, rowOffset, scores.device());
                auto g = gamma.defined() ? gamma.to(scores.dtype())
                                         : torch::ones({scores.size(0)}, scores.options());
                const auto scale = g.view({-1, 1, 1}) * torch::sqrt(n / 2.0).unsqueeze(0);
                return maskTail(relu(), 0).div_(scale);
            }
            case AttentionKind::Family:
                return divided(maskTail(applyFamily(scores, spec.familyFunction, mayOverwrite), 0));
            default:
                break;
        }
    }
    const auto mask = causalMask(rows, keys, rowOffset, scores.device(), window);  // (rows, keys)
    const auto zero = torch::zeros({}, scores.options());
    switch (spec.kind) {
        case AttentionKind::Softmax:
            return torch::softmax(
                scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity()),
                -1);
        case AttentionKind::Relu:
            return torch::where(mask, torch::relu(scores), zero);
        case AttentionKind::ReluLen: {
            const auto n = visibleCounts(rows, rowOffset, scores.device(), window);  // (rows, 1)
            return torch::where(mask, torch::relu(scores), zero) / n.pow(spec.lengthExponent);
        }
        case AttentionKind::ReluFormer: {
            const auto n = visibleCounts(rows, rowOffset, scores.device(), window);
            auto g = gamma.defined() ? gamma.to(scores.dtype())
                                     : torch::ones({scores.size(0)}, scores.options());
            const auto scale = g.view({-1, 1, 1}) * torch::sqrt(n / 2.0).unsqueeze(0);
            return torch::where(mask, torch::relu(scores), zero) / scale;
        }
        case AttentionKind::Family: {
            const auto n = visibleCounts(rows, rowOffset, scores.device(), window);
            return torch::where(mask, applyFamily(scores, spec.familyFunction, false), zero) /
                   n.pow(spec.lengthExponent);
        }
        default:
            return laterVariantWeights(scores, spec, mask,
                                       visibleCounts(rows, rowOffset, scores.device(), window));
    }
}

torch::Tensor layerAttentionWeights(const torch::Tensor& scores, const RunSpec& run, int64_t layer,
                                    int64_t h0, int64_t n, const torch::Tensor& gamma,
                                    int64_t rowOffset, bool mayOverwrite, int64_t window) {
    if (!run.overridesLayer(layer)) {
        return attentionWeights(scores, run.attention, gamma, rowOffset, mayOverwrite, window);
    }
    const int64_t B = scores.size(0) / n, rows = scores.size(1), keys = scores.size(2);
    const auto perHead = scores.view({B, n, rows, keys});
    const auto gammas = gamma.defined() ? gamma.view({B, n}) : gamma;
    std::vector<torch::Tensor> heads;
    for (int64_t j = 0; j < n; ++j) {
        const HeadAttention plan = run.headAttention(layer, h0 + j);
        const auto s = perHead.select(1, j).contiguous();  // (B, rows, keys)
        switch (plan.ablation) {
            case Ablation::Zero:
                heads.push_back(torch::zeros_like(s));
                break;
            case Ablation::Uniform: {
                const auto visible =
                    causalMask(rows, keys, rowOffset, s.device(), window).to(s.scalar_type());
                const auto counts =
                    visibleCounts(rows, rowOffset, s.device(), window).to(s.scalar_type());
                heads.push_back(
                    (visible / counts).unsqueeze(0).expand({B, rows, keys}).contiguous());
                break;
            }
            case Ablation::None:
                heads.push_back(attentionWeights(
                    s, plan.spec, gammas.defined() ? gammas.select(1, j).contiguous() : gammas,
                    rowOffset, mayOverwrite, window));
                break;
        }
    }
    return torch::stack(heads, 1).view({B * n, rows, keys});
}

}  // namespace relulens::core
