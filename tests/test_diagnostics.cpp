// Diagnostics (PAPERS.md) against hand-worked 3×3 maps.
#include <algorithm>
#include <cmath>
#include <limits>

#include "core/attention.h"
#include "core/cpu_kernels.h"
#include "core/diagnostics.h"
#include "core/row_pass.h"
#include "core/second_core.h"
#include "core_test.h"

using namespace relulens::core;

namespace {

torch::Tensor map(std::vector<float> values) {
    return torch::tensor(values).view({1, 3, 3});
}

}  // namespace

TEST_CASE("reluStyleMap") {
    // row 0: [0.5]; row 1: [0, 2]; row 2: [1, 1, 0]
    auto w = map({0.5, 0, 0, 0, 2, 0, 1, 1, 0});
    auto d = attentionDiagnostics(w, torch::Tensor(), SparsityRule{true, 0.1});
    REQUIRE(d.heads.size() == size_t(1));
    const auto& h = d.heads[0];
    REQUIRE(std::abs(h.sparsity - 2.0 / 6.0) < 1e-6);  // 2 of 6 visible entries are 0
    REQUIRE(std::abs(h.rowMass - 1.5) < 1e-6);         // (0.5 + 2 + 2) / 3
    REQUIRE(std::abs(h.rowMassStd - std::sqrt(0.5)) < 1e-6);
    REQUIRE(std::abs(h.entropy - std::log(2.0) / 3.0) < 1e-6);   // rows: 0, 0, ln 2
    REQUIRE(std::abs(h.topShare - 2.5 / 3.0) < 1e-6);            // 1, 1, 0.5
    REQUIRE(std::abs(h.topOnePercentShare - 2.5 / 3.0) < 1e-6);  // top 1 % is top 1 at n <= 100
    REQUIRE(h.emptyRows == int64_t(0));
    // distance 0: (0.5 + 2 + 0) / 3; distance 1: (0 + 1) / 2; distance 2: 1 / 1
    REQUIRE(h.distanceProfile.size() == size_t(3));
    REQUIRE(std::abs(h.distanceProfile[0] - 2.5 / 3.0) < 1e-6);
    REQUIRE(std::abs(h.distanceProfile[1] - 0.5) < 1e-6);
    REQUIRE(std::abs(h.distanceProfile[2] - 1.0) < 1e-6);
    RL_COMPARE_ROWS(d.rowSparsity, (std::vector<std::vector<double>>{{0, 0.5, 1.0 / 3}}), 1e-6);
}

TEST_CASE("emptyRowsAreLeftOutOfEntropy") {
    auto w = map({0, 0, 0, 0.2f, 0.8f, 0, 0.1f, 0.2f, 0.7f});
    auto d = attentionDiagnostics(w, torch::Tensor(), SparsityRule{true, 0.1});
    const auto& h = d.heads[0];
    REQUIRE(h.emptyRows == int64_t(1));
    const double e1 = -(0.2 * std::log(0.2) + 0.8 * std::log(0.8));
    const double e2 = -(0.1 * std::log(0.1) + 0.2 * std::log(0.2) + 0.7 * std::log(0.7));
    REQUIRE(std::abs(h.entropy - (e1 + e2) / 2) < 1e-6);
    REQUIRE(std::abs(h.topShare - 0.75) < 1e-6);
    REQUIRE(std::abs(h.sparsity - 1.0 / 6.0) < 1e-6);
}

TEST_CASE("softmaxSparsityUsesTau") {
    // τ_i = 0.1 / n_i: 0.04 < 0.05 in row 1 and 0.02 < 0.0333 in row 2 count; nothing is 0.
    auto w = map({1, 0, 0, 0.96f, 0.04f, 0, 0.02f, 0.5f, 0.48f});
    auto thresholded = attentionDiagnostics(w, torch::Tensor(), SparsityRule{false, 0.1});
    REQUIRE(std::abs(thresholded.heads[0].sparsity - 2.0 / 6.0) < 1e-6);
    auto exact = attentionDiagnostics(w, torch::Tensor(), SparsityRule{true, 0.1});
    REQUIRE(exact.heads[0].sparsity == doctest::Approx(0.0).epsilon(1e-12));
    // τ scale 1.5: τ = 1.5, 0.75, 0.5 -> 1 (row 0), 0.04, and 0.02, 0.48 (row 2) count.
    auto wider = attentionDiagnostics(w, torch::Tensor(), SparsityRule{false, 1.5});
    REQUIRE(std::abs(wider.heads[0].sparsity - 4.0 / 6.0) < 1e-6);
    auto rule = attentionSparsityRule(AttentionSpec{}, 0.1);
    REQUIRE(!rule.exactZero);
}

