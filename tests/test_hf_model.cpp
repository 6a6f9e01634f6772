// Hugging Face–layout checkpoints against an independent NumPy forward pass: every family and
// feature (GQA, MQA, biases, q/k norms, rope scaling, sliding windows, tied and untied heads,
// bf16/f16, shards) in softmax and two ReLU variants and with a ReLU-fied gate; llama2.c models
// imported from both .bin formats; and every bad folder refused with its own message.
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/capture.h"
#include "core/hf_checkpoint.h"
#include "core/lens.h"
#include "core/llama2c.h"
#include "core/model_folder.h"
#include "core/safetensors.h"
#include "core/slot_vocabulary.h"
#include "core_test.h"

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

// A number as %g writes it (6 significant digits), for failure messages.
std::string numberText(double v) {
    std::ostringstream out;
    out << v;
    return out.str();
}

// A number with a fixed count of decimals (%.Nf).
std::string fixedText(double v, int decimals) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(decimals) << v;
    return out.str();
}

bool endsWith(const std::string& text, const std::string& tail) {
    return text.size() >= tail.size() &&
           text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// A copy of a fixture folder to damage.
std::string copyFolder(const std::string& from, const std::string& to) {
    std::filesystem::create_directories(to);
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(from)) {
        if (entry.is_regular_file()) names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
        std::error_code ec;
        std::filesystem::copy_file(from + "/" + name, to + "/" + name, ec);
    }
    return to;
}

json readJson(const std::string& path) {
    return json::parse(relulens::test::readFile(path));
}
void writeJson(const std::string& path, const json& j) {
    relulens::test::writeFile(path, j.dump(2));
}

// What initTestCase built once for every test: the fixture folders the Python generators wrote
// into a temporary folder (removed with the fixture), and their reference.json files.
struct Fixture {
    relulens::test::TempDir dir;
    std::string fixtures, llama2c;
    json reference, llama2cReference;

    Fixture() : fixtures(dir.filePath("hf")), llama2c(dir.filePath("llama2c")) {
        const std::string source = RELULENS_SOURCE_DIR;
        auto hf = relulens::test::runProcess(
            RELULENS_PYTHON,
            {source + "/tests/reference/hf_fixtures.py", "--out", fixtures, "--tokenizer",
             relulens::test::dataPath("tiny/tokenizer.model")},
            120);
        if (!hf.finished || hf.exitCode != 0)
            throw std::runtime_error("hf_fixtures.py failed: " + hf.err);
        auto l2c = relulens::test::runProcess(
            RELULENS_PYTHON, {source + "/tests/reference/llama2c_fixtures.py", "--out", llama2c},
            120);
        if (!l2c.finished || l2c.exitCode != 0)
            throw std::runtime_error("llama2c_fixtures.py failed: " + l2c.err);
        reference = readJson(fixtures + "/reference.json");
        llama2cReference = readJson(llama2c + "/reference.json");
        if (reference["cases"].size() != size_t(12))
            throw std::runtime_error("hf reference.json has " +
                                     std::to_string(reference["cases"].size()) +
                                     " cases, expected 12");
    }
};

const Fixture& fixture() {
    static Fixture f;
    return f;
}

std::string folder(const std::string& name) {
    return fixture().fixtures + "/" + name;
}

LoadOptions cpu() {
    LoadOptions options;
    options.device = "cpu";
    return options;
}

// The message loading a folder gives (and that checking it gives the same).
std::string refusal(const std::string& path) {
    auto checked = checkModelFolder(path);
    auto loaded = loadModelFolder(path, cpu());
    if (loaded) return "(loaded)";
    if (checked && !loaded) return "(check passed) " + loaded.error();
    if (checked.error() != loaded.error()) return "(check and load differ) " + checked.error();
    return loaded.error();
}

}  // namespace

// ---- every family and feature against the NumPy forward -----------------------------

