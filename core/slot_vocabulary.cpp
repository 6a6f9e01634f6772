#include "core/slot_vocabulary.h"

#include <cmath>
#include <limits>

#include <torch/csrc/autograd/grad_mode.h>

namespace relulens::core {

SlotVocabulary::SlotVocabulary(const LanguageModel& model, const Tokenizer& tokenizer, int64_t k)
    : embedding_(model.outputEmbedding()), k_(k) {
    for (int64_t l = 0; l < model.info().nLayers; ++l) values_.push_back(model.slotValues(l));
    const int64_t V = embedding_.size(0);
    std::vector<uint8_t> excluded(size_t(V), 1);
    for (int64_t id = 0; id < std::min(V, tokenizer.vocabSize()); ++id) {
        pieces_.push_back(tokenizer.readable(id));
        excluded[size_t(id)] = tokenizer.isSpecial(id) ? 1 : 0;
    }
    excluded_ = torch::tensor(excluded, torch::kUInt8).to(torch::kBool).to(embedding_.device());
}

std::vector<PromotedToken> SlotVocabulary::promoted(int64_t layer, int64_t slot) const {
    if (layer < 0 || layer >= int64_t(values_.size()) || slot < 0 ||
        slot >= values_[size_t(layer)].size(1)) {
        return {};
    }
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cache_.find({layer, slot});
    if (it != cache_.end()) return it->second;
    torch::NoGradGuard noGrad;
    const auto value = values_[size_t(layer)].select(1, slot).to(torch::kFloat32);  // (d)
    auto logits = torch::mv(embedding_.to(torch::kFloat32), value);                 // (vocab)
    logits.masked_fill_(excluded_, -std::numeric_limits<float>::infinity());
    const int64_t listed = std::min<int64_t>(k_, int64_t(pieces_.size()));
    auto [top, ids] = logits.topk(listed);
    top = top.to(torch::kCPU).contiguous();
    ids = ids.to(torch::kCPU).contiguous();
    std::vector<PromotedToken> out;
    for (int64_t i = 0; i < listed; ++i) {
        const float v = top.data_ptr<float>()[i];
        if (!std::isfinite(v)) break;  // fewer listable pieces than k
        const int64_t id = ids.data_ptr<int64_t>()[i];
        out.push_back({id, pieces_[size_t(id)], double(v)});
    }
    cache_.emplace(std::make_pair(layer, slot), out);
    return out;
}

}  // namespace relulens::core
