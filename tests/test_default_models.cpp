// The eight bundled default models: each loads, its config names the variant it was trained with, and
// its loss on a held-out excerpt (never trained on) is within 5 % of the model card's value.
#include <QtTest>

#include <fstream>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/corpus.h"
#include "core/evaluation.h"
#include "test_support.h"

using namespace relulens::core;
using nlohmann::json;

class TestDefaultModels : public QObject {
    Q_OBJECT
    json card_;
    std::string models_ = std::string(RELULENS_RESOURCES) + "/models";
private Q_SLOTS:
    void initTestCase() {
        std::ifstream in(models_ + "/results.json");
        QVERIFY2(in.good(), "resources/models/results.json is missing");
        card_ = json::parse(in);
    }

    void allEightVariantsAreShipped() {
        std::set<std::string> names;
        for (const auto& m : card_["models"]) names.insert(m["name"].get<std::string>());
        for (const char* expected : {"softmax", "relu-len", "reluformer", "relu", "ffn-softmax",
                                     "ffn-softmax-ln", "sigmoid", "softpick"}) {
            QVERIFY2(names.count(expected), expected);
        }
    }

    void eachModelLoadsAndMatchesTheCard() {
        for (const auto& m : card_["models"]) {
            const std::string name = m["name"];
            auto loaded = loadModelFolder(models_ + "/" + name);
            QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
            const auto& config = loaded->model->info();
            QCOMPARE(QString::fromStdString(config.trained.attention.name()),
                     QString::fromStdString(m["attention"]));
            QCOMPARE(QString::fromStdString(ffnKindName(config.trained.ffn)),
                     QString::fromStdString(m["ffn"]));
            QCOMPARE(config.contextLength, int64_t(256));
            auto corpus = tokenizeCorpus({relulens::test::dataPath("heldout.txt")},
                                         loaded->tokenizer, 0.05);
            QVERIFY(corpus.ok());
            std::vector<int64_t> tokens = corpus->train;
            tokens.insert(tokens.end(), corpus->validation.begin(), corpus->validation.end());
            auto result = evaluateContexts(*loaded->model, tokens, {256}, config.trained, 65536);
            QVERIFY(result.ok());
            const double expected = m["heldout_loss_256"];
            const double actual = (*result)[0].loss;
            QVERIFY2(std::abs(actual - expected) <= 0.05 * expected,
                     qPrintable(QString("%1: held-out loss %2, model card says %3")
                                    .arg(QString::fromStdString(name)).arg(actual).arg(expected)));
        }
    }
};

QTEST_GUILESS_MAIN(TestDefaultModels)
#include "test_default_models.moc"
