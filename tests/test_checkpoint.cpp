// Model folders and safetensors: round trips in every storage type, and one clear error for
// each kind of damaged file.
#include <QtTest>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/checkpoint.h"
#include "test_support.h"

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

}  // namespace

class TestCheckpoint : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::string folder_;
    std::string weights_;
    Transformer model_ = Transformer::initialise(smallConfig(), 5);

    QString loadError() {
        auto loaded = loadModelFolder(folder_);
        return loaded.ok() ? QString() : QString::fromStdString(loaded.error());
    }

private Q_SLOTS:
    void init() {
        folder_ = dir_.filePath("model").toStdString();
        fs::remove_all(folder_);
        weights_ = folder_ + "/model.safetensors";
        auto s = saveModelFolder(folder_, model_, relulens::test::dataPath("tiny/tokenizer.model"),
                                 StorageType::F32);
        QVERIFY2(s.ok(), s.error().c_str());
    }

    void roundTripF32() {
        auto loaded = loadWeights(folder_);
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
        QCOMPARE(loaded->tensors().size(), model_.tensors().size());
        for (const auto& [name, t] : model_.tensors()) {
            QVERIFY2(torch::equal(loaded->tensors().at(name), t), name.c_str());
        }
        QCOMPARE(loaded->info().dFf, int64_t(24));
    }

    void roundTripHalfTypes() {
        for (auto type : {StorageType::F16, StorageType::BF16}) {
            auto s = writeSafetensors(weights_, model_.tensors(), type);
            QVERIFY(s.ok());
            auto file = readSafetensors(weights_);
            QVERIFY(file.ok());
            const auto scalar = type == StorageType::F16 ? torch::kFloat16 : torch::kBFloat16;
            for (const auto& [name, t] : model_.tensors()) {
                QVERIFY(torch::equal(file->tensors.at(name), t.to(scalar).to(torch::kFloat32)));
            }
            const std::string header = readAll(weights_).substr(8, 200);
            QVERIFY(header.find(type == StorageType::F16 ? "\"F16\"" : "\"BF16\"") !=
                    std::string::npos);
        }
    }

    void truncatedFile() {
        const auto bytes = readAll(weights_);
        writeAll(weights_, bytes.substr(0, bytes.size() / 2));
        QVERIFY(loadError().contains("lie outside"));
        QVERIFY(loadError().contains("truncated"));
        writeAll(weights_, bytes.substr(0, 5));
        QVERIFY(loadError().contains("too short for a safetensors header"));
    }

    void headerLengthPastEnd() {
        auto bytes = readAll(weights_);
        bytes[6] = char(0x7f);  // header length now ~2^55
        writeAll(weights_, bytes);
        QVERIFY(loadError().contains("runs past the end"));
    }

    void badJson() {
        writeAll(weights_, rawSafetensors("{\"tok_emb.weight\": [1, 2", "xxxx"));
        QVERIFY(loadError().contains("header is not valid JSON"));
    }

    void numberOutOfRange() {
        // The JSON reader reports 1e999 as out of range rather than as a syntax error.
        writeAll(weights_,
                 rawSafetensors(R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})",
                                std::string(4, '\0')));
        QVERIFY(loadError().contains("header is not valid JSON"));
        QVERIFY(loadError().contains("number overflow"));
        auto config = configToJson(smallConfig()).dump();
        const std::string context = "\"context_length\":32";
        QVERIFY(config.find(context) != std::string::npos);
        config.replace(config.find(context), context.size(), "\"context_length\":1e999");
        writeAll(folder_ + "/config.json", config);
        QVERIFY(loadError().contains("config.json: not valid JSON"));
    }

    void shapeTooLarge() {
        // 2^40 × 2^24 elements: the product wraps around to 0 in 64 bits.
        writeAll(
            weights_,
            rawSafetensors(
                R"({"a":{"dtype":"F32","shape":[1099511627776,16777216],"data_offsets":[0,0]}})",
                ""));
        QVERIFY(loadError().contains("tensor 'a': shape too large"));
        writeAll(
            weights_,
            rawSafetensors(
                R"({"a":{"dtype":"F32","shape":[1048576,1048577],"data_offsets":[0,0]}})", ""));
        QVERIFY(loadError().contains("tensor 'a': shape too large"));
    }

    void wrongDtype() {
        writeAll(
            weights_,
            rawSafetensors(R"({"tok_emb.weight":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",
                           std::string(8, '\0')));
        QVERIFY(loadError().contains("'tok_emb.weight' has dtype I64"));
    }

    void shapeMismatch() {
        auto tensors = model_.tensors();
        tensors["layers.0.ffn.w1"] = torch::zeros({23, 16});
        QVERIFY(writeSafetensors(weights_, tensors, StorageType::F32).ok());
        QCOMPARE(loadError(), QString::fromStdString(weights_ + ": tensor 'layers.0.ffn.w1' has "
                                                                "shape 23×16, config says 24×16"));
    }

    void missingTensor() {
        auto tensors = model_.tensors();
        tensors.erase("layers.0.attn.wk");
        QVERIFY(writeSafetensors(weights_, tensors, StorageType::F32).ok());
        QVERIFY(loadError().contains("tensor 'layers.0.attn.wk' is missing"));
    }

    void extraTensor() {
        auto tensors = model_.tensors();
        tensors["layers.0.attn.bias"] = torch::zeros({16});
        QVERIFY(writeSafetensors(weights_, tensors, StorageType::F32).ok());
        QVERIFY(loadError().contains("unexpected tensor 'layers.0.attn.bias'"));
    }

    void nanWeights() {
        auto tensors = model_.tensors();
        auto bad = tensors["layers.0.ffn.b2"].clone();
        bad[3] = std::numeric_limits<float>::quiet_NaN();
        tensors["layers.0.ffn.b2"] = bad;
        QVERIFY(writeSafetensors(weights_, tensors, StorageType::F32).ok());
        QVERIFY(loadError().contains("tensor 'layers.0.ffn.b2' holds 1 NaN or infinite value(s)"));
    }

    void overlappingData() {
        writeAll(weights_,
                 rawSafetensors(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                std::string(12, '\0')));
        QVERIFY(loadError().contains("overlap"));
    }

    void configProblems() {
        const std::string config = folder_ + "/config.json";
        auto json = configToJson(smallConfig());
        json["d_model"] = 1'000'000'000;
        writeAll(config, json.dump());
        QVERIFY(loadError().contains("d_model = 1000000000 is outside"));
        json = configToJson(smallConfig());
        json["vocab_size"] = 900000;
        json["d_model"] = 16000;
        writeAll(config, json.dump());
        QVERIFY(loadError().contains("parameters, more than ReluLens loads"));
        json = configToJson(smallConfig());
        json["attention"] = "sparsemix";
        writeAll(config, json.dump());
        QVERIFY(loadError().contains("unknown attention variant 'sparsemix'"));
        writeAll(config, "{ not json");
        QVERIFY(loadError().contains("config.json: not valid JSON"));
        fs::remove(config);
        QVERIFY(loadError().contains("config.json: missing"));
    }

    void tokenizerMustMatchVocabulary() {
        auto config = smallConfig();
        config.vocabSize = 600;
        auto model = Transformer::initialise(config, 1);
        QVERIFY(saveModelFolder(folder_, model, "", StorageType::F32).ok());
        QVERIFY(loadError().contains("the tokenizer has 512 pieces, config.json says 600"));
    }

    void missingFolder() {
        auto loaded = loadModelFolder("/nonexistent/model");
        QVERIFY(!loaded.ok());
        QVERIFY(QString::fromStdString(loaded.error()).contains("no such model folder"));
    }

    // Every file ReluLens writes (weights, config, JSON reports) goes through one atomic write:
    // a failure leaves the old file as it was and no partial file behind.
    void atomicWriteReplacesOnlyWhenComplete() {
        const std::string path = dir_.filePath("report.json").toStdString();
        QVERIFY(writeTextAtomically(path, "first\n").ok());
        QCOMPARE(readAll(path), std::string("first\n"));
        QVERIFY(writeTextAtomically(path, "second\n").ok());
        QCOMPARE(readAll(path), std::string("second\n"));

        auto failed = writeFileAtomically(path, [](std::ostream& out) {
            out << "half of a thi";
            out.setstate(std::ios::badbit);  // what a full disk does to the stream
        });
        QVERIFY(!failed.ok());
        QVERIFY(QString::fromStdString(failed.error()).contains("report.json: writing failed"));
        QCOMPARE(readAll(path), std::string("second\n"));
        QVERIFY(!fs::exists(path + ".partial"));

        const std::string nowhere = dir_.filePath("no-such-folder/report.json").toStdString();
        auto refused = writeTextAtomically(nowhere, "x");
        QVERIFY(!refused.ok());
        QVERIFY(QString::fromStdString(refused.error())
                    .contains("no-such-folder/report.json: cannot write"));
        QVERIFY(!fs::exists(dir_.filePath("no-such-folder").toStdString()));
    }
};

QTEST_GUILESS_MAIN(TestCheckpoint)
#include "test_checkpoint.moc"
