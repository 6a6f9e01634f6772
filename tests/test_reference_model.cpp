// The checked-in tiny model against an independent NumPy forward pass
// (tests/reference/reference_forward.py wrote tiny_reference.json) for every variant.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/capture.h"
#include "core/checkpoint.h"
#include "core/lens.h"
#include "core/transformer.h"
#include "core_test.h"

using namespace relulens::core;
using nlohmann::json;

namespace {

RunSpec specFromJson(const json& j) {
    RunSpec run;
    run.attention.kind = *parseAttentionKind(j["attention"].get<std::string>());
    run.attention.lengthExponent = j.value("a", 1.0);
    if (j.contains("bias")) run.attention.sigmoidBias = j["bias"].get<double>();
    run.attention.ssmaxSigma = j.value("sigma", AttentionSpec::kDefaultSsmaxSigma);
    if (j.contains("h"))
        run.attention.familyFunction = *parseFamilyFunction(j["h"].get<std::string>());
    run.ffn = *parseFfnKind(j["ffn"].get<std::string>());
    run.overrides = relulens::test::overridesFromJson(j.value("overrides", json::array()));
    return run;
}

std::string describe(const RunSpec& run) {
    std::string out = run.attention.label() + " / " + ffnKindName(run.ffn);
    for (const auto& o : run.overrides) out += " " + o.label();
    return out;
}

double maxDifference(const torch::Tensor& actual, const std::vector<double>& expected) {
    auto a = actual.to(torch::kFloat64).contiguous().flatten();
    auto e = torch::tensor(expected, torch::kFloat64);
    return (a - e).abs().max().item<double>();
}

// A number as the old messages wrote it: %g, six significant digits.
std::string numberText(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

// What initTestCase read once for every test: the NumPy reference.
struct Fixture {
    json reference;

    Fixture() {
        std::ifstream in(relulens::test::dataPath("tiny_reference.json"));
        if (!in.good()) throw std::runtime_error("tests/data/tiny_reference.json is missing");
        reference = json::parse(in);
    }
};

const Fixture& fixture() {
    static Fixture f;
    return f;
}

}  // namespace

TEST_CASE("everyVariantMatchesTheReference") {
    json reference_ = fixture().reference;  // a copy: operator[] on it behaves as on the old member
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? std::string() : loaded.error()));
    const auto ids = reference_["ids"].get<std::vector<int64_t>>();
    const int64_t L = int64_t(ids.size());
    const int64_t mapLayer = reference_["map_layer"], mapHead = reference_["map_head"];
    const int64_t slotLayer = reference_["slot_layer"], slotToken = reference_["slot_token"];
    REQUIRE(reference_["runs"].size() == size_t(23));
    for (const auto& run : reference_["runs"]) {
        const RunSpec spec = specFromJson(run["spec"]);
        const std::string label = describe(spec);
        torch::NoGradGuard noGrad;
        ForwardTrace trace;
        trace.options.weights = true;
        trace.options.ffn = true;
        auto logits = loaded->model->forward(torch::tensor(ids).view({1, L}), spec, &trace)[0];
        const auto lastError = maxDifference(logits[L - 1], run["last_logits"]);
        const auto firstError = maxDifference(logits[0], run["first_logits"]);
        REQUIRE_MESSAGE(lastError < 2e-4,
                        (label + " last logits differ by " + numberText(lastError)));
        REQUIRE_MESSAGE(firstError < 2e-4, (label + " first logits differ"));
        // The same pass without a trace (each half of the rows on a core of its own)
        const auto plain = loaded->model->forward(torch::tensor(ids).view({1, L}), spec)[0];
        REQUIRE_MESSAGE(maxDifference(plain[L - 1], run["last_logits"]) < 2e-4,
                        (label + " last logits without a trace"));
        REQUIRE_MESSAGE(maxDifference(plain[0], run["first_logits"]) < 2e-4,
                        (label + " first logits without a trace"));
        const auto& map = trace.layers[size_t(mapLayer)].weights[0][mapHead];  // (L, L)
        for (int64_t i = 0; i < L; ++i) {
            const auto row = run["map"][size_t(i)].get<std::vector<double>>();
            REQUIRE(int64_t(row.size()) == i + 1);
            REQUIRE_MESSAGE(maxDifference(map[i].narrow(0, 0, i + 1), row) < 1e-5,
                            (label + " map row " + std::to_string(i)));
            if (i + 1 < L) {
                REQUIRE_MESSAGE((map[i].narrow(0, i + 1, L - i - 1) == 0).all().item<bool>(),
                                (label + " masked entries not zero"));
            }
        }
        const auto slotValues = trace.layers[size_t(slotLayer)].slotActivations[0][slotToken];
        REQUIRE_MESSAGE(maxDifference(slotValues, run["slots"]) < 1e-5,
                        (label + " slot activations"));
    }
}

