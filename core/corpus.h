// Training and evaluation text as token ids: files read, tokenized once, split into a training
// part and a held-out validation part (the last share of the tokens).
#pragma once
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tokenizer.h"

namespace relulens::core {

struct TokenizedCorpus {
    std::vector<int64_t> train;       // token ids before the split
    std::vector<int64_t> validation;  // the last `validationFraction` of the tokens
    size_t validationStartByte = 0;   // where validation begins in the concatenated text
};

// Files are joined with a blank line between them, as the corpus builder does.
Result<std::string> readCorpusText(const std::vector<std::string>& files);
Result<TokenizedCorpus> tokenizeCorpus(const std::vector<std::string>& files,
                                       const Tokenizer& tokenizer, double validationFraction);

}  // namespace relulens::core
