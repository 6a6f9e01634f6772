// train and eval: training a model on a corpus, and measuring its loss at several lengths.
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "core/atomic_file.h"
#include "core/capture.h"
#include "core/capture_json.h"
#include "core/checkpoint.h"
#include "core/corpus.h"
#include "core/device.h"
#include "core/evaluation.h"
#include "core/trainer.h"

namespace relulens::app {

namespace {

std::atomic<bool> stopRequested{false};

void onInterrupt(int) {
    stopRequested.store(true);
}

std::string duration(double seconds) {
    char buffer[32];
    const long s = long(seconds);
    if (s >= 3600)
        std::snprintf(buffer, sizeof buffer, "%ldh%02ldm", s / 3600, (s / 60) % 60);
    else
        std::snprintf(buffer, sizeof buffer, "%ldm%02lds", s / 60, s % 60);
    return buffer;
}

void printProgress(const core::TrainProgress& p, bool terminal, int64_t every) {
    const bool report =
        p.validationLoss >= 0 || p.checkpointed || p.step % every == 0 || p.step == 1;
    if (!terminal && !report) return;
    char line[256];
    std::snprintf(
        line, sizeof line, "step %lld/%lld  loss %.4f%s  lr %.2e  %.0f tok/s  elapsed %s  left %s",
        (long long)p.step, (long long)p.steps, p.trainLoss,
        p.regulariser > 0 ? (" (+reg " + std::to_string(p.regulariser).substr(0, 6) + ")").c_str()
                          : "",
        p.lr, p.tokensPerSecond, duration(p.elapsedSeconds).c_str(),
        duration(p.secondsLeft).c_str());
    if (terminal) {
        std::printf("\r\033[K%s", line);
        if (p.validationLoss >= 0 || p.checkpointed) {
            std::printf("\n");
            if (p.validationLoss >= 0) std::printf("  validation loss %.4f\n", p.validationLoss);
            if (p.checkpointed) std::printf("  checkpoint written\n");
        }
    } else {
        std::printf("%s", line);
        if (p.validationLoss >= 0) std::printf("  val %.4f", p.validationLoss);
        if (p.checkpointed) std::printf("  [checkpoint]");
        std::printf("\n");
    }
    std::fflush(stdout);
}

}  // namespace

int trainCommand(const std::vector<std::string>& argv) {
    auto args = Arguments::parse(argv, withVariantOptions({{"corpus", true, true},
                                                           {"tokenizer"},
                                                           {"out"},
                                                           {"layers"},
                                                           {"heads"},
                                                           {"d-model"},
                                                           {"d-ff"},
                                                           {"context"},
                                                           {"steps"},
                                                           {"batch"},
                                                           {"lr"},
                                                           {"warmup"},
                                                           {"seed"},
                                                           {"eval-every"},
                                                           {"eval-batches"},
                                                           {"checkpoint-every"},
                                                           {"lambda"},
                                                           {"dtype"},
                                                           {"name"},
                                                           {"validation"},
                                                           {"resume", false},
                                                           {"force", false}}));
    if (!args) return fail(args.error());
    if (!args->has("corpus") || !args->has("out") || !args->has("tokenizer")) {
        return fail("train needs --corpus FILE..., --tokenizer FILE and --out DIR");
    }
    core::TrainOptions o;
    o.corpus = args->values("corpus");
    o.tokenizerPath = args->value("tokenizer");
    o.out = args->value("out");
    o.resume = args->has("resume");
    o.force = args->has("force");
    auto& c = o.config;
    c.name = args->value("name", std::filesystem::path(o.out).filename().string());
    struct Integer {
        const char* option;
        int64_t* target;
        int64_t fallback, lo, hi;
    };
    const Integer integers[] = {{"layers", &c.nLayers, 4, 1, 64},
                                {"heads", &c.nHeads, 4, 1, 64},
                                {"d-model", &c.dModel, 256, 8, 4096},
                                {"d-ff", &c.dFf, 1024, 8, 65536},
                                {"context", &c.contextLength, 256, 8, 16384},
                                {"steps", &o.steps, 3000, 1, 10'000'000},
                                {"batch", &o.batch, 16, 1, 4096},
                                {"warmup", &o.warmup, 200, 0, 1'000'000},
                                {"eval-every", &o.evalEvery, 200, 1, 1'000'000},
                                {"eval-batches", &o.evalBatches, 8, 1, 10'000},
                                {"checkpoint-every", &o.checkpointEvery, 200, 1, 1'000'000}};
    for (const auto& i : integers) {
        auto value = args->integer(i.option, i.fallback);
        if (!value) return fail(value.error());
        if (*value < i.lo || *value > i.hi) {
            return fail(std::string("--") + i.option + " must be between " + std::to_string(i.lo) +
                        " and " + std::to_string(i.hi));
        }
        *i.target = *value;
    }
    auto seed = args->integer("seed", 1);
    if (!seed) return fail(seed.error());
    o.seed = uint64_t(*seed);
    auto lr = args->number("lr", 2e-3);
    if (!lr || !(*lr > 0) || *lr > 1) return fail("--lr must be a number in (0, 1]");
    o.lr = *lr;
    auto lambda = args->number("lambda", 0.01);
    if (!lambda || *lambda < 0) return fail("--lambda must be a non-negative number");
    o.reluformerLambda = *lambda;
    auto validation = args->number("validation", 0.05);
    if (!validation || !(*validation > 0) || *validation >= 0.5) {
        return fail("--validation must be a fraction in (0, 0.5)");
    }
    o.validationFraction = *validation;
    auto storage = core::parseStorageType(args->value("dtype", "f16"));
    if (!storage) return fail(storage.error());
    o.storage = *storage;
    auto run = runSpecFromArguments(*args, core::RunSpec{});
    if (!run) return fail(run.error());
    c.trained = *run;
    c.vocabSize = 2;  // replaced by the tokenizer's size

    std::signal(SIGINT, onInterrupt);
    std::signal(SIGTERM, onInterrupt);
    const bool terminal = isatty(STDOUT_FILENO);
    std::printf(
        "training %s: attention %s, FFN %s, %lld layers × %lld heads, d_model %lld, "
        "d_ff %lld, context %lld, batch %lld, %lld steps%s\n",
        o.out.c_str(), c.trained.attention.label().c_str(),
        core::ffnKindName(c.trained.ffn).c_str(), (long long)c.nLayers, (long long)c.nHeads,
        (long long)c.dModel, (long long)c.dFf, (long long)c.contextLength, (long long)o.batch,
        (long long)o.steps, o.resume ? " (resuming)" : "");
    std::fflush(stdout);
    auto summary = core::trainModel(
        o, stopRequested, [&](const core::TrainProgress& p) { printProgress(p, terminal, 20); });
    if (!summary) return fail(summary.error());
    std::printf("%s at step %lld: %lld tokens seen, %s, train loss %.4f, validation loss %.4f\n",
                summary->stoppedEarly ? "stopped" : "finished", (long long)summary->steps,
                (long long)summary->tokensSeen, duration(summary->seconds).c_str(),
                summary->finalTrainLoss, summary->finalValidationLoss);
    if (summary->stoppedEarly) {
        std::printf("checkpoint kept in %s; continue with the same command plus --resume\n",
                    o.out.c_str());
        return 130;
    }
    return 0;
}

int evalCommand(const std::vector<std::string>& argv) {
    auto args = Arguments::parse(argv, withVariantOptions({{"model"},
                                                           {"corpus", true, true},
                                                           {"context", true, true},
                                                           {"device"},
                                                           {"max-tokens"},
                                                           {"json"},
                                                           {"split"}}));
    if (!args) return fail(args.error());
    if (!args->has("model") || !args->has("corpus")) {
        return fail("eval needs --model DIR and --corpus FILE...");
    }
    auto loaded = openModel(args->value("model"), args->value("device", "auto"));
    if (!loaded) return fail(loaded.error());
    const auto& info = loaded->model->info();
    auto run = runSpecFromArguments(*args, info.trained);
    if (!run) return fail(run.error());
    if (auto s = loaded->model->supports(*run); !s) return fail(s.error());
    std::vector<int64_t> contexts;
    for (const auto& text : args->values("context")) {
        try {
            contexts.push_back(std::stoll(text));
        } catch (const std::exception&) {
            return fail("--context expects whole numbers, got '" + text + "'");
        }
    }
    if (contexts.empty()) contexts = {info.contextLength};
    auto maxTokens = args->integer("max-tokens", 65536);
    if (!maxTokens || *maxTokens < 1) return fail("--max-tokens must be a positive number");
    // --split validation: only the held-out part (the last 5 %) of the corpus, as in training.
    const std::string split = args->value("split", "all");
    if (split != "all" && split != "validation") return fail("--split must be all or validation");
    auto corpus = core::tokenizeCorpus(args->values("corpus"), loaded->tokenizer, 0.05);
    if (!corpus) return fail(corpus.error());
    std::vector<int64_t> tokens = corpus->validation;
    if (split == "all") tokens.insert(tokens.begin(), corpus->train.begin(), corpus->train.end());
    auto results = core::evaluateContexts(*loaded->model, tokens, contexts, *run, *maxTokens);
    if (!results) return fail(results.error());
    std::printf("model %s, attention %s, FFN %s (%s), %zu tokens of text\n", info.name.c_str(),
                run->attention.label().c_str(), core::ffnKindName(run->ffn).c_str(),
                core::sameVariants(*run, info.trained) ? "as trained" : "NOT as trained",
                tokens.size());
    std::printf("%8s %10s %9s %12s %8s %8s\n", "context", "loss", "± s.e.", "perplexity", "windows",
                "tokens");
    nlohmann::json json = nlohmann::json::array();
    for (const auto& r : *results) {
        std::printf("%8lld %10.4f %9.4f %12.2f %8lld %8lld\n", (long long)r.context, r.loss,
                    r.standardError, r.perplexity, (long long)r.windows, (long long)r.tokens);
        json.push_back({{"context", r.context},
                        {"loss", r.loss},
                        {"standard_error", r.standardError},
                        {"perplexity", r.perplexity},
                        {"windows", r.windows},
                        {"tokens", r.tokens},
                        {"window_losses", r.windowLosses}});
    }
    if (args->has("json")) {
        const auto document = nlohmann::json{{"model", info.name},
                                             {"training_context", info.contextLength},
                                             {"run", core::runSpecToJson(*run)},
                                             {"results", json}};
        if (auto s = core::writeTextAtomically(args->value("json"), document.dump(2) + "\n"); !s) {
            return fail(s.error());
        }
    }
    return 0;
}

}  // namespace relulens::app