// On 150 tokens (the second half of the rows starts at row 75, where the rotary positions must
// go on from), the passes without autograd (which split the rows between two cores on a
// two-core machine), traced and untraced, agree with the whole-rows pass that autograd takes
// (the weights need no gradient, so it builds no graph), on every variant.
TEST_CASE("theForwardPassInRowHalvesMatchesTheWholeRowsOne") {
    json reference_ = fixture().reference;
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE(loaded.ok());
    const int64_t L = 150, vocab = loaded->model->info().vocabSize;
    const auto ids = (torch::arange(L, torch::kLong) * 37 + 11).remainder(vocab).view({1, L});
    for (const auto& run : reference_["runs"]) {
        const RunSpec spec = specFromJson(run["spec"]);
        torch::Tensor whole;
        {
            torch::AutoGradMode autograd(true);
            whole = loaded->model->forward(ids, spec).detach();
        }
        torch::NoGradGuard noGrad;
        ForwardTrace trace;
        const auto traced = loaded->model->forward(ids, spec, &trace);
        const auto plain = loaded->model->forward(ids, spec);
        const double size = whole.abs().max().item<double>();  // float rounding scales with it
        for (const auto& [name, logits] : {std::pair{"untraced", plain}, {"traced", traced}}) {
            REQUIRE(logits.sizes() == whole.sizes());
            const double error = (logits - whole).abs().max().item<double>();
            REQUIRE_MESSAGE(
                error < 1e-5 * std::max(1.0, size),
                (describe(spec) + ": " + name + " logits differ by " + numberText(error)));
        }
    }
}

// What overrides and ablations change at each token, against the NumPy reference's own
// forward passes with and without them.
TEST_CASE("theEffectOfOverridesMatchesTheReference") {
    json reference_ = fixture().reference;  // a copy: operator[] on it behaves as on the old member
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE(loaded.ok());
    int checked = 0;
    for (const auto& run : reference_["runs"]) {
        if (!run.contains("effect")) continue;
        CaptureRequest request;
        request.run = specFromJson(run["spec"]);
        request.diagnostics = false;
        request.effect = true;
        const std::string label = describe(request.run);
        auto result = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
        REQUIRE_MESSAGE(result.ok(), (result.ok() ? std::string() : result.error()));
        REQUIRE(result->effect);
        REQUIRE_FALSE(result->trainedWithRun);
        const auto& expected = run["effect"];
        const auto delta = expected["delta_log_prob"].get<std::vector<double>>();
        const auto kl = expected["kl"].get<std::vector<double>>();
        REQUIRE(result->effect->deltaLogProb.size() == delta.size());
        for (size_t i = 0; i < delta.size(); ++i) {
            REQUIRE_MESSAGE(std::abs(result->effect->deltaLogProb[i] - delta[i]) < 2e-4,
                            (label + " Δ log p"));
            REQUIRE_MESSAGE(std::abs(result->effect->kl[i] - kl[i]) < 2e-4, (label + " KL"));
        }
        REQUIRE_MESSAGE(std::abs(result->effect->loss - expected["loss"].get<double>()) < 1e-4,
                        label);
        REQUIRE_MESSAGE(std::abs(result->effect->unchangedLoss -
                                 expected["unchanged_loss"].get<double>()) < 1e-4,
                        label);
        ++checked;
    }
    REQUIRE(checked == 4);

    // Nothing overridden: the two passes are the same pass, and nothing changes.
    CaptureRequest plain;
    plain.diagnostics = false;
    plain.effect = true;
    auto unchanged = capture(*loaded->model, loaded->tokenizer, reference_["text"], plain);
    REQUIRE((unchanged.ok() && unchanged->effect));
    for (size_t i = 0; i < unchanged->effect->kl.size(); ++i) {
        REQUIRE(unchanged->effect->deltaLogProb[i] == doctest::Approx(0.0).epsilon(1e-12));
        REQUIRE(unchanged->effect->kl[i] == doctest::Approx(0.0).epsilon(1e-12));
    }
    REQUIRE(unchanged->effect->loss ==
            doctest::Approx(unchanged->effect->unchangedLoss).epsilon(1e-12));
}

