// The trainer on a small excerpt: the loss falls, a fixed seed repeats exactly, a stopped run
// resumes from its checkpoint's step and ends where an unbroken run ends.
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <torch/optim/adamw.h>

#include "core/checkpoint.h"
#include "core/evaluation.h"
#include "core/trainer.h"
#include "core_test.h"

using namespace relulens::core;

namespace {

TrainOptions smallRun(const std::string& out, AttentionKind attention = AttentionKind::Softmax) {
    TrainOptions o;
    o.corpus = {relulens::test::dataPath("excerpt.txt")};
    o.tokenizerPath = relulens::test::dataPath("tiny/tokenizer.model");
    o.out = out;
    o.config.name = "trainer-test";
    o.config.nLayers = 1;
    o.config.nHeads = 2;
    o.config.dModel = 32;
    o.config.dFf = 64;
    o.config.contextLength = 32;
    o.config.trained.attention.kind = attention;
    o.steps = 40;
    o.batch = 8;
    o.lr = 1e-2;
    o.warmup = 5;
    o.evalEvery = 10;
    o.evalBatches = 2;
    o.checkpointEvery = 10;
    o.storage = StorageType::F32;
    return o;
}

std::vector<double> losses(const std::string& folder, std::vector<int64_t>* steps = nullptr) {
    std::ifstream in(folder + "/train_log.csv");
    std::string line;
    std::getline(in, line);  // header
    std::vector<double> out;
    while (std::getline(in, line)) {
        const auto comma = line.find(',');
        if (steps) steps->push_back(std::stoll(line.substr(0, comma)));
        out.push_back(std::stod(line.substr(comma + 1)));
    }
    return out;
}

// A number as the old messages wrote it: %g, six significant digits.
std::string numberText(double value) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
}

// What the old test object held for its runs: a temporary folder (removed with the object) to
// train into, and a stop flag that is never raised. One per test case.
struct Workspace {
    relulens::test::TempDir dir;
    std::atomic<bool> never{false};

    std::string path(const char* name) const { return dir.filePath(name); }
};

}  // namespace

TEST_CASE("learningRateSchedule") {
    TrainOptions o;
    o.lr = 1.0;
    o.warmup = 10;
    o.steps = 110;
    o.minLrRatio = 0.1;
    REQUIRE(learningRate(o, 5) == doctest::Approx(0.5).epsilon(1e-12));   // halfway through warm-up
    REQUIRE(learningRate(o, 10) == doctest::Approx(1.0).epsilon(1e-12));  // peak
    REQUIRE(std::abs(learningRate(o, 60) - 0.55) < 1e-12);  // cosine midpoint: 0.1 + 0.9/2
    REQUIRE(std::abs(learningRate(o, 110) - 0.1) < 1e-12);  // floor
}

TEST_CASE("lossFallsAndSeedRepeats") {
    Workspace w;
    auto first = trainModel(smallRun(w.path("a")), w.never, nullptr);
    REQUIRE_MESSAGE(first.ok(), (first.ok() ? std::string() : first.error()));
    auto second = trainModel(smallRun(w.path("b")), w.never, nullptr);
    REQUIRE(second.ok());
    const auto a = losses(w.path("a")), b = losses(w.path("b"));
    REQUIRE(a.size() == size_t(40));
    REQUIRE(a == b);  // bit-identical for the same seed
    // The first batch sits near ln(512) = 6.24; forty steps bring it well below.
    REQUIRE(a.front() > 6.0);
    REQUIRE_MESSAGE(a.back() < a.front() - 1.0,
                    (numberText(a.front()) + " -> " + numberText(a.back())));
    REQUIRE(first->finalValidationLoss < 5.5);
    auto other = smallRun(w.path("c"));
    other.seed = 2;
    REQUIRE(trainModel(other, w.never, nullptr).ok());
    REQUIRE(losses(w.path("c")) != a);

    // The folder is a loadable model that says how it was trained.
    auto loaded = loadModelFolder(w.path("a"));
    REQUIRE_MESSAGE(loaded.ok(), (loaded.ok() ? std::string() : loaded.error()));
    REQUIRE(loaded->model->info().trained.attention.kind == AttentionKind::Softmax);
    REQUIRE(relulens::test::contains(loaded->model->info().description, "40 steps"));
}

// A folder that holds a model (its config.json) is never overwritten without --force, and
// is left as it was.
TEST_CASE("refusesToOverwrite") {
    Workspace w;
    std::filesystem::create_directories(w.path("taken"));
    {
        std::ofstream config(w.path("taken") + "/config.json");
        config << "{\"name\": \"someone's model\"}\n";
    }
    auto again = trainModel(smallRun(w.path("taken")), w.never, nullptr);
    REQUIRE_FALSE(again.ok());
    REQUIRE(relulens::test::contains(again.error(), "--force"));
    std::ifstream config(w.path("taken") + "/config.json");
    std::string kept((std::istreambuf_iterator<char>(config)), std::istreambuf_iterator<char>());
    REQUIRE(kept == std::string("{\"name\": \"someone's model\"}\n"));
    REQUIRE_FALSE(relulens::test::fileExists(w.path("taken") + "/train_log.csv"));
}