TEST_CASE("matchesTheReference") {
    for (const json& c : fixture().reference["cases"]) {
        INFO("row: " << c["name"].get<std::string>());
        auto loaded = loadModelFolder(folder(c["folder"]), cpu());
        REQUIRE_MESSAGE(loaded.ok(), loaded.error());
        const auto ids = c["ids"].get<std::vector<int64_t>>();
        const int64_t L = int64_t(ids.size());
        const auto input = torch::tensor(ids).view({1, L});
        // the papers' variants, the seven later ones, and softmax with per-layer and per-head
        // overrides and ablations
        REQUIRE(c["runs"].size() == size_t(12));
        for (const auto& run : c["runs"]) {
            const RunSpec spec = runOf(run);
            std::string name =
                run["attention"].get<std::string>() + " / " + run["ffn"].get<std::string>();
            for (const auto& o : spec.overrides) name += " " + o.label();
            const std::string label = name;
            torch::NoGradGuard noGrad;
            ForwardTrace trace;
            trace.options.weights = true;
            trace.options.ffn = true;
            trace.options.queriesKeys = true;
            trace.options.residual = true;
            const auto logits = loaded->model->forward(input, spec, &trace)[0];
            const double logitError = maxDifference(logits, run["logits"]);
            REQUIRE_MESSAGE(logitError < 1e-4,
                            (label + " logits off by " + numberText(logitError)));
            // The logit lens through this family's final norm and output layer.
            {
                std::vector<torch::Tensor> afterLayer;
                for (size_t l = 1; l < trace.layers.size(); ++l)
                    afterLayer.push_back(trace.layers[l].residual[0]);
                afterLayer.push_back(trace.finalResidual[0]);
                const auto lens =
                    logitLens(*loaded->model, afterLayer, ids, {-1}, 3, loaded->tokenizer);
                REQUIRE(lens.nextTokenProbability.size(0) == int64_t(run["lens"].size()));
                const double e = maxDifference(lens.nextTokenProbability, run["lens"]);
                REQUIRE_MESSAGE(e < 1e-5, (label + " lens off by " + numberText(e)));
            }
            for (const auto& map : run["maps"]) {
                const int64_t layer = map["layer"], head = map["head"];
                const double e =
                    maxDifference(trace.layers[size_t(layer)].weights[0][head], map["weights"]);
                REQUIRE_MESSAGE(e < 1e-5, (label + " map off by " + numberText(e)));
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
                REQUIRE_MESSAGE(e < 1e-4, (label + " continued logits off by " + numberText(e)));
            }
            const int64_t slotLayer = run["slots"]["layer"];
            const double slotError = maxDifference(
                trace.layers[size_t(slotLayer)].slotActivations[0], run["slots"]["values"]);
            REQUIRE_MESSAGE(slotError < 1e-4, (label + " slots off by " + numberText(slotError)));

            // The maps the views draw are rebuilt from kept queries and keys (kv heads shared
            // under GQA, the window applied): the same entries.
            CaptureRequest request = viewerRequest(spec, 0.1);
            auto result = capture(*loaded->model, loaded->tokenizer, "unused", request);
            REQUIRE(result.ok());
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
                REQUIRE_MESSAGE(e < 1e-5, (label + " rebuilt map off by " + numberText(e)));
            }
            // every head (the forward pass's kv-head sharing is checked by the logits above)
            for (int64_t l = 0; l < maps.layers(); ++l) {
                for (int64_t h = 0; h < maps.heads(); ++h) {
                    const double e = (maps.weights(l, h) - trace.layers[size_t(l)].weights[0][h])
                                         .abs()
                                         .max()
                                         .item<double>();
                    REQUIRE_MESSAGE(e < 1e-6, (label + " rebuilt head " + std::to_string(int(h)) +
                                               " off by " + numberText(e)));
                }
            }
        }
    }
}

TEST_CASE("familiesAndShapesAreReported") {
    auto gqa = readModelConfig(folder("llama_gqa_bf16"));
    REQUIRE(gqa.ok());
    REQUIRE(gqa->family == std::string("llama"));
    REQUIRE(gqa->nHeads == int64_t(8));
    REQUIRE(gqa->nKvHeads == int64_t(2));
    REQUIRE(gqa->kvHeadOf(5) == int64_t(1));  // 8 query heads over 2 kv heads: 4 per group
    REQUIRE(gqa->kvHeadOf(3) == int64_t(0));
    REQUIRE(gqa->gatedFfn);
    auto gemma = checkModelFolder(folder("gemma"));
    REQUIRE_MESSAGE(gemma.ok(), gemma.error());
    REQUIRE(gemma->headDim == int64_t(24));
    REQUIRE(gemma->trained.ffn == FfnKind::GeluTanh);
    REQUIRE(gemma->storage == std::string("BF16"));
    auto window = readModelConfig(folder("mistral_window"));
    REQUIRE(window->window(1) == int64_t(5));
    auto qwen = readModelConfig(folder("qwen2_bias"));
    REQUIRE(qwen->window(1) == int64_t(0));  // use_sliding_window is false
}

