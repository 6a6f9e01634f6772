#include "core/lens.h"

#include <torch/csrc/autograd/grad_mode.h>

namespace relulens::core {

namespace {

// Rows of logits taken at once: a few thousand rows of a large vocabulary stay near 100 MB.
constexpr int64_t kLensRows = 1024;

torch::Tensor logProbabilities(const torch::Tensor& logits, int64_t vocabulary) {
    auto l = logits.to(torch::kFloat32);
    if (vocabulary < l.size(-1)) l = l.narrow(-1, 0, vocabulary);
    return torch::log_softmax(l, -1);
}

}  // namespace

ChangeEffect changeEffect(const torch::Tensor& changed, const torch::Tensor& unchanged,
                          const std::vector<int64_t>& ids, int topK, const Tokenizer& tokenizer) {
    torch::NoGradGuard noGrad;
    ChangeEffect effect;
    effect.unchangedPredictions = topPredictions(unchanged, topK, tokenizer);
    const auto L = int64_t(ids.size());
    if (L < 2) return effect;
    const auto next = torch::tensor(std::vector<int64_t>(ids.begin() + 1, ids.end()), torch::kLong)
                          .to(changed.device())
                          .unsqueeze(1);
    for (int64_t r0 = 0; r0 < L - 1; r0 += kLensRows) {
        const int64_t R = std::min(kLensRows, L - 1 - r0);
        const auto p = logProbabilities(changed.narrow(0, r0, R), tokenizer.vocabSize());
        const auto q = logProbabilities(unchanged.narrow(0, r0, R), tokenizer.vocabSize());
        const auto target = next.narrow(0, r0, R);
        const auto delta =
            (p.gather(1, target) - q.gather(1, target)).squeeze(1).to(torch::kFloat64).cpu();
        const auto kl = (q.exp() * (q - p)).sum(-1).to(torch::kFloat64).cpu();
        const auto lossChanged =
            -p.gather(1, target).squeeze(1).to(torch::kFloat64).sum().item<double>();
        const auto lossUnchanged =
            -q.gather(1, target).squeeze(1).to(torch::kFloat64).sum().item<double>();
        for (int64_t i = 0; i < R; ++i) {
            effect.deltaLogProb.push_back(delta[i].item<double>());
            effect.kl.push_back(std::max(0.0, kl[i].item<double>()));
        }
        effect.loss += lossChanged;
        effect.unchangedLoss += lossUnchanged;
    }
    effect.loss /= double(L - 1);
    effect.unchangedLoss /= double(L - 1);
    return effect;
}

LogitLens logitLens(const LanguageModel& model, const std::vector<torch::Tensor>& afterLayer,
                    const std::vector<int64_t>& ids, const std::vector<int64_t>& positions,
                    int topK, const Tokenizer& tokenizer) {
    torch::NoGradGuard noGrad;
    LogitLens lens;
    const auto L = int64_t(ids.size());
    const auto layers = int64_t(afterLayer.size());
    lens.nextTokenProbability =
        torch::zeros({layers, std::max<int64_t>(L - 1, 0)}, torch::kFloat32);
    const auto next =
        L > 1 ? torch::tensor(std::vector<int64_t>(ids.begin() + 1, ids.end()), torch::kLong)
                    .to(model.device())
                    .unsqueeze(1)
              : torch::Tensor();
    // Rows whose top k is listed, in the order asked.
    std::vector<std::vector<size_t>> listedAt(static_cast<size_t>(L));
    for (const int64_t asked : positions) {
        const int64_t p = asked < 0 ? L - 1 : asked;
        listedAt[size_t(p)].push_back(lens.top.size());
        lens.top.push_back({p, {}});
    }
    for (int64_t l = 0; l < layers; ++l) {
        const auto& stream = afterLayer[size_t(l)];
        for (int64_t r0 = 0; r0 < L; r0 += kLensRows) {
            const int64_t R = std::min(kLensRows, L - r0);
            const auto logits = model.logitsFromResidual(stream.narrow(0, r0, R));
            const int64_t scored = std::min(R, L - 1 - r0);  // the last token has no next one
            if (scored > 0) {
                const auto logp =
                    logProbabilities(logits.narrow(0, 0, scored), tokenizer.vocabSize());
                lens.nextTokenProbability[l]
                    .narrow(0, r0, scored)
                    .copy_(logp.gather(1, next.narrow(0, r0, scored)).squeeze(1).exp().cpu());
            }
            std::vector<int64_t> rows;
            for (int64_t r = 0; r < R; ++r) {
                if (!listedAt[size_t(r0 + r)].empty()) rows.push_back(r);
            }
            if (rows.empty()) continue;
            const auto picked =
                logits.index_select(0, torch::tensor(rows, torch::kLong).to(logits.device()));
            auto top = topPredictions(picked, topK, tokenizer);
            for (size_t i = 0; i < rows.size(); ++i) {
                for (const size_t entry : listedAt[size_t(r0 + rows[i])])
                    lens.top[entry].layers.push_back(top[i]);
            }
        }
    }
    return lens;
}

}  // namespace relulens::core
