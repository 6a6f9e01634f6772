// Attention variants against values worked out by hand (PAPERS.md formulas) on a 3×3 example.
// Masked entries hold a large score (9) so that a broken mask cannot go unnoticed.
#include "core/attention.h"
#include "core/language_model.h"
#include "core_test.h"

using namespace relulens::core;
using relulens::test::spec;

namespace {

// One head: row i sees keys 0..i; entries above the diagonal are masked.
torch::Tensor scores() {
    return torch::tensor({1.0, 9.0, 9.0, 2.0, -1.0, 9.0, 0.5, 3.0, -2.0}, torch::kFloat32)
        .view({1, 3, 3});
}

torch::Tensor noGamma() {
    return torch::ones({1});
}

}  // namespace

TEST_CASE("everyFamilyFunctionIsListedOnceAndParsesBack") {
    // PAPERS.md's family h(s) / n^a: relu, relu², gelu, softplus, sigmoid.
    const std::vector<std::string> expected = {"relu", "relu2", "gelu", "softplus", "sigmoid"};
    std::vector<std::string> names;
    for (auto h : relulens::core::familyFunctions()) {
        names.push_back(familyFunctionName(h));
        auto parsed = parseFamilyFunction(names.back());
        REQUIRE_MESSAGE(parsed.ok(), parsed.error());
        REQUIRE(*parsed == h);
    }
    REQUIRE(names == expected);
    auto unknown = parseFamilyFunction("tanh");
    REQUIRE(!unknown.ok());
    REQUIRE(unknown.error() ==
            std::string("unknown family function 'tanh' (expected one of relu, relu2, gelu, "
                        "softplus, sigmoid)"));
}

TEST_CASE("softmaxByHand") {
    auto w = attentionWeights(scores(), spec(AttentionKind::Softmax), noGamma())[0];
    // row 1: e^2 / (e^2 + e^-1) = 1 / (1 + e^-3); row 2: e^0.5, e^3, e^-2 normalised.
    RL_COMPARE_ROWS(
        w,
        (std::vector<std::vector<double>>{
            {1, 0, 0}, {0.95257413, 0.04742587, 0}, {0.07538875, 0.91842297, 0.00618829}}),
        1e-6);
    auto rowSums = w.sum(-1);
    REQUIRE(torch::allclose(rowSums, torch::ones({3}), 1e-6, 1e-6));
}

TEST_CASE("reluKeepsPositivesAndCountsZeros") {
    auto w = attentionWeights(scores(), spec(AttentionKind::Relu), noGamma())[0];
    RL_COMPARE_ROWS(w, (std::vector<std::vector<double>>{{1, 0, 0}, {2, 0, 0}, {0.5, 3, 0}}), 1e-7);
    REQUIRE((w >= 0).all().item<bool>());
    // 3 masked entries plus the two negative visible scores (-1, -2) are exactly zero.
    REQUIRE((w == 0).sum().item<int64_t>() == int64_t(5));
}

TEST_CASE("reluLenDividesByRowLength") {
    auto w = attentionWeights(scores(), spec(AttentionKind::ReluLen, 1.0), noGamma())[0];
    RL_COMPARE_ROWS(w, (std::vector<std::vector<double>>{{1, 0, 0}, {1, 0, 0}, {0.5 / 3, 1, 0}}),
                    1e-7);
    auto half = attentionWeights(scores(), spec(AttentionKind::ReluLen, 0.5), noGamma())[0];
    RL_COMPARE_ROWS(half,
                    (std::vector<std::vector<double>>{
                        {1, 0, 0}, {1.41421356, 0, 0}, {0.28867513, 1.73205081, 0}}),
                    1e-6);
}

