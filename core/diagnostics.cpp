#include "core/diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>

#include <ATen/Parallel.h>

#include "core/attention.h"
#include "core/row_pass.h"

namespace relulens::core {

std::string sparsityRuleText(const SparsityRule& rule, const std::string& per, bool ascii) {
    if (rule.exactZero) return "exactly 0";
    char number[32];
    std::snprintf(number, sizeof(number), "%g", rule.tauScale);
    return std::string(ascii ? "below tau = " : "below τ = ") + number + " / " + per;
}

SparsityRule attentionSparsityRule(const AttentionSpec& spec, double tauScale) {
    return SparsityRule{spec.hasExactZeros(), tauScale};
}

SparsityRule attentionSparsityRule(const RunSpec& run, int64_t layers, int64_t heads,
                                   double tauScale) {
    bool exact = true;
    for (int64_t l = 0; l < layers && exact; ++l) {
        for (int64_t h = 0; h < heads && exact; ++h) {
            const HeadAttention plan = run.headAttention(l, h);
            exact = plan.ablation == Ablation::Zero ||
                    (plan.ablation == Ablation::None && plan.spec.hasExactZeros());
        }
    }
    return SparsityRule{exact, tauScale};
}

namespace {

std::vector<double> toVector(const torch::Tensor& t) {
    auto c = t.to(torch::kCPU, torch::kFloat64).contiguous();
    return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Variance of x[0..n) (without Bessel's correction), in two passes in double.
double varianceOf(const float* x, int64_t n) {
    return centralSums(x, n, sumOf(x, n) / double(n)).squares / double(n);
}

// Variance over every entry (as torch's var without Bessel's correction): on the CPU in two
// passes in double.
double populationVariance(const torch::Tensor& t) {
    if (!t.is_cpu() || t.numel() == 0) return t.var(/*unbiased=*/false).item<double>();
    const auto x = t.to(torch::kFloat32).contiguous();
    return varianceOf(x.data_ptr<float>(), x.numel());
}

// headOutputs (H, L, dh) on the CPU as float: each head's variance over all its entries.
std::vector<double> headVariances(const torch::Tensor& x) {
    const int64_t H = x.size(0), n = x.size(1) * x.size(2);
    std::vector<double> out;
    for (int64_t h = 0; h < H; ++h) out.push_back(varianceOf(x.data_ptr<float>() + h * n, n));
    return out;
}

std::vector<VarianceBucket> varianceByRows(const torch::Tensor& x) {
    // x: headOutputs (H, L, dh) on the CPU as float. Rows bucketed by n_i = i + 1 in
    // [2^k, 2^(k+1) - 1]; a bucket's variance is the mean over heads of each head's.
    std::vector<VarianceBucket> buckets;
    const int64_t H = x.size(0), L = x.size(1), dh = x.size(2);
    const float* p = x.data_ptr<float>();
    for (int64_t lo = 1; lo <= L; lo *= 2) {
        const int64_t hi = std::min(L, lo * 2 - 1);
        const int64_t entries = (hi - lo + 1) * dh;
        double variance = 0;
        if (entries > 1) {
            for (int64_t h = 0; h < H; ++h)
                variance += varianceOf(p + (h * L + lo - 1) * dh, entries);
            variance /= double(H);
        }
        buckets.push_back({lo, hi, variance});
    }
    return buckets;
}

// Each row's share of sparse entries, of a (rows, N) tensor: exactly 0, or below tau in
// magnitude.
torch::Tensor sparseShareByRow(const torch::Tensor& t, bool exactZero, double tau) {
    const int64_t N = t.size(-1);
    if (!t.is_cpu()) {
        const auto sparse = exactZero ? (t == 0) : (t.abs() < tau);
        return sparse.to(torch::kFloat32).mean(-1);
    }
    const auto x = t.to(torch::kFloat32).contiguous();
    const int64_t rows = x.numel() / std::max<int64_t>(N, 1);
    auto out = torch::empty({rows}, torch::kFloat32);
    const float* p = x.data_ptr<float>();
    float* o = out.data_ptr<float>();
    at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
        for (int64_t r = begin; r < end; ++r)
            o[r] = float(double(countSparse(p + r * N, N, exactZero, float(tau))) / double(N));
    });
    return out;
}

// (H, R) sums of each row's ceil(1 % of n_i) largest visible entries, n_i = r0 + i + 1 (at
// most `window` when one is set; the entries before the window are 0 and rank last).
torch::Tensor largestSums(const torch::Tensor& w, int64_t r0, int64_t window) {
    const int64_t H = w.size(0), R = w.size(1), K = w.size(2);
    auto kOf = [r0, window](int64_t i) {
        const int64_t n = window > 0 ? std::min(r0 + i + 1, window) : r0 + i + 1;
        return std::max<int64_t>(1, int64_t(std::ceil(double(n) * 0.01)));
    };
    if (w.is_cpu()) {
        auto out = torch::empty({H, R}, torch::kFloat32);
        const float* p = w.data_ptr<float>();
        float* o = out.data_ptr<float>();
        at::parallel_for(0, H * R, 1, [&](int64_t begin, int64_t end) {
            std::vector<float> heap;
            for (int64_t row = begin; row < end; ++row) {
                const int64_t i = row % R;
                o[row] = float(sumOfLargest(p + row * K, r0 + i + 1, kOf(i), heap));
            }
        });
        return out;
    }
    // Elsewhere: only the largest ceil(1 % of the block's last n) entries are ever needed.
    const int64_t kMax = kOf(R - 1);
    std::vector<int64_t> ks;
    for (int64_t i = 0; i < R; ++i) ks.push_back(kOf(i) - 1);
    const auto k = torch::tensor(ks, torch::kLong).to(w.device());
    const auto largest = std::get<0>(w.topk(std::min(kMax, K), -1, true, true)).cumsum(-1);
    return largest.gather(-1, k.view({1, R, 1}).expand({H, R, 1})).squeeze(-1);
}

}  // namespace

AttentionDiagnosticsAccumulator::AttentionDiagnosticsAccumulator(int64_t heads, int64_t tokens,
                                                                 const SparsityRule& rule,
                                                                 const torch::Device& device,
                                                                 int64_t window)
    : heads_(heads), tokens_(tokens), window_(window), rule_(rule) {
    auto options = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    sparseCount_ = torch::zeros({heads, tokens}, options);
    mass_ = torch::zeros({heads, tokens}, options);
    entropy_ = torch::zeros({heads, tokens}, options);
    top1_ = torch::zeros({heads, tokens}, options);
    topPct_ = torch::zeros({heads, tokens}, options);
    distanceSums_ = torch::zeros({heads, tokens}, options);
    first_ = torch::zeros({heads, tokens}, options);
}

void AttentionDiagnosticsAccumulator::add(const torch::Tensor& weightsIn, int64_t r0,
                                          int64_t headBegin) {
    const auto w = weightsIn.to(torch::kFloat32).contiguous();  // (H, R, K)
    if (w.is_cpu() && fused_) {
        addRows(w, r0, headBegin);
        return;
    }
    const int64_t H = w.size(0), R = w.size(1), K = w.size(2);
    const auto n = visibleCounts(R, r0, w.device(), window_).squeeze(1);  // (R) n_i
    // Entries a row cannot see are exactly zero, so they never count as non-zero, and under a
    // threshold rule they all count as below it (τ > 0): K - n_i of them per row.
    // (Counting through bytes is several times faster than summing the boolean tensor.)
    auto count = [](const torch::Tensor& condition) {
        return condition.to(torch::kByte).sum(-1, false, torch::kInt).to(torch::kFloat32);
    };
    torch::Tensor sparse;
    if (rule_.exactZero) {
        sparse = n.unsqueeze(0) - count(w != 0);
    } else {
        sparse = count(w < (rule_.tauScale / n).view({1, R, 1})) - (double(K) - n).unsqueeze(0);
    }
    const auto mass = w.sum(-1);  // (H, R)
    const auto hasMass = mass > 0;
    const auto safeMass = torch::where(hasMass, mass, torch::ones_like(mass));
    // Entropy of the row normalised to sum 1, over its positive entries:
    // -Σ p log p with p = w / m is (log m · Σ w⁺ - Σ w⁺ log w⁺) / m.
    const auto positive = w.clamp_min(0);
    const auto entropy = torch::where(hasMass,
                                      (safeMass.log() * positive.sum(-1) -
                                       (positive * positive.clamp_min(1e-30f).log()).sum(-1)) /
                                          safeMass,
                                      torch::zeros_like(mass));
    const auto top1 = w.amax(-1) / safeMass;
    const auto topPct = largestSums(w, r0, window_) / safeMass;

    // Distance profile: pad each row on the left with R zeros; reading the padded block with a
    // row stride one longer than its width lines up query-key distance d = r0 + R - t in
    // column t, so summing over rows gives every distance's total in one pass.
    const int64_t W = K + R;
    const auto padded = torch::constant_pad_nd(w, {R, 0}).contiguous();  // (H, R, W)
    const auto diagonals = padded.as_strided({H, R, K + 1}, {R * W, W + 1, 1});
    const auto totals = diagonals.sum(1);  // (H, K + 1): column t holds distance r0 + R - t
    const int64_t reach = r0 + R;          // distances 0..reach-1 occur in this block
    auto rows = [&](const torch::Tensor& t) { return t.narrow(0, headBegin, H).narrow(1, r0, R); };
    distanceSums_.narrow(0, headBegin, H).narrow(1, 0, reach) +=
        totals.narrow(1, 1, reach).flip(-1);

    rows(sparseCount_).copy_(sparse);
    rows(mass_).copy_(mass);
    rows(entropy_).copy_(entropy);
    rows(top1_).copy_(top1);
    rows(topPct_).copy_(topPct);
    rows(first_).copy_(w.select(2, 0));
}

void AttentionDiagnosticsAccumulator::addRows(const torch::Tensor& w, int64_t r0,
                                              int64_t headBegin) {
    const int64_t H = w.size(0), R = w.size(1), K = w.size(2);
    const int64_t L = tokens_, skip = headBegin * L;  // the block's first head's place
    const float* p = w.data_ptr<float>();
    float* sparse = sparseCount_.data_ptr<float>() + skip;
    float* mass = mass_.data_ptr<float>() + skip;
    float* entropy = entropy_.data_ptr<float>() + skip;
    float* top1 = top1_.data_ptr<float>() + skip;
    float* topPct = topPct_.data_ptr<float>() + skip;
    float* distance = distanceSums_.data_ptr<float>() + skip;
    float* firstKey = first_.data_ptr<float>() + skip;
    const double tauScale = rule_.tauScale;
    const bool exact = rule_.exactZero;
    // Parallel over heads: the rows of one head add into the same distance totals.
    at::parallel_for(0, H, 1, [&](int64_t headBegin, int64_t headEnd) {
        std::vector<float> candidates(static_cast<size_t>(K)), heap;
        // The top 1 % of a row: its k largest entries up to the query (those before a window
        // are 0 and rank last), found among the entries above a threshold. The next row of the
        // same head has nearly the same weights, so its threshold is a little below this row's
        // k-th largest; the first row's, or one that proves too high, comes from a sample.
        float guess = std::numeric_limits<float>::infinity();
        for (int64_t row = headBegin * R; row < headEnd * R; ++row) {
            const int64_t h = row / R, i = row % R, at = r0 + i;  // absolute position
            if (i == 0) guess = std::numeric_limits<float>::infinity();
            const float* x = p + row * K;
            const int64_t first = window_ > 0 ? std::max<int64_t>(0, at - window_ + 1) : 0;
            const int64_t n = at - first + 1;  // visible keys
            const int64_t k = std::max<int64_t>(1, int64_t(std::ceil(double(n) * 0.01)));
            RowPassInput in;
            in.x = x;
            in.m = at + 1;
            in.first = first;
            in.exactZero = exact;
            in.tau = float(tauScale / double(n));
            in.totals = distance + h * L;  // entry j is at distance at - j
            if (k > 1) in.threshold = std::isfinite(guess) ? guess : largestThreshold(x, in.m, k);
            in.candidates = candidates.data();
            const RowPassOutput r = rowPass(in);
            double largest = r.best;  // k = 1
            if (k > 1) {
                LargestSum top;
                bool found = sumOfLargestCandidates(candidates.data(), r.candidates, r.equal,
                                                    in.threshold, k, top);
                const float sampled = found ? in.threshold : largestThreshold(x, in.m, k);
                if (!found && std::isfinite(sampled) && sampled < in.threshold) {
                    int64_t equal = 0;
                    const int64_t count =
                        candidatesAbove(x, in.m, sampled, candidates.data(), &equal);
                    found =
                        sumOfLargestCandidates(candidates.data(), count, equal, sampled, k, top);
                }
                if (found) {
                    largest = top.sum;
                    guess = top.kth > 0 ? top.kth * 0.9f : top.kth;
                } else {  // a short row, or thresholds above its k-th largest
                    largest = sumOfLargest(x, in.m, k, heap);
                    guess = std::numeric_limits<float>::infinity();
                }
            }
            const float best = K > at + 1
                                   ? std::max(r.best, 0.0f)  // the block's masked entries are 0
                                   : r.best;
            const int64_t out = h * L + at;
            sparse[out] = float(r.counted);
            mass[out] = float(r.sum);
            const bool hasMass = r.sum > 0;
            const double safe = hasMass ? r.sum : 1.0;
            entropy[out] =
                hasMass ? float((std::log(safe) * r.positiveSum - r.positiveXLogX) / safe) : 0.0f;
            top1[out] = float(double(best) / safe);
            topPct[out] = float(largest / safe);
            firstKey[out] = x[0];
        }
    });
}

AttentionDiagnosticsAccumulator AttentionDiagnosticsAccumulator::resized(int64_t tokens) const {
    AttentionDiagnosticsAccumulator out = *this;
    out.tokens_ = tokens;
    const int64_t kept = std::min(tokens, tokens_);
    for (auto* t : {&out.sparseCount_, &out.mass_, &out.entropy_, &out.top1_, &out.topPct_,
                    &out.distanceSums_, &out.first_}) {
        auto grown = torch::zeros({heads_, tokens}, t->options());
        grown.narrow(1, 0, kept).copy_(t->narrow(1, 0, kept));
        *t = grown;
    }
    return out;
}

AttentionDiagnostics AttentionDiagnosticsAccumulator::finish(
    const torch::Tensor& headOutputs) const {
    const int64_t H = heads_, L = tokens_;
    const auto device = mass_.device();
    const auto n = visibleCounts(L, 0, device, window_).squeeze(1);  // (L)
    AttentionDiagnostics out;
    out.rowSparsity = sparseCount_ / n.unsqueeze(0);
    out.rowMass = mass_;
    out.rowEntropy = entropy_;
    const auto hasMass = mass_ > 0;
    const auto hasMassF = hasMass.to(torch::kFloat32);
    const auto massRows = hasMassF.sum(-1).clamp_min(1);  // (H)
    auto perHead = [&](const torch::Tensor& rows) {
        return toVector((rows * hasMassF).sum(-1) / massRows);
    };
    const auto sparsityV = toVector(sparseCount_.sum(-1) / n.sum());
    const auto massMean = toVector(mass_.mean(-1));
    const auto massStd = toVector(mass_.std(-1, /*unbiased=*/false));
    const auto entropyV = perHead(entropy_);
    const auto top1V = perHead(top1_);
    const auto topPctV = perHead(topPct_);
    const auto empty = toVector((~hasMass).to(torch::kFloat32).sum(-1));
    std::vector<double> variance(size_t(H), 0.0);
    if (headOutputs.defined()) {
        const auto x = headOutputs.to(torch::kCPU, torch::kFloat32).contiguous();
        variance = headVariances(x);
        out.outputVarianceByN = varianceByRows(x);
    }
    // Sinks: the first token's share of rows 1.. that have mass, and its mean weight over all rows.
    std::vector<double> share(size_t(H), 0.0), zeroMass(size_t(H), 0.0);
    if (L > 1) {
        const auto later = hasMass.narrow(1, 1, L - 1);
        const auto laterF = later.to(torch::kFloat32);
        const auto ratio = torch::where(
            later, first_.narrow(1, 1, L - 1) / mass_.narrow(1, 1, L - 1).clamp_min(1e-30),
            torch::zeros({}, mass_.options()));
        share = toVector(ratio.sum(-1) / laterF.sum(-1).clamp_min(1));
        zeroMass = toVector((L - 1) - laterF.sum(-1));
    }  // (a one-token text has no row after the first: share 0)
    const auto sinkScore = toVector(first_.mean(-1));
    // Bin d holds L - d visible entries.
    const auto counts =
        (L - torch::arange(L, torch::TensorOptions().dtype(torch::kFloat32).device(device)));
    const auto profileCpu =
        (distanceSums_ / counts.unsqueeze(0)).to(torch::kCPU, torch::kFloat64).contiguous();
    for (int64_t h = 0; h < H; ++h) {
        HeadDiagnostics d;
        d.sparsity = sparsityV[size_t(h)];
        d.rowMass = massMean[size_t(h)];
        d.rowMassStd = massStd[size_t(h)];
        d.entropy = entropyV[size_t(h)];
        d.topShare = top1V[size_t(h)];
        d.topOnePercentShare = topPctV[size_t(h)];
        d.outputVariance = variance[size_t(h)];
        d.emptyRows = int64_t(empty[size_t(h)]);
        const double* row = profileCpu[h].data_ptr<double>();
        d.distanceProfile.assign(row, row + L);
        d.sink.firstTokenShare = share[size_t(h)];
        d.sink.zeroMassRows = int64_t(zeroMass[size_t(h)]);
        d.sink.sinkScore = sinkScore[size_t(h)];
        out.heads.push_back(std::move(d));
    }
    return out;
}

ResidualDiagnostics residualDiagnostics(const torch::Tensor& stream) {
    ResidualDiagnostics out;
    const auto x = stream.to(torch::kCPU, torch::kFloat32).contiguous();
    const int64_t n = x.numel();
    if (n == 0) return out;
    const int64_t d = stream.size(-1);
    const float* v = x.data_ptr<float>();
    // One pass for the three largest magnitudes (of equal ones the first) and a histogram of the
    // magnitudes' upper 16 bits (the bits of non-negative floats order as the floats do); the
    // median from a selection among the entries of its bin; the moments in two passes in double.
    std::vector<int64_t> top;  // indices, largest |h| first
    std::vector<uint32_t> histogram(size_t(1) << 16, 0);
    auto bitsOf = [](float m) {
        uint32_t bits;
        std::memcpy(&bits, &m, sizeof bits);
        return bits;
    };
    for (int64_t i = 0; i < n; ++i) {
        const float m = std::abs(v[i]);
        ++histogram[bitsOf(m) >> 16];
        if (top.size() == 3 && !(m > std::abs(v[top.back()]))) continue;
        auto at = top.end();
        while (at != top.begin() && m > std::abs(v[*(at - 1)])) --at;
        top.insert(at, i);
        if (top.size() > 3) top.pop_back();
    }
    for (const int64_t at : top) out.largest.push_back({double(v[at]), at / d, at % d});
    // The lower of the two middle values when n is even, as torch::median has it.
    const int64_t rank = (n - 1) / 2;
    int64_t below = 0;
    uint32_t bin = 0;
    while (below + int64_t(histogram[bin]) <= rank) below += int64_t(histogram[bin++]);
    std::vector<float> inBin;
    inBin.reserve(histogram[bin]);
    for (int64_t i = 0; i < n; ++i) {
        const float m = std::abs(v[i]);
        if (bitsOf(m) >> 16 == bin) inBin.push_back(m);
    }
    const auto middle = inBin.begin() + (rank - below);
    std::nth_element(inBin.begin(), middle, inBin.end());
    out.medianAbs = *middle;
    const double mean = sumOf(v, n) / double(n);
    const CentralSums moments = centralSums(v, n, mean);
    const double variance = moments.squares / double(n);
    out.kurtosis = variance > 0 ? (moments.fourth / double(n)) / (variance * variance) : 0;
    return out;
}

void completeSinkDiagnostics(std::vector<HeadDiagnostics>& heads, const torch::Tensor& keys,
                             const torch::Tensor& values, double threshold) {
    const int64_t H = int64_t(heads.size());
    for (int64_t h = 0; h < H; ++h)
        heads[size_t(h)].sink.sinkHead = heads[size_t(h)].sink.sinkScore > threshold;
    if (!keys.defined() || !values.defined() || H == 0) return;
    const int64_t kv = keys.size(0), group = std::max<int64_t>(1, H / kv);
    auto norms =
        [](const torch::Tensor& t) {  // (H_kv, L, dh) -> per kv head: ||t_0||, mean_{j>=1} ||t_j||
            const auto n = t.to(torch::kFloat32).norm(2, -1);  // (H_kv, L)
            const auto first = toVector(n.select(1, 0));
            const auto others = n.size(1) > 1
                                    ? toVector(n.narrow(1, 1, n.size(1) - 1).mean(-1))
                                    : std::vector<double>(size_t(n.size(0)), std::nan(""));
            return std::pair{first, others};
        };
    const auto [firstKey, otherKey] = norms(keys);
    const auto [firstValue, otherValue] = norms(values);
    for (int64_t h = 0; h < H; ++h) {
        auto& s = heads[size_t(h)].sink;
        const auto g = size_t(std::min(h / group, kv - 1));
        s.firstKeyNorm = firstKey[g];
        s.otherKeyNorm = otherKey[g];
        s.firstValueNorm = firstValue[g];
        s.otherValueNorm = otherValue[g];
    }
}

AttentionDiagnostics attentionDiagnostics(const torch::Tensor& weights,
                                          const torch::Tensor& headOutputs,
                                          const SparsityRule& rule) {
    AttentionDiagnosticsAccumulator accumulator(weights.size(0), weights.size(1), rule,
                                                weights.device());
    accumulator.add(weights, 0);
    return accumulator.finish(headOutputs);
}

FfnDiagnostics ffnDiagnostics(const torch::Tensor& ffnInput, const torch::Tensor& slots,
                              const FfnWeights& w, FfnKind kind, double tauScale,
                              const torch::Tensor& output) {
    FfnDiagnostics out;
    const int64_t L = slots.size(0), N = slots.size(-1);
    out.rule = SparsityRule{kind == FfnKind::Relu, tauScale};
    out.tokenSparsity = sparseShareByRow(slots, out.rule.exactZero, tauScale / double(N));
    // Every token has the same N slots: the mean over tokens of their shares is the overall one.
    out.sparsity = out.tokenSparsity.to(torch::kFloat64).mean().item<double>();
    const auto full = output.defined() ? output : ffnOutput(slots, w, kind);
    out.outputVariance = populationVariance(full);
    // Output variance of the memory restricted to its first N' slots (paper 1's mechanism:
    // softmax shrinks the output as slots grow, ReLU does not). b2 is left out.
    // The first N' slots' pre-activations are the first N' columns of the full ones; the curve
    // is taken over at most kSlotCurveTokens evenly spaced tokens, as for gated memories.
    auto input = ffnInput;
    if (L > kSlotCurveTokens) {
        input = ffnInput.index_select(
            0, torch::linspace(0, double(L - 1), kSlotCurveTokens, ffnInput.options())
                   .round()
                   .to(torch::kLong));
    }
    const auto pre = ffnPreActivations(input, w, kind);
    for (int64_t n = std::min<int64_t>(N, 16);; n = std::min(N, n * 2)) {
        FfnWeights sub{w.w1.narrow(0, 0, n),
                       w.b1.narrow(0, 0, n),
                       w.w2.narrow(1, 0, n),
                       torch::zeros_like(w.b2),
                       w.lnW,
                       w.lnB,
                       w.eps};
        auto m = ffnActivation(pre.narrow(-1, 0, n), kind);
        double variance = populationVariance(ffnOutput(m, sub, kind));
        out.outputVarianceBySlots.push_back({1, n, variance});
        if (n == N) break;
    }
    return out;
}

FfnDiagnostics gatedFfnDiagnostics(const torch::Tensor& slots, const torch::Tensor& output,
                                   const GatedFfnWeights& w, FfnKind kind, double tauScale) {
    FfnDiagnostics out;
    const int64_t L = slots.size(0), N = slots.size(-1);
    out.rule = SparsityRule{kind == FfnKind::Relu, tauScale};
    out.tokenSparsity = sparseShareByRow(slots, out.rule.exactZero, tauScale / double(N));
    // Every token has the same N slots: the mean over tokens of their shares is the overall one.
    out.sparsity = out.tokenSparsity.to(torch::kFloat64).mean().item<double>();
    const auto full = output.defined() ? output : gatedFfnOutput(slots, w);
    out.outputVariance = populationVariance(full);
    // The coefficients are elementwise, so the memory restricted to its first N' slots is the
    // first N' coefficients against the first N' columns of down (its bias left out): each
    // doubling adds the next columns' product to the last.
    auto sample = slots;
    if (L > kSlotCurveTokens) {
        sample = slots.index_select(
            0, torch::linspace(0, double(L - 1), kSlotCurveTokens, slots.options())
                   .round()
                   .to(torch::kLong));
    }
    torch::Tensor partial;
    int64_t done = 0;
    for (int64_t n = std::min<int64_t>(N, 16);; n = std::min(N, n * 2)) {
        const auto part =
            torch::linear(sample.narrow(-1, done, n - done), w.down.narrow(1, done, n - done));
        partial = partial.defined() ? partial + part : part;
        done = n;
        out.outputVarianceBySlots.push_back({1, n, populationVariance(partial)});
        if (n == N) break;
    }
    return out;
}

}  // namespace relulens::core
