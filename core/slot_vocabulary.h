// What each FFN memory slot writes: its value vector v_i (column i of W2) projected through the
// output embedding, v_i·Eᵀ, and the tokens it promotes most (Geva et al.). Depends only on the
// weights, so it is computed once per loaded model.
#pragma once
#include "core/transformer.h"

namespace relulens::core {

struct SlotVocabulary {
    torch::Tensor ids;     // (layers, d_ff, k) int64: most promoted token ids per slot
    torch::Tensor logits;  // (layers, d_ff, k) float: their v_i·Eᵀ values
    std::vector<std::string> pieces;  // id -> piece, filled by whoever holds the tokenizer
};

// `excluded`: token ids never listed (e.g. byte-fallback pieces, whose rarely trained
// embeddings would otherwise crowd the lists).
SlotVocabulary computeSlotVocabulary(const Transformer& model, int64_t k = 10,
                                     const std::vector<int64_t>& excluded = {});

}  // namespace relulens::core
