// Byte-level BPE tokenizers read from Hugging Face tokenizer.json files (GPT-2, Llama 3, Qwen2/3,
// SmolLM), with byte offsets per token. Pure C++ (nlohmann-json, PCRE2, ICU): no Torch, no Qt.
// Whatever a file asks for that the reader does not implement is refused at load.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tokenizer.h"

namespace relulens::core {

class BpeTokenizer {
public:
    // Reads tokenizer.json, and tokenizer_config.json when the path is not empty (its
    // add_bos_token, with bos_token, overrides the post-processor's template when present).
    // Refuses, with a one-line message naming what it found, anything it does not implement:
    // a model other than BPE, a normalizer other than none or NFC, pre-tokenizers other than
    // ByteLevel (last) after Split / Digits steps, a decoder other than ByteLevel,
    // post-processors other than TemplateProcessing ([token] $A) / ByteLevel / a Sequence of
    // them, and BPE options it doesn't honour (dropout, continuing_subword_prefix,
    // end_of_word_suffix, byte_fallback).
    static Result<BpeTokenizer> load(const std::string& tokenizerJson,
                                     const std::string& tokenizerConfig);

    // Tokens of text (valid UTF-8). Added tokens are matched first (honouring single_word,
    // lstrip, rstrip and normalized) and never split; the rest is normalized, pre-tokenized and
    // merged. [start, end) are byte offsets into `text`, and every byte of text is covered by
    // exactly one token. The template's BOS is not included (see bos()).
    std::vector<Token> encode(const std::string& text) const;
    // Byte-level decode; added tokens, special ones included, are kept as their text. Byte
    // sequences that are not UTF-8 (a token cut inside a character) become U+FFFD, as in
    // Hugging Face's decoder.
    std::string decode(const std::vector<int64_t>& ids) const;
    // The vocabulary string ("Ġthe") or an added token's content; "" when out of range.
    std::string piece(int64_t id) const;
    // The bytes of text an id stands for: a vocabulary string through the byte-level alphabet,
    // an added token's content; "" when out of range.
    std::string bytesOf(int64_t id) const;
    // Added tokens marked special.
    bool isSpecial(int64_t id) const;
    // 1 + the largest id of the vocabulary and the added tokens.
    int64_t vocabSize() const;
    // The id of a vocabulary string or added token, or -1.
    int64_t pieceId(const std::string& piece) const;
    // The id the template puts before $A (or tokenizer_config's bos_token when its
    // add_bos_token is true); -1 when none is put there.
    int64_t bos() const;

private:
    BpeTokenizer() = default;  // only load() makes one

    struct Model;      // everything read from the files; immutable after load
    struct WordCache;  // BPE results per pre-token, shared by copies and guarded by a mutex

    std::shared_ptr<const Model> model_;
    std::shared_ptr<WordCache> cache_;
};

}  // namespace relulens::core
