// The trainer on a small excerpt: the loss falls, a fixed seed repeats exactly, a stopped run
// resumes from its checkpoint's step and ends where an unbroken run ends.
#include <QtTest>

#include <fstream>
#include <iterator>

// torch::optim, with Qt's `slots` macro hidden as core/torch_include.h does
#pragma push_macro("slots")
#undef slots
#include <torch/optim/adamw.h>
#pragma pop_macro("slots")

#include "core/checkpoint.h"
#include "core/evaluation.h"
#include "core/trainer.h"
#include "test_support.h"

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

}  // namespace

class TestTrainer : public QObject {
    Q_OBJECT
    QTemporaryDir dir_;
    std::atomic<bool> never_{false};

    std::string path(const char* name) { return dir_.filePath(name).toStdString(); }

private Q_SLOTS:
    void learningRateSchedule() {
        TrainOptions o;
        o.lr = 1.0;
        o.warmup = 10;
        o.steps = 110;
        o.minLrRatio = 0.1;
        QCOMPARE(learningRate(o, 5), 0.5);                      // halfway through warm-up
        QCOMPARE(learningRate(o, 10), 1.0);                     // peak
        QVERIFY(std::abs(learningRate(o, 60) - 0.55) < 1e-12);  // cosine midpoint: 0.1 + 0.9/2
        QVERIFY(std::abs(learningRate(o, 110) - 0.1) < 1e-12);  // floor
    }

    void lossFallsAndSeedRepeats() {
        auto first = trainModel(smallRun(path("a")), never_, nullptr);
        QVERIFY2(first.ok(), first.ok() ? "" : first.error().c_str());
        auto second = trainModel(smallRun(path("b")), never_, nullptr);
        QVERIFY(second.ok());
        const auto a = losses(path("a")), b = losses(path("b"));
        QCOMPARE(a.size(), size_t(40));
        QCOMPARE(a, b);  // bit-identical for the same seed
        // The first batch sits near ln(512) = 6.24; forty steps bring it well below.
        QVERIFY(a.front() > 6.0);
        QVERIFY2(a.back() < a.front() - 1.0,
                 qPrintable(QString("%1 -> %2").arg(a.front()).arg(a.back())));
        QVERIFY(first->finalValidationLoss < 5.5);
        auto other = smallRun(path("c"));
        other.seed = 2;
        QVERIFY(trainModel(other, never_, nullptr).ok());
        QVERIFY(losses(path("c")) != a);

        // The folder is a loadable model that says how it was trained.
        auto loaded = loadModelFolder(path("a"));
        QVERIFY2(loaded.ok(), loaded.ok() ? "" : loaded.error().c_str());
        QCOMPARE(loaded->model->info().trained.attention.kind, AttentionKind::Softmax);
        QVERIFY(QString::fromStdString(loaded->model->info().description).contains("40 steps"));
    }

    // A folder that holds a model (its config.json) is never overwritten without --force, and
    // is left as it was.
    void refusesToOverwrite() {
        QDir().mkpath(QString::fromStdString(path("taken")));
        {
            std::ofstream config(path("taken") + "/config.json");
            config << "{\"name\": \"someone's model\"}\n";
        }
        auto again = trainModel(smallRun(path("taken")), never_, nullptr);
        QVERIFY(!again.ok());
        QVERIFY(QString::fromStdString(again.error()).contains("--force"));
        std::ifstream config(path("taken") + "/config.json");
        std::string kept((std::istreambuf_iterator<char>(config)),
                         std::istreambuf_iterator<char>());
        QCOMPARE(kept, std::string("{\"name\": \"someone's model\"}\n"));
        QVERIFY(!QFileInfo::exists(QString::fromStdString(path("taken") + "/train_log.csv")));
    }