TEST_CASE("topOnePercentOnLongRows") {
    // 250 rows: row i keeps its top ceil(0.01 · (i + 1)) entries (1, 2 or 3), summed by hand.
    torch::manual_seed(11);
    const int L = 250;
    auto w = torch::rand({1, L, L}) * torch::tril(torch::ones({L, L}));
    auto d = attentionDiagnostics(w, torch::Tensor(), SparsityRule{true, 0.1});
    double expected = 0;
    for (int i = 0; i < L; ++i) {
        std::vector<double> row;
        double mass = 0;
        for (int j = 0; j <= i; ++j) {
            row.push_back(w[0][i][j].item<double>());
            mass += row.back();
        }
        std::sort(row.rbegin(), row.rend());
        const int k = int(std::ceil(0.01 * (i + 1)));
        double top = 0;
        for (int j = 0; j < k; ++j) top += row[size_t(j)];
        expected += top / mass;
    }
    REQUIRE(std::abs(d.heads[0].topOnePercentShare - expected / L) < 1e-5);
}

TEST_CASE("outputVarianceByRowBuckets") {
    auto w = map({1, 0, 0, 0.5f, 0.5f, 0, 0.3f, 0.3f, 0.4f});
    // head outputs (1, 3, 2): rows [1,1], [3,3], [1,1]
    auto out = torch::tensor({1.0f, 1.0f, 3.0f, 3.0f, 1.0f, 1.0f}).view({1, 3, 2});
    auto d = attentionDiagnostics(w, out, SparsityRule{false, 0.1});
    REQUIRE(std::abs(d.heads[0].outputVariance - 8.0 / 9.0) < 1e-6);
    REQUIRE(d.outputVarianceByN.size() == size_t(2));
    REQUIRE(d.outputVarianceByN[0].nLow == int64_t(1));
    REQUIRE(d.outputVarianceByN[0].nHigh == int64_t(1));
    REQUIRE(std::abs(d.outputVarianceByN[0].variance) < 1e-9);
    REQUIRE(d.outputVarianceByN[1].nLow == int64_t(2));
    REQUIRE(d.outputVarianceByN[1].nHigh == int64_t(3));
    REQUIRE(std::abs(d.outputVarianceByN[1].variance - 1.0) < 1e-6);
}

TEST_CASE("theSparsityRuleIsNamedOneWay") {
    auto text = [](const SparsityRule& rule, const char* per, bool ascii = false) {
        return sparsityRuleText(rule, per, ascii);
    };
    REQUIRE(text({true, 0.1}, "n_i") == std::string("exactly 0"));
    REQUIRE(text({false, 0.1}, "n_i") == std::string("below τ = 0.1 / n_i"));
    REQUIRE(text({false, 0.25}, "d_ff", true) == std::string("below tau = 0.25 / d_ff"));
}

