#include "core/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include <torch/torch.h>

#include "core/checkpoint.h"
#include "core/corpus.h"
#include "core/tokenizer.h"
#include "core/transformer.h"

namespace relulens::core {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "train_state.safetensors";
constexpr const char* kLogFile = "train_log.csv";

// (rows, context + 1) windows of token ids starting at the given offsets.
torch::Tensor windows(const std::vector<int64_t>& tokens, const std::vector<size_t>& offsets,
                      int64_t context) {
    auto out = torch::empty({int64_t(offsets.size()), context + 1}, torch::kLong);
    auto* data = out.data_ptr<int64_t>();
    for (size_t r = 0; r < offsets.size(); ++r) {
        std::copy_n(tokens.begin() + long(offsets[r]), context + 1, data + r * size_t(context + 1));
    }
    return out;
}

// Batch k depends only on (seed, k), so a resumed run sees the batches an unbroken one would.
torch::Tensor trainingBatch(const std::vector<int64_t>& tokens, int64_t batch, int64_t context,
                            uint64_t seed, int64_t step) {
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(step));
    std::uniform_int_distribution<size_t> pick(0, tokens.size() - size_t(context) - 1);
    std::vector<size_t> offsets(static_cast<size_t>(batch));
    for (auto& o : offsets) o = pick(rng);
    return windows(tokens, offsets, context);
}

std::vector<size_t> validationOffsets(size_t tokenCount, int64_t count, int64_t context) {
    std::vector<size_t> offsets;
    const size_t last = tokenCount - size_t(context) - 1;
    for (int64_t k = 0; k < count; ++k) {
        offsets.push_back(count == 1 ? 0 : size_t(double(last) * double(k) / double(count - 1)));
    }
    return offsets;
}

double crossEntropy(const torch::Tensor& logits, const torch::Tensor& targets) {
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                targets.reshape({-1}))
        .item<double>();
}

bool decays(const std::string& name, const torch::Tensor& t) {
    return t.dim() >= 2 && name.find("ln") == std::string::npos;
}

struct OptimiserState {
    std::map<std::string, torch::Tensor> m, v;
    int64_t step = 0;
    int64_t tokens = 0;
    double seconds = 0;
};

Status saveState(const std::string& folder, const Transformer& model, const OptimiserState& s) {
    TensorMap all;
    for (const auto& [name, t] : model.tensors()) {
        all["param/" + name] = t.detach();
        all["m/" + name] = s.m.at(name);
        all["v/" + name] = s.v.at(name);
    }
    return writeSafetensors((fs::path(folder) / kStateFile).string(), all, StorageType::F32,
                            {{"step", std::to_string(s.step)},
                             {"tokens", std::to_string(s.tokens)},
                             {"seconds", std::to_string(s.seconds)}});
}

Result<OptimiserState> loadState(const std::string& folder, const ModelConfig& config,
                                 TensorMap& parameters) {
    const std::string path = (fs::path(folder) / kStateFile).string();
    auto file = readSafetensors(path);
    if (!file) return Error{file.error()};
    OptimiserState s;
    TensorMap weights;
    for (const auto& t : config.tensorShapes()) {
        for (const char* prefix : {"param/", "m/", "v/"}) {
            if (!file->tensors.count(prefix + t.name)) {
                return Error{path + ": tensor '" + prefix + t.name + "' is missing"};
            }
        }
        weights[t.name] = file->tensors.at("param/" + t.name);
        s.m[t.name] = file->tensors.at("m/" + t.name);
        s.v[t.name] = file->tensors.at("v/" + t.name);
    }
    if (auto v = validateTensors(config, weights, path); !v) return Error{v.error()};
    try {
        s.step = std::stoll(file->metadata.at("step"));
        s.tokens = std::stoll(file->metadata.at("tokens"));
        s.seconds = std::stod(file->metadata.at("seconds"));
    } catch (const std::exception&) {
        return Error{path + ": metadata lacks step, tokens or seconds"};
    }
    parameters = std::move(weights);
    return s;
}

}  // namespace

void adamWStep(const torch::Tensor& parameter, const torch::Tensor& gradient,
               const torch::Tensor& m, const torch::Tensor& v, int64_t step, double lr,
               double beta1, double beta2, double weightDecay, bool decay) {
    torch::NoGradGuard noGrad;
    const double bc1 = 1.0 - std::pow(beta1, double(step));
    const double bc2 = 1.0 - std::pow(beta2, double(step));
    m.mul_(beta1).add_(gradient, 1.0 - beta1);
    v.mul_(beta2).addcmul_(gradient, gradient, 1.0 - beta2);
    auto denominator = (v / bc2).sqrt_().add_(1e-8);
    if (decay) parameter.mul_(1.0 - lr * weightDecay);
    parameter.addcdiv_(m, denominator, -lr / bc1);
}

