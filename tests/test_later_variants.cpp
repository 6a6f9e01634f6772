// The attention variants of PAPERS.md's "Beyond the two papers" against values worked out by
// hand on small rows (ties, all-negative rows, one visible key, scores of ±1e4), sparsemax and
// 1.5-entmax against bisection on τ, stick-breaking against its product form, and every variant
// on rows of 16,384 keys against a double-precision loop.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/attention.h"
#include "core_test.h"

using namespace relulens::core;

namespace {

AttentionSpec spec(AttentionKind kind) {
    AttentionSpec s;
    s.kind = kind;
    return s;
}

// The weights of one query row that sees every key of `scores` (the last row of a causal map).
std::vector<double> lastRow(const std::vector<double>& scores, const AttentionSpec& s) {
    const int64_t n = int64_t(scores.size());
    auto t = torch::tensor(scores, torch::kFloat64).to(torch::kFloat32).view({1, 1, n});
    auto w = attentionWeights(t, s, torch::ones({1}), /*rowOffset=*/n - 1)[0][0];
    auto d = w.to(torch::kFloat64).contiguous();
    return std::vector<double>(d.data_ptr<double>(), d.data_ptr<double>() + n);
}

bool near(const std::vector<double>& actual, const std::vector<double>& expected, double tol,
          std::string* why) {
    if (actual.size() != expected.size()) {
        *why =
            std::to_string(actual.size()) + " values, expected " + std::to_string(expected.size());
        return false;
    }
    for (size_t j = 0; j < actual.size(); ++j) {
        if (!(std::fabs(actual[j] - expected[j]) <= tol)) {
            std::ostringstream message;
            message.precision(9);
            message << "key " << j << ": " << actual[j] << ", expected " << expected[j];
            *why = message.str();
            return false;
        }
    }
    return true;
}

#define CHECK_ROW(kind, scores, expected, tol)                                  \
    do {                                                                        \
        std::string why;                                                        \
        REQUIRE_MESSAGE(near(lastRow(scores, spec(kind)), expected, tol, &why), \
                        (attentionKindName(kind) + ": " + why));                \
    } while (0)

// A number as the old messages wrote it: %g, six significant digits.
std::string numberText(double value) {
    std::ostringstream text;
    text << value;
    return text.str();
}

using Row = std::vector<double>;
const Row kTies = {1, 1, 0};
const Row kNegative = {-3, -1, -2};
const Row kSingle = {-5};
const Row kLarge = {1e4, -1e4, 1e4 - 1};
const Row kSmall = {-1e4, -1e4 + 1, -1e4};

double sigmoidOf(double x) {
    return 1.0 / (1.0 + std::exp(-x));
}

// α-entmax of a row by bisection on τ in double: p_j = [(α−1)·s_j − τ]_+^(1/(α−1)), Σ p = 1.
// α = 2 is sparsemax, α = 1.5 is 1.5-entmax.
Row entmaxByBisection(const Row& s, double alpha) {
    double top = -INFINITY;
    for (double v : s) top = std::max(top, (alpha - 1) * v);
    auto p = [&](double tau, size_t j) {
        return std::pow(std::max((alpha - 1) * s[j] - tau, 0.0), 1.0 / (alpha - 1));
    };
    double lo = top - 1, hi = top;  // the sum is >= 1 at lo and 0 at hi
    for (int i = 0; i < 200; ++i) {
        const double mid = 0.5 * (lo + hi);
        double sum = 0;
        for (size_t j = 0; j < s.size(); ++j) sum += p(mid, j);
        (sum >= 1 ? lo : hi) = mid;
    }
    Row out(s.size());
    for (size_t j = 0; j < s.size(); ++j) out[j] = p(lo, j);
    return out;
}

Row randomRow(int64_t n, double scale, uint64_t seed) {
    torch::manual_seed(seed);
    auto t = (torch::randn({n}, torch::kFloat32) * scale).to(torch::kFloat64).contiguous();
    return Row(t.data_ptr<double>(), t.data_ptr<double>() + n);
}

}  // namespace