TEST_CASE("ffnSparsityAndSlotsSweep") {
    FfnWeights w;
    torch::manual_seed(3);
    w.w1 = torch::randn({40, 4});
    w.b1 = torch::zeros({40});
    w.w2 = torch::randn({4, 40});
    w.b2 = torch::zeros({4});
    w.lnW = torch::ones({4});
    w.lnB = torch::zeros({4});
    auto x = torch::randn({5, 4});
    // Slots 30–39 read nothing (zero rows of W1) and have bias −1: relu(−1) = 0 for every
    // token, and slots 0–29 have bias +10, far above what 4 inputs of W1 reach here: never
    // 0. So 10 of 40 slots are zero at each of the 5 tokens: sparsity 1/4 exactly.
    w.w1.narrow(0, 30, 10).zero_();
    w.b1 = torch::cat({torch::full({30}, 10.0), torch::full({10}, -1.0)});
    REQUIRE(torch::mm(x, w.w1.t()).abs().max().item<double>() < 10.0);
    auto m = ffnSlotActivations(x, w, FfnKind::Relu);
    auto d = ffnDiagnostics(x, m, w, FfnKind::Relu, 0.1);
    REQUIRE_MESSAGE(std::abs(d.sparsity - 0.25) < 1e-9, d.sparsity);
    REQUIRE(d.rule.exactZero);
    // per token: the same quarter at each
    REQUIRE(d.tokenSparsity.size(0) == int64_t(5));
    REQUIRE((d.tokenSparsity - 0.25).abs().max().item<double>() < 1e-9);
    // slot counts 16, 32, 40; the last equals the full memory's output variance.
    REQUIRE(d.outputVarianceBySlots.size() == size_t(3));
    REQUIRE(d.outputVarianceBySlots.back().nHigh == int64_t(40));
    REQUIRE(std::abs(d.outputVarianceBySlots.back().variance - d.outputVariance) < 1e-6);
    auto ds =
        ffnDiagnostics(x, ffnSlotActivations(x, w, FfnKind::Softmax), w, FfnKind::Softmax, 0.1);
    REQUIRE(!ds.rule.exactZero);
}

TEST_CASE("fusedRowsEqualTheTensorPath") {
    // The CPU's one pass per row against the whole-tensor arithmetic other devices use, on
    // causal blocks of 9 rows (the last block short) with zeros, ties and masked entries; and
    // on rows long enough that their top 1 % is several entries, with weights spread over
    // thirteen orders of magnitude as long softmax rows have them.
    struct Row {
        const char* name;
        bool exact;
        int window;
        bool negative;
        int64_t tokens = 31;
        bool spread = false;
        double zeroShare = 0.3;
        bool ties = false;  // weights in steps of 1/8, so that many equal the k-th largest
    };
    const std::vector<Row> rows = {
        {"relu zeros", true, 0, false},
        {"softmax tau", false, 0, false},
        {"window", true, 7, false},
        {"window tau", false, 5, false},
        {"negative weights", false, 0, true},
        {"long rows, weights from 1e-13 to 1", false, 0, false, 420, true},
        {"long relu rows, mostly zeros", true, 0, false, 420, false, 0.97},
        {"long rows of tied weights", false, 0, false, 420, false, 0.3, true},
        {"long windowed rows", false, 300, false, 420, true},
    };
    for (const Row& row : rows) {
        INFO("row: " << std::string(row.name));
        const bool exact = row.exact;
        const int window = row.window;
        const bool negative = row.negative;
        torch::manual_seed(11);
        const int64_t H = 3, L = row.tokens;
        auto w = torch::rand({H, L, L});
        if (row.spread) w = torch::exp(-30.0 * w);
        if (row.ties) w = (w * 8).floor() / 8;
        if (negative) w = w - 0.3;
        w = torch::where(torch::rand({H, L, L}) < row.zeroShare, torch::zeros({}), w);
        w.select(1, 4).fill_(0);  // an empty row
        w = w * causalMask(L, L, 0, torch::kCPU, window).to(torch::kFloat32).unsqueeze(0);
        const SparsityRule rule{exact, 0.4};
        AttentionDiagnosticsAccumulator fused(H, L, rule, torch::kCPU, window),
            tensors(H, L, rule, torch::kCPU, window);
        tensors.setFused(false);
        for (int64_t r0 = 0; r0 < L; r0 += 9) {
            const int64_t R = std::min<int64_t>(9, L - r0);
            const auto block = w.narrow(1, r0, R).narrow(2, 0, r0 + R).contiguous();
            fused.add(block, r0);
            tensors.add(block, r0);
        }
        const auto a = fused.finish(torch::Tensor()), b = tensors.finish(torch::Tensor());
        for (const auto& [x, y] : {std::pair{a.rowSparsity, b.rowSparsity},
                                   {a.rowMass, b.rowMass},
                                   {a.rowEntropy, b.rowEntropy}}) {
            REQUIRE((x - y).abs().max().item<double>() < 1e-5);
        }
        for (int64_t h = 0; h < H; ++h) {
            const auto& p = a.heads[size_t(h)];
            const auto& q = b.heads[size_t(h)];
            REQUIRE(std::abs(p.sparsity - q.sparsity) < 1e-6);
            REQUIRE(std::abs(p.entropy - q.entropy) < 1e-5);
            REQUIRE(std::abs(p.topShare - q.topShare) < 1e-5);
            REQUIRE(std::abs(p.topOnePercentShare - q.topOnePercentShare) < 1e-5);
            REQUIRE(p.emptyRows == q.emptyRows);
            REQUIRE(std::abs(p.sink.firstTokenShare - q.sink.firstTokenShare) < 1e-5);
            REQUIRE(std::abs(p.sink.sinkScore - q.sink.sinkScore) < 1e-6);
            REQUIRE(p.sink.zeroMassRows == q.sink.zeroMassRows);
            for (size_t d = 0; d < p.distanceProfile.size(); ++d) {
                REQUIRE(std::abs(p.distanceProfile[d] - q.distanceProfile[d]) < 1e-5);
            }
        }
    }
}