double learningRate(const TrainOptions& o, int64_t step) {
    if (step <= o.warmup) return o.lr * double(step) / double(std::max<int64_t>(1, o.warmup));
    const double progress =
        double(step - o.warmup) / double(std::max<int64_t>(1, o.steps - o.warmup));
    const double cosine = 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
    return o.lr * (o.minLrRatio + (1.0 - o.minLrRatio) * cosine);
}

namespace {

// What a run needs before its first step: the tokenizer, the model and optimiser state (fresh,
// or resumed from the folder's checkpoint), the corpus and the validation windows.
struct TrainingRun {
    ModelConfig config;
    Transformer model;
    OptimiserState state;
    TokenizedCorpus corpus;
    torch::Tensor validation;  // (windows, context + 1)
};

Result<TrainingRun> startTraining(const TrainOptions& options) {
    const fs::path out(options.out);
    std::error_code ec;
    auto tokenizer = Tokenizer::load(options.tokenizerPath);
    if (!tokenizer) return Error{tokenizer.error()};

    TrainingRun run;
    run.config = options.config;
    run.config.vocabSize = tokenizer->vocabSize();
    if (options.resume) {
        auto saved = loadConfigFile((out / "config.json").string());
        if (!saved) return Error{"cannot resume: " + saved.error()};
        run.config = *saved;
        TensorMap parameters;
        auto loaded = loadState(options.out, run.config, parameters);
        if (!loaded) return Error{"cannot resume: " + loaded.error()};
        run.state = std::move(*loaded);
        run.model = Transformer::fromTensors(run.config, std::move(parameters));
        if (run.state.step >= options.steps) {
            return Error{"the checkpoint is already at step " + std::to_string(run.state.step) +
                         "; ask for more --steps to continue"};
        }
    } else {
        if ((fs::exists(out / "config.json", ec) || fs::exists(out / "model.safetensors", ec)) &&
            !options.force) {
            return Error{options.out +
                         " already holds a model; add --force to replace it or "
                         "--resume to continue its training"};
        }
        if (auto s = validateConfig(run.config); !s) return Error{s.error()};
        run.model = Transformer::initialise(run.config, options.seed);
        for (const auto& [name, t] : run.model.tensors()) {
            run.state.m[name] = torch::zeros_like(t);
            run.state.v[name] = torch::zeros_like(t);
        }
    }
    fs::create_directories(out, ec);
    if (ec) return Error{options.out + ": cannot create the folder (" + ec.message() + ")"};

    auto corpus = tokenizeCorpus(options.corpus, *tokenizer, options.validationFraction);
    if (!corpus) return Error{corpus.error()};
    run.corpus = std::move(*corpus);
    const int64_t context = run.config.contextLength;
    if (run.corpus.train.size() <= size_t(context) + 1 ||
        run.corpus.validation.size() <= size_t(context) + 1) {
        return Error{"the corpus is too small for context " + std::to_string(context) +
                     " (training part " + std::to_string(run.corpus.train.size()) +
                     " tokens, validation part " + std::to_string(run.corpus.validation.size()) +
                     ")"};
    }
    run.validation = windows(run.corpus.validation,
                             validationOffsets(run.corpus.validation.size(),
                                               options.evalBatches * options.batch, context),
                             context);
    return run;
}

struct StepLosses {
    torch::Tensor crossEntropy;  // of this step's batch
    torch::Tensor regulariser;   // ReLUFormer's row-mass term (undefined for other variants)
};

// Forward, backward, global-norm clipping and AdamW on one batch (B, context + 1). Fails when
// the gradient norm is not finite, before anything is updated.
Result<StepLosses> trainingStep(Transformer& model, OptimiserState& state,
                                const torch::Tensor& batch, const TrainOptions& options,
                                int64_t step, double lr) {
    const RunSpec run = model.config().trained;
    const bool regularise = run.attention.kind == AttentionKind::ReluFormer;
    const int64_t context = batch.size(1) - 1;
    ForwardTrace trace;
    trace.options.rowMass = regularise;
    auto logits = model.forward(batch.narrow(1, 0, context), run, regularise ? &trace : nullptr);
    StepLosses losses;
    losses.crossEntropy = torch::nn::functional::cross_entropy(
        logits.reshape({-1, logits.size(-1)}), batch.narrow(1, 1, context).reshape({-1}));
    auto loss = losses.crossEntropy;
    if (regularise) {
        auto reg = torch::zeros({});
        for (const auto& layer : trace.layers)
            reg = reg + torch::log(layer.rowMass + 1e-6).abs().mean();
        losses.regulariser = reg * (options.reluformerLambda / double(trace.layers.size()));
        loss = loss + losses.regulariser;
    }
    for (auto& [name, t] : model.tensors()) {
        if (t.grad().defined()) t.grad().zero_();
    }
    loss.backward();
    torch::NoGradGuard noGrad;
    double squares = 0;
    for (const auto& [name, t] : model.tensors()) {
        if (t.grad().defined()) squares += t.grad().pow(2).sum().item<double>();
    }
    const double norm = std::sqrt(squares);
    if (!std::isfinite(norm)) {
        return Error{"training diverged at step " + std::to_string(step) +
                     " (gradient norm is not finite); the last checkpoint is kept"};
    }
    const double clipScale = norm > options.clip ? options.clip / (norm + 1e-6) : 1.0;
    for (auto& [name, t] : model.tensors()) {
        // Tensors the trained variant does not use (γ under softmax, the memory's layer norm
        // under relu) get no gradient and stay as initialised.
        if (!t.grad().defined()) continue;
        adamWStep(t, t.grad() * clipScale, state.m[name], state.v[name], step, lr, options.beta1,
                  options.beta2, options.weightDecay, decays(name, t));
    }
    return losses;
}

}  // namespace

