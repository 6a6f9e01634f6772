// Hugging Face–layout checkpoints against an independent NumPy forward pass: every family and
// feature (GQA, MQA, biases, q/k norms, rope scaling, sliding windows, tied and untied heads,
// bf16/f16, shards) in softmax and two ReLU variants and with a ReLU-fied gate; llama2.c models
// imported from both .bin formats; and every bad folder refused with its own message.
#include <QtTest>

#include <QProcess>
#include <QTemporaryDir>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/capture.h"
#include "core/hf_checkpoint.h"
#include "core/lens.h"
#include "core/llama2c.h"
#include "core/model_folder.h"
#include "core/safetensors.h"
#include "core/slot_vocabulary.h"
#include "test_support.h"

using namespace relulens::core;
using nlohmann::json;

namespace {

// Largest |actual - expected| over a (rows, cols) tensor and its rows written out in JSON.
double maxDifference(const torch::Tensor& actual, const json& expected) {
    std::vector<double> flat;
    for (const auto& row : expected) {
        for (double v : row) flat.push_back(v);
    }
    auto e = torch::tensor(flat, torch::kFloat64);
    auto a = actual.to(torch::kFloat64).contiguous().flatten();
    if (a.numel() != e.numel()) return std::numeric_limits<double>::infinity();
    return (a - e).abs().max().item<double>();
}

RunSpec runOf(const json& run) {
    RunSpec spec;
    spec.attention.kind = *parseAttentionKind(run["attention"].get<std::string>());
    spec.ffn = *parseFfnKind(run["ffn"].get<std::string>());
    spec.overrides = relulens::test::overridesFromJson(run.value("overrides", json::array()));
    return spec;
}

QByteArray readAll(const QString& path) {
    QFile f(path);
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void writeAll(const QString& path, const QByteArray& bytes) {
    QFile f(path);
    QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
    f.write(bytes);
}

// A copy of a fixture folder to damage.
QString copyFolder(const QString& from, const QString& to) {
    QDir().mkpath(to);
    for (const QString& name : QDir(from).entryList(QDir::Files))
        QFile::copy(from + "/" + name, to + "/" + name);
    return to;
}

json readJson(const QString& path) {
    return json::parse(readAll(path).toStdString());
}
void writeJson(const QString& path, const json& j) {
    writeAll(path, QByteArray::fromStdString(j.dump(2)));
}

}  // namespace

class TestHfModel : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    QString fixtures_, llama2c_;
    json reference_, llama2cReference_;