TEST_CASE("rowPassOnAHandWorkedRow") {
    // x = [0, 0.5, 0.25, 0, 0.25]: 2 zeros, sum 1, Σ x log x = 0.5 ln 0.5 + 2 · 0.25 ln 0.25,
    // weights by distance from the query (entry 4 is at distance 0): [0.25, 0, 0.25, 0.5, 0];
    // above 0.25: only 0.5, and 2 entries equal to it, so the 2 largest sum to 0.75.
    const std::vector<float> x = {0, 0.5f, 0.25f, 0, 0.25f};
    std::vector<RowPassPath> paths = {RowPassPath::Portable};
    if (avx2KernelsRun()) paths.push_back(RowPassPath::Avx2);
    for (const auto path : paths) {
        INFO("path " << int(path));
        std::vector<float> totals(5, 0.0f), candidates(5);
        RowPassInput in;
        in.x = x.data();
        in.m = 5;
        in.exactZero = true;
        in.totals = totals.data();
        in.threshold = 0.25f;
        in.candidates = candidates.data();
        const RowPassOutput r = rowPass(in, path);
        REQUIRE(r.counted == 2);
        REQUIRE(std::abs(r.sum - 1.0) < 1e-7);
        REQUIRE(std::abs(r.positiveSum - 1.0) < 1e-7);
        REQUIRE(std::abs(r.positiveXLogX - (0.5 * std::log(0.5) + 0.5 * std::log(0.25))) < 1e-6);
        REQUIRE(r.best == 0.5f);
        REQUIRE(totals == std::vector<float>{0.25f, 0, 0.25f, 0.5f, 0});
        REQUIRE(r.candidates == 1);
        REQUIRE(candidates[0] == 0.5f);
        REQUIRE(r.equal == 2);
        LargestSum top;
        REQUIRE(sumOfLargestCandidates(candidates.data(), r.candidates, r.equal, 0.25f, 2, top));
        REQUIRE(top.sum == 0.75);
        REQUIRE(top.kth == 0.25f);
        // Four largest: the candidates cannot tell (only 3 reach the threshold).
        REQUIRE(!sumOfLargestCandidates(candidates.data(), r.candidates, r.equal, 0.25f, 4, top));
        // Below tau = 0.3 and after a window starting at entry 2: entries 2, 3 and 4 are
        // visible, of which 0.25, 0 and 0.25 are below.
        in.exactZero = false;
        in.tau = 0.3f;
        in.first = 2;
        REQUIRE(rowPass(in, path).counted == 3);
    }
}