TEST_CASE("sigmoidByHand") {
    // σ(s − log n): with n = 3, σ(0 − log 3) = 1 / (1 + 3) = 1/4 exactly.
    CHECK_ROW(AttentionKind::Sigmoid, kTies, (Row{0.475366886, 0.475366886, 0.25}), 1e-6);
    CHECK_ROW(AttentionKind::Sigmoid, kNegative, (Row{0.0163247687, 0.109231773, 0.043164533}),
              1e-6);
    CHECK_ROW(AttentionKind::Sigmoid, kSingle, (Row{0.00669285092}), 1e-8);  // σ(−5), log 1 = 0
    CHECK_ROW(AttentionKind::Sigmoid, kLarge, (Row{1, 0, 1}), 1e-7);
    CHECK_ROW(AttentionKind::Sigmoid, kSmall, (Row{0, 0, 0}), 1e-7);
    // A fixed bias replaces −log n: σ(1 + 2) and σ(0 + 2).
    AttentionSpec fixed = spec(AttentionKind::Sigmoid);
    fixed.sigmoidBias = 2.0;
    std::string why;
    REQUIRE_MESSAGE(
        near(lastRow(kTies, fixed), {sigmoidOf(3), sigmoidOf(3), sigmoidOf(2)}, 1e-6, &why), why);
}

TEST_CASE("softpickByHand") {
    // relu(e^s − 1) / Σ|e^s − 1|: the key with score 0 gets exactly 0, the tied ones halves.
    CHECK_ROW(AttentionKind::Softpick, kTies, (Row{0.5, 0.5, 0}), 1e-6);
    REQUIRE(lastRow(kTies, spec(AttentionKind::Softpick))[2] ==
            doctest::Approx(0.0).epsilon(1e-12));
    CHECK_ROW(AttentionKind::Softpick, kNegative, (Row{0, 0, 0}), 0);  // nothing to pick
    CHECK_ROW(AttentionKind::Softpick, kSingle, (Row{0}), 0);
    // At 1e4 the −1 vanishes beside e^s: e^0 / (e^0 + e^−1) and e^−1 / (e^0 + e^−1).
    CHECK_ROW(AttentionKind::Softpick, kLarge, (Row{0.731058579, 0, 0.268941421}), 1e-6);
    CHECK_ROW(AttentionKind::Softpick, kSmall, (Row{0, 0, 0}), 0);
    // A row with a positive and a negative score: (e^2 − 1) / ((e^2 − 1) + (1 − e^−1)).
    const double up = std::expm1(2.0), down = -std::expm1(-1.0);
    CHECK_ROW(AttentionKind::Softpick, (Row{2, -1}), (Row{up / (up + down), 0}), 1e-6);
}

TEST_CASE("softmax1ByHand") {
    // e^s / (1 + Σ e^s): ties e / (1 + 2e + 1) and 1 / (2 + 2e).
    CHECK_ROW(AttentionKind::Softmax1, kTies, (Row{0.365529289, 0.365529289, 0.134470711}), 1e-6);
    CHECK_ROW(AttentionKind::Softmax1, kNegative, (Row{0.0320586033, 0.236882818, 0.0871443187}),
              1e-6);
    CHECK_ROW(AttentionKind::Softmax1, kSingle, (Row{0.00669285092}),
              1e-8);  // e^−5 / (1 + e^−5)
    CHECK_ROW(AttentionKind::Softmax1, kLarge, (Row{0.731058579, 0, 0.268941421}), 1e-6);
    CHECK_ROW(AttentionKind::Softmax1, kSmall, (Row{0, 0, 0}), 1e-7);  // all to the extra 1
}

TEST_CASE("sparsemaxByHand") {
    // ties: k* = 2 (1 + 2·1 > 2, 1 + 3·0 ≤ 2), τ = (2 − 1) / 2.
    CHECK_ROW(AttentionKind::Sparsemax, kTies, (Row{0.5, 0.5, 0}), 1e-6);
    CHECK_ROW(AttentionKind::Sparsemax, kNegative, (Row{0, 1, 0}), 1e-6);  // gap of 1: τ = −2
    CHECK_ROW(AttentionKind::Sparsemax, kSingle, (Row{1}), 0);
    CHECK_ROW(AttentionKind::Sparsemax, kLarge, (Row{1, 0, 0}), 1e-6);
    CHECK_ROW(AttentionKind::Sparsemax, kSmall, (Row{0, 1, 0}), 1e-6);
    // Full support: τ = (0.5 + 0.4 + 0.2 − 1) / 3 = 1/30.
    CHECK_ROW(AttentionKind::Sparsemax, (Row{0.5, 0.2, 0.4}),
              (Row{0.5 - 1.0 / 30, 0.2 - 1.0 / 30, 0.4 - 1.0 / 30}), 1e-6);
}