TEST_CASE("reluformerUsesPerHeadGamma") {
    // Two heads with the same scores, gamma 2 and 0.5: scale γ·sqrt(n_i / 2).
    auto s = scores().repeat({2, 1, 1});
    auto gamma = torch::tensor({2.0f, 0.5f});
    auto w = attentionWeights(s, spec(AttentionKind::ReluFormer), gamma);
    RL_COMPARE_ROWS(w[0],
                    (std::vector<std::vector<double>>{
                        {0.70710678, 0, 0}, {1, 0, 0}, {0.20412415, 1.22474487, 0}}),
                    1e-6);
    RL_COMPARE_ROWS(w[1],
                    (std::vector<std::vector<double>>{
                        {2.82842712, 0, 0}, {4, 0, 0}, {0.81649658, 4.89897949, 0}}),
                    1e-5);
}

TEST_CASE("familyFunctions") {
    auto relu2 = attentionWeights(scores(), spec(AttentionKind::Family, 1.0, FamilyFunction::Relu2),
                                  noGamma())[0];
    RL_COMPARE_ROWS(
        relu2, (std::vector<std::vector<double>>{{1, 0, 0}, {2, 0, 0}, {0.08333333, 3, 0}}), 1e-6);
    // sigmoid is never zero on visible entries; masked entries still are (a = 0: no division).
    auto sig = attentionWeights(scores(), spec(AttentionKind::Family, 0.0, FamilyFunction::Sigmoid),
                                noGamma())[0];
    RL_COMPARE_ROWS(
        sig,
        (std::vector<std::vector<double>>{
            {0.73105858, 0, 0}, {0.88079708, 0.26894142, 0}, {0.62245933, 0.95257413, 0.11920292}}),
        1e-6);
    auto soft = attentionWeights(
        scores(), spec(AttentionKind::Family, 2.0, FamilyFunction::Softplus), noGamma())[0];
    RL_COMPARE_ROWS(
        soft,
        (std::vector<std::vector<double>>{
            {1.31326169, 0, 0}, {0.53173200, 0.07831542, 0}, {0.10823078, 0.33873193, 0.01410311}}),
        1e-6);
    // gelu(x) = x·Φ(x): negative scores give small negative weights.
    auto g = attentionWeights(scores(), spec(AttentionKind::Family, 1.0, FamilyFunction::Gelu),
                              noGamma())[0];
    RL_COMPARE_ROWS(g,
                    (std::vector<std::vector<double>>{{0.84134475, 0, 0},
                                                      {0.97724987, -0.07932763, 0},
                                                      {0.11524374, 0.99865010, -0.01516675}}),
                    1e-6);
}

TEST_CASE("maskedEntriesAreExactlyZeroForEveryVariant") {
    const AttentionSpec all[] = {spec(AttentionKind::Softmax),
                                 spec(AttentionKind::Relu),
                                 spec(AttentionKind::ReluLen),
                                 spec(AttentionKind::ReluFormer),
                                 spec(AttentionKind::Family, 1.0, FamilyFunction::Gelu),
                                 spec(AttentionKind::Family, 0.3, FamilyFunction::Softplus),
                                 spec(AttentionKind::Family, 1.7, FamilyFunction::Sigmoid)};
    auto big = torch::randn({2, 7, 7}) * 3;
    auto upper = torch::triu(torch::ones({7, 7}), 1).to(torch::kBool);
    for (const auto& s : all) {
        auto w = attentionWeights(big, s, torch::tensor({1.0f, 1.3f}));
        REQUIRE_MESSAGE(
            (w.masked_select(upper.unsqueeze(0).expand({2, 7, 7})) == 0).all().item<bool>(),
            s.label());
    }
}

TEST_CASE("rowOffsetMatchesTheFullMap") {
    // Rows 1..2 computed alone, as a tile starting at row 1, equal rows 1..2 of the full map.
    auto full = attentionWeights(scores(), spec(AttentionKind::ReluLen), noGamma());
    auto tile = attentionWeights(scores().narrow(1, 1, 2), spec(AttentionKind::ReluLen), noGamma(),
                                 /*rowOffset=*/1);
    REQUIRE(torch::equal(tile, full.narrow(1, 1, 2)));
    auto soft =
        attentionWeights(scores().narrow(1, 1, 2), spec(AttentionKind::Softmax), noGamma(), 1);
    REQUIRE(torch::allclose(
        soft, attentionWeights(scores(), spec(AttentionKind::Softmax), noGamma()).narrow(1, 1, 2)));
}