TEST_CASE("rowPassPathsAgreeWithPlainLoops") {
    // Rows of every length around the lanes' widths, with zeros, negative and tied entries,
    // against loops over the entries one at a time in double.
    torch::manual_seed(5);
    std::vector<RowPassPath> paths = {RowPassPath::Portable};
    if (avx2KernelsRun()) paths.push_back(RowPassPath::Avx2);
    for (int64_t m : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 100, 257}) {
        auto row = ((torch::rand({m}) - 0.2) * 8).floor() / 8;  // steps of 1/8, some negative
        std::vector<float> x(row.data_ptr<float>(), row.data_ptr<float>() + m);
        for (const bool exact : {true, false}) {
            const int64_t first = m / 3;
            const float tau = 0.2f, threshold = 0.25f;
            double sum = 0, positive = 0, xlogx = 0, magnitude = 1;
            float best = -std::numeric_limits<float>::infinity();
            int64_t counted = 0, equal = 0;
            std::vector<float> above;
            std::vector<float> totals(static_cast<size_t>(m), 0.0f);
            for (int64_t j = 0; j < m; ++j) {
                const float v = x[size_t(j)];
                sum += v;
                positive += std::max(v, 0.0f);
                if (v > 0) xlogx += double(v) * std::log(double(v));
                if (v > 0) magnitude += std::abs(double(v) * std::log(double(v)));
                magnitude += std::abs(v);
                best = std::max(best, v);
                if (j >= first && (exact ? v == 0 : v < tau)) ++counted;
                if (v > threshold) above.push_back(v);
                if (v == threshold) ++equal;
                totals[size_t(m - 1 - j)] += v;
            }
            for (const auto path : paths) {
                INFO("m " << m << ", exact " << exact << ", path " << int(path));
                std::vector<float> gotTotals(static_cast<size_t>(m), 0.0f);
                std::vector<float> candidates(static_cast<size_t>(m));
                RowPassInput in;
                in.x = x.data();
                in.m = m;
                in.first = first;
                in.exactZero = exact;
                in.tau = tau;
                in.totals = gotTotals.data();
                in.threshold = threshold;
                in.candidates = candidates.data();
                const RowPassOutput r = rowPass(in, path);
                // Float lanes over up to 257 entries: relative to the terms' magnitudes.
                REQUIRE(std::abs(r.sum - sum) < 1e-5 * magnitude);
                REQUIRE(std::abs(r.positiveSum - positive) < 1e-5 * magnitude);
                REQUIRE(std::abs(r.positiveXLogX - xlogx) < 1e-5 * magnitude);
                REQUIRE(r.best == best);
                REQUIRE(r.counted == counted);
                REQUIRE(r.equal == equal);
                REQUIRE(gotTotals == totals);
                candidates.resize(size_t(r.candidates));
                std::sort(candidates.begin(), candidates.end());
                std::sort(above.begin(), above.end());
                REQUIRE(candidates == above);
            }
        }
    }
}