Result<TrainSummary> trainModel(const TrainOptions& options, const std::atomic<bool>& stop,
                                const ProgressCallback& progress) {
    const fs::path out(options.out);
    auto prepared = startTraining(options);
    if (!prepared) return Error{prepared.error()};
    TrainingRun& training = *prepared;
    const ModelConfig& config = training.config;
    Transformer& model = training.model;
    OptimiserState& state = training.state;
    const auto& validation = training.validation;
    const int64_t context = config.contextLength;
    const RunSpec run = config.trained;

    auto validationLoss = [&]() {
        torch::NoGradGuard noGrad;
        double total = 0;
        int64_t count = 0;
        for (int64_t r = 0; r < validation.size(0); r += options.batch) {
            auto rows = validation.narrow(0, r, std::min(options.batch, validation.size(0) - r));
            auto logits = model.forward(rows.narrow(1, 0, context), run);
            total += crossEntropy(logits, rows.narrow(1, 1, context)) * double(rows.size(0));
            count += rows.size(0);
        }
        return total / double(count);
    };

    std::ofstream log((out / kLogFile).string(), options.resume ? std::ios::app : std::ios::trunc);
    if (!log) return Error{(out / kLogFile).string() + ": cannot write the training log"};
    if (!options.resume) log << "step,train_loss,val_loss,lr,tokens_seen,elapsed_s\n";

    auto checkpoint = [&]() -> Status {
        ModelConfig saved = config;
        saved.description = "trained " + std::to_string(state.step) + " steps (" +
                            std::to_string(state.tokens) + " tokens) by relulens train";
        Transformer snapshot = Transformer::fromTensors(saved, model.tensors());
        if (auto s = saveModelFolder(options.out, snapshot, options.tokenizerPath, options.storage);
            !s) {
            return s;
        }
        return saveState(options.out, model, state);
    };

    model.setRequiresGrad(true);
    const auto started = std::chrono::steady_clock::now();
    const double secondsBefore = state.seconds;
    const int64_t firstStep = state.step;
    TrainSummary summary;
    double lastTrainLoss = 0, lastValidation = -1;
    while (state.step < options.steps) {
        if (stop.load()) {
            summary.stoppedEarly = true;
            break;
        }
        const int64_t step = state.step + 1;
        const double lr = learningRate(options, step);
        auto batch =
            trainingBatch(training.corpus.train, options.batch, context, options.seed, step);
        auto losses = trainingStep(model, state, batch, options, step, lr);
        if (!losses) return Error{losses.error()};
        state.step = step;
        state.tokens += options.batch * context;
        lastTrainLoss = losses->crossEntropy.item<double>();
        const double elapsed =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        state.seconds = secondsBefore + elapsed;

        TrainProgress p;
        p.step = step;
        p.steps = options.steps;
        p.trainLoss = lastTrainLoss;
        p.regulariser = losses->regulariser.defined() ? losses->regulariser.item<double>() : 0.0;
        p.lr = lr;
        p.elapsedSeconds = state.seconds;
        p.tokensPerSecond =
            double((step - firstStep) * options.batch * context) / std::max(elapsed, 1e-9);
        p.secondsLeft = elapsed / double(step - firstStep) * double(options.steps - step);
        if (!std::isfinite(lastTrainLoss)) {
            return Error{"training diverged at step " + std::to_string(step) +
                         " (loss is not finite); the last checkpoint is kept"};
        }
        if (step % options.evalEvery == 0 || step == options.steps) {
            lastValidation = validationLoss();
            p.validationLoss = lastValidation;
        }
        log << step << ',' << lastTrainLoss << ',';
        if (p.validationLoss >= 0) log << p.validationLoss;
        log << ',' << lr << ',' << state.tokens << ',' << state.seconds << '\n';
        log.flush();
        if (step % options.checkpointEvery == 0 || step == options.steps) {
            if (auto s = checkpoint(); !s) return Error{s.error()};
            p.checkpointed = true;
        }
        if (progress) progress(p);
    }
    if (summary.stoppedEarly) {
        if (auto s = checkpoint(); !s) return Error{s.error()};
    }
    summary.steps = state.step;
    summary.tokensSeen = state.tokens;
    summary.finalTrainLoss = lastTrainLoss;
    summary.finalValidationLoss = lastValidation;
    summary.seconds = state.seconds;
    return summary;
}

}  // namespace relulens::core
