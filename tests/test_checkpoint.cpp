// Model folders and safetensors: round trips in every storage type, and one clear error for
// each kind of damaged file.
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checkpoint.h"
#include "core_test.h"

using namespace relulens::core;
namespace fs = std::filesystem;

namespace {

ModelConfig smallConfig() {
    ModelConfig c;
    c.name = "small";
    c.vocabSize = 512;  // matches the tiny tokenizer
    c.dModel = 16;
    c.nLayers = 1;
    c.nHeads = 2;
    c.dFf = 24;
    c.contextLength = 32;
    return c;
}

std::string readAll(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeAll(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
}

std::string rawSafetensors(const std::string& header, const std::string& data) {
    std::string out(8, '\0');
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) out[size_t(i)] = char((n >> (8 * i)) & 0xFF);
    return out + header + data;
}

// initTestCase: one temporary folder and one model (seed 5) for every test case.
struct Fixture {
    relulens::test::TempDir dir;
    Transformer model = Transformer::initialise(smallConfig(), 5);
};

const Fixture& fixture() {
    static Fixture f;
    return f;
}

// init(), run at the top of each test case: a fresh model folder holding the fixture's model
// in F32 and the tiny tokenizer.
struct ModelFolder {
    const Transformer& model = fixture().model;
    std::string folder = fixture().dir.filePath("model");
    std::string weights = folder + "/model.safetensors";

    ModelFolder() {
        fs::remove_all(folder);
        auto s = saveModelFolder(folder, model, relulens::test::dataPath("tiny/tokenizer.model"),
                                 StorageType::F32);
        REQUIRE_MESSAGE(s.ok(), s.error());
    }

    // The error loading the folder reports; empty when it loads.
    std::string loadError() const {
        auto loaded = loadModelFolder(folder);
        return loaded.ok() ? std::string() : loaded.error();
    }
};

}  // namespace

TEST_CASE("roundTripF32") {
    const ModelFolder f;
    auto loaded = loadWeights(f.folder);
    REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? "" : loaded.error().c_str()));
    REQUIRE(loaded->tensors().size() == f.model.tensors().size());
    for (const auto& [name, t] : f.model.tensors()) {
        REQUIRE_MESSAGE(torch::equal(loaded->tensors().at(name), t), name.c_str());
    }
    REQUIRE(loaded->info().dFf == int64_t(24));
}

TEST_CASE("roundTripHalfTypes") {
    const ModelFolder f;
    for (auto type : {StorageType::F16, StorageType::BF16}) {
        auto s = writeSafetensors(f.weights, f.model.tensors(), type);
        REQUIRE(s.ok());
        auto file = readSafetensors(f.weights);
        REQUIRE(file.ok());
        const auto scalar = type == StorageType::F16 ? torch::kFloat16 : torch::kBFloat16;
        for (const auto& [name, t] : f.model.tensors()) {
            REQUIRE(torch::equal(file->tensors.at(name), t.to(scalar).to(torch::kFloat32)));
        }
        const std::string header = readAll(f.weights).substr(8, 200);
        REQUIRE(header.find(type == StorageType::F16 ? "\"F16\"" : "\"BF16\"") !=
                std::string::npos);
    }
}

TEST_CASE("truncatedFile") {
    const ModelFolder f;
    const auto bytes = readAll(f.weights);
    writeAll(f.weights, bytes.substr(0, bytes.size() / 2));
    REQUIRE(relulens::test::contains(f.loadError(), "lie outside"));
    REQUIRE(relulens::test::contains(f.loadError(), "truncated"));
    writeAll(f.weights, bytes.substr(0, 5));
    REQUIRE(relulens::test::contains(f.loadError(), "too short for a safetensors header"));
}

TEST_CASE("headerLengthPastEnd") {
    const ModelFolder f;
    auto bytes = readAll(f.weights);
    bytes[6] = char(0x7f);  // header length now ~2^55
    writeAll(f.weights, bytes);
    REQUIRE(relulens::test::contains(f.loadError(), "runs past the end"));
}

TEST_CASE("badJson") {
    const ModelFolder f;
    writeAll(f.weights, rawSafetensors("{\"tok_emb.weight\": [1, 2", "xxxx"));
    REQUIRE(relulens::test::contains(f.loadError(), "header is not valid JSON"));
}

TEST_CASE("numberOutOfRange") {
    const ModelFolder f;
    // The JSON reader reports 1e999 as out of range rather than as a syntax error.
    writeAll(f.weights,
             rawSafetensors(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})",
                            std::string(4, '\0')));
    REQUIRE(relulens::test::contains(f.loadError(), "header is not valid JSON"));
    REQUIRE(relulens::test::contains(f.loadError(), "number overflow"));
    auto config = configToJson(smallConfig()).dump();
    const std::string context = "\"context_length\":32";
    REQUIRE(config.find(context) != std::string::npos);
    config.replace(config.find(context), context.size(), "\"context_length\":1e999");
    writeAll(f.folder + "/config.json", config);
    REQUIRE(relulens::test::contains(f.loadError(), "config.json: not valid JSON"));
}

TEST_CASE("shapeTooLarge") {
    const ModelFolder f;
    // 2^40 × 2^24 elements: the product wraps around to 0 in 64 bits.
    writeAll(
        f.weights,
        rawSafetensors(
            R"({"a":{"dtype":"F32","shape":[1099511627776,16777216],"data_offsets":[0,0]}})", ""));
    REQUIRE(relulens::test::contains(f.loadError(), "tensor 'a': shape too large"));
    writeAll(f.weights,
             rawSafetensors(
                 R"({"a":{"dtype":"F32","shape":[1048576,1048577],"data_offsets":[0,0]}})", ""));
    REQUIRE(relulens::test::contains(f.loadError(), "tensor 'a': shape too large"));
}