    QString folder(const std::string& name) const {
        return fixtures_ + "/" + QString::fromStdString(name);
    }
    LoadOptions cpu() const {
        LoadOptions options;
        options.device = "cpu";
        return options;
    }
    // The message loading a folder gives (and that checking it gives the same).
    QString refusal(const QString& path) {
        auto checked = checkModelFolder(path.toStdString());
        auto loaded = loadModelFolder(path.toStdString(), cpu());
        if (loaded) return "(loaded)";
        if (checked && !loaded) return "(check passed) " + QString::fromStdString(loaded.error());
        if (checked.error() != loaded.error())
            return "(check and load differ) " + QString::fromStdString(checked.error());
        return QString::fromStdString(loaded.error());
    }

private Q_SLOTS:
    void initTestCase() {
        fixtures_ = dir_.filePath("hf");
        llama2c_ = dir_.filePath("llama2c");
        const QString source = RELULENS_SOURCE_DIR;
        QProcess python;
        python.start(RELULENS_PYTHON,
                     {source + "/tests/reference/hf_fixtures.py", "--out", fixtures_, "--tokenizer",
                      QString::fromStdString(relulens::test::dataPath("tiny/tokenizer.model"))});
        QVERIFY(python.waitForFinished(120000));
        QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());
        python.start(RELULENS_PYTHON,
                     {source + "/tests/reference/llama2c_fixtures.py", "--out", llama2c_});
        QVERIFY(python.waitForFinished(120000));
        QVERIFY2(python.exitCode() == 0, python.readAllStandardError().constData());
        reference_ = readJson(fixtures_ + "/reference.json");
        llama2cReference_ = readJson(llama2c_ + "/reference.json");
        QCOMPARE(reference_["cases"].size(), size_t(12));
    }

    // ---- every family and feature against the NumPy forward -----------------------------

    void matchesTheReference_data() {
        QTest::addColumn<int>("index");
        for (size_t i = 0; i < reference_["cases"].size(); ++i) {
            QTest::newRow(reference_["cases"][i]["name"].get<std::string>().c_str()) << int(i);
        }
    }

    void matchesTheReference() {
        QFETCH(int, index);
        const json& c = reference_["cases"][size_t(index)];
        auto loaded = loadModelFolder(folder(c["folder"]).toStdString(), cpu());
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
        const auto ids = c["ids"].get<std::vector<int64_t>>();
        const int64_t L = int64_t(ids.size());
        const auto input = torch::tensor(ids).view({1, L});
        // the papers' variants, the seven later ones, and softmax with per-layer and per-head
        // overrides and ablations
        QCOMPARE(c["runs"].size(), size_t(12));
        for (const auto& run : c["runs"]) {
            const RunSpec spec = runOf(run);
            std::string name =
                run["attention"].get<std::string>() + " / " + run["ffn"].get<std::string>();
            for (const auto& o : spec.overrides) name += " " + o.label();
            const QByteArray label = QByteArray::fromStdString(name);
            torch::NoGradGuard noGrad;
            ForwardTrace trace;
            trace.options.weights = true;
            trace.options.ffn = true;
            trace.options.queriesKeys = true;
            trace.options.residual = true;
            const auto logits = loaded->model->forward(input, spec, &trace)[0];
            const double logitError = maxDifference(logits, run["logits"]);
            QVERIFY2(logitError < 1e-4, label + " logits off by " + QByteArray::number(logitError));
            // The logit lens through this family's final norm and output layer.
            {
                std::vector<torch::Tensor> afterLayer;
                for (size_t l = 1; l < trace.layers.size(); ++l)
                    afterLayer.push_back(trace.layers[l].residual[0]);
                afterLayer.push_back(trace.finalResidual[0]);
                const auto lens =
                    logitLens(*loaded->model, afterLayer, ids, {-1}, 3, loaded->tokenizer);
                QCOMPARE(lens.nextTokenProbability.size(0), int64_t(run["lens"].size()));
                const double e = maxDifference(lens.nextTokenProbability, run["lens"]);
                QVERIFY2(e < 1e-5, label + " lens off by " + QByteArray::number(e));
            }
            for (const auto& map : run["maps"]) {
                const int64_t layer = map["layer"], head = map["head"];
                const double e =
                    maxDifference(trace.layers[size_t(layer)].weights[0][head], map["weights"]);
                QVERIFY2(e < 1e-5, label + " map off by " + QByteArray::number(e));
            }
            // Continued from the keys and values of a pass over the first P tokens (what typing
            // at the end reuses): the rest's logits are the reference's rows P on.
            {
                const int64_t P = L / 2 + 1;
                ForwardTrace first;
                first.options.values = true;
                loaded->model->forward(input.narrow(1, 0, P), spec, &first);
                ForwardTrace rest;
                for (const auto& layer : first.layers) {
                    rest.pastKeys.push_back(layer.k);
                    rest.pastValues.push_back(layer.v);
                }
                const auto tail = loaded->model->forward(input.narrow(1, P, L - P), spec, &rest)[0];
                json expected = json::array();
                for (int64_t i = P; i < L; ++i) expected.push_back(run["logits"][size_t(i)]);
                const double e = maxDifference(tail, expected);
                QVERIFY2(e < 1e-4, label + " continued logits off by " + QByteArray::number(e));
            }
            const int64_t slotLayer = run["slots"]["layer"];
            const double slotError = maxDifference(
                trace.layers[size_t(slotLayer)].slotActivations[0], run["slots"]["values"]);
            QVERIFY2(slotError < 1e-4, label + " slots off by " + QByteArray::number(slotError));

            // The maps the views draw are rebuilt from kept queries and keys (kv heads shared
            // under GQA, the window applied): the same entries.
            CaptureRequest request = viewerRequest(spec, 0.1);
            auto result = capture(*loaded->model, loaded->tokenizer, "unused", request);
            QVERIFY(result.ok());
            std::vector<AttentionMaps::Layer> layers;
            for (int64_t l = 0; l < int64_t(trace.layers.size()); ++l) {
                layers.push_back({trace.layers[size_t(l)].q[0], trace.layers[size_t(l)].k[0],
                                  loaded->model->attentionGamma(l),
                                  loaded->model->info().window(l)});
            }
            const AttentionMaps maps(layers, spec, loaded->model->attentionScale());
            for (const auto& map : run["maps"]) {
                const double e =
                    maxDifference(maps.weights(map["layer"], map["head"]), map["weights"]);
                QVERIFY2(e < 1e-5, label + " rebuilt map off by " + QByteArray::number(e));
            }
            // every head (the forward pass's kv-head sharing is checked by the logits above)
            for (int64_t l = 0; l < maps.layers(); ++l) {
                for (int64_t h = 0; h < maps.heads(); ++h) {
                    const double e = (maps.weights(l, h) - trace.layers[size_t(l)].weights[0][h])
                                         .abs()
                                         .max()
                                         .item<double>();
                    QVERIFY2(e < 1e-6, label + " rebuilt head " + QByteArray::number(int(h)) +
                                           " off by " + QByteArray::number(e));
                }
            }
        }
    }

    void familiesAndShapesAreReported() {
        auto gqa = readModelConfig(folder("llama_gqa_bf16").toStdString());
        QVERIFY(gqa.ok());
        QCOMPARE(QString::fromStdString(gqa->family), QString("llama"));
        QCOMPARE(gqa->nHeads, int64_t(8));
        QCOMPARE(gqa->nKvHeads, int64_t(2));
        QCOMPARE(gqa->kvHeadOf(5), int64_t(1));  // 8 query heads over 2 kv heads: 4 per group
        QCOMPARE(gqa->kvHeadOf(3), int64_t(0));
        QVERIFY(gqa->gatedFfn);
        auto gemma = checkModelFolder(folder("gemma").toStdString());
        QVERIFY2(gemma.ok(), gemma.ok() ? "" : gemma.error().c_str());
        QCOMPARE(gemma->headDim, int64_t(24));
        QCOMPARE(gemma->trained.ffn, FfnKind::GeluTanh);
        QCOMPARE(QString::fromStdString(gemma->storage), QString("BF16"));
        auto window = readModelConfig(folder("mistral_window").toStdString());
        QCOMPARE(window->window(1), int64_t(5));
        auto qwen = readModelConfig(folder("qwen2_bias").toStdString());
        QCOMPARE(qwen->window(1), int64_t(0));  // use_sliding_window is false
    }

    void bosIsAddedAsTheTokenizerConfigSays() {
        // "Hello world" is 417 278 278 269 259 301 348 482 in the tiny SentencePiece model
        // (spm_encode); llama folders add BOS (id 1) with an empty span, qwen folders do not.
        const std::vector<int64_t> expected = {417, 278, 278, 269, 259, 301, 348, 482};
        auto llama = loadModelFolder(folder("llama_f32").toStdString(), cpu());
        QVERIFY(llama.ok());
        const auto withBos = llama->tokenizer.encode("Hello world").value();
        QCOMPARE(int(withBos.size()), 9);
        QCOMPARE(withBos[0].id, int64_t(1));
        QCOMPARE(withBos[0].start, size_t(0));
        QCOMPARE(withBos[0].end, size_t(0));
        for (size_t i = 0; i < expected.size(); ++i) QCOMPARE(withBos[i + 1].id, expected[i]);
        auto qwen = loadModelFolder(folder("qwen2_bias").toStdString(), cpu());
        QVERIFY(qwen.ok());
        const auto without = qwen->tokenizer.encode("Hello world").value();
        QCOMPARE(int(without.size()), 8);
        for (size_t i = 0; i < expected.size(); ++i) QCOMPARE(without[i].id, expected[i]);
        // add_bos_token false in tokenizer_config.json wins over the family's habit
        const QString off = copyFolder(folder("llama_f32"), dir_.filePath("bos-off"));
        writeJson(off + "/tokenizer_config.json", {{"add_bos_token", false}});
        auto noBos = loadModelFolder(off.toStdString(), cpu());
        QVERIFY(noBos.ok());
        QCOMPARE(noBos->tokenizer.encode("Hello world").value()[0].id, expected[0]);
    }

    void loadingReportsProgressAndCanBeCancelled() {
        const std::string path = folder("llama_sharded").toStdString();
        std::vector<double> seen;
        std::atomic<bool> cancel{false};
        LoadOptions options = cpu();
        options.cancel = &cancel;
        options.progress = [&](double fraction, const std::string&) {
            seen.push_back(fraction);
            if (seen.size() == 5) cancel = true;  // the user presses Cancel mid-load
        };
        auto stopped = loadModelFolder(path, options);
        QVERIFY(!stopped.ok());
        QCOMPARE(QString::fromStdString(stopped.error()),
                 QString::fromStdString("loading " + path + " was cancelled"));
        QCOMPARE(int(seen.size()), 5);
        cancel = false;
        seen.clear();
        options.progress = [&](double fraction, const std::string&) { seen.push_back(fraction); };
        QVERIFY(loadModelFolder(path, options).ok());
        QVERIFY(seen.size() > 10);
        QVERIFY(std::is_sorted(seen.begin(), seen.end()));
        QCOMPARE(seen.back(), 1.0);
    }

    void theTrainedActivationComesFromARelulensBlock() {
        const QString path = copyFolder(folder("llama_f32"), dir_.filePath("trained-relu"));
        json config = readJson(path + "/config.json");
        QVERIFY(!readModelConfig(path.toStdString())->trained.attention.hasExactZeros());
        config["relulens"] = {{"attention", "relu_len"}, {"ffn", "relu"}};
        writeJson(path + "/config.json", config);
        auto info = checkModelFolder(path.toStdString());
        QVERIFY(info.ok());
        QCOMPARE(info->trained.attention.kind, AttentionKind::ReluLen);
        QCOMPARE(info->trained.ffn, FfnKind::Relu);
    }

    void softmaxMemoriesAreRefusedOnGatedFfns() {
        auto loaded = loadModelFolder(folder("llama_f32").toStdString(), cpu());
        QVERIFY(loaded.ok());
        RunSpec run;
        run.ffn = FfnKind::Softmax;
        auto r = capture(*loaded->model, loaded->tokenizer, "Hello", viewerRequest(run, 0.1));
        QVERIFY(!r.ok());
        QCOMPARE(
            QString::fromStdString(r.error()),
            QString("FFN variant softmax is defined for ungated memories only; llama_f32 has a "
                    "gated FFN, whose gate activation can be silu, gelu, gelu_tanh, relu"));
    }

    void slotVocabularyProjectsDownColumnsThroughTheOutput() {
        // Computed here from the file's own tensors: column `slot` of down_proj against every
        // lm_head row, byte and control pieces (ids 0..258 of the tiny tokenizer) left out.
        const QString path = folder("llama_f32");
        auto loaded = loadModelFolder(path.toStdString(), cpu());
        QVERIFY(loaded.ok());
        auto file = readSafetensors((path + "/model.safetensors").toStdString());
        QVERIFY(file.ok());
        const int64_t layer = 1, slot = 17;
        const auto down = file->tensors.at("model.layers.1.mlp.down_proj.weight");
        const auto head = file->tensors.at("lm_head.weight");
        auto logits = (head.to(torch::kFloat64) * down.select(1, slot).to(torch::kFloat64)).sum(1);
        logits.narrow(0, 0, 259).fill_(-1e300);
        const auto expected = std::get<1>(logits.topk(10));
        const SlotVocabulary vocabulary(*loaded->model, loaded->tokenizer);
        const auto promoted = vocabulary.promoted(layer, slot);
        QCOMPARE(int(promoted.size()), 10);
        for (int i = 0; i < 10; ++i) {
            QCOMPARE(promoted[size_t(i)].id, expected[i].item<int64_t>());
            QCOMPARE(promoted[size_t(i)].piece, loaded->tokenizer.readable(promoted[size_t(i)].id));
        }
        QVERIFY(vocabulary.promoted(layer, 10'000).empty());
    }

    // ---- llama2.c ----------------------------------------------------------------------

    void llama2cImportsMatchTheInterleavedForward_data() {
        QTest::addColumn<int>("index");
        for (size_t i = 0; i < llama2cReference_["cases"].size(); ++i) {
            QTest::newRow(llama2cReference_["cases"][i]["name"].get<std::string>().c_str())
                << int(i);
        }
    }

    void llama2cImportsMatchTheInterleavedForward() {
        QFETCH(int, index);
        const json& c = llama2cReference_["cases"][size_t(index)];
        Llama2cImport request;
        request.model = (llama2c_ + "/" + QString::fromStdString(c["file"])).toStdString();
        request.tokenizer = relulens::test::dataPath("tiny/tokenizer.model");
        request.out = dir_.filePath("imported-" + QString::fromStdString(c["name"])).toStdString();
        auto summary = importLlama2c(request);
        QVERIFY2(summary.ok(), summary.ok() ? "" : summary.error().c_str());
        QCOMPARE(summary->version, c["version"].get<int>());
        QCOMPARE(summary->tied, c["tied"].get<bool>());
        QCOMPARE(summary->kvHeads, c["n_kv_heads"].get<int64_t>());
        auto loaded = loadModelFolder(request.out, cpu());
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
        const auto ids = c["ids"].get<std::vector<int64_t>>();
        torch::NoGradGuard noGrad;
        RunSpec run;  // softmax attention, SiLU gate: llama2.c's model
        run.ffn = FfnKind::Silu;
        const auto logits =
            loaded->model->forward(torch::tensor(ids).view({1, int64_t(ids.size())}), run)[0];
        const double e = maxDifference(logits, c["logits"]);
        QVERIFY2(e < 1e-4, "logits off by " + QByteArray::number(e));
        // the tokenizer adds BOS, as llama2.c's run.c does
        QCOMPARE(loaded->tokenizer.encode("Hello").value()[0].id, int64_t(1));
        // a second import refuses to overwrite without --force
        auto again = importLlama2c(request);
        QVERIFY(!again.ok());
        QCOMPARE(QString::fromStdString(again.error()),
                 QString::fromStdString(request.out) +
                     " already holds a model; add --force to replace it");
    }

    void theCommandLineImportsAndInspects() {
        // relulens import-llama2c, then inspect --json on the folder it wrote: the JSON's model
        // block names the family and the shapes; BOS leads the tokens.
        const QString out = dir_.filePath("cli-import");
        QProcess relulens;
        relulens.start(QString::fromStdString(relulens::test::binPath("relulens")),
                       {"import-llama2c", "--model", llama2c_ + "/v0_untied_gqa.bin", "--tokenizer",
                        QString::fromStdString(relulens::test::dataPath("tiny/tokenizer.model")),
                        "--out", out});
        QVERIFY(relulens.waitForFinished(60000));
        QVERIFY2(relulens.exitCode() == 0, relulens.readAllStandardError().constData());
        QCOMPARE(QString(relulens.readAllStandardOutput()),
                 "llama2.c v0 model (dim 48, 2 layers, 6 heads / 2 kv heads, vocab 512, separate "
                 "classifier) written to " +
                     out + " as a Hugging Face llama folder\n");
        const QString json = dir_.filePath("cli.json");
        relulens.start(QString::fromStdString(relulens::test::binPath("relulens")),
                       {"inspect", "--model", out, "--text", "Hello world", "--attention",
                        "relu_len", "--json", json});
        QVERIFY(relulens.waitForFinished(60000));
        QVERIFY2(relulens.exitCode() == 0, relulens.readAllStandardError().constData());
        const auto j = readJson(json);
        QCOMPARE(j["model"]["family"].get<std::string>(), std::string("llama"));
        QCOMPARE(j["model"]["n_heads"].get<int>(), 6);
        QCOMPARE(j["model"]["n_kv_heads"].get<int>(), 2);
        QCOMPARE(j["model"]["head_dim"].get<int>(), 8);
        QCOMPARE(j["model"]["ffn"].get<std::string>(), std::string("silu"));
        QVERIFY(j["model"]["gated_ffn"].get<bool>());
        QCOMPARE(j["run"]["attention"]["variant"].get<std::string>(), std::string("relu_len"));
        QCOMPARE(j["tokens"][0]["id"].get<int>(), 1);
        QCOMPARE(j["tokens"].size(), size_t(9));
        QCOMPARE(j["layers"][1]["heads"].size(), size_t(6));
    }

    void llama2cRefusesATruncatedFile() {
        const QString path = llama2c_ + "/v0_tied.bin";
        QByteArray bytes = readAll(path);
        const QString cut = dir_.filePath("cut.bin");
        writeAll(cut, bytes.left(bytes.size() - 4));
        Llama2cImport request{cut.toStdString(), relulens::test::dataPath("tiny/tokenizer.model"),
                              dir_.filePath("cut").toStdString()};
        auto s = importLlama2c(request);
        QVERIFY(!s.ok());
        QCOMPARE(QString::fromStdString(s.error()),
                 cut + QString(": not a llama2.c model (the file has %1 bytes; a v0 model of these "
                               "sizes has %2)")
                           .arg(bytes.size() - 4)
                           .arg(bytes.size()));
        QVERIFY(!QFileInfo::exists(dir_.filePath("cut")));
    }

    // ---- bad folders: each its own message, nothing loaded -------------------------------

    void badFolders_data() {
        QTest::addColumn<QString>("damage");
        for (const char* d :
             {"unsupported family", "gemma2", "missing shard", "index names a missing tensor",
              "shape contradicts the config", "pickle only", "tokenizer vocabulary", "no BOS id",
              "unsupported tokenizer.json", "tiktoken tokenizer.model", "unexpected tensor",
              "NaN weights", "rope scaling", "head count"}) {
            QTest::newRow(d) << QString(d);
        }
    }

    void badFolders() {
        QFETCH(QString, damage);
        const QString base = damage == "missing shard" || damage == "index names a missing tensor"
                                 ? folder("llama_sharded")
                                 : folder("llama_f32");
        const QString path =
            copyFolder(base, dir_.filePath("bad-" + QString(damage).replace(' ', '-')));
        json config = readJson(path + "/config.json");
        QString expected;
        if (damage == "unsupported family") {
            config["model_type"] = "gpt2";
            writeJson(path + "/config.json", config);
            expected = path +
                       "/config.json: model_type 'gpt2' is not supported; ReluLens opens llama, "
                       "mistral, qwen2, qwen3 and gemma checkpoints (and its own models)";
        } else if (damage == "gemma2") {
            config["model_type"] = "gemma2";
            writeJson(path + "/config.json", config);
            expected =
                path +
                "/config.json: model_type 'gemma2' uses attention and final-logit soft-capping "
                "and extra norms, which ReluLens does not implement; it opens llama, mistral, "
                "qwen2, qwen3 and gemma checkpoints";
        } else if (damage == "missing shard") {
            QVERIFY(QFile::remove(path + "/model-00002-of-00003.safetensors"));
            expected = path +
                       "/model-00002-of-00003.safetensors: missing (model.safetensors.index.json "
                       "names it)";
        } else if (damage == "index names a missing tensor") {
            json index = readJson(path + "/model.safetensors.index.json");
            index["weight_map"]["model.layers.0.mlp.extra.weight"] =
                "model-00001-of-00003.safetensors";
            writeJson(path + "/model.safetensors.index.json", index);
            expected =
                path +
                "/model.safetensors.index.json: names tensor 'model.layers.0.mlp.extra.weight' in "
                "model-00001-of-00003.safetensors, which does not hold it";
        } else if (damage == "shape contradicts the config") {
            config["intermediate_size"] = 96;
            writeJson(path + "/config.json", config);
            expected = path +
                       "/model.safetensors: tensor 'model.layers.0.mlp.gate_proj.weight' has shape "
                       "64×32, config says 96×32";
        } else if (damage == "pickle only") {
            QVERIFY(QFile::rename(path + "/model.safetensors", path + "/pytorch_model.bin"));
            expected =
                path +
                "/pytorch_model.bin: a pickle checkpoint, which ReluLens never opens (it can run "
                "code); convert it to model.safetensors first";
        } else if (damage == "tokenizer vocabulary") {
            QFile::remove(path + "/tokenizer.model");
            QVERIFY(QFile::copy(QString(RELULENS_RESOURCES) + "/models/softmax/tokenizer.model",
                                path + "/tokenizer.model"));
            expected =
                path +
                "/tokenizer.model: the tokenizer has 4096 pieces, config.json says vocab_size 512";
        } else if (damage == "no BOS id") {
            config.erase("bos_token_id");
            writeJson(path + "/config.json", config);
            expected =
                path +
                ": the tokenizer should add a BOS token, but neither config.json (bos_token_id) "
                "nor tokenizer_config.json names one";
        } else if (damage == "unsupported tokenizer.json") {
            // with no tokenizer.model, the tokenizer.json is read: here a Unigram one
            QVERIFY(QFile::remove(path + "/tokenizer.model"));
            writeJson(path + "/tokenizer.json",
                      {{"model", {{"type", "Unigram"}, {"vocab", json::array()}}}});
            expected = path + "/tokenizer.json: model type 'Unigram' is not supported (only BPE)";
        } else if (damage == "tiktoken tokenizer.model") {
            writeAll(path + "/tokenizer.model", "IQ== 0\nIg== 1\n");
            expected = path +
                       "/tokenizer.model is a tiktoken vocabulary, not a SentencePiece model, and "
                       "there is no tokenizer.json beside it";
        } else if (damage == "unexpected tensor") {
            auto file = readSafetensors((path + "/model.safetensors").toStdString());
            QVERIFY(file.ok());
            file->tensors["model.layers.0.self_attn.q_norm.weight"] = torch::ones({8});
            QVERIFY(writeSafetensors((path + "/model.safetensors").toStdString(), file->tensors,
                                     StorageType::F32)
                        .ok());
            expected =
                path +
                "/model.safetensors: unexpected tensor 'model.layers.0.self_attn.q_norm.weight' "
                "(not part of a llama model with this config.json)";
        } else if (damage == "NaN weights") {
            auto file = readSafetensors((path + "/model.safetensors").toStdString());
            QVERIFY(file.ok());
            file->tensors["model.layers.1.mlp.up_proj.weight"][3][4] =
                std::numeric_limits<float>::quiet_NaN();
            QVERIFY(writeSafetensors((path + "/model.safetensors").toStdString(), file->tensors,
                                     StorageType::F32)
                        .ok());
            // the header is fine: only reading the values finds it
            QVERIFY(checkModelFolder(path.toStdString()).ok());
            auto loaded = loadModelFolder(path.toStdString(), cpu());
            QVERIFY(!loaded.ok());
            QCOMPARE(QString::fromStdString(loaded.error()),
                     path +
                         "/model.safetensors: tensor 'model.layers.1.mlp.up_proj.weight' holds 1 "
                         "NaN or infinite value(s)");
            return;
        } else if (damage == "rope scaling") {
            config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
            writeJson(path + "/config.json", config);
            expected =
                path +
                "/config.json: rope_scaling type 'yarn' is not supported (default, linear, llama3)";
        } else if (damage == "head count") {
            config["num_key_value_heads"] = 3;
            writeJson(path + "/config.json", config);
            expected =
                path +
                "/config.json: num_attention_heads 4 is not a multiple of num_key_value_heads 3";
        }
        QCOMPARE(refusal(path), expected);
    }

    void aModelTooLargeForMemoryIsRefusedBeforeAllocating() {
        // An 11-billion-parameter llama whose weights are a sparse file: its header is real, its
        // data never read. The refusal names the sizes and nothing is allocated.
        const QString path = dir_.filePath("huge");
        QDir().mkpath(path);
        const int64_t H = 8192, I = 28672, V = 128256, layers = 10;
        json config = {{"model_type", "llama"},     {"hidden_size", H},
                       {"intermediate_size", I},    {"num_hidden_layers", layers},
                       {"num_attention_heads", 64}, {"num_key_value_heads", 8},
                       {"vocab_size", V},           {"tie_word_embeddings", false},
                       {"bos_token_id", 1}};
        writeJson(path + "/config.json", config);
        json header = json::object();
        uint64_t offset = 0;
        int64_t parameters = 0;
        auto add = [&](const std::string& name, std::vector<int64_t> shape) {
            int64_t n = 1;
            for (auto d : shape) n *= d;
            parameters += n;
            header[name] = {{"dtype", "BF16"},
                            {"shape", shape},
                            {"data_offsets", {offset, offset + uint64_t(n) * 2}}};
            offset += uint64_t(n) * 2;
        };
        add("model.embed_tokens.weight", {V, H});
        for (int64_t l = 0; l < layers; ++l) {
            const std::string p = "model.layers." + std::to_string(l) + ".";
            add(p + "input_layernorm.weight", {H});
            add(p + "post_attention_layernorm.weight", {H});
            add(p + "self_attn.q_proj.weight", {H, H});
            add(p + "self_attn.k_proj.weight", {1024, H});
            add(p + "self_attn.v_proj.weight", {1024, H});
            add(p + "self_attn.o_proj.weight", {H, H});
            add(p + "mlp.gate_proj.weight", {I, H});
            add(p + "mlp.up_proj.weight", {I, H});
            add(p + "mlp.down_proj.weight", {H, I});
        }
        add("model.norm.weight", {H});
        add("lm_head.weight", {V, H});
        std::string text = header.dump();
        while ((8 + text.size()) % 8) text.push_back(' ');
        {
            std::ofstream out((path + "/model.safetensors").toStdString(), std::ios::binary);
            const uint64_t n = text.size();
            out.write(reinterpret_cast<const char*>(&n), 8);
            out.write(text.data(), std::streamsize(text.size()));
        }
        QVERIFY(QFile::resize(path + "/model.safetensors",
                              qint64(8 + text.size() + offset)));  // sparse
        QFile::copy(QString::fromStdString(relulens::test::dataPath("tiny/tokenizer.model")),
                    path + "/tokenizer.model");
        const int64_t available = availableMemoryBytes();
        QVERIFY(available > 0 && available < parameters * 4);
        const double residentBefore = relulens::test::residentMb();
        auto loaded = loadModelFolder(path.toStdString(), cpu());
        QVERIFY(relulens::test::residentMb() - residentBefore < 64);
        QVERIFY(!loaded.ok());
        QCOMPARE(
            QString::fromStdString(loaded.error()).section(" and ", 0, 0),
            path + QString(": the model needs %1 GB of memory (%2 billion parameters as float32)")
                       .arg(double(parameters) * 4 / 1e9, 0, 'f', 1)
                       .arg(double(parameters) / 1e9, 0, 'f', 2));
        QVERIFY(QString::fromStdString(loaded.error())
                    .endsWith(" are available; close other programs or open a smaller model"));
    }
};

QTEST_GUILESS_MAIN(TestHfModel)
#include "test_hf_model.moc"
