#include "core/diagnostics.h"

#include <cmath>

#include "core/attention.h"

namespace relulens::core {

SparsityRule attentionSparsityRule(const AttentionSpec& spec, double tauScale) {
    return SparsityRule{spec.hasExactZeros(), tauScale};
}

namespace {

std::vector<double> toVector(const torch::Tensor& t) {
    auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

std::vector<VarianceBucket> varianceByRows(const torch::Tensor& headOutputs) {
    // headOutputs (H, L, dh): bucket rows by n_i = i + 1 in [2^k, 2^(k+1) - 1].
    std::vector<VarianceBucket> buckets;
    const int64_t L = headOutputs.size(1);
    for (int64_t lo = 1; lo <= L; lo *= 2) {
        const int64_t hi = std::min(L, lo * 2 - 1);
        auto rows = headOutputs.narrow(1, lo - 1, hi - lo + 1);  // (H, rows, dh)
        double variance = 0;
        if (rows.size(1) * rows.size(2) > 1) {
            variance = rows.flatten(1).var(1, /*unbiased=*/false).mean().item<double>();
        }
        buckets.push_back({lo, hi, variance});
    }
    return buckets;
}

}  // namespace

AttentionDiagnostics attentionDiagnostics(const torch::Tensor& weightsIn,
                                          const torch::Tensor& headOutputs,
                                          const SparsityRule& rule) {
    const auto weights = weightsIn.to(torch::kFloat32);
    const int64_t H = weights.size(0), L = weights.size(1);
    const auto device = weights.device();
    const auto mask = causalMask(L, L, 0, device).unsqueeze(0);      // (1, L, L)
    const auto n = visibleCounts(L, 0, device);                      // (L, 1)
    const auto visible = mask.to(torch::kFloat32).sum(-1);           // (1, L)

    torch::Tensor sparse;  // (H, L, L) bool
    if (rule.exactZero) {
        sparse = (weights == 0).logical_and(mask);
    } else {
        sparse = (weights < (rule.tauScale / n).unsqueeze(0)).logical_and(mask);
    }
    AttentionDiagnostics out;
    out.rowSparsity = sparse.to(torch::kFloat32).sum(-1) / visible;  // (H, L)
    const auto mass = weights.sum(-1);                                 // (H, L)
    out.rowMass = mass;
    const auto hasMass = mass > 0;
    const auto safeMass = torch::where(hasMass, mass, torch::ones_like(mass));
    const auto p = weights / safeMass.unsqueeze(-1);
    const auto plogp = torch::where(p > 0, p * torch::log(p.clamp_min(1e-30)),
                                    torch::zeros_like(p));
    out.rowEntropy = torch::where(hasMass, -plogp.sum(-1), torch::zeros_like(mass));  // (H, L)

    const auto top1 = std::get<0>(weights.max(-1)) / safeMass;  // (H, L)
    // Top ceil(1 % of n_i) entries: only the largest kMax = ceil(1 % of L) are ever needed.
    auto k = torch::ceil(n.squeeze(1) * 0.01).clamp_min(1).to(torch::kLong) - 1;  // (L)
    const int64_t kMax = std::max<int64_t>(1, int64_t(std::ceil(double(L) * 0.01)));
    auto largest = std::get<0>(weights.topk(kMax, -1, /*largest=*/true, /*sorted=*/true)).cumsum(-1);
    auto topPct = largest.gather(-1, k.view({1, L, 1}).expand({H, L, 1})).squeeze(-1) / safeMass;

    // Distance profile: masked entries are exactly zero, so clamping their negative distance
    // into bin 0 adds nothing; bin d has L - d visible entries.
    auto i = torch::arange(L, torch::TensorOptions().dtype(torch::kLong).device(device));
    auto distance = (i.unsqueeze(1) - i.unsqueeze(0)).clamp_min(0).flatten();  // (L·L)
    auto sums = torch::zeros({H, L}, weights.options())
                    .scatter_add_(1, distance.unsqueeze(0).expand({H, L * L}), weights.flatten(1));
    auto counts = (L - i).to(torch::kFloat32).unsqueeze(0);
    auto profile = sums / counts;  // (H, L)

    const auto hasMassF = hasMass.to(torch::kFloat32);
    const auto massRows = hasMassF.sum(-1).clamp_min(1);  // (H)
    auto perHead = [&](const torch::Tensor& rows) { return toVector((rows * hasMassF).sum(-1) / massRows); };
    const auto sparsityV = toVector(sparse.to(torch::kFloat32).sum({1, 2}) / visible.sum());
    const auto massMean = toVector(mass.mean(-1));
    const auto massStd = toVector(mass.std(-1, /*unbiased=*/false));
    const auto entropyV = perHead(out.rowEntropy);
    const auto top1V = perHead(top1);
    const auto topPctV = perHead(topPct);
    const auto empty = toVector((~hasMass).to(torch::kFloat32).sum(-1));
    std::vector<double> variance(size_t(H), 0.0);
    if (headOutputs.defined()) {
        variance = toVector(headOutputs.to(torch::kFloat32).flatten(1).var(1, false));
        out.outputVarianceByN = varianceByRows(headOutputs.to(torch::kFloat32));
    }
    const auto profileCpu = profile.to(torch::kCPU, torch::kFloat64).contiguous();
    for (int64_t h = 0; h < H; ++h) {
        HeadDiagnostics d;
        d.sparsity = sparsityV[size_t(h)];
        d.rowMass = massMean[size_t(h)];
        d.rowMassStd = massStd[size_t(h)];
        d.entropy = entropyV[size_t(h)];
        d.topRatio1 = top1V[size_t(h)];
        d.topRatio1pct = topPctV[size_t(h)];
        d.outputVariance = variance[size_t(h)];
        d.emptyRows = int64_t(empty[size_t(h)]);
        const double* row = profileCpu[h].data_ptr<double>();
        d.distanceProfile.assign(row, row + L);
        out.heads.push_back(std::move(d));
    }
    return out;
}

FfnDiagnostics ffnDiagnostics(const torch::Tensor& ffnInput, const torch::Tensor& slots,
                              const FfnWeights& w, FfnKind kind, double tauScale) {
    FfnDiagnostics out;
    const int64_t N = slots.size(-1);
    out.rule = SparsityRule{kind == FfnKind::Relu, tauScale};
    const auto sparse = out.rule.exactZero ? (slots == 0) : (slots.abs() < tauScale / double(N));
    out.tokenSparsity = sparse.to(torch::kFloat32).mean(-1);
    out.sparsity = sparse.to(torch::kFloat32).mean().item<double>();
    out.outputVariance = ffnOutput(slots, w, kind).var(/*unbiased=*/false).item<double>();
    // Output variance of the memory restricted to its first N' slots (paper 1's mechanism:
    // softmax shrinks the output as slots grow, ReLU does not). b2 is left out.
    for (int64_t n = std::min<int64_t>(N, 16); ; n = std::min(N, n * 2)) {
        FfnWeights sub{w.w1.narrow(0, 0, n), w.b1.narrow(0, 0, n), w.w2.narrow(1, 0, n),
                       torch::zeros_like(w.b2), w.lnW, w.lnB, w.eps};
        auto m = ffnSlotActivations(ffnInput, sub, kind);
        double variance = ffnOutput(m, sub, kind).var(false).item<double>();
        out.outputVarianceBySlots.push_back({1, n, variance});
        if (n == N) break;
    }
    return out;
}

}  // namespace relulens::core
