// train-tokenizer and init-model: making the parts of a model folder.
#include <cstdio>
#include <filesystem>

#include "app/commands.h"
#include "core/checkpoint.h"
#include "core/llama2c.h"
#include "core/tokenizer.h"

namespace relulens::app {

namespace fs = std::filesystem;

int trainTokenizerCommand(const std::vector<std::string>& argv) {
    auto args = Arguments::parse(
        argv, {{"corpus", true, true}, {"vocab"}, {"out"}, {"model-type"}, {"force", false}});
    if (!args) return fail(args.error());
    if (!args->has("corpus") || !args->has("out")) {
        return fail("train-tokenizer needs --corpus FILE... and --out FILE");
    }
    auto vocab = args->integer("vocab", 4096);
    if (!vocab) return fail(vocab.error());
    if (*vocab < 300 || *vocab > 200000) {
        return fail(
            "--vocab must be between 300 and 200000 (byte fallback alone needs 259 pieces)");
    }
    core::TokenizerTrainOptions options;
    options.inputs = args->values("corpus");
    options.outputModel = args->value("out");
    options.vocabSize = int(*vocab);
    options.modelType = args->value("model-type", "unigram");
    if (options.modelType != "unigram" && options.modelType != "bpe") {
        return fail("--model-type must be unigram or bpe");
    }
    std::error_code ec;
    if (fs::exists(options.outputModel, ec) && !args->has("force")) {
        return fail(options.outputModel + " exists; add --force to replace it");
    }
    if (auto s = core::Tokenizer::train(options); !s) return fail(s.error());
    auto check = core::Tokenizer::load(options.outputModel);
    if (!check) return fail(check.error());
    std::printf("tokenizer with %lld pieces written to %s\n", (long long)check->vocabSize(),
                options.outputModel.c_str());
    return 0;
}

int initModelCommand(const std::vector<std::string>& argv) {
    auto args = Arguments::parse(argv, withVariantOptions({{"tokenizer"},
                                                           {"out"},
                                                           {"layers"},
                                                           {"heads"},
                                                           {"d-model"},
                                                           {"d-ff"},
                                                           {"context"},
                                                           {"seed"},
                                                           {"dtype"},
                                                           {"name"},
                                                           {"init-std"},
                                                           {"perturb-all", false},
                                                           {"force", false}}));
    if (!args) return fail(args.error());
    if (!args->has("tokenizer") || !args->has("out")) {
        return fail("init-model needs --tokenizer FILE and --out DIR");
    }
    auto tokenizer = core::Tokenizer::load(args->value("tokenizer"));
    if (!tokenizer) return fail(tokenizer.error());
    const std::string out = args->value("out");
    std::error_code ec;
    if (fs::exists(fs::path(out) / "model.safetensors", ec) && !args->has("force")) {
        return fail(out + " already holds a model; add --force to replace it");
    }
    core::ModelConfig config;
    config.name = args->value("name", fs::path(out).filename().string());
    config.vocabSize = tokenizer->vocabSize();
    struct Size {
        const char* option;
        int64_t* target;
        int64_t fallback;
    };
    for (const Size& s : {Size{"layers", &config.nLayers, 2}, Size{"heads", &config.nHeads, 2},
                          Size{"d-model", &config.dModel, 32}, Size{"d-ff", &config.dFf, 64},
                          Size{"context", &config.contextLength, 64}}) {
        auto value = args->integer(s.option, s.fallback);
        if (!value) return fail(value.error());
        *s.target = *value;
    }
    auto run = runSpecFromArguments(*args, core::RunSpec{});
    if (!run) return fail(run.error());
    config.trained = *run;
    config.description = "randomly initialised, untrained";
    if (auto s = core::validateConfig(config); !s) return fail(s.error());
    auto seed = args->integer("seed", 1);
    if (!seed) return fail(seed.error());
    auto storage = core::parseStorageType(args->value("dtype", "f32"));
    if (!storage) return fail(storage.error());
    auto initStd = args->number("init-std", 0.02);
    if (!initStd) return fail(initStd.error());
    if (!(*initStd > 0) || *initStd > 10) return fail("--init-std must be in (0, 10]");
    auto model =
        core::Transformer::initialise(config, uint64_t(*seed), *initStd, args->has("perturb-all"));
    if (auto s = core::saveModelFolder(out, model, args->value("tokenizer"), *storage); !s) {
        return fail(s.error());
    }
    std::printf("random model with %lld parameters written to %s\n",
                (long long)config.parameterCount(), out.c_str());
    return 0;
}

int importLlama2cCommand(const std::vector<std::string>& argv) {
    auto args =
        Arguments::parse(argv, {{"model"}, {"tokenizer"}, {"out"}, {"dtype"}, {"force", false}});
    if (!args) return fail(args.error());
    if (!args->has("model") || !args->has("tokenizer") || !args->has("out")) {
        return fail(
            "import-llama2c needs --model FILE.bin, --tokenizer tokenizer.model and --out DIR");
    }
    core::Llama2cImport request;
    request.model = args->value("model");
    request.tokenizer = args->value("tokenizer");
    request.out = args->value("out");
    request.force = args->has("force");
    auto storage = core::parseStorageType(args->value("dtype", "f32"));
    if (!storage) return fail(storage.error());
    request.storage = *storage;
    auto s = core::importLlama2c(request);
    if (!s) return fail(s.error());
    std::printf(
        "llama2.c v%d model (dim %lld, %lld layers, %lld heads / %lld kv heads, vocab %lld, "
        "%s classifier) written to %s as a Hugging Face llama folder\n",
        s->version, (long long)s->dim, (long long)s->layers, (long long)s->heads,
        (long long)s->kvHeads, (long long)s->vocab, s->tied ? "shared" : "separate",
        request.out.c_str());
    return 0;
}

}  // namespace relulens::app
