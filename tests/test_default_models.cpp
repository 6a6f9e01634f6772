// The bundled default models, as the model card (resources/models/results.json) lists them:
// every folder under resources/models is in the card and every card entry is shipped; each
// loads, its config names the variant and the length it was trained with, and its loss on a
// held-out excerpt (tests/data/heldout.txt, never trained on) is within 5 % of the card: of the
// card's validation loss, measured on another text (the corpus's held-out split, which the
// tests cannot read), at the length the model was trained at; and of the card's own figure for
// this excerpt, at 256 tokens and at 1,024 for the models trained there. The folder stays within
// its 64 MB budget.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/checkpoint.h"
#include "core/corpus.h"
#include "core/evaluation.h"
#include "core_test.h"

using namespace relulens::core;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// What initTestCase read once for every test: the model card.
struct Fixture {
    json card;
    std::string models = std::string(RELULENS_RESOURCES) + "/models";

    Fixture() {
        std::ifstream in(models + "/results.json");
        if (!in.good()) throw std::runtime_error("resources/models/results.json is missing");
        card = json::parse(in);
    }
};

const Fixture& fixture() {
    static Fixture f;
    return f;
}

// A number as the old messages wrote it: %g, six significant digits.
std::string numberText(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

}  // namespace

TEST_CASE("theCardListsExactlyTheShippedModels") {
    json card_ = fixture().card;  // a copy: operator[] on it behaves as on the old member
    const std::string& models_ = fixture().models;
    std::set<std::string> card, shipped;
    for (const auto& m : card_["models"]) card.insert(m["name"].get<std::string>());
    for (const auto& entry : fs::directory_iterator(models_)) {
        if (fs::exists(entry.path() / "config.json"))
            shipped.insert(entry.path().filename().string());
    }
    REQUIRE(shipped.size() == card.size());
    REQUIRE(shipped == card);
    for (const char* expected :
         {"softmax", "relu-len", "reluformer", "relu", "ffn-softmax", "ffn-softmax-ln", "sigmoid",
          "softpick", "long-softmax", "long-relu-len", "long-reluformer"}) {
        REQUIRE_MESSAGE(card.count(expected), expected);
    }
}

TEST_CASE("eachModelLoadsAndMatchesTheCard") {
    json card_ = fixture().card;  // a copy: operator[] on it behaves as on the old member
    const std::string& models_ = fixture().models;
    for (const auto& m : card_["models"]) {
        const std::string name = m["name"];
        auto loaded = loadModelFolder(models_ + "/" + name);
        REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? std::string() : loaded.error()));
        const auto& config = loaded->model->info();
        REQUIRE(config.trained.attention.name() == m["attention"].get<std::string>());
        REQUIRE(ffnKindName(config.trained.ffn) == m["ffn"].get<std::string>());
        const bool trainedLong = name.rfind("long-", 0) == 0;
        REQUIRE(config.contextLength == int64_t(trainedLong ? 1024 : 256));
        REQUIRE(int64_t(m["training_context"]) == config.contextLength);
        auto corpus =
            tokenizeCorpus({relulens::test::dataPath("heldout.txt")}, loaded->tokenizer, 0.05);
        REQUIRE(corpus.ok());
        std::vector<int64_t> tokens = corpus->train;
        tokens.insert(tokens.end(), corpus->validation.begin(), corpus->validation.end());
        std::vector<int64_t> contexts = {256};
        if (trainedLong) contexts.push_back(1024);
        auto result = evaluateContexts(*loaded->model, tokens, contexts, config.trained, 65536);
        REQUIRE(result.ok());
        // The card's validation loss comes from the corpus's held-out split, not this excerpt.
        const double trainedAt = (*result)[trainedLong ? 1 : 0].loss;
        double validation = -1;
        for (const auto& r : m["validation"]) {
            if (r["context"] == config.contextLength) validation = r["loss"];
        }
        REQUIRE_MESSAGE(validation > 0,
                        (name + ": the card has no validation loss at its training length"));
        REQUIRE_MESSAGE(
            std::abs(trainedAt - validation) <= 0.05 * validation,
            (name + ": loss " + numberText(trainedAt) + " at " +
             std::to_string(config.contextLength) +
             " tokens on the excerpt, the card's validation loss is " + numberText(validation)));
        for (size_t c = 0; c < contexts.size(); ++c) {
            const std::string key = "heldout_loss_" + std::to_string(contexts[c]);
            REQUIRE_MESSAGE(m.contains(key), (name + ": the card has no " + key));
            const double expected = m[key];
            const double actual = (*result)[c].loss;
            REQUIRE_MESSAGE(
                std::abs(actual - expected) <= 0.05 * expected,
                (name + ": held-out loss at " + std::to_string(contexts[c]) + " tokens " +
                 numberText(actual) + ", model card says " + numberText(expected)));
        }
    }
}

TEST_CASE("theModelsFitTheirBudget") {
    const std::string& models_ = fixture().models;
    uintmax_t bytes = 0;
    for (const auto& entry : fs::recursive_directory_iterator(models_)) {
        if (entry.is_regular_file()) bytes += entry.file_size();
    }
    char size[64];
    std::snprintf(size, sizeof size, "resources/models: %.1f MB", double(bytes) / 1e6);
    MESSAGE(size);
    REQUIRE_MESSAGE(bytes <= 64u * 1024 * 1024, (std::to_string(bytes) + " bytes"));
}
