// FFN variants against a hand-worked example: d = 2, d_ff = 3 memory slots.
#include "core/ffn.h"
#include "core_test.h"

using namespace relulens::core;

namespace {

FfnWeights weights() {
    FfnWeights w;
    w.w1 = torch::tensor({1.0f, 0.0f, 0.0f, 1.0f, 1.0f, -1.0f}).view({3, 2});  // keys
    w.b1 = torch::tensor({0.0f, -0.5f, 0.25f});
    w.w2 = torch::tensor({1.0f, 2.0f, 0.0f, 0.0f, 1.0f, -1.0f}).view({2, 3});  // values
    w.b2 = torch::tensor({0.1f, -0.1f});
    w.lnW = torch::tensor({2.0f, 0.5f});
    w.lnB = torch::tensor({0.0f, 1.0f});
    w.eps = 1e-5;
    return w;
}

torch::Tensor x() {
    return torch::tensor({0.5f, 1.0f}).view({1, 2});
}

}  // namespace

TEST_CASE("relu") {
    // pre = x·W1ᵀ + b1 = [0.5, 0.5, -0.25]; m = [0.5, 0.5, 0]; out = m·W2ᵀ + b2.
    auto m = ffnSlotActivations(x(), weights(), FfnKind::Relu);
    RL_COMPARE_ROWS(m, (std::vector<std::vector<double>>{{0.5, 0.5, 0}}), 1e-7);
    RL_COMPARE_ROWS(ffnOutput(m, weights(), FfnKind::Relu),
                    (std::vector<std::vector<double>>{{1.6, 0.4}}), 1e-6);
}

TEST_CASE("gelu") {
    auto m = ffnSlotActivations(x(), weights(), FfnKind::Gelu);
    RL_COMPARE_ROWS(m, (std::vector<std::vector<double>>{{0.34573123, 0.34573123, -0.10032342}}),
                    1e-6);
    RL_COMPARE_ROWS(ffnOutput(m, weights(), FfnKind::Gelu),
                    (std::vector<std::vector<double>>{{1.13719369, 0.34605465}}), 1e-6);
}

TEST_CASE("softmaxMemoryIgnoresBiases") {
    // softmax over slots of x·W1ᵀ = [0.5, 1, -0.5]; no b1, no b2.
    auto m = ffnSlotActivations(x(), weights(), FfnKind::Softmax);
    RL_COMPARE_ROWS(m, (std::vector<std::vector<double>>{{0.33149896, 0.54654939, 0.12195165}}),
                    1e-6);
    REQUIRE(std::abs(m.sum().item<double>() - 1.0) < 1e-6);
    RL_COMPARE_ROWS(ffnOutput(m, weights(), FfnKind::Softmax),
                    (std::vector<std::vector<double>>{{1.42459773, 0.42459773}}), 1e-6);
}

TEST_CASE("softmaxLnNormalisesTheOutput") {
    // LN([1.4246, 0.4246]) = ±0.99998 (eps 1e-5), then ·[2, 0.5] + [0, 1].
    auto m = ffnSlotActivations(x(), weights(), FfnKind::SoftmaxLn);
    RL_COMPARE_ROWS(ffnOutput(m, weights(), FfnKind::SoftmaxLn),
                    (std::vector<std::vector<double>>{{1.99996000, 0.50001000}}), 1e-6);
}

TEST_CASE("namesRoundTrip") {
    for (const char* name : {"relu", "gelu", "softmax", "softmax_ln"}) {
        auto kind = parseFfnKind(name);
        REQUIRE(kind.ok());
        REQUIRE(ffnKindName(*kind) == std::string(name));
    }
    REQUIRE(!parseFfnKind("swiglu").ok());
}