TEST_CASE("sinksOnMapsBuiltByHand") {
    // Three heads over four tokens, rows added in two blocks:
    //   head 0, a perfect sink: every row puts all its weight on token 0;
    //   head 1, uniform: row i gives 1 / (i + 1) to each of its keys;
    //   head 2, ReLU-like, row 1 abstains (all zeros): rows [.5], [0 0], [0 .4 .2], [.1 0 0
    //   .3].
    // The forward pass hands a block's heads over in two parts from two threads at once; the
    // same maps added that way (heads 0 and 1..2) must give the same figures.
    struct Row {
        const char* name;
        bool fused, twoParts;
    };
    const std::vector<Row> rows = {
        {"one pass per row (CPU)", true, false},
        {"tensor path (other devices)", false, false},
        {"one pass per row, heads in two parts on two threads", true, true},
        {"tensor path, heads in two parts on two threads", false, true},
    };
    for (const Row& row : rows) {
        INFO("row: " << std::string(row.name));
        const bool fused = row.fused;
        auto w = torch::zeros({3, 4, 4});
        for (int64_t i = 0; i < 4; ++i) {
            w[0][i][0] = 1.0;
            for (int64_t j = 0; j <= i; ++j) w[1][i][j] = 1.0 / double(i + 1);
        }
        w[2][0][0] = 0.5;
        w[2][2][1] = 0.4;
        w[2][2][2] = 0.2;
        w[2][3][0] = 0.1;
        w[2][3][3] = 0.3;
        AttentionDiagnosticsAccumulator accumulator(3, 4, SparsityRule{true, 0.1}, torch::kCPU);
        accumulator.setFused(fused);
        auto add = [&](const torch::Tensor& block, int64_t r0) {
            if (!row.twoParts) {
                accumulator.add(block.contiguous(), r0);
                return;
            }
            runOnTwoCores([&] { accumulator.add(block.narrow(0, 0, 1).contiguous(), r0, 0); },
                          [&] { accumulator.add(block.narrow(0, 1, 2).contiguous(), r0, 1); });
        };
        add(w.narrow(1, 0, 2).narrow(2, 0, 2), 0);
        add(w.narrow(1, 2, 2), 2);
        auto d = accumulator.finish(torch::Tensor());
        // Head 0: share 1 in rows 1..3; sink score (1 + 1 + 1 + 1) / 4.
        REQUIRE(std::abs(d.heads[0].sink.firstTokenShare - 1.0) < 1e-6);
        REQUIRE(std::abs(d.heads[0].sink.sinkScore - 1.0) < 1e-6);
        // Head 1: share (1/2 + 1/3 + 1/4) / 3; score (1 + 1/2 + 1/3 + 1/4) / 4 — over 0.3 at
        // four tokens, so Gu et al.'s score calls a uniform head a sink in a short text.
        REQUIRE(std::abs(d.heads[1].sink.firstTokenShare - (0.5 + 1.0 / 3 + 0.25) / 3) < 1e-6);
        REQUIRE(std::abs(d.heads[1].sink.sinkScore - (1 + 0.5 + 1.0 / 3 + 0.25) / 4) < 1e-6);
        // Head 2: rows 2 and 3 have mass: (0 / 0.6 + 0.1 / 0.4) / 2; the abstaining row is
        // counted apart, not as a sink; score (0.5 + 0 + 0 + 0.1) / 4.
        REQUIRE(std::abs(d.heads[2].sink.firstTokenShare - 0.125) < 1e-6);
        REQUIRE(d.heads[2].sink.zeroMassRows == int64_t(1));
        REQUIRE(d.heads[0].sink.zeroMassRows == int64_t(0));
        REQUIRE(std::abs(d.heads[2].sink.sinkScore - 0.15) < 1e-6);
        // The flag and the first token's key and value norms: keys of token 0 are (3, 4), the
        // others (1, 0) and (0, 2), (0, 1); one kv head read by all three query heads.
        auto keys = torch::tensor({3.0f, 4.0f, 1.0f, 0.0f, 0.0f, 2.0f, 0.0f, 1.0f}).view({1, 4, 2});
        auto values =
            torch::tensor({0.0f, 0.1f, 2.0f, 0.0f, 0.0f, 2.0f, 2.0f, 0.0f}).view({1, 4, 2});
        completeSinkDiagnostics(d.heads, keys, values, 0.3);
        REQUIRE(d.heads[0].sink.sinkHead);
        REQUIRE(d.heads[1].sink.sinkHead);
        REQUIRE(!d.heads[2].sink.sinkHead);
        for (const auto& h : d.heads) {
            REQUIRE(std::abs(h.sink.firstKeyNorm - 5.0) < 1e-6);
            REQUIRE(std::abs(h.sink.otherKeyNorm - (1.0 + 2.0 + 1.0) / 3) < 1e-6);
            REQUIRE(std::abs(h.sink.firstValueNorm - 0.1) < 1e-6);  // a sink that writes little
            REQUIRE(std::abs(h.sink.otherValueNorm - 2.0) < 1e-6);
        }
        completeSinkDiagnostics(d.heads, keys, values, 0.6);  // a stricter ε leaves head 1 out
        REQUIRE((d.heads[0].sink.sinkHead && !d.heads[1].sink.sinkHead));
    }
}