TEST_CASE("entmax15ByHand") {
    // ties: z = s/2 = (.5, .5, 0); with all three in the support 2(.5 − τ)² + τ² = 1 gives
    // 3τ² − 2τ − 1/2 = 0, τ = (2 − √10) / 6.
    const double tau = (2 - std::sqrt(10.0)) / 6;
    CHECK_ROW(AttentionKind::Entmax15, kTies,
              (Row{(0.5 - tau) * (0.5 - tau), (0.5 - tau) * (0.5 - tau), tau * tau}), 1e-6);
    // (−3, −1, −2) shifted: z = (−1, 0, −.5); support of two: τ = −1/4 − √(7/16).
    const double two = -0.25 - std::sqrt(7.0 / 16);
    CHECK_ROW(AttentionKind::Entmax15, kNegative, (Row{0, two * two, (0.5 + two) * (0.5 + two)}),
              1e-6);
    CHECK_ROW(AttentionKind::Entmax15, kSingle, (Row{1}), 0);
    CHECK_ROW(AttentionKind::Entmax15, kLarge, (Row{two * two, 0, (0.5 + two) * (0.5 + two)}),
              1e-6);
    // (−1e4, −1e4 + 1, −1e4): z = (−.5, 0, −.5), all three: τ = −1/3 − √(5/18).
    const double three = -1.0 / 3 - std::sqrt(5.0 / 18);
    const double side = (-0.5 - three) * (-0.5 - three);
    CHECK_ROW(AttentionKind::Entmax15, kSmall, (Row{side, three * three, side}), 1e-5);
}

TEST_CASE("ssmaxByHand") {
    // softmax(0.43 · log 3 · s).
    CHECK_ROW(AttentionKind::Ssmax, kTies, (Row{0.3811699, 0.3811699, 0.2376602}), 1e-6);
    CHECK_ROW(AttentionKind::Ssmax, kNegative, (Row{0.193193416, 0.49695447, 0.309852113}), 1e-6);
    CHECK_ROW(AttentionKind::Ssmax, kSingle, (Row{1}), 0);  // log 1 = 0, one key
    CHECK_ROW(AttentionKind::Ssmax, kLarge, (Row{0.615952424, 0, 0.384047576}), 1e-5);
    CHECK_ROW(AttentionKind::Ssmax, kSmall, (Row{0.277481485, 0.445037031, 0.277481485}), 1e-5);
    // σ = 1 on two keys: softmax(log 2 · (1, 0)) = (2/3, 1/3).
    AttentionSpec one = spec(AttentionKind::Ssmax);
    one.ssmaxSigma = 1.0;
    std::string why;
    REQUIRE_MESSAGE(near(lastRow({1, 0}, one), {2.0 / 3, 1.0 / 3}, 1e-6, &why), why);
}

TEST_CASE("stickBreakingByHand") {
    // ties (1, 1, 0): α₂ = σ(0) = 1/2, α₁ = σ(1)·(1 − 1/2), α₀ = σ(1)·(1 − σ(1))·(1/2).
    CHECK_ROW(AttentionKind::StickBreaking, kTies, (Row{0.0983059666, 0.365529289, 0.5}), 1e-6);
    CHECK_ROW(AttentionKind::StickBreaking, kNegative, (Row{0.030538196, 0.236882818, 0.119202922}),
              1e-6);
    CHECK_ROW(AttentionKind::StickBreaking, kSingle, (Row{0.00669285092}), 1e-8);  // σ(−5)
    CHECK_ROW(AttentionKind::StickBreaking, kLarge, (Row{0, 0, 1}),
              1e-6);  // the nearest takes all
    CHECK_ROW(AttentionKind::StickBreaking, kSmall, (Row{0, 0, 0}), 1e-7);
}