TEST_CASE("wrongDtype") {
    const ModelFolder f;
    writeAll(
        f.weights,
        rawSafetensors(R"({"tok_emb.weight":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                       std::string(8, '\0')));
    REQUIRE(relulens::test::contains(f.loadError(), "'tok_emb.weight' has dtype I64"));
}

TEST_CASE("shapeMismatch") {
    const ModelFolder f;
    auto tensors = f.model.tensors();
    tensors["layers.0.ffn.w1"] = torch::zeros({23, 16});
    REQUIRE(writeSafetensors(f.weights, tensors, StorageType::F32).ok());
    REQUIRE(f.loadError() == f.weights +
                                 ": tensor 'layers.0.ffn.w1' has "
                                 "shape 23×16, config says 24×16");
}

TEST_CASE("missingTensor") {
    const ModelFolder f;
    auto tensors = f.model.tensors();
    tensors.erase("layers.0.attn.wk");
    REQUIRE(writeSafetensors(f.weights, tensors, StorageType::F32).ok());
    REQUIRE(relulens::test::contains(f.loadError(), "tensor 'layers.0.attn.wk' is missing"));
}

TEST_CASE("extraTensor") {
    const ModelFolder f;
    auto tensors = f.model.tensors();
    tensors["layers.0.attn.bias"] = torch::zeros({16});
    REQUIRE(writeSafetensors(f.weights, tensors, StorageType::F32).ok());
    REQUIRE(relulens::test::contains(f.loadError(), "unexpected tensor 'layers.0.attn.bias'"));
}

TEST_CASE("nanWeights") {
    const ModelFolder f;
    auto tensors = f.model.tensors();
    auto bad = tensors["layers.0.ffn.b2"].clone();
    bad[3] = std::numeric_limits<float>::quiet_NaN();
    tensors["layers.0.ffn.b2"] = bad;
    REQUIRE(writeSafetensors(f.weights, tensors, StorageType::F32).ok());
    REQUIRE(relulens::test::contains(f.loadError(),
                                     "tensor 'layers.0.ffn.b2' holds 1 NaN or infinite value(s)"));
}

TEST_CASE("overlappingData") {
    const ModelFolder f;
    writeAll(f.weights, rawSafetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                       std::string(12, '\0')));
    REQUIRE(relulens::test::contains(f.loadError(), "overlap"));
}

TEST_CASE("configProblems") {
    const ModelFolder f;
    const std::string config = f.folder + "/config.json";
    auto json = configToJson(smallConfig());
    json["d_model"] = 1'000'000'000;
    writeAll(config, json.dump());
    REQUIRE(relulens::test::contains(f.loadError(), "d_model = 1000000000 is outside"));
    json = configToJson(smallConfig());
    json["vocab_size"] = 900000;
    json["d_model"] = 16000;
    writeAll(config, json.dump());
    REQUIRE(relulens::test::contains(f.loadError(), "parameters, more than ReluLens loads"));
    json = configToJson(smallConfig());
    json["attention"] = "sparsemix";
    writeAll(config, json.dump());
    REQUIRE(relulens::test::contains(f.loadError(), "unknown attention variant 'sparsemix'"));
    writeAll(config, "{ not json");
    REQUIRE(relulens::test::contains(f.loadError(), "config.json: not valid JSON"));
    fs::remove(config);
    REQUIRE(relulens::test::contains(f.loadError(), "config.json: missing"));
}

TEST_CASE("tokenizerMustMatchVocabulary") {
    const ModelFolder f;
    auto config = smallConfig();
    config.vocabSize = 600;
    auto model = Transformer::initialise(config, 1);
    REQUIRE(saveModelFolder(f.folder, model, "", StorageType::F32).ok());
    REQUIRE(relulens::test::contains(f.loadError(),
                                     "the tokenizer has 512 pieces, config.json says 600"));
}

TEST_CASE("missingFolder") {
    const ModelFolder f;
    auto loaded = loadModelFolder("/nonexistent/model");
    REQUIRE(!loaded.ok());
    REQUIRE(relulens::test::contains(loaded.error(), "no such model folder"));
}

// Every file ReluLens writes (weights, config, JSON reports) goes through one atomic write:
// a failure leaves the old file as it was and no partial file behind.
TEST_CASE("atomicWriteReplacesOnlyWhenComplete") {
    const ModelFolder f;
    const std::string path = fixture().dir.filePath("report.json");
    REQUIRE(writeTextAtomically(path, "first\n").ok());
    REQUIRE(readAll(path) == std::string("first\n"));
    REQUIRE(writeTextAtomically(path, "second\n").ok());
    REQUIRE(readAll(path) == std::string("second\n"));

    auto failed = writeFileAtomically(path, [](std::ostream& out) {
        out << "half of a thi";
        out.setstate(std::ios::badbit);  // what a full disk does to the stream
    });
    REQUIRE(!failed.ok());
    REQUIRE(relulens::test::contains(failed.error(), "report.json: writing failed"));
    REQUIRE(readAll(path) == std::string("second\n"));
    REQUIRE(!fs::exists(path + ".partial"));

    const std::string nowhere = fixture().dir.filePath("no-such-folder/report.json");
    auto refused = writeTextAtomically(nowhere, "x");
    REQUIRE(!refused.ok());
    REQUIRE(relulens::test::contains(refused.error(), "no-such-folder/report.json: cannot write"));
    REQUIRE(!fs::exists(fixture().dir.filePath("no-such-folder")));
}
