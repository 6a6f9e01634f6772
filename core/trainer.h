// Training a model from scratch (or resuming): AdamW with warm-up and cosine decay, gradient
// clipping, the ReLUFormer row-mass regulariser, a held-out validation split, a CSV log and
// periodic checkpoints. Deterministic for a fixed seed: batch k depends only on (seed, k).
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/model_config.h"
#include "core/safetensors.h"
#include "core/torch_include.h"

namespace relulens::core {

struct TrainOptions {
    std::vector<std::string> corpus;
    std::string tokenizerPath;
    std::string out;     // model folder written (config, weights, tokenizer, log, state)
    ModelConfig config;  // sizes and the variants to train with; vocab from the tokenizer
    int64_t steps = 3000;
    int64_t batch = 16;
    double lr = 2e-3;
    int64_t warmup = 200;
    double minLrRatio = 0.1;   // cosine decay ends at lr · minLrRatio
    double weightDecay = 0.1;  // decoupled; matrices and embeddings only
    double clip = 1.0;
    double beta1 = 0.9, beta2 = 0.95;
    uint64_t seed = 1;
    double validationFraction = 0.05;
    int64_t evalEvery = 200;
    int64_t evalBatches = 8;
    int64_t checkpointEvery = 200;
    double reluformerLambda = 0.01;
    StorageType storage = StorageType::F16;  // model.safetensors; the resume state is f32
    bool resume = false;
    bool force = false;
};

struct TrainProgress {
    int64_t step = 0, steps = 0;
    double trainLoss = 0;        // cross-entropy of this step's batch (regulariser excluded)
    double regulariser = 0;      // ReLUFormer term of this step (0 for other variants)
    double validationLoss = -1;  // set on evaluation steps
    double lr = 0;
    double tokensPerSecond = 0;
    double elapsedSeconds = 0;
    double secondsLeft = 0;
    bool checkpointed = false;
};

struct TrainSummary {
    int64_t steps = 0;
    int64_t tokensSeen = 0;
    double finalTrainLoss = 0;
    double finalValidationLoss = 0;
    double seconds = 0;
    bool stoppedEarly = false;
};

using ProgressCallback = std::function<void(const TrainProgress&)>;

// `stop` is polled every step; when set, a checkpoint is written and training returns.
Result<TrainSummary> trainModel(const TrainOptions& options, const std::atomic<bool>& stop,
                                const ProgressCallback& progress);

// Learning rate at a step: linear warm-up, then cosine decay to lr · minLrRatio.
double learningRate(const TrainOptions& options, int64_t step);

// One AdamW step on one tensor, as the trainer takes it (in place: the tensors share their
// storage with the caller's): decoupled weight decay (when `decay`),
// then the moments m and v updated in place from `gradient`, bias-corrected for `step` (from 1),
// and parameter -= lr / (1 - beta1^step) · m / (sqrt(v / (1 - beta2^step)) + 1e-8). The same
// update as torch::optim::AdamW with eps 1e-8.
void adamWStep(const torch::Tensor& parameter, const torch::Tensor& gradient,
               const torch::Tensor& m, const torch::Tensor& v, int64_t step, double lr,
               double beta1, double beta2, double weightDecay, bool decay);

}  // namespace relulens::core