// The trainer's AdamW step against LibTorch's own torch::optim::AdamW (eps 1e-8, decoupled
// weight decay), five steps on a random tensor with random gradients; without decay too.
TEST_CASE("adamWMatchesLibTorch") {
    torch::manual_seed(3);
    for (const bool decay : {true, false}) {
        const double lr = 0.01, beta1 = 0.9, beta2 = 0.95, weightDecay = decay ? 0.1 : 0.0;
        auto reference = torch::randn({4, 6}).set_requires_grad(true);
        auto ours = reference.detach().clone();
        auto m = torch::zeros_like(ours), v = torch::zeros_like(ours);
        torch::optim::AdamW optimiser({reference}, torch::optim::AdamWOptions(lr)
                                                       .betas({beta1, beta2})
                                                       .eps(1e-8)
                                                       .weight_decay(weightDecay));
        for (int step = 1; step <= 5; ++step) {
            const auto gradient = torch::randn({4, 6}) * double(step);
            reference.mutable_grad() = gradient.clone();
            optimiser.step();
            adamWStep(ours, gradient, m, v, step, lr, beta1, beta2, 0.1, decay);
            REQUIRE_MESSAGE(
                torch::allclose(ours, reference.detach(), 1e-6, 1e-7),
                ("step " + std::to_string(step) + ", decay " + std::to_string(int(decay)) + ": " +
                 numberText((ours - reference.detach()).abs().max().item<double>())));
        }
    }
}

TEST_CASE("stopThenResume") {
    Workspace w;
    // An unbroken reference run, and one stopped after step 15 and resumed.
    REQUIRE(
        trainModel(smallRun(w.path("whole"), AttentionKind::ReluFormer), w.never, nullptr).ok());
    std::atomic<bool> stop{false};
    auto stopped = trainModel(smallRun(w.path("parts"), AttentionKind::ReluFormer), stop,
                              [&](const TrainProgress& p) {
                                  if (p.step == 15) stop = true;
                              });
    REQUIRE(stopped.ok());
    REQUIRE(stopped->stoppedEarly);
    REQUIRE(stopped->steps == int64_t(15));
    auto options = smallRun(w.path("parts"), AttentionKind::ReluFormer);
    options.resume = true;
    int64_t firstResumed = -1;
    auto resumed = trainModel(options, w.never, [&](const TrainProgress& p) {
        if (firstResumed < 0) firstResumed = p.step;
    });
    REQUIRE_MESSAGE(resumed.ok(), (resumed.ok() ? std::string() : resumed.error()));
    REQUIRE(firstResumed == int64_t(16));
    REQUIRE(resumed->steps == int64_t(40));
    std::vector<int64_t> steps;
    const auto parts = losses(w.path("parts"), &steps);
    REQUIRE(steps.size() == size_t(40));
    for (size_t i = 0; i < steps.size(); ++i) REQUIRE(steps[i] == int64_t(i + 1));
    const auto whole = losses(w.path("whole"));
    for (size_t i = 0; i < whole.size(); ++i) {
        REQUIRE_MESSAGE(std::abs(parts[i] - whole[i]) < 1e-5, ("step " + std::to_string(i + 1)));
    }
    auto finished = trainModel(options, w.never, nullptr);
    REQUIRE_FALSE(finished.ok());
    REQUIRE(relulens::test::contains(finished.error(), "already at step 40"));
}

TEST_CASE("evaluationMatchesAHandSum") {
    auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
    REQUIRE(loaded.ok());
    std::vector<int64_t> tokens;
    for (int i = 0; i < 41; ++i) tokens.push_back((i * 37) % 512);
    auto result =
        evaluateContexts(*loaded->model, tokens, {20, 40}, loaded->model->info().trained, 1000);
    REQUIRE(result.ok());
    REQUIRE(result->size() == size_t(2));
    REQUIRE((*result)[0].windows == int64_t(2));
    REQUIRE((*result)[1].windows == int64_t(1));
    // Context 40: one window; recompute its mean negative log-likelihood directly.
    torch::NoGradGuard noGrad;
    auto ids = torch::tensor(tokens, torch::kLong);
    auto logits = loaded->model->forward(ids.narrow(0, 0, 40).view({1, 40}),
                                         loaded->model->info().trained)[0];
    double nll = 0;
    auto logp = torch::log_softmax(logits, -1);
    for (int i = 0; i < 40; ++i) nll -= logp[i][tokens[size_t(i + 1)]].item<double>();
    REQUIRE(std::abs((*result)[1].loss - nll / 40) < 1e-5);
    REQUIRE(std::abs((*result)[1].perplexity / std::exp(nll / 40) - 1.0) < 1e-4);
    REQUIRE((*result)[1].standardError ==
            doctest::Approx(0.0).epsilon(1e-12));  // one window: no spread to measure

    // Context 20: two windows, each scored alone. With two values the standard error of
    // their mean is half their difference (s = |a − b| / √2, s / √2).
    double windowLoss[2] = {0, 0};
    for (int w = 0; w < 2; ++w) {
        auto windowLogits = loaded->model->forward(ids.narrow(0, 20 * w, 20).view({1, 20}),
                                                   loaded->model->info().trained)[0];
        auto windowLogp = torch::log_softmax(windowLogits, -1);
        for (int i = 0; i < 20; ++i) {
            windowLoss[w] -= windowLogp[i][tokens[size_t(20 * w + i + 1)]].item<double>() / 20;
        }
    }
    const auto& twenty = (*result)[0];
    REQUIRE(twenty.windowLosses.size() == size_t(2));
    REQUIRE(std::abs(twenty.windowLosses[0] - windowLoss[0]) < 1e-5);
    REQUIRE(std::abs(twenty.windowLosses[1] - windowLoss[1]) < 1e-5);
    REQUIRE(std::abs(twenty.loss - (windowLoss[0] + windowLoss[1]) / 2) < 1e-5);
    REQUIRE(std::abs(windowLoss[0] - windowLoss[1]) > 1e-3);  // a spread to measure
    REQUIRE(std::abs(twenty.standardError - std::abs(windowLoss[0] - windowLoss[1]) / 2) < 1e-5);
}