TEST_CASE("bosIsAddedAsTheTokenizerConfigSays") {
    // "Hello world" is 417 278 278 269 259 301 348 482 in the tiny SentencePiece model
    // (spm_encode); llama folders add BOS (id 1) with an empty span, qwen folders do not.
    const std::vector<int64_t> expected = {417, 278, 278, 269, 259, 301, 348, 482};
    auto llama = loadModelFolder(folder("llama_f32"), cpu());
    REQUIRE(llama.ok());
    const auto withBos = llama->tokenizer.encode("Hello world").value();
    REQUIRE(int(withBos.size()) == 9);
    REQUIRE(withBos[0].id == int64_t(1));
    REQUIRE(withBos[0].start == size_t(0));
    REQUIRE(withBos[0].end == size_t(0));
    for (size_t i = 0; i < expected.size(); ++i) REQUIRE(withBos[i + 1].id == expected[i]);
    auto qwen = loadModelFolder(folder("qwen2_bias"), cpu());
    REQUIRE(qwen.ok());
    const auto without = qwen->tokenizer.encode("Hello world").value();
    REQUIRE(int(without.size()) == 8);
    for (size_t i = 0; i < expected.size(); ++i) REQUIRE(without[i].id == expected[i]);
    // add_bos_token false in tokenizer_config.json wins over the family's habit
    const std::string off = copyFolder(folder("llama_f32"), fixture().dir.filePath("bos-off"));
    writeJson(off + "/tokenizer_config.json", {{"add_bos_token", false}});
    auto noBos = loadModelFolder(off, cpu());
    REQUIRE(noBos.ok());
    REQUIRE(noBos->tokenizer.encode("Hello world").value()[0].id == expected[0]);
}

TEST_CASE("loadingReportsProgressAndCanBeCancelled") {
    const std::string path = folder("llama_sharded");
    std::vector<double> seen;
    std::atomic<bool> cancel{false};
    LoadOptions options = cpu();
    options.cancel = &cancel;
    options.progress = [&](double fraction, const std::string&) {
        seen.push_back(fraction);
        if (seen.size() == 5) cancel = true;  // the user presses Cancel mid-load
    };
    auto stopped = loadModelFolder(path, options);
    REQUIRE_FALSE(stopped.ok());
    REQUIRE(stopped.error() == "loading " + path + " was cancelled");
    REQUIRE(int(seen.size()) == 5);
    cancel = false;
    seen.clear();
    options.progress = [&](double fraction, const std::string&) { seen.push_back(fraction); };
    REQUIRE(loadModelFolder(path, options).ok());
    REQUIRE(seen.size() > 10);
    REQUIRE(std::is_sorted(seen.begin(), seen.end()));
    REQUIRE(seen.back() == doctest::Approx(1.0).epsilon(1e-12));
}

TEST_CASE("theTrainedActivationComesFromARelulensBlock") {
    const std::string path =
        copyFolder(folder("llama_f32"), fixture().dir.filePath("trained-relu"));
    json config = readJson(path + "/config.json");
    REQUIRE_FALSE(readModelConfig(path)->trained.attention.hasExactZeros());
    config["relulens"] = {{"attention", "relu_len"}, {"ffn", "relu"}};
    writeJson(path + "/config.json", config);
    auto info = checkModelFolder(path);
    REQUIRE(info.ok());
    REQUIRE(info->trained.attention.kind == AttentionKind::ReluLen);
    REQUIRE(info->trained.ffn == FfnKind::Relu);
}