TEST_CASE("sparsemaxAndEntmaxAgreeWithBisection") {
    for (int64_t n : {2, 7, 64, 1000}) {
        for (double scale : {0.1, 1.0, 3.0, 30.0}) {
            const Row s = randomRow(n, scale, uint64_t(n * 31 + scale * 7));
            std::string why;
            REQUIRE_MESSAGE(
                near(lastRow(s, spec(AttentionKind::Sparsemax)), entmaxByBisection(s, 2.0), 2e-5,
                     &why),
                ("sparsemax n=" + std::to_string(n) + " scale=" + numberText(scale) + ": " + why));
            REQUIRE_MESSAGE(
                near(lastRow(s, spec(AttentionKind::Entmax15)), entmaxByBisection(s, 1.5), 2e-5,
                     &why),
                ("entmax15 n=" + std::to_string(n) + " scale=" + numberText(scale) + ": " + why));
        }
    }
    // Limiting cases shared by both: a row of ties is uniform, and one score ahead of the
    // rest by more than 1 (sparsemax) or 2 (1.5-entmax, on s/2) takes everything.
    const Row ties(5, 0.7);
    std::string why;
    for (auto kind : {AttentionKind::Sparsemax, AttentionKind::Entmax15}) {
        REQUIRE_MESSAGE(near(lastRow(ties, spec(kind)), Row(5, 0.2), 1e-6, &why), why);
        REQUIRE_MESSAGE(near(lastRow({0, 2.5, -1}, spec(kind)), {0, 1, 0}, 1e-7, &why), why);
    }
    // Between the two gaps they differ: sparsemax is one-hot at a gap of 1.5, entmax is not.
    REQUIRE(lastRow({0, 1.5}, spec(AttentionKind::Sparsemax))[0] == 0);
    REQUIRE(lastRow({0, 1.5}, spec(AttentionKind::Entmax15))[0] > 0.01);
}

TEST_CASE("stickBreakingEqualsTheProductForm") {
    for (int64_t n : {1, 5, 300}) {
        const Row s = randomRow(n, 2.0, uint64_t(n));
        Row expected(static_cast<size_t>(n), 0.0);
        double remaining = 1.0;  // Π over the later keys of (1 − β)
        for (int64_t j = n - 1; j >= 0; --j) {
            const double beta = sigmoidOf(s[size_t(j)]);
            expected[size_t(j)] = beta * remaining;
            remaining *= 1 - beta;
        }
        std::string why;
        REQUIRE_MESSAGE(near(lastRow(s, spec(AttentionKind::StickBreaking)), expected, 1e-6, &why),
                        ("n=" + std::to_string(n) + ": " + why));
    }
}

TEST_CASE("rowsOf16384KeysAgreeWithDoubleLoops") {
    const int64_t n = 16384;
    for (double scale : {1.0, 100.0}) {
        const Row s = randomRow(n, scale, 7);
        // Double-precision loops, one per formula of PAPERS.md.
        const double top = *std::max_element(s.begin(), s.end());
        std::map<AttentionKind, Row> expected;
        Row sig(n), pick(n), one(n), scaled(n), stick(n);
        double pickSum = 0, oneSum = 0, scaledSum = 0;
        const double m1 = std::max(0.0, top), c = 0.43 * std::log(double(n));
        for (int64_t j = 0; j < n; ++j) {
            const double x = s[size_t(j)];
            sig[size_t(j)] = sigmoidOf(x - std::log(double(n)));
            pick[size_t(j)] = std::exp(x - top) - std::exp(-top);
            pickSum += std::fabs(pick[size_t(j)]);
            one[size_t(j)] = std::exp(x - m1);
            oneSum += one[size_t(j)];
            scaled[size_t(j)] = std::exp(c * (x - top));
            scaledSum += scaled[size_t(j)];
        }
        for (int64_t j = 0; j < n; ++j) {
            pick[size_t(j)] = std::max(pick[size_t(j)], 0.0) / (pickSum + 1e-8);
            one[size_t(j)] /= std::exp(-m1) + oneSum;
            scaled[size_t(j)] /= scaledSum;
        }
        double remaining = 1.0;
        for (int64_t j = n - 1; j >= 0; --j) {
            const double beta = sigmoidOf(s[size_t(j)]);
            stick[size_t(j)] = beta * remaining;
            remaining *= 1 - beta;
        }
        expected[AttentionKind::Sigmoid] = sig;
        expected[AttentionKind::Softpick] = pick;
        expected[AttentionKind::Softmax1] = one;
        expected[AttentionKind::Ssmax] = scaled;
        expected[AttentionKind::StickBreaking] = stick;
        expected[AttentionKind::Sparsemax] = entmaxByBisection(s, 2.0);
        expected[AttentionKind::Entmax15] = entmaxByBisection(s, 1.5);
        for (const auto& [kind, want] : expected) {
            const Row got = lastRow(s, spec(kind));
            std::string why;
            // Inputs of size 100 carry float32 rounding of about 1e-5 into the weights.
            REQUIRE_MESSAGE(near(got, want, scale > 1 ? 1e-4 : 1e-5, &why),
                            (attentionKindName(kind) + " scale " + numberText(scale) + ": " + why));
        }
    }
}