// The effect of a change on hand-built logits over the tiny model's 512-token vocabulary:
// unchanged, every row is uniform; changed, row 0 gives its actual next token the logit
// ln 512 (others 0), row 1 gives it ln(1/2), row 2 is left as it was. Worked by hand:
//   row 0: p = 512/1023, so Δ log p = ln(512 · 512/1023) > 0 and
//          KL(q ‖ p) = ln(1023/512) − ln(512)/512;
//   row 1: p = 0.5/511.5, Δ log p = ln(512 · 0.5/511.5) < 0,
//          KL = ln(511.5/512) − ln(0.5)/512;
//   row 2: Δ = 0, KL = 0. Loss: the mean over the three rows of −log p.
TEST_CASE("theEffectOfAChangeHasTheHandWorkedSignAndSize") {
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE_MESSAGE(loaded, loaded.error());
    const int64_t V = 512;
    REQUIRE(loaded->tokenizer.vocabSize() == V);
    const std::vector<int64_t> ids = {5, 17, 42, 99};
    const auto unchanged = torch::zeros({4, V});
    auto changed = torch::zeros({4, V});
    changed[0][17] = std::log(512.0);
    changed[1][42] = std::log(0.5);
    const auto effect = changeEffect(changed, unchanged, ids, 3, loaded->tokenizer);
    REQUIRE(effect.deltaLogProb.size() == size_t(3));
    REQUIRE(effect.kl.size() == size_t(3));
    auto near = [](double a, double b) { return std::abs(a - b) < 1e-5; };
    REQUIRE_MESSAGE(near(effect.deltaLogProb[0], std::log(512.0 * 512.0 / 1023.0)),
                    numberText(effect.deltaLogProb[0]));
    REQUIRE_MESSAGE(near(effect.deltaLogProb[1], std::log(512.0 * 0.5 / 511.5)),
                    numberText(effect.deltaLogProb[1]));
    REQUIRE((effect.deltaLogProb[0] > 5.5 && effect.deltaLogProb[1] < -0.69));
    REQUIRE(near(effect.deltaLogProb[2], 0.0));
    REQUIRE_MESSAGE(near(effect.kl[0], std::log(1023.0 / 512.0) - std::log(512.0) / 512.0),
                    numberText(effect.kl[0]));
    REQUIRE_MESSAGE(near(effect.kl[1], std::log(511.5 / 512.0) - std::log(0.5) / 512.0),
                    numberText(effect.kl[1]));
    REQUIRE(near(effect.kl[2], 0.0));
    const double uniform = std::log(512.0);
    REQUIRE(near(effect.unchangedLoss, uniform));
    REQUIRE(near(effect.loss, (-std::log(512.0 / 1023.0) - std::log(0.5 / 511.5) + uniform) / 3.0));
}

// Next-token predictions on hand-built logits over the tiny model's 512 pieces, all 0 except:
//   row 0: token 300 at ln 4, tokens 7 and 9 at ln 2 (a tie), token 500 at ln 3:
//          Σ exp = 508 + 4 + 2 + 2 + 3 = 519, so p = 4/519, 3/519, 2/519, 2/519 and 1/519 for the
//          rest, the tie in id order (7 before 9), then the lowest ids among the ones;
//   row 1: all 0 but token 511 at 1000 (a logit that overflows exp unless shifted): p ≈ 1.
TEST_CASE("predictionsOnHandBuiltLogits") {
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE_MESSAGE(loaded, loaded.error());
    const int64_t V = 512;
    REQUIRE(loaded->tokenizer.vocabSize() == V);
    auto logits = torch::zeros({2, V});
    logits[0][300] = std::log(4.0);
    logits[0][7] = std::log(2.0);
    logits[0][9] = std::log(2.0);
    logits[0][500] = std::log(3.0);
    logits[1][511] = 1000.0;
    const auto top = topPredictions(logits, 6, loaded->tokenizer);
    REQUIRE(top.size() == size_t(2));
    REQUIRE(top[0].size() == size_t(6));
    const std::vector<int64_t> ids = {300, 500, 7, 9, 0, 1};
    const std::vector<double> p = {4, 3, 2, 2, 1, 1};
    for (size_t k = 0; k < ids.size(); ++k) {
        CHECK(top[0][k].id == ids[k]);
        CHECK(top[0][k].probability == doctest::Approx(p[k] / 519.0).epsilon(1e-6));
        CHECK(top[0][k].piece == loaded->tokenizer.piece(ids[k]));
    }
    REQUIRE(top[1][0].id == 511);
    CHECK(top[1][0].probability == doctest::Approx(1.0).epsilon(1e-9));
    CHECK(top[1][1].probability == doctest::Approx(0.0));
}