TEST_CASE("variantNamesRoundTrip") {
    for (const char* name : {"softmax", "relu", "relu_len", "reluformer", "family"}) {
        auto kind = parseAttentionKind(name);
        REQUIRE(kind.ok());
        REQUIRE(attentionKindName(*kind) == std::string(name));
    }
    REQUIRE(!parseAttentionKind("sparsemix").ok());
    REQUIRE(relulens::test::contains(parseAttentionKind("sparsemix").error(), "sparsemix"));
    // The message lists what is accepted, later variants included.
    REQUIRE(relulens::test::contains(parseAttentionKind("x").error(), "stickbreaking"));
    AttentionSpec bad = spec(AttentionKind::Family, 2.5);
    REQUIRE(!validateAttentionSpec(bad).ok());
}

// Rotary position embedding from a table made once per pass (rotateInto) against a hand-worked
// rotation, and against applyRotary (its tensor form) on the layout the forward pass uses.
TEST_CASE("rotaryTablesRotateAsApplyRotaryDoes") {
    torch::NoGradGuard noGrad;
    // d_head 4: pairs (x0, x2) and (x1, x3) turn by position · 1 and position · 0.5 radians.
    const auto frequencies = torch::tensor({1.0f, 0.5f});
    const auto table =
        rotaryTable(3, 2, frequencies, torch::TensorOptions().dtype(torch::kFloat32));
    auto x = torch::tensor({1.0f, 2.0f, 3.0f, 4.0f}).view({1, 1, 1, 4});
    auto out = torch::empty_like(x);
    rotateInto(x, table, 1, out);   // row 1 of the table: position 4
    const double a = 4.0, b = 2.0;  // the two angles
    const double expected[4] = {
        1 * std::cos(a) - 3 * std::sin(a), 2 * std::cos(b) - 4 * std::sin(b),
        1 * std::sin(a) + 3 * std::cos(a), 2 * std::sin(b) + 4 * std::cos(b)};
    for (int i = 0; i < 4; ++i)
        REQUIRE(out[0][0][0][i].item<double>() == doctest::Approx(expected[i]).epsilon(1e-6));

    // (B, n, H, dh) made (B, H, n, dh) by a transpose, as the forward's heads are; rows 40.. of
    // a table of positions 100..
    const int64_t B = 2, n = 24, H = 3, dh = 10, row0 = 40;
    const auto inverse = ropeFrequencies(dh, 10000.0);
    const auto heads = torch::randn({B, n, H, dh}).transpose(1, 2);
    const auto full = rotaryTable(100, 80, inverse, torch::TensorOptions().dtype(torch::kFloat32));
    auto into = torch::zeros({B, H, 2 * n, dh});  // a view of half its rows
    rotateInto(heads, full, row0, into.narrow(2, n, n));
    const auto reference = applyRotary(heads, 100 + row0, inverse);
    // (bit for bit on x86-64 builds; a compiler that fuses multiply-adds may differ in the last
    // place)
    REQUIRE(torch::allclose(into.narrow(2, n, n), reference, 1e-6, 1e-6));
    REQUIRE((into.narrow(2, 0, n) == 0).all().item<bool>());  // nothing written outside it
    // in double: the tensor path
    const auto doubles = heads.to(torch::kFloat64);
    const auto fullDouble =
        rotaryTable(100, 80, inverse, torch::TensorOptions().dtype(torch::kFloat64));
    auto outDouble = torch::empty({B, H, n, dh}, torch::kFloat64);
    rotateInto(doubles, fullDouble, row0, outDouble);
    REQUIRE(torch::allclose(outDouble, applyRotary(doubles, 100 + row0, inverse), 1e-12, 1e-12));
}