TEST_CASE("hiddenKeysAreExactlyZeroAndNeverCount") {
    // A hidden key with a huge score must not move the visible weights: rows of a causal map
    // equal the same rows computed alone.
    torch::manual_seed(3);
    auto scores = torch::randn({2, 6, 6}) * 3;
    scores.index_put_({torch::indexing::Slice(), 0, torch::indexing::Slice(1, 6)}, 1e4);
    const auto upper = torch::triu(torch::ones({6, 6}), 1).to(torch::kBool).expand({2, 6, 6});
    for (auto kind : attentionKinds()) {
        if (isPapersVariant(kind)) continue;
        const auto w = attentionWeights(scores, spec(kind), torch::ones({2}));
        const std::string name = attentionKindName(kind);
        REQUIRE_MESSAGE((w.masked_select(upper) == 0).all().item<bool>(), name);
        REQUIRE_MESSAGE(torch::isfinite(w).all().item<bool>(), name);
        for (int64_t i = 0; i < 6; ++i) {
            auto alone = attentionWeights(scores.narrow(1, i, 1).narrow(2, 0, i + 1), spec(kind),
                                          torch::ones({2}), i);
            REQUIRE_MESSAGE(
                torch::allclose(alone, w.narrow(1, i, 1).narrow(2, 0, i + 1), 1e-6, 1e-7),
                (name + " row " + std::to_string(i)));
        }
        // A tile of rows 2..4 (row offset 2) equals those rows of the whole map.
        auto tile = attentionWeights(scores.narrow(1, 2, 3).narrow(2, 0, 5), spec(kind),
                                     torch::ones({2}), 2);
        REQUIRE_MESSAGE(torch::allclose(tile, w.narrow(1, 2, 3).narrow(2, 0, 5), 1e-6, 1e-7), name);
        // Under a sliding window of 3 keys, row 5 sees keys 3..5 only.
        auto windowed = attentionWeights(scores, spec(kind), torch::ones({2}), 0, false, 3);
        REQUIRE_MESSAGE((windowed.narrow(1, 5, 1).narrow(2, 0, 3) == 0).all().item<bool>(), name);
        auto three = attentionWeights(scores.narrow(1, 5, 1).narrow(2, 3, 3), spec(kind),
                                      torch::ones({2}), 2);
        REQUIRE_MESSAGE(
            torch::allclose(windowed.narrow(1, 5, 1).narrow(2, 3, 3), three, 1e-6, 1e-7),
            (name + " window"));
    }
}

TEST_CASE("trainingGradientsAreFinite") {
    torch::manual_seed(5);
    for (auto kind : attentionKinds()) {
        if (isPapersVariant(kind)) continue;
        auto scores = (torch::randn({2, 8, 8}) * 2).requires_grad_(true);
        auto w = attentionWeights(scores, spec(kind), torch::ones({2}));
        (w * torch::randn({2, 8, 8})).sum().backward();
        const std::string name = attentionKindName(kind);
        REQUIRE_MESSAGE(torch::isfinite(scores.grad()).all().item<bool>(), name);
        REQUIRE_MESSAGE(scores.grad().abs().sum().item<double>() > 0, name);
    }
}

TEST_CASE("namesConstantsAndLabels") {
    for (auto kind : attentionKinds()) {
        auto parsed = parseAttentionKind(attentionKindName(kind));
        REQUIRE(parsed.ok());
        REQUIRE(int(*parsed) == int(kind));
    }
    REQUIRE(int(attentionKinds().size()) == 12);
    AttentionSpec s = spec(AttentionKind::Ssmax);
    REQUIRE(s.label() == std::string("ssmax"));
    s.ssmaxSigma = 0.6;
    REQUIRE(s.label() == std::string("ssmax(sigma=0.60)"));
    s.ssmaxSigma = 0;
    REQUIRE(!validateAttentionSpec(s).ok());
    AttentionSpec b = spec(AttentionKind::Sigmoid);
    REQUIRE(b != (AttentionSpec{AttentionKind::Sigmoid, FamilyFunction::Relu, 1.0, -2.0}));
    b.sigmoidBias = 99;
    REQUIRE(!validateAttentionSpec(b).ok());
    REQUIRE(spec(AttentionKind::Sparsemax).hasExactZeros());
    REQUIRE(spec(AttentionKind::Softpick).hasExactZeros());
    REQUIRE(!spec(AttentionKind::Softmax1).hasExactZeros());
    REQUIRE(!spec(AttentionKind::StickBreaking).hasExactZeros());
}
