#include "core/corpus.h"

#include <fstream>
#include <sstream>

namespace relulens::core {

Result<std::string> readCorpusText(const std::vector<std::string>& files) {
    if (files.empty()) return Error{"no corpus files given"};
    std::string text;
    for (const auto& path : files) {
        std::ifstream in(path, std::ios::binary);
        if (!in) return Error{path + ": cannot open the corpus file"};
        std::ostringstream buffer;
        buffer << in.rdbuf();
        if (!text.empty()) text += "\n\n";
        text += buffer.str();
    }
    if (text.empty()) return Error{"the corpus is empty"};
    return text;
}

Result<TokenizedCorpus> tokenizeCorpus(const std::vector<std::string>& files,
                                       const Tokenizer& tokenizer, double validationFraction) {
    auto text = readCorpusText(files);
    if (!text) return Error{text.error()};
    auto encoded = tokenizer.encode(*text);
    if (!encoded) return Error{encoded.error()};
    const auto& tokens = *encoded;
    if (tokens.size() < 64) {
        return Error{"the corpus has only " + std::to_string(tokens.size()) +
                     " tokens; training needs more text"};
    }
    const size_t split = size_t(double(tokens.size()) * (1.0 - validationFraction));
    TokenizedCorpus corpus;
    corpus.train.reserve(split);
    for (size_t i = 0; i < tokens.size(); ++i) {
        (i < split ? corpus.train : corpus.validation).push_back(tokens[i].id);
    }
    corpus.validationStartByte = split < tokens.size() ? tokens[split].start : text->size();
    return corpus;
}

}  // namespace relulens::core