    // The trainer's AdamW step against LibTorch's own torch::optim::AdamW (eps 1e-8, decoupled
    // weight decay), five steps on a random tensor with random gradients; without decay too.
    void adamWMatchesLibTorch() {
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
                QVERIFY2(
                    torch::allclose(ours, reference.detach(), 1e-6, 1e-7),
                    qPrintable(QString("step %1, decay %2: %3")
                                   .arg(step)
                                   .arg(decay)
                                   .arg((ours - reference.detach()).abs().max().item<double>())));
            }
        }
    }

    void stopThenResume() {
        // An unbroken reference run, and one stopped after step 15 and resumed.
        QVERIFY(
            trainModel(smallRun(path("whole"), AttentionKind::ReluFormer), never_, nullptr).ok());
        std::atomic<bool> stop{false};
        auto stopped = trainModel(smallRun(path("parts"), AttentionKind::ReluFormer), stop,
                                  [&](const TrainProgress& p) {
                                      if (p.step == 15) stop = true;
                                  });
        QVERIFY(stopped.ok());
        QVERIFY(stopped->stoppedEarly);
        QCOMPARE(stopped->steps, int64_t(15));
        auto options = smallRun(path("parts"), AttentionKind::ReluFormer);
        options.resume = true;
        int64_t firstResumed = -1;
        auto resumed = trainModel(options, never_, [&](const TrainProgress& p) {
            if (firstResumed < 0) firstResumed = p.step;
        });
        QVERIFY2(resumed.ok(), resumed.ok() ? "" : resumed.error().c_str());
        QCOMPARE(firstResumed, int64_t(16));
        QCOMPARE(resumed->steps, int64_t(40));
        std::vector<int64_t> steps;
        const auto parts = losses(path("parts"), &steps);
        QCOMPARE(steps.size(), size_t(40));
        for (size_t i = 0; i < steps.size(); ++i) QCOMPARE(steps[i], int64_t(i + 1));
        const auto whole = losses(path("whole"));
        for (size_t i = 0; i < whole.size(); ++i) {
            QVERIFY2(std::abs(parts[i] - whole[i]) < 1e-5,
                     qPrintable(QString("step %1").arg(i + 1)));
        }
        auto finished = trainModel(options, never_, nullptr);
        QVERIFY(!finished.ok());
        QVERIFY(QString::fromStdString(finished.error()).contains("already at step 40"));
    }

    void evaluationMatchesAHandSum() {
        auto loaded = loadModelFolder(relulens::test::dataPath("tiny"));
        QVERIFY(loaded.ok());
        std::vector<int64_t> tokens;
        for (int i = 0; i < 41; ++i) tokens.push_back((i * 37) % 512);
        auto result =
            evaluateContexts(*loaded->model, tokens, {20, 40}, loaded->model->info().trained, 1000);
        QVERIFY(result.ok());
        QCOMPARE(result->size(), size_t(2));
        QCOMPARE((*result)[0].windows, int64_t(2));
        QCOMPARE((*result)[1].windows, int64_t(1));
        // Context 40: one window; recompute its mean negative log-likelihood directly.
        torch::NoGradGuard noGrad;
        auto ids = torch::tensor(tokens, torch::kLong);
        auto logits = loaded->model->forward(ids.narrow(0, 0, 40).view({1, 40}),
                                             loaded->model->info().trained)[0];
        double nll = 0;
        auto logp = torch::log_softmax(logits, -1);
        for (int i = 0; i < 40; ++i) nll -= logp[i][tokens[size_t(i + 1)]].item<double>();
        QVERIFY(std::abs((*result)[1].loss - nll / 40) < 1e-5);
        QVERIFY(std::abs((*result)[1].perplexity / std::exp(nll / 40) - 1.0) < 1e-4);
        QCOMPARE((*result)[1].standardError, 0.0);  // one window: no spread to measure

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
        QCOMPARE(twenty.windowLosses.size(), size_t(2));
        QVERIFY(std::abs(twenty.windowLosses[0] - windowLoss[0]) < 1e-5);
        QVERIFY(std::abs(twenty.windowLosses[1] - windowLoss[1]) < 1e-5);
        QVERIFY(std::abs(twenty.loss - (windowLoss[0] + windowLoss[1]) / 2) < 1e-5);
        QVERIFY(std::abs(windowLoss[0] - windowLoss[1]) > 1e-3);  // a spread to measure
        QVERIFY(std::abs(twenty.standardError - std::abs(windowLoss[0] - windowLoss[1]) / 2) <
                1e-5);
    }
};

QTEST_GUILESS_MAIN(TestTrainer)
#include "test_trainer.moc"
