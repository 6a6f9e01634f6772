// The checked-in tiny model against an independent NumPy forward pass
// (tests/reference/reference_forward.py wrote tiny_reference.json) for every variant.
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/capture.h"
#include "core/checkpoint.h"
#include "test_support.h"

using namespace relulens::core;
using nlohmann::json;

namespace {

RunSpec specFromJson(const json& j) {
    RunSpec run;
    run.attention.kind = *parseAttentionKind(j["attention"].get<std::string>());
    run.attention.a = j.value("a", 1.0);
    if (j.contains("bias")) run.attention.sigmoidBias = j["bias"].get<double>();
    run.attention.ssmaxSigma = j.value("sigma", AttentionSpec::kDefaultSsmaxSigma);
    if (j.contains("h")) run.attention.h = *parseFamilyFunction(j["h"].get<std::string>());
    run.ffn = *parseFfnKind(j["ffn"].get<std::string>());
    return run;
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
        QCOMPARE(reference_["runs"].size(), size_t(19));
        for (const auto& run : reference_["runs"]) {
            const RunSpec spec = specFromJson(run["spec"]);
            const QByteArray label = QByteArray::fromStdString(spec.attention.label() + " / " +
                                                               ffnKindName(spec.ffn));
            torch::NoGradGuard noGrad;
            ForwardTrace trace;
            trace.options.weights = true;
            trace.options.ffn = true;
            auto logits = loaded->model->forward(torch::tensor(ids).view({1, L}), spec, &trace)[0];
            const auto lastError = maxDifference(logits[L - 1], run["last_logits"]);
            const auto firstError = maxDifference(logits[0], run["first_logits"]);
            QVERIFY2(lastError < 2e-4, label + " last logits differ by " + QByteArray::number(lastError));
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
        QCOMPARE(result->layers[0].attention.heads.size(), size_t(2));
        QVERIFY(result->layers[0].attention.heads[0].sparsity > 0);
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
