// What each FFN memory slot writes: its value vector v_i (column i of W2, or of down_proj in a
// gated FFN) projected through the output embedding, v_i·Eᵀ, and the tokens it promotes most
// (Geva et al.). Computed per slot when first asked (a 32,000-token vocabulary times a layer's
// thousands of slots would take seconds per layer), then kept.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "core/language_model.h"
#include "core/tokenizer.h"

namespace relulens::core {

struct PromotedToken {
    int64_t id = 0;
    std::string piece;  // as a person reads it (Tokenizer::readable)
    double logit = 0;   // v_i·e_id
};

class SlotVocabulary {
public:
    // Keeps the model's slot value vectors and output embedding (not copies). Control and
    // byte-fallback pieces of the tokenizer are never listed: their rarely trained embeddings
    // would otherwise crowd the lists. Embedding rows past the tokenizer's pieces are padding.
    SlotVocabulary(const LanguageModel& model, const Tokenizer& tokenizer, int64_t k = 10);

    // The k tokens slot `slot` of `layer` promotes most, best first; empty when out of range.
    std::vector<PromotedToken> promoted(int64_t layer, int64_t slot) const;

private:
    std::vector<torch::Tensor> values_;  // per layer (d, d_ff)
    torch::Tensor embedding_;            // (vocab, d)
    torch::Tensor excluded_;             // (vocab) bool: never listed
    std::vector<std::string> pieces_;
    int64_t k_;
    mutable std::mutex mutex_;
    mutable std::map<std::pair<int64_t, int64_t>, std::vector<PromotedToken>> cache_;
};

}  // namespace relulens::core