TEST_CASE("residualStreamPeaksMedianAndKurtosis") {
    const std::vector<float> x = {1, -2, 0.5f, 0, 0, 100, -3, 1, 2, 0, 0, -50};
    const auto r = residualDiagnostics(torch::tensor(x).view({3, 4}));
    REQUIRE(r.largest.size() == size_t(3));
    REQUIRE(r.largest[0].value == doctest::Approx(100.0).epsilon(1e-12));  // token 1, dimension 1
    REQUIRE(r.largest[0].token == int64_t(1));
    REQUIRE(r.largest[0].dimension == int64_t(1));
    REQUIRE(r.largest[1].value ==
            doctest::Approx(-50.0).epsilon(1e-12));  // signed, token 2, dimension 3
    REQUIRE(r.largest[1].token == int64_t(2));
    REQUIRE(r.largest[1].dimension == int64_t(3));
    REQUIRE(r.largest[2].value == doctest::Approx(-3.0).epsilon(1e-12));
    // |h| sorted: 0 0 0 0 .5 1 1 2 2 3 50 100: the two middle ones are both 1.
    REQUIRE(r.medianAbs == doctest::Approx(1.0).epsilon(1e-12));
    REQUIRE(std::abs(r.largestOverMedian() - 100.0) < 1e-9);
    double mean = 0, m2 = 0, m4 = 0;
    for (float v : x) mean += v / 12.0;
    for (float v : x) {
        m2 += std::pow(v - mean, 2) / 12.0;
        m4 += std::pow(v - mean, 4) / 12.0;
    }
    REQUIRE(std::abs(r.kurtosis - m4 / (m2 * m2)) < 1e-9 * r.kurtosis);
    REQUIRE(r.kurtosis > 3);  // heavy-tailed, as massive activations make a stream
    // An even count with distinct middle values: |h| = 1 2 3 4, the lower of the two (as
    // torch::median has it).
    const auto even = residualDiagnostics(torch::tensor({-4.0f, 1.0f, 3.0f, -2.0f}).view({2, 2}));
    REQUIRE(even.medianAbs == doctest::Approx(2.0).epsilon(1e-12));
    REQUIRE(even.largest.size() == size_t(3));
    REQUIRE(even.largest[0].value == doctest::Approx(-4.0).epsilon(1e-12));
    REQUIRE(even.largest[1].value == doctest::Approx(3.0).epsilon(1e-12));
    REQUIRE(even.largest[1].token == int64_t(1));
    REQUIRE(even.largest[1].dimension == int64_t(0));
}

TEST_CASE("residualMedianOfLongStreams") {
    // Long streams whose magnitudes spread over many orders (so the median's search crosses many
    // bins of the magnitudes' leading bits), with ties and zeros, odd and even counts: against a
    // full sort of the magnitudes, and the kurtosis against a plain loop in double.
    torch::manual_seed(21);
    for (const auto& [rows, width] : {std::pair<int64_t, int64_t>{109, 367}, {2500, 16}}) {
        const int64_t n = rows * width;  // 40003 and 40000
        INFO("n " << n);
        auto t = torch::randn({n}) * torch::exp(2 * torch::randn({n}));
        t.narrow(0, 0, 5000).fill_(0.0f);
        t.narrow(0, 5000, 3000).fill_(-0.75f);
        t = t.index_select(0, torch::randperm(n));
        const auto r = residualDiagnostics(t.view({rows, width}));
        const float* x = t.data_ptr<float>();
        std::vector<float> magnitudes(x, x + n);
        for (float& m : magnitudes) m = std::abs(m);
        std::sort(magnitudes.begin(), magnitudes.end());
        REQUIRE(r.medianAbs == double(magnitudes[size_t((n - 1) / 2)]));
        double mean = 0, m2 = 0, m4 = 0;
        for (int64_t i = 0; i < n; ++i) mean += double(x[i]);
        mean /= double(n);
        for (int64_t i = 0; i < n; ++i) {
            const double c = double(x[i]) - mean;
            m2 += c * c;
            m4 += c * c * c * c;
        }
        m2 /= double(n);
        m4 /= double(n);
        REQUIRE(std::abs(r.kurtosis - m4 / (m2 * m2)) < 1e-9 * r.kurtosis);
    }
}

