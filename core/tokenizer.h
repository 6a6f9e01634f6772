// A tokenizer: SentencePiece (reached through the dlopen'ed module librelulens_spm.so) or a
// Hugging Face byte-level BPE tokenizer.json. Tokens carry byte offsets into the original text
// so views can map them back to characters.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"

namespace relulens::core {

// Offset of the first byte of `text` that is not part of well-formed UTF-8 (overlong forms,
// surrogates and code points past U+10FFFF included), or -1 when the text is valid.
int64_t firstInvalidUtf8(const std::string& text);

struct Token {
    int64_t id = 0;
    std::string
        piece;  // the vocabulary's piece: "▁" (SentencePiece) or "Ġ" (byte-level BPE) marks a space
    size_t start = 0;      // byte offset of the token's text in the input
    size_t end = 0;        // one past its last byte
    std::string readable;  // the piece as a person reads it (see Tokenizer::readable)
};

struct TokenizerTrainOptions {
    std::vector<std::string> inputs;  // text files
    std::string outputModel;          // path of the .model file to write
    int vocabSize = 4096;
    std::string modelType = "unigram";
    int64_t maxSentences = 2'000'000;
};

class Tokenizer {
public:
    // A SentencePiece model.
    static Result<Tokenizer> load(const std::string& modelPath);
    // A Hugging Face tokenizer.json (byte-level BPE) with tokenizer_config.json when the path is
    // not empty; the BOS is the one its template (or add_bos_token) puts first.
    static Result<Tokenizer> loadJson(const std::string& tokenizerJson,
                                      const std::string& tokenizerConfig);
    static Status train(const TokenizerTrainOptions& options);
    const std::string& kind() const { return kind_; }  // "sentencepiece" or "bpe"

    // Tokens of `text`, after the BOS token when one is set (an empty span at 0); an error
    // carries the tokenizer module's own message.
    Result<std::vector<Token>> encode(const std::string& text) const;
    std::string decode(const std::vector<int64_t>& ids) const;
    std::string piece(int64_t id) const;
    // The piece as a person reads it, whatever the tokenizer's spelling: spaces as "▁", "↵"
    // for a newline, "⇥" for a tab, "byte 0xE2" for a byte that is not a whole character;
    // control and special tokens as their piece ("<s>", "<|begin_of_text|>").
    std::string readable(int64_t id) const;
    // Control symbols (<unk>, <s>, </s>), byte-fallback pieces (<0xAB>) and special added
    // tokens (<|begin_of_text|>).
    bool isSpecial(int64_t id) const;
    int64_t vocabSize() const;
    const std::string& path() const { return path_; }
    // The id of a piece, or -1.
    int64_t pieceId(const std::string& piece) const;
    // A token id put before every encoding (-1: none), as a model's tokenizer config asks.
    void setBos(int64_t id) { bos_ = id; }
    int64_t bos() const { return bos_; }

    // Where the module was found (or why not); for --version and error messages.
    static Result<std::string> modulePath();

    struct Backend;

private:
    std::shared_ptr<const Backend> backend_;
    std::string path_;
    std::string kind_;
    int64_t bos_ = -1;
};

}  // namespace relulens::core
