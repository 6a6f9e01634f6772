// The SentencePiece tokenizer through its module: round trips, byte offsets, known ids.
#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/tokenizer.h"
#include "core_test.h"

using namespace relulens::core;

namespace {

// The text a token stands for: the piece with "▁" as a space, or one byte for "<0xAB>".
std::string surface(const Token& t, bool first) {
    if (t.piece.size() == 6 && t.piece.rfind("<0x", 0) == 0 && t.piece.back() == '>') {
        return std::string(1, char(std::stoi(t.piece.substr(3, 2), nullptr, 16)));
    }
    std::string out;
    const std::string mark = "\xE2\x96\x81";  // ▁
    for (size_t i = 0; i < t.piece.size();) {
        if (t.piece.compare(i, mark.size(), mark) == 0) {
            out += ' ';
            i += mark.size();
        } else {
            out += t.piece[i++];
        }
    }
    // SentencePiece adds a "▁" before the first word that the text itself does not hold.
    if (first && !out.empty() && out[0] == ' ' && t.start == 0 && t.end == out.size() - 1) {
        out.erase(0, 1);
    }
    return out;
}

// What initTestCase built once for every test: the tiny model's tokenizer.
struct Fixture {
    Tokenizer tokenizer;

    Fixture() {
        auto t = Tokenizer::load(relulens::test::dataPath("tiny/tokenizer.model"));
        if (!t.ok()) throw std::runtime_error(t.error());
        tokenizer = *t;
        if (tokenizer.vocabSize() != int64_t(512))
            throw std::runtime_error("the tiny tokenizer has " +
                                     std::to_string(tokenizer.vocabSize()) +
                                     " pieces, expected 512");
    }
};

const Fixture& fixture() {
    static Fixture f;
    return f;
}

}  // namespace

TEST_CASE("roundTripAndOffsets") {
    const Tokenizer& tokenizer = fixture().tokenizer;
    struct Row {
        std::string name;
        std::string text;
    };
    const std::vector<Row> rows = {
        {"ascii", "It is a truth universally acknowledged."},
        {"accents", "Café, naïve élan — Mr. Darcy's fiancée!"},
        {"cjk", "東京で Elizabeth に会った"},
        {"emoji", "Pride 🙂 and prejudice 👍🏽."},
        {"whitespace", "two  spaces\tand a\nnewline"},
    };
    for (const auto& row : rows) {
        INFO("row: " << row.name);
        const std::string& utf8 = row.text;
        const auto tokens = tokenizer.encode(utf8).value();
        REQUIRE(!tokens.empty());
        std::vector<int64_t> ids;
        size_t cursor = 0;
        for (size_t i = 0; i < tokens.size(); ++i) {
            const auto& t = tokens[i];
            ids.push_back(t.id);
            REQUIRE((t.id >= 0 && t.id < tokenizer.vocabSize()));
            REQUIRE(t.start == cursor);  // spans tile the text, in order
            REQUIRE((t.end >= t.start && t.end <= utf8.size()));
            REQUIRE(utf8.substr(t.start, t.end - t.start) == surface(t, i == 0));
            cursor = t.end;
        }
        REQUIRE(cursor == utf8.size());
        REQUIRE(tokenizer.decode(ids) == row.text);
    }
}

TEST_CASE("malformedUtf8") {
    const Tokenizer& tokenizer = fixture().tokenizer;
    // Each malformed byte becomes U+FFFD: three byte pieces for one byte of the text.
    const std::string text = "ok \xff\xfe end\xc3";
    const auto tokens = tokenizer.encode(text).value();
    size_t cursor = 0, specialPieces = 0;
    for (const auto& t : tokens) {
        REQUIRE(t.start == cursor);  // spans still tile the text, in order
        REQUIRE((t.end >= t.start && t.end <= text.size()));
        cursor = t.end;
        specialPieces += tokenizer.isSpecial(t.id) ? 1 : 0;
    }
    REQUIRE(cursor == text.size());
    REQUIRE(specialPieces == size_t(9));
}

TEST_CASE("knownIdsFromSpmEncode") {
    const Tokenizer& tokenizer = fixture().tokenizer;
    // tiny_reference.json holds the ids SentencePiece's own spm_encode gave for its text.
    std::ifstream in(relulens::test::dataPath("tiny_reference.json"));
    REQUIRE(in.good());
    const auto reference = nlohmann::json::parse(in);
    const auto tokens = tokenizer.encode(reference["text"].get<std::string>()).value();
    const auto expected = reference["ids"].get<std::vector<int64_t>>();
    REQUIRE(tokens.size() == expected.size());
    for (size_t i = 0; i < tokens.size(); ++i) REQUIRE(tokens[i].id == expected[i]);
}

TEST_CASE("pieces") {
    const Tokenizer& tokenizer = fixture().tokenizer;
    REQUIRE(tokenizer.piece(0) == std::string("<unk>"));
    REQUIRE(tokenizer.piece(3) == std::string("<0x00>"));
}

TEST_CASE("piecesReadAsText") {
    const Tokenizer& tokenizer = fixture().tokenizer;
    // byte pieces are ids 3 + byte: a newline, a tab, a lone UTF-8 lead byte, a control byte
    REQUIRE(tokenizer.readable(3 + 0x0A) == std::string("↵"));
    REQUIRE(tokenizer.readable(3 + 0x09) == std::string("⇥"));
    REQUIRE(tokenizer.readable(3 + 0xE2) == std::string("byte 0xE2"));
    REQUIRE(tokenizer.readable(3 + 0x01) == std::string("byte 0x01"));
    REQUIRE(tokenizer.readable(1) == std::string("<s>"));
    const int64_t the = tokenizer.pieceId("▁the");
    REQUIRE(the > 258);
    REQUIRE(tokenizer.readable(the) == std::string("▁the"));
    // encode fills each token's readable form
    const auto tokens = tokenizer.encode("a\nb").value();
    REQUIRE(std::any_of(tokens.begin(), tokens.end(),
                        [](const Token& t) { return t.readable == "↵"; }));
}

TEST_CASE("badModelFileIsAnError") {
    auto missing = Tokenizer::load("/nonexistent/tokenizer.model");
    REQUIRE(!missing.ok());
    REQUIRE(relulens::test::contains(missing.error(), "no such file"));
    relulens::test::TempDir dir;
    const std::string junk = dir.filePath("junk.model");
    relulens::test::writeFile(junk, "this is not a protobuf model");
    REQUIRE(relulens::test::fileExists(junk));
    auto bad = Tokenizer::load(junk);
    REQUIRE(!bad.ok());
    REQUIRE(relulens::test::contains(bad.error(), "not a SentencePiece model"));
}

TEST_CASE("trainsANewModel") {
    relulens::test::TempDir dir;
    const std::string out = dir.filePath("small.model");
    TokenizerTrainOptions options;
    options.inputs = {relulens::test::dataPath("excerpt.txt")};
    options.outputModel = out;
    options.vocabSize = 400;
    auto status = Tokenizer::train(options);
    REQUIRE_MESSAGE(status.ok(), status.error());
    auto trained = Tokenizer::load(out);
    REQUIRE(trained.ok());
    REQUIRE(trained->vocabSize() == int64_t(400));
    const std::string text = "Mr. Bennet was so odd a mixture of quick parts";
    std::vector<int64_t> ids;
    const auto tokens = trained->encode(text).value();
    for (const auto& t : tokens) ids.push_back(t.id);
    REQUIRE(trained->decode(ids) == text);
}