TEST_CASE("ffnTauRuleByTokenOnHandBuiltSlots") {
    // A softmax memory of 4 slots counts |m| below tau = 0.4 / 4 = 0.1. Rows: 0.05 and −0.05
    // are below (0.2 and 0.5 are not); 0.09 and 0 are below (0.1 is not, nor −0.2); none of
    // four ones. The given output's six values 1..6 have mean 3.5 and variance 17.5 / 6.
    FfnWeights w;
    torch::manual_seed(4);
    w.w1 = torch::randn({4, 2});
    w.b1 = torch::zeros({4});
    w.w2 = torch::randn({2, 4});
    w.b2 = torch::zeros({2});
    w.lnW = torch::ones({2});
    w.lnB = torch::zeros({2});
    const auto slots =
        torch::tensor({0.05f, -0.05f, 0.2f, 0.5f, 0.1f, 0.09f, -0.2f, 0.0f, 1.0f, 1.0f, 1.0f, 1.0f})
            .view({3, 4});
    const auto output = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}).view({3, 2});
    const auto d = ffnDiagnostics(torch::randn({3, 2}), slots, w, FfnKind::Softmax, 0.4, output);
    REQUIRE(!d.rule.exactZero);
    REQUIRE(d.tokenSparsity.size(0) == int64_t(3));
    REQUIRE(d.tokenSparsity[0].item<float>() == 0.5f);
    REQUIRE(d.tokenSparsity[1].item<float>() == 0.5f);
    REQUIRE(d.tokenSparsity[2].item<float>() == 0.0f);
    REQUIRE(std::abs(d.sparsity - 1.0 / 3.0) < 1e-9);
    REQUIRE(std::abs(d.outputVariance - 17.5 / 6.0) < 1e-12);
}

TEST_CASE("gatedFfnByHand") {
    // slot activations (3 tokens × 2 memory) and down (d 2 × 2 memory) chosen by hand: the
    // output rows are (1, 0), (0, -1) and (6, 3); their six values have mean 1.5 and
    // variance 33.5 / 6.
    GatedFfnWeights w;
    w.down = torch::tensor({1.0f, 2.0f, 0.0f, 1.0f}).view({2, 2});
    const auto memory = torch::tensor({1.0f, 0.0f, 2.0f, -1.0f, 0.0f, 3.0f}).view({3, 2});
    const auto d = gatedFfnDiagnostics(memory, torch::Tensor(), w, FfnKind::Relu, 0.1);
    REQUIRE(d.rule.exactZero);
    REQUIRE(std::abs(d.sparsity - 2.0 / 6.0) < 1e-6);
    REQUIRE(std::abs(d.outputVariance - 33.5 / 6.0) < 1e-6);
    REQUIRE(d.outputVarianceBySlots.size() == size_t(1));
    REQUIRE(std::abs(d.outputVarianceBySlots[0].variance - 33.5 / 6.0) < 1e-6);
    // a silu gate counts |m| below tau / d_ff = 0.05: only the two exact zeros here
    REQUIRE(std::abs(gatedFfnDiagnostics(memory, torch::Tensor(), w, FfnKind::Silu, 0.1).sparsity -
                     2.0 / 6.0) < 1e-6);
}

TEST_CASE("gatedSlotCurveSumsPrefixesOfDown") {
    torch::manual_seed(5);
    GatedFfnWeights w;
    w.down = torch::randn({6, 40}, torch::kFloat64).to(torch::kFloat32);
    const auto memory = torch::randn({9, 40});
    const auto d = gatedFfnDiagnostics(memory, torch::Tensor(), w, FfnKind::Silu, 0.1);
    REQUIRE(d.outputVarianceBySlots.size() == size_t(3));  // 16, 32, 40 memory
    for (const auto& bucket : d.outputVarianceBySlots) {
        // the first n memory alone, summed slot by slot in double
        auto out = torch::zeros({9, 6}, torch::kFloat64);
        for (int64_t i = 0; i < bucket.nHigh; ++i) {
            out += memory.select(1, i).to(torch::kFloat64).unsqueeze(1) *
                   w.down.select(1, i).to(torch::kFloat64).unsqueeze(0);
        }
        const double expected = out.var(false).item<double>();
        REQUIRE_MESSAGE(std::abs(bucket.variance - expected) < 1e-5 * expected, bucket.nHigh);
    }
}