TEST_CASE("softmaxMemoriesAreRefusedOnGatedFfns") {
    auto loaded = loadModelFolder(folder("llama_f32"), cpu());
    REQUIRE(loaded.ok());
    RunSpec run;
    run.ffn = FfnKind::Softmax;
    auto r = capture(*loaded->model, loaded->tokenizer, "Hello", viewerRequest(run, 0.1));
    REQUIRE_FALSE(r.ok());
    REQUIRE(r.error() ==
            std::string("FFN variant softmax is defined for ungated memories only; llama_f32 has a "
                        "gated FFN, whose gate activation can be silu, gelu, gelu_tanh, relu"));
}

TEST_CASE("slotVocabularyProjectsDownColumnsThroughTheOutput") {
    // Computed here from the file's own tensors: column `slot` of down_proj against every
    // lm_head row, byte and control pieces (ids 0..258 of the tiny tokenizer) left out.
    const std::string path = folder("llama_f32");
    auto loaded = loadModelFolder(path, cpu());
    REQUIRE(loaded.ok());
    auto file = readSafetensors(path + "/model.safetensors");
    REQUIRE(file.ok());
    const int64_t layer = 1, slot = 17;
    const auto down = file->tensors.at("model.layers.1.mlp.down_proj.weight");
    const auto head = file->tensors.at("lm_head.weight");
    auto logits = (head.to(torch::kFloat64) * down.select(1, slot).to(torch::kFloat64)).sum(1);
    logits.narrow(0, 0, 259).fill_(-1e300);
    const auto expected = std::get<1>(logits.topk(10));
    const SlotVocabulary vocabulary(*loaded->model, loaded->tokenizer);
    const auto promoted = vocabulary.promoted(layer, slot);
    REQUIRE(int(promoted.size()) == 10);
    for (int i = 0; i < 10; ++i) {
        REQUIRE(promoted[size_t(i)].id == expected[i].item<int64_t>());
        REQUIRE(promoted[size_t(i)].piece == loaded->tokenizer.readable(promoted[size_t(i)].id));
    }
    REQUIRE(vocabulary.promoted(layer, 10'000).empty());
}

// ---- llama2.c ----------------------------------------------------------------------

TEST_CASE("llama2cImportsMatchTheInterleavedForward") {
    for (const json& c : fixture().llama2cReference["cases"]) {
        INFO("row: " << c["name"].get<std::string>());
        Llama2cImport request;
        request.model = fixture().llama2c + "/" + c["file"].get<std::string>();
        request.tokenizer = relulens::test::dataPath("tiny/tokenizer.model");
        request.out = fixture().dir.filePath("imported-" + c["name"].get<std::string>());
        auto summary = importLlama2c(request);
        REQUIRE_MESSAGE(summary.ok(), summary.error());
        REQUIRE(summary->version == c["version"].get<int>());
        REQUIRE(summary->tied == c["tied"].get<bool>());
        REQUIRE(summary->kvHeads == c["n_kv_heads"].get<int64_t>());
        auto loaded = loadModelFolder(request.out, cpu());
        REQUIRE_MESSAGE(loaded.ok(), loaded.error());
        const auto ids = c["ids"].get<std::vector<int64_t>>();
        torch::NoGradGuard noGrad;
        RunSpec run;  // softmax attention, SiLU gate: llama2.c's model
        run.ffn = FfnKind::Silu;
        const auto logits =
            loaded->model->forward(torch::tensor(ids).view({1, int64_t(ids.size())}), run)[0];
        const double e = maxDifference(logits, c["logits"]);
        REQUIRE_MESSAGE(e < 1e-4, ("logits off by " + numberText(e)));
        // the tokenizer adds BOS, as llama2.c's run.c does
        REQUIRE(loaded->tokenizer.encode("Hello").value()[0].id == int64_t(1));
        // a second import refuses to overwrite without --force
        auto again = importLlama2c(request);
        REQUIRE_FALSE(again.ok());
        REQUIRE(again.error() == request.out + " already holds a model; add --force to replace it");
    }
}

TEST_CASE("theCommandLineImportsAndInspects") {
    // relulens import-llama2c, then inspect --json on the folder it wrote: the JSON's model
    // block names the family and the shapes; BOS leads the tokens.
    const std::string out = fixture().dir.filePath("cli-import");
    auto imported = relulens::test::runProcess(
        relulens::test::binPath("relulens"),
        {"import-llama2c", "--model", fixture().llama2c + "/v0_untied_gqa.bin", "--tokenizer",
         relulens::test::dataPath("tiny/tokenizer.model"), "--out", out},
        60);
    REQUIRE_MESSAGE((imported.finished && imported.exitCode == 0), imported.err);
    REQUIRE(imported.out ==
            "llama2.c v0 model (dim 48, 2 layers, 6 heads / 2 kv heads, vocab 512, separate "
            "classifier) written to " +
                out + " as a Hugging Face llama folder\n");
    const std::string json = fixture().dir.filePath("cli.json");
    auto inspected = relulens::test::runProcess(relulens::test::binPath("relulens"),
                                                {"inspect", "--model", out, "--text", "Hello world",
                                                 "--attention", "relu_len", "--json", json},
                                                60);
    REQUIRE_MESSAGE((inspected.finished && inspected.exitCode == 0), inspected.err);
    const auto j = readJson(json);
    REQUIRE(j["model"]["family"].get<std::string>() == std::string("llama"));
    REQUIRE(j["model"]["n_heads"].get<int>() == 6);
    REQUIRE(j["model"]["n_kv_heads"].get<int>() == 2);
    REQUIRE(j["model"]["head_dim"].get<int>() == 8);
    REQUIRE(j["model"]["ffn"].get<std::string>() == std::string("silu"));
    REQUIRE(j["model"]["gated_ffn"].get<bool>());
    REQUIRE(j["run"]["attention"]["variant"].get<std::string>() == std::string("relu_len"));
    REQUIRE(j["tokens"][0]["id"].get<int>() == 1);
    REQUIRE(j["tokens"].size() == size_t(9));
    REQUIRE(j["layers"][1]["heads"].size() == size_t(6));
}

TEST_CASE("llama2cRefusesATruncatedFile") {
    const std::string path = fixture().llama2c + "/v0_tied.bin";
    const std::string bytes = relulens::test::readFile(path);
    const std::string cut = fixture().dir.filePath("cut.bin");
    relulens::test::writeFile(cut, bytes.substr(0, bytes.size() - 4));
    Llama2cImport request{cut, relulens::test::dataPath("tiny/tokenizer.model"),
                          fixture().dir.filePath("cut")};
    auto s = importLlama2c(request);
    REQUIRE_FALSE(s.ok());
    REQUIRE(s.error() ==
            cut + ": not a llama2.c model (the file has " + std::to_string(bytes.size() - 4) +
                " bytes; a v0 model of these sizes has " + std::to_string(bytes.size()) + ")");
    REQUIRE_FALSE(relulens::test::fileExists(fixture().dir.filePath("cut")));
}

// ---- bad folders: each its own message, nothing loaded -------------------------------

TEST_CASE("badFolders") {
    struct Row {
        std::string name;  // the damage done
    };
    const std::vector<Row> rows = {
        {"unsupported family"},
        {"gemma2"},
        {"missing shard"},
        {"index names a missing tensor"},
        {"shape contradicts the config"},
        {"pickle only"},
        {"tokenizer vocabulary"},
        {"no BOS id"},
        {"unsupported tokenizer.json"},
        {"tiktoken tokenizer.model"},
        {"unexpected tensor"},
        {"NaN weights"},
        {"rope scaling"},
        {"head count"},
    };
    for (const Row& row : rows) {
        INFO("row: " << row.name);
        const std::string& damage = row.name;
        const std::string base =
            damage == "missing shard" || damage == "index names a missing tensor"
                ? folder("llama_sharded")
                : folder("llama_f32");
        std::string dashed = damage;
        std::replace(dashed.begin(), dashed.end(), ' ', '-');
        const std::string path = copyFolder(base, fixture().dir.filePath("bad-" + dashed));
        json config = readJson(path + "/config.json");
        std::string expected;
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
            REQUIRE(std::filesystem::remove(path + "/model-00002-of-00003.safetensors"));
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
            std::error_code ec;
            std::filesystem::rename(path + "/model.safetensors", path + "/pytorch_model.bin", ec);
            REQUIRE(!ec);
            expected =
                path +
                "/pytorch_model.bin: a pickle checkpoint, which ReluLens never opens (it can run "
                "code); convert it to model.safetensors first";
        } else if (damage == "tokenizer vocabulary") {
            std::error_code ec;
            std::filesystem::remove(path + "/tokenizer.model", ec);
            REQUIRE(std::filesystem::copy_file(
                std::string(RELULENS_RESOURCES) + "/models/softmax/tokenizer.model",
                path + "/tokenizer.model", ec));
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
            REQUIRE(std::filesystem::remove(path + "/tokenizer.model"));
            writeJson(path + "/tokenizer.json",
                      {{"model", {{"type", "Unigram"}, {"vocab", json::array()}}}});
            expected = path + "/tokenizer.json: model type 'Unigram' is not supported (only BPE)";
        } else if (damage == "tiktoken tokenizer.model") {
            relulens::test::writeFile(path + "/tokenizer.model", "IQ== 0\nIg== 1\n");
            expected = path +
                       "/tokenizer.model is a tiktoken vocabulary, not a SentencePiece model, and "
                       "there is no tokenizer.json beside it";
        } else if (damage == "unexpected tensor") {
            auto file = readSafetensors(path + "/model.safetensors");
            REQUIRE(file.ok());
            file->tensors["model.layers.0.self_attn.q_norm.weight"] = torch::ones({8});
            REQUIRE(writeSafetensors(path + "/model.safetensors", file->tensors, StorageType::F32)
                        .ok());
            expected =
                path +
                "/model.safetensors: unexpected tensor 'model.layers.0.self_attn.q_norm.weight' "
                "(not part of a llama model with this config.json)";
        } else if (damage == "NaN weights") {
            auto file = readSafetensors(path + "/model.safetensors");
            REQUIRE(file.ok());
            file->tensors["model.layers.1.mlp.up_proj.weight"][3][4] =
                std::numeric_limits<float>::quiet_NaN();
            REQUIRE(writeSafetensors(path + "/model.safetensors", file->tensors, StorageType::F32)
                        .ok());
            // the header is fine: only reading the values finds it
            REQUIRE(checkModelFolder(path).ok());
            auto loaded = loadModelFolder(path, cpu());
            REQUIRE_FALSE(loaded.ok());
            REQUIRE(loaded.error() ==
                    path +
                        "/model.safetensors: tensor 'model.layers.1.mlp.up_proj.weight' holds 1 "
                        "NaN or infinite value(s)");
            continue;  // this row is done; the next rows still run
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
        REQUIRE(refusal(path) == expected);
    }
}

TEST_CASE("aModelTooLargeForMemoryIsRefusedBeforeAllocating") {
    // An 11-billion-parameter llama whose weights are a sparse file: its header is real, its
    // data never read. The refusal names the sizes and nothing is allocated.
    // (a folder of its own: nothing here needs the generated fixtures)
    const relulens::test::TempDir scratch;
    const std::string path = scratch.filePath("huge");
    std::filesystem::create_directories(path);
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
        std::ofstream out(path + "/model.safetensors", std::ios::binary);
        const uint64_t n = text.size();
        out.write(reinterpret_cast<const char*>(&n), 8);
        out.write(text.data(), std::streamsize(text.size()));
    }
    {
        std::error_code ec;
        std::filesystem::resize_file(path + "/model.safetensors", 8 + text.size() + offset,
                                     ec);  // sparse
        REQUIRE(!ec);
    }
    {
        std::error_code ec;
        std::filesystem::copy_file(relulens::test::dataPath("tiny/tokenizer.model"),
                                   path + "/tokenizer.model", ec);
    }
    const int64_t available = availableMemoryBytes();
    REQUIRE((available > 0 && available < parameters * 4));
    const double residentBefore = relulens::test::residentMb();
    auto loaded = loadModelFolder(path, cpu());
    REQUIRE(relulens::test::residentMb() - residentBefore < 64);
    REQUIRE_FALSE(loaded.ok());
    // the part before the first " and " (all of it when there is none)
    const std::string firstPart = loaded.error().substr(0, loaded.error().find(" and "));
    REQUIRE(firstPart == path + ": the model needs " + fixedText(double(parameters) * 4 / 1e9, 1) +
                             " GB of memory (" + fixedText(double(parameters) / 1e9, 2) +
                             " billion parameters as float32)");
    REQUIRE(
        endsWith(loaded.error(), " are available; close other programs or open a smaller model"));
}
