// The fused attention kernel (tiles in cache, online softmax) against attention written out
// whole in double precision by PAPERS.md's formulas, with the mask built here row by row.
#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "core/fused_attention.h"
#include "core_test.h"

using namespace relulens::core;
using relulens::test::spec;

namespace {

bool processorTakesTheKernel() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

// Attention written out whole: q (B, H, Q, dh) at positions L - Q .. L - 1, k and v
// (B, H_kv, L, dh). Row i sees key j when j ≤ its position and, with a window, j > its
// position - window; n_i counts them.
torch::Tensor writtenOut(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                         const AttentionSpec& s, const std::vector<double>& gamma, double scale,
                         int64_t window) {
    const int64_t H = q.size(1), Q = q.size(2), L = k.size(2), past = L - Q;
    const auto kd = k.to(torch::kFloat64).repeat_interleave(H / k.size(1), 1);
    const auto vd = v.to(torch::kFloat64).repeat_interleave(H / v.size(1), 1);
    const auto scores = torch::matmul(q.to(torch::kFloat64), kd.transpose(-1, -2)) * scale;
    std::vector<uint8_t> seen(static_cast<size_t>(Q * L));
    std::vector<double> n(static_cast<size_t>(Q));
    for (int64_t i = 0; i < Q; ++i) {
        for (int64_t j = 0; j < L; ++j) {
            const int64_t position = past + i;
            const bool visible = j <= position && (window == 0 || j > position - window);
            seen[size_t(i * L + j)] = visible ? 1 : 0;
            n[size_t(i)] += visible ? 1 : 0;
        }
    }
    const auto mask = torch::from_blob(seen.data(), {Q, L}, torch::kUInt8).to(torch::kBool);
    const auto counts = torch::from_blob(n.data(), {Q, 1}, torch::kFloat64).clone();
    const auto zero = torch::zeros({}, torch::kFloat64);
    torch::Tensor w;
    switch (s.kind) {
        case AttentionKind::Softmax:
            w = scores.masked_fill(mask.logical_not(), -std::numeric_limits<double>::infinity())
                    .softmax(-1);
            break;
        case AttentionKind::Relu:
            w = torch::where(mask, scores.clamp_min(0), zero);
            break;
        case AttentionKind::ReluLen:
            w = torch::where(mask, scores.clamp_min(0), zero) / counts.pow(s.lengthExponent);
            break;
        case AttentionKind::ReluFormer: {
            const auto g = torch::tensor(gamma, torch::kFloat64).view({1, H, 1, 1});
            w = torch::where(mask, scores.clamp_min(0), zero) / (g * (counts / 2).sqrt());
            break;
        }
        default: {  // the family with relu²
            const auto r = scores.clamp_min(0);
            w = torch::where(mask, r * r, zero) / counts.pow(s.lengthExponent);
            break;
        }
    }
    return torch::matmul(w, vd);
}

// Largest difference against the written-out result, relative to its largest entry.
double relativeDifference(const torch::Tensor& fused, const torch::Tensor& expected) {
    const double largest = expected.abs().max().item<double>();
    return (fused.to(torch::kFloat64) - expected).abs().max().item<double>() / largest;
}

RunSpec runOf(const AttentionSpec& s) {
    RunSpec run;
    run.attention = s;
    return run;
}

}  // namespace

TEST_CASE("fusedAttentionEqualsAttentionWrittenOutForEveryVariantItTakes") {
    if (!processorTakesTheKernel()) {
        MESSAGE("skipped: this processor has no AVX2 and FMA, so the blocked path runs instead");
        return;
    }
    torch::NoGradGuard noGrad;
    torch::manual_seed(7);
    // Two texts, four query heads over two key heads, a head size that is no multiple of eight,
    // rows after 290 earlier positions: tiles of rows and keys with ragged ends. The last block
    // of rows holds 9, 11 or 13 (6 + 3, 6 + 5, 6 + 6 + 1 rows for the scores' kernel; 4 + 4 + 1,
    // 4 + 4 + 3, 4 + 4 + 4 + 1 for the values'); a window of 600 spans two tiles of keys.
    const int64_t B = 2, H = 4, Hkv = 2, past = 290, dh = 44;
    for (const int64_t Q : {int64_t(329), int64_t(331), int64_t(333)}) {
        const int64_t L = past + Q;
        const auto q = torch::randn({B, H, Q, dh}) * 1.5;
        const auto k = torch::randn({B, Hkv, L, dh});
        const auto v = torch::randn({B, Hkv, L, dh});
        const std::vector<double> gamma = {0.5, 1.0, 2.0, 3.0};
        const auto gammaTensor = torch::tensor(gamma, torch::kFloat32);
        const double scale = 1.0 / std::sqrt(double(dh));
        const std::vector<AttentionSpec> specs = {
            spec(AttentionKind::Softmax),
            spec(AttentionKind::Relu),
            spec(AttentionKind::ReluLen),
            spec(AttentionKind::ReluLen, 0.5),
            spec(AttentionKind::ReluFormer),
            spec(AttentionKind::Family, 1.5, FamilyFunction::Relu2)};
        for (const auto& s : specs) {
            for (const int64_t window : {int64_t(0), int64_t(100), int64_t(300), int64_t(600)}) {
                CAPTURE(Q);
                CAPTURE(s.label());
                CAPTURE(window);
                REQUIRE(fusedAttentionApplies(q, runOf(s), 0));
                const auto fused = fusedAttention(q, k, v, s, gammaTensor, scale, window, {});
                REQUIRE(fused.defined());
                REQUIRE(fused.sizes() == q.sizes());
                const auto expected = writtenOut(q, k, v, s, gamma, scale, window);
                CHECK(relativeDifference(fused, expected) < 3e-6);
            }
        }
    }
}

