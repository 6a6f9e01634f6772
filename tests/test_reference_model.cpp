// The checked-in tiny model against an independent NumPy forward pass
// (tests/reference/reference_forward.py wrote tiny_reference.json) for every variant.
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/capture.h"
#include "core/checkpoint.h"
#include "core/lens.h"
#include "core/transformer.h"
#include "test_support.h"

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

}  // namespace

class TestReferenceModel : public QObject {
    Q_OBJECT
    json reference_;
private Q_SLOTS:
    void initTestCase() {
        std::ifstream in(relulens::test::dataPath("tiny_reference.json"));
        QVERIFY(in.good());
        reference_ = json::parse(in);
    }

    void everyVariantMatchesTheReference() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
        const auto ids = reference_["ids"].get<std::vector<int64_t>>();
        const int64_t L = int64_t(ids.size());
        const int64_t mapLayer = reference_["map_layer"], mapHead = reference_["map_head"];
        const int64_t slotLayer = reference_["slot_layer"], slotToken = reference_["slot_token"];
        QCOMPARE(reference_["runs"].size(), size_t(23));
        for (const auto& run : reference_["runs"]) {
            const RunSpec spec = specFromJson(run["spec"]);
            const QByteArray label = QByteArray::fromStdString(describe(spec));
            torch::NoGradGuard noGrad;
            ForwardTrace trace;
            trace.options.weights = true;
            trace.options.ffn = true;
            auto logits = loaded->model->forward(torch::tensor(ids).view({1, L}), spec, &trace)[0];
            const auto lastError = maxDifference(logits[L - 1], run["last_logits"]);
            const auto firstError = maxDifference(logits[0], run["first_logits"]);
            QVERIFY2(lastError < 2e-4,
                     label + " last logits differ by " + QByteArray::number(lastError));
            QVERIFY2(firstError < 2e-4, label + " first logits differ");
            const auto& map = trace.layers[size_t(mapLayer)].weights[0][mapHead];  // (L, L)
            for (int64_t i = 0; i < L; ++i) {
                const auto row = run["map"][size_t(i)].get<std::vector<double>>();
                QCOMPARE(int64_t(row.size()), i + 1);
                QVERIFY2(maxDifference(map[i].narrow(0, 0, i + 1), row) < 1e-5,
                         label + " map row " + QByteArray::number(qlonglong(i)));
                if (i + 1 < L) {
                    QVERIFY2((map[i].narrow(0, i + 1, L - i - 1) == 0).all().item<bool>(),
                             label + " masked entries not zero");
                }
            }
            const auto slotValues = trace.layers[size_t(slotLayer)].slotActivations[0][slotToken];
            QVERIFY2(maxDifference(slotValues, run["slots"]) < 1e-5, label + " slot activations");
        }
    }

    // What overrides and ablations change at each token, against the NumPy reference's own
    // forward passes with and without them.
    void theEffectOfOverridesMatchesTheReference() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY(loaded.ok());
        int checked = 0;
        for (const auto& run : reference_["runs"]) {
            if (!run.contains("effect")) continue;
            CaptureRequest request;
            request.run = specFromJson(run["spec"]);
            request.diagnostics = false;
            request.effect = true;
            const QByteArray label = QByteArray::fromStdString(describe(request.run));
            auto result = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
            QVERIFY2(result.ok(), result.ok() ? "" : result.error().c_str());
            QVERIFY(result->effect);
            QVERIFY(!result->trainedWithRun);
            const auto& expected = run["effect"];
            const auto delta = expected["delta_log_prob"].get<std::vector<double>>();
            const auto kl = expected["kl"].get<std::vector<double>>();
            QCOMPARE(result->effect->deltaLogProb.size(), delta.size());
            for (size_t i = 0; i < delta.size(); ++i) {
                QVERIFY2(std::abs(result->effect->deltaLogProb[i] - delta[i]) < 2e-4,
                         label + " Δ log p");
                QVERIFY2(std::abs(result->effect->kl[i] - kl[i]) < 2e-4, label + " KL");
            }
            QVERIFY2(std::abs(result->effect->loss - expected["loss"].get<double>()) < 1e-4, label);
            QVERIFY2(std::abs(result->effect->unchangedLoss -
                              expected["unchanged_loss"].get<double>()) < 1e-4,
                     label);
            ++checked;
        }
        QCOMPARE(checked, 4);

        // Nothing overridden: the two passes are the same pass, and nothing changes.
        CaptureRequest plain;
        plain.diagnostics = false;
        plain.effect = true;
        auto unchanged = capture(*loaded->model, loaded->tokenizer, reference_["text"], plain);
        QVERIFY(unchanged.ok() && unchanged->effect);
        for (size_t i = 0; i < unchanged->effect->kl.size(); ++i) {
            QCOMPARE(unchanged->effect->deltaLogProb[i], 0.0);
            QCOMPARE(unchanged->effect->kl[i], 0.0);
        }
        QCOMPARE(unchanged->effect->loss, unchanged->effect->unchangedLoss);
    }

    // The effect of a change on hand-built logits over the tiny model's 512-token vocabulary:
    // unchanged, every row is uniform; changed, row 0 gives its actual next token the logit
    // ln 512 (others 0), row 1 gives it ln(1/2), row 2 is left as it was. Worked by hand:
    //   row 0: p = 512/1023, so Δ log p = ln(512 · 512/1023) > 0 and
    //          KL(q ‖ p) = ln(1023/512) − ln(512)/512;
    //   row 1: p = 0.5/511.5, Δ log p = ln(512 · 0.5/511.5) < 0,
    //          KL = ln(511.5/512) − ln(0.5)/512;
    //   row 2: Δ = 0, KL = 0. Loss: the mean over the three rows of −log p.
    void theEffectOfAChangeHasTheHandWorkedSignAndSize() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY2(loaded, loaded.error().c_str());
        const int64_t V = 512;
        QCOMPARE(loaded->tokenizer.vocabSize(), V);
        const std::vector<int64_t> ids = {5, 17, 42, 99};
        const auto unchanged = torch::zeros({4, V});
        auto changed = torch::zeros({4, V});
        changed[0][17] = std::log(512.0);
        changed[1][42] = std::log(0.5);
        const auto effect = changeEffect(changed, unchanged, ids, 3, loaded->tokenizer);
        QCOMPARE(effect.deltaLogProb.size(), size_t(3));
        QCOMPARE(effect.kl.size(), size_t(3));
        auto near = [](double a, double b) { return std::abs(a - b) < 1e-5; };
        QVERIFY2(near(effect.deltaLogProb[0], std::log(512.0 * 512.0 / 1023.0)),
                 qPrintable(QString::number(effect.deltaLogProb[0])));
        QVERIFY2(near(effect.deltaLogProb[1], std::log(512.0 * 0.5 / 511.5)),
                 qPrintable(QString::number(effect.deltaLogProb[1])));
        QVERIFY(effect.deltaLogProb[0] > 5.5 && effect.deltaLogProb[1] < -0.69);
        QVERIFY(near(effect.deltaLogProb[2], 0.0));
        QVERIFY2(near(effect.kl[0], std::log(1023.0 / 512.0) - std::log(512.0) / 512.0),
                 qPrintable(QString::number(effect.kl[0])));
        QVERIFY2(near(effect.kl[1], std::log(511.5 / 512.0) - std::log(0.5) / 512.0),
                 qPrintable(QString::number(effect.kl[1])));
        QVERIFY(near(effect.kl[2], 0.0));
        const double uniform = std::log(512.0);
        QVERIFY(near(effect.unchangedLoss, uniform));
        QVERIFY(
            near(effect.loss, (-std::log(512.0 / 1023.0) - std::log(0.5 / 511.5) + uniform) / 3.0));
    }

    void theLogitLensMatchesTheReference() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY(loaded.ok());
        CaptureRequest request;
        request.run = specFromJson(reference_["lens"]["spec"]);
        request.lens = true;
        request.lensPositions = {-1, 3};
        request.topK = 5;
        auto result = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
        QVERIFY2(result.ok(), result.ok() ? "" : result.error().c_str());
        QVERIFY(result->lens);
        const auto& expected = reference_["lens"]["next_token_probability"];
        const auto& p = result->lens->nextTokenProbability;
        QCOMPARE(p.size(0), int64_t(expected.size()));
        for (int64_t l = 0; l < p.size(0); ++l) {
            QVERIFY2(maxDifference(p[l], expected[size_t(l)].get<std::vector<double>>()) < 1e-5,
                     qPrintable(QString("lens layer %1").arg(l)));
        }
        // The last layer's lens is the model's own prediction.
        const auto L = result->tokens.size();
        QCOMPARE(result->lens->top.size(), size_t(2));
        QCOMPARE(result->lens->top[0].position, int64_t(L - 1));
        QCOMPARE(result->lens->top[1].position, int64_t(3));
        const auto& last = result->lens->top[0].layers.back();
        QCOMPARE(last.size(), result->predictions.back().size());
        for (size_t k = 0; k < last.size(); ++k) {
            QCOMPARE(last[k].id, result->predictions.back()[k].id);
            QVERIFY(std::abs(last[k].probability - result->predictions.back()[k].probability) <
                    1e-6);
        }
        request.lensPositions = {int64_t(L)};
        auto outside = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
        QVERIFY(!outside.ok());
        QVERIFY(QString::fromStdString(outside.error()).contains("outside the text"));
    }

    // A model whose second layer adds nothing (its attention output and FFN output weights and
    // bias are zero): the stream after layer 1 is the stream after layer 0, so the lens reads the
    // same there, and it differs on the unmodified model.
    void theLensIsConstantWhereLayersAddNothing() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY(loaded.ok());
        const auto* transformer = dynamic_cast<const Transformer*>(loaded->model.get());
        QVERIFY(transformer);
        TensorMap tensors;
        for (const auto& [name, t] : transformer->tensors()) tensors[name] = t.detach().clone();
        for (const char* name : {"layers.1.attn.wo", "layers.1.ffn.w2", "layers.1.ffn.b2"}) {
            QVERIFY2(tensors.count(name), name);
            tensors[name].zero_();
        }
        const auto silent = Transformer::fromTensors(transformer->config(), tensors);
        CaptureRequest request;
        request.lens = true;
        request.diagnostics = false;
        for (const LanguageModel* model :
             std::vector<const LanguageModel*>{&silent, loaded->model.get()}) {
            auto result = capture(*model, loaded->tokenizer, reference_["text"], request);
            QVERIFY(result.ok() && result->lens);
            const auto& p = result->lens->nextTokenProbability;
            const double difference = (p[0] - p[1]).abs().max().item<double>();
            if (model == &silent) {
                QCOMPARE(difference, 0.0);
            } else {
                QVERIFY2(difference > 1e-3, "the unmodified model's second layer changes the lens");
            }
        }
    }

    void captureReportsTheRunAndTraining() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY(loaded.ok());
        CaptureRequest request;
        request.run.attention.kind = AttentionKind::ReluLen;
        request.maps = {{1, 0}};
        auto result = capture(*loaded->model, loaded->tokenizer, reference_["text"], request);
        QVERIFY(result.ok());
        QVERIFY(!result->trainedWithRun);  // the tiny model says it was trained with softmax
        QCOMPARE(result->maps->requested().size(), size_t(1));
        QCOMPARE(result->layers.size(), size_t(2));
        QCOMPARE(result->layers[0].attentionDiagnostics.heads.size(), size_t(2));
        QVERIFY(result->layers[0].attentionDiagnostics.heads[0].sparsity > 0);
        // The relu_len map has exact zeros where raw scores are negative, and nowhere else.
        const auto& map = result->maps->requested()[0];
        auto visible = torch::tril(torch::ones_like(map.weights)).to(torch::kBool);
        auto zeros = (map.weights == 0).logical_and(visible);
        auto negative = (map.scores <= 0).logical_and(visible);
        QVERIFY(torch::equal(zeros, negative));

        request.run = loaded->model->info().trained;
        auto trained = capture(*loaded->model, loaded->tokenizer, "Mr. Darcy", request);
        QVERIFY(trained.ok());
        QVERIFY(trained->trainedWithRun);
        QCOMPARE(int(trained->predictions.size()), int(trained->tokens.size()));
        double total = 0;
        for (const auto& p : trained->predictions[0]) total += p.probability;
        QVERIFY(total > 0 && total <= 1.0 + 1e-6);

        auto empty = capture(*loaded->model, loaded->tokenizer, "", request);
        QVERIFY(!empty.ok());
        QVERIFY(QString::fromStdString(empty.error()).contains("empty"));
        request.maps = {{2, 0}};
        auto badHead = capture(*loaded->model, loaded->tokenizer, "text", request);
        QVERIFY(!badHead.ok());
        QVERIFY(QString::fromStdString(badHead.error()).contains("no head 2:0"));
    }
};

QTEST_GUILESS_MAIN(TestReferenceModel)
#include "test_reference_model.moc"