TEST_CASE("theLogitLensMatchesTheReference") {
    json reference_ = fixture().reference;  // a copy: operator[] on it behaves as on the old member
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE(loaded.ok());
    CaptureRequest request;
    request.run = specFromJson(reference_["lens"]["spec"]);
    request.lens = true;
    request.lensPositions = {-1, 3};
    request.topK = 5;
    auto result = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
    REQUIRE_MESSAGE(result.ok(), (result.ok() ? std::string() : result.error()));
    REQUIRE(result->lens);
    const auto& expected = reference_["lens"]["next_token_probability"];
    const auto& p = result->lens->nextTokenProbability;
    REQUIRE(p.size(0) == int64_t(expected.size()));
    for (int64_t l = 0; l < p.size(0); ++l) {
        REQUIRE_MESSAGE(maxDifference(p[l], expected[size_t(l)].get<std::vector<double>>()) < 1e-5,
                        ("lens layer " + std::to_string(l)));
    }
    // The last layer's lens is the model's own prediction.
    const auto L = result->tokens.size();
    REQUIRE(result->lens->top.size() == size_t(2));
    REQUIRE(result->lens->top[0].position == int64_t(L - 1));
    REQUIRE(result->lens->top[1].position == int64_t(3));
    const auto& last = result->lens->top[0].layers.back();
    REQUIRE(last.size() == result->predictions.back().size());
    for (size_t k = 0; k < last.size(); ++k) {
        REQUIRE(last[k].id == result->predictions.back()[k].id);
        REQUIRE(std::abs(last[k].probability - result->predictions.back()[k].probability) < 1e-6);
    }
    request.lensPositions = {int64_t(L)};
    auto outside = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
    REQUIRE_FALSE(outside.ok());
    REQUIRE(relulens::test::contains(outside.error(), "outside the text"));
}

// A model whose second layer adds nothing (its attention output and FFN output weights and
// bias are zero): the stream after layer 1 is the stream after layer 0, so the lens reads the
// same there, and it differs on the unmodified model.
TEST_CASE("theLensIsConstantWhereLayersAddNothing") {
    json reference_ = fixture().reference;  // a copy: operator[] on it behaves as on the old member
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE(loaded.ok());
    const auto* transformer = dynamic_cast<const Transformer*>(loaded->model.get());
    REQUIRE(transformer != nullptr);
    TensorMap tensors;
    for (const auto& [name, t] : transformer->tensors()) tensors[name] = t.detach().clone();
    for (const char* name : {"layers.1.attn.wo", "layers.1.ffn.w2", "layers.1.ffn.b2"}) {
        REQUIRE_MESSAGE(tensors.count(name), name);
        tensors[name].zero_();
    }
    const auto silent = Transformer::fromTensors(transformer->config(), tensors);
    CaptureRequest request;
    request.lens = true;
    request.diagnostics = false;
    for (const LanguageModel* model :
         std::vector<const LanguageModel*>{&silent, loaded->model.get()}) {
        auto result = capture(*model, loaded->tokenizer, reference_["text"], request);
        REQUIRE((result.ok() && result->lens));
        const auto& p = result->lens->nextTokenProbability;
        const double difference = (p[0] - p[1]).abs().max().item<double>();
        if (model == &silent) {
            REQUIRE(difference == doctest::Approx(0.0).epsilon(1e-12));
        } else {
            REQUIRE_MESSAGE(difference > 1e-3,
                            "the unmodified model's second layer changes the lens");
        }
    }
}

TEST_CASE("captureReportsTheRunAndTraining") {
    json reference_ = fixture().reference;  // a copy: operator[] on it behaves as on the old member
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE(loaded.ok());
    CaptureRequest request;
    request.run.attention.kind = AttentionKind::ReluLen;
    request.maps = {{1, 0}};
    auto result = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
    REQUIRE(result.ok());
    REQUIRE_FALSE(result->trainedWithRun);  // the tiny model says it was trained with softmax
    REQUIRE(result->maps->requested().size() == size_t(1));
    REQUIRE(result->layers.size() == size_t(2));
    REQUIRE(result->layers[0].attentionDiagnostics.heads.size() == size_t(2));
    REQUIRE(result->layers[0].attentionDiagnostics.heads[0].sparsity > 0);
    // The relu_len map has exact zeros where raw scores are negative, and nowhere else.
    const auto& map = result->maps->requested()[0];
    auto visible = torch::tril(torch::ones_like(map.weights)).to(torch::kBool);
    auto zeros = (map.weights == 0).logical_and(visible);
    auto negative = (map.scores <= 0).logical_and(visible);
    REQUIRE(torch::equal(zeros, negative));

    request.run = loaded->model->info().trained;
    auto trained = capture(*loaded->model, loaded->tokenizer, "Mr. Darcy", request);
    REQUIRE(trained.ok());
    REQUIRE(trained->trainedWithRun);
    REQUIRE(int(trained->predictions.size()) == int(trained->tokens.size()));
    double total = 0;
    for (const auto& p : trained->predictions[0]) total += p.probability;
    REQUIRE((total > 0 && total <= 1.0 + 1e-6));

    auto empty = capture(*loaded->model, loaded->tokenizer, "", request);
    REQUIRE_FALSE(empty.ok());
    REQUIRE(relulens::test::contains(empty.error(), "empty"));
    request.maps = {{2, 0}};
    auto badHead = capture(*loaded->model, loaded->tokenizer, "text", request);
    REQUIRE_FALSE(badHead.ok());
    REQUIRE(relulens::test::contains(badHead.error(), "no head 2:0"));
}