TEST_CASE("aNotANumberInTheScoresReachesTheOutputAsInTheBlockedPath") {
    if (!processorTakesTheKernel()) {
        MESSAGE("skipped: this processor has no AVX2 and FMA");
        return;
    }
    torch::NoGradGuard noGrad;
    // A diverged model's NaN must show as NaN (as torch's softmax and relu give it), not as a
    // finite output: key 3 of head 0 is NaN, so every row of head 0 that sees it (rows 3 to 39;
    // from row 7 on it falls in the vectors, before it in the scalar tail) is NaN throughout,
    // and rows 0 to 2 and head 1 stay finite.
    const auto q = torch::randn({1, 2, 40, 16});
    auto k = torch::randn({1, 2, 40, 16});
    k[0][0][3][5] = std::numeric_limits<float>::quiet_NaN();
    const auto v = torch::randn({1, 2, 40, 16});
    for (const auto& s : {spec(AttentionKind::Softmax), spec(AttentionKind::Relu),
                          spec(AttentionKind::Family, 1.0, FamilyFunction::Relu2)}) {
        CAPTURE(s.label());
        const auto out = fusedAttention(q, k, v, s, {}, 0.25, 0, {});
        CHECK(out[0][0].narrow(0, 3, 37).isnan().all().item<bool>());
        CHECK(out.isnan().sum().item<int64_t>() == 37 * 16);
    }
}

TEST_CASE("theOnlineSoftmaxHoldsWhenTheLargestScoreMovesFromTileToTile") {
    if (!processorTakesTheKernel()) {
        MESSAGE("skipped: this processor has no AVX2 and FMA");
        return;
    }
    torch::NoGradGuard noGrad;
    torch::manual_seed(11);
    // Keys that grow along the input make each later tile's scores larger than all before it
    // (the running maximum moves at every tile, and early weights shrink towards zero); keys
    // that shrink keep the maximum in the first tile.
    const int64_t Q = 700, dh = 32;
    const auto q = torch::randn({1, 2, Q, dh}).abs() + 0.5;
    const auto growth = torch::linspace(0.0, 6.0, Q).view({1, 1, Q, 1});
    for (const bool growing : {true, false}) {
        CAPTURE(growing);
        const auto k = (torch::rand({1, 2, Q, dh}) + 0.5) * (growing ? growth : growth.flip(2));
        const auto v = torch::randn({1, 2, Q, dh});
        const auto s = spec(AttentionKind::Softmax);
        const double scale = 1.0 / std::sqrt(double(dh));  // scores up to ~45, 15 more a tile
        const auto fused = fusedAttention(q, k, v, s, {}, scale, 0, {});
        const auto expected = writtenOut(q, k, v, s, {}, scale, 0);
        CHECK(relativeDifference(fused, expected) < 2e-5);
    }
}

TEST_CASE("aCancelledFusedPassReturnsNothing") {
    if (!processorTakesTheKernel()) {
        MESSAGE("skipped: this processor has no AVX2 and FMA");
        return;
    }
    torch::NoGradGuard noGrad;
    const auto q = torch::randn({1, 2, 300, 16});
    const auto k = torch::randn({1, 2, 300, 16});
    int polls = 0;
    std::mutex lock;
    const auto out = fusedAttention(q, k, k, spec(AttentionKind::Softmax), {}, 0.25, 0, [&] {
        std::lock_guard<std::mutex> hold(lock);
        return ++polls > 2;
    });
    CHECK_FALSE(out.defined());
    // Ten items (five blocks of rows of two heads), each polled before it starts: two ran, the
    // third poll stopped its core, and the other core polls at most once more (a pass that
    // ignored the cancel would poll ten times).
    CHECK(polls >= 3);
    CHECK(polls <= 4);
}

TEST_CASE("theFusedKernelTakesOnlyWhatItComputesTheSame") {
    if (!processorTakesTheKernel()) {
        MESSAGE("skipped: this processor has no AVX2 and FMA");
        return;
    }
    const auto q = torch::randn({1, 2, 8, 16});
    {
        torch::NoGradGuard noGrad;
        CHECK(fusedAttentionApplies(q, runOf(spec(AttentionKind::Softmax)), 0));
        CHECK(fusedAttentionApplies(
            q, runOf(spec(AttentionKind::Family, 1.0, FamilyFunction::Relu2)), 0));
        CHECK_FALSE(fusedAttentionApplies(
            q, runOf(spec(AttentionKind::Family, 1.0, FamilyFunction::Gelu)), 0));
        CHECK_FALSE(fusedAttentionApplies(q, runOf(spec(AttentionKind::Sigmoid)), 0));
        CHECK_FALSE(fusedAttentionApplies(q, runOf(spec(AttentionKind::Sparsemax)), 0));
        CHECK_FALSE(
            fusedAttentionApplies(q.to(torch::kFloat64), runOf(spec(AttentionKind::Softmax)), 0));
        // A head of layer 1 switched off: layer 1 takes the blocked path, layer 0 need not.
        RunSpec ablated = runOf(spec(AttentionKind::Softmax));
        AttentionOverride off;
        off.layer = 1;
        off.head = 0;
        off.ablation = Ablation::Zero;
        ablated.overrides.push_back(off);
        CHECK(fusedAttentionApplies(q, ablated, 0));
        CHECK_FALSE(fusedAttentionApplies(q, ablated, 1));
    }
    // Training (autograd) keeps the blocked path, whose every step has a gradient.
    torch::AutoGradMode grad(true);
    CHECK_FALSE(fusedAttentionApplies(q, runOf(spec(AttentionKind::Softmax)), 0));
}
