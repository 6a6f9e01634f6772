#include "core/evaluation.h"

#include <cmath>

#include <torch/csrc/autograd/grad_mode.h>

namespace relulens::core {

Result<std::vector<ContextLoss>> evaluateContexts(const LanguageModel& model,
                                                  const std::vector<int64_t>& tokens,
                                                  const std::vector<int64_t>& contexts,
                                                  const RunSpec& run, int64_t maxTokens,
                                                  int64_t batch) {
    torch::NoGradGuard noGrad;
    std::vector<ContextLoss> out;
    const auto all = torch::tensor(tokens, torch::kLong);
    for (const int64_t context : contexts) {
        if (context < 1) return Error{"context length must be positive"};
        const int64_t available = (int64_t(tokens.size()) - 1) / context;
        if (available < 1) {
            return Error{"the text has " + std::to_string(tokens.size()) +
                         " tokens, too few for context " + std::to_string(context)};
        }
        const int64_t windows = std::max<int64_t>(1, std::min(available, maxTokens / context));
        std::vector<double> windowLosses;
        windowLosses.reserve(size_t(windows));
        for (int64_t w = 0; w < windows; w += batch) {
            const int64_t rows = std::min(batch, windows - w);
            std::vector<torch::Tensor> inputs, targets;
            for (int64_t r = 0; r < rows; ++r) {
                const int64_t start = (w + r) * context;
                inputs.push_back(all.narrow(0, start, context));
                targets.push_back(all.narrow(0, start + 1, context));
            }
            auto logits = model.forward(torch::stack(inputs).to(model.device()), run);
            auto logProbabilities = torch::log_softmax(logits.to(torch::kFloat32), -1);
            auto picked =
                logProbabilities.gather(-1, torch::stack(targets).to(model.device()).unsqueeze(-1));
            const auto perWindow =
                (-picked.squeeze(-1).to(torch::kFloat64).mean(1)).to(torch::kCPU);
            for (int64_t r = 0; r < rows; ++r) windowLosses.push_back(perWindow[r].item<double>());
        }
        ContextLoss loss;
        loss.context = context;
        loss.windows = windows;
        loss.tokens = windows * context;
        double sum = 0;
        for (double l : windowLosses) sum += l;
        loss.loss = sum / double(windows);  // every window has `context` predictions
        if (windows > 1) {
            double squares = 0;
            for (double l : windowLosses) squares += (l - loss.loss) * (l - loss.loss);
            loss.standardError = std::sqrt(squares / double(windows - 1) / double(windows));
        }
        loss.windowLosses = std::move(windowLosses);
        loss.perplexity = std::exp(loss.loss);
        out.push_back(loss);
    }
    return out;
}

}  // namespace relulens::core
