// The bundled default models, as the model card (resources/models/results.json) lists them:
// every folder under resources/models is in the card and every card entry is shipped; each
// loads, its config names the variant and the length it was trained with, and its loss on a
// held-out excerpt (tests/data/heldout.txt, never trained on) is within 5 % of the card: of the
// card's validation loss, measured on another text (the corpus's held-out split, which the
// tests cannot read), at the length the model was trained at; and of the card's own figure for
// this excerpt, at 256 tokens and at 1,024 for the models trained there. The folder stays within
// its 64 MB budget.
#include <QtTest>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/corpus.h"
#include "core/evaluation.h"
#include "test_support.h"

using namespace relulens::core;
using nlohmann::json;
namespace fs = std::filesystem;

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

    void theCardListsExactlyTheShippedModels() {
        std::set<std::string> card, shipped;
        for (const auto& m : card_["models"]) card.insert(m["name"].get<std::string>());
        for (const auto& entry : fs::directory_iterator(models_)) {
            if (fs::exists(entry.path() / "config.json"))
                shipped.insert(entry.path().filename().string());
        }
        QCOMPARE(shipped.size(), card.size());
        QVERIFY(shipped == card);
        for (const char* expected :
             {"softmax", "relu-len", "reluformer", "relu", "ffn-softmax", "ffn-softmax-ln",
              "sigmoid", "softpick", "long-softmax", "long-relu-len", "long-reluformer"}) {
            QVERIFY2(card.count(expected), expected);
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
            const bool trainedLong = name.rfind("long-", 0) == 0;
            QCOMPARE(config.contextLength, int64_t(trainedLong ? 1024 : 256));
            QCOMPARE(int64_t(m["training_context"]), config.contextLength);
            auto corpus =
                tokenizeCorpus({relulens::test::dataPath("heldout.txt")}, loaded->tokenizer, 0.05);
            QVERIFY(corpus.ok());
            std::vector<int64_t> tokens = corpus->train;
            tokens.insert(tokens.end(), corpus->validation.begin(), corpus->validation.end());
            std::vector<int64_t> contexts = {256};
            if (trainedLong) contexts.push_back(1024);
            auto result = evaluateContexts(*loaded->model, tokens, contexts, config.trained, 65536);
            QVERIFY(result.ok());
            // The card's validation loss comes from the corpus's held-out split, not this excerpt.
            const double trainedAt = (*result)[trainedLong ? 1 : 0].loss;
            double validation = -1;
            for (const auto& r : m["validation"]) {
                if (r["context"] == config.contextLength) validation = r["loss"];
            }
            QVERIFY2(validation > 0,
                     (name + ": the card has no validation loss at its training length").c_str());
            QVERIFY2(
                std::abs(trainedAt - validation) <= 0.05 * validation,
                qPrintable(
                    QString(
                        "%1: loss %2 at %3 tokens on the excerpt, the card's validation loss is %4")
                        .arg(QString::fromStdString(name))
                        .arg(trainedAt)
                        .arg(config.contextLength)
                        .arg(validation)));
            for (size_t c = 0; c < contexts.size(); ++c) {
                const std::string key = "heldout_loss_" + std::to_string(contexts[c]);
                QVERIFY2(m.contains(key), (name + ": the card has no " + key).c_str());
                const double expected = m[key];
                const double actual = (*result)[c].loss;
                QVERIFY2(std::abs(actual - expected) <= 0.05 * expected,
                         qPrintable(QString("%1: held-out loss at %2 tokens %3, model card says %4")
                                        .arg(QString::fromStdString(name))
                                        .arg(contexts[c])
                                        .arg(actual)
                                        .arg(expected)));
            }
        }
    }

    void theModelsFitTheirBudget() {
        uintmax_t bytes = 0;
        for (const auto& entry : fs::recursive_directory_iterator(models_)) {
            if (entry.is_regular_file()) bytes += entry.file_size();
        }
        qInfo("resources/models: %.1f MB", double(bytes) / 1e6);
        QVERIFY2(bytes <= 64u * 1024 * 1024,
                 qPrintable(QString("%1 bytes").arg(qulonglong(bytes))));
    }
};

QTEST_GUILESS_MAIN(TestDefaultModels)
#include "test_default_models.moc"
