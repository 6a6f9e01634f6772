// Tokenizers behind one interface: SentencePiece models, and byte-level BPE tokenizer.json files.
// SentencePiece is never linked into ReluLens. Debian's libsentencepiece carries a private
// protobuf that clashes with the one LibTorch loads, crashing the process before main().
// The module is loaded with RTLD_LOCAL | RTLD_DEEPBIND so each side keeps its own protobuf.
#include "core/tokenizer.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "core/bpe_tokenizer.h"
#include "core/install_paths.h"
#include "core/sentencepiece_module/spm_api.h"

namespace relulens::core {

int64_t firstInvalidUtf8(const std::string& text) {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    size_t i = 0;
    while (i < n) {
        const unsigned char c = p[i];
        size_t length = 0;
        uint32_t lowest = 0;
        if (c < 0x80) {
            ++i;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            length = 2, lowest = 0x80;
        } else if ((c & 0xF0) == 0xE0) {
            length = 3, lowest = 0x800;
        } else if ((c & 0xF8) == 0xF0) {
            length = 4, lowest = 0x10000;
        } else {
            return int64_t(i);
        }
        if (i + length > n) return int64_t(i);
        uint32_t code = c & (0xFF >> (length + 1));
        for (size_t k = 1; k < length; ++k) {
            if ((p[i + k] & 0xC0) != 0x80) return int64_t(i);
            code = (code << 6) | (p[i + k] & 0x3F);
        }
        if (code < lowest || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF))
            return int64_t(i);
        i += length;
    }
    return -1;
}

namespace fs = std::filesystem;

namespace {

constexpr const char* kModuleName = "librelulens_spm.so";

struct Api {
    void* library = nullptr;
    std::string path;
    std::string error;
    decltype(&rl_spm_load) load = nullptr;
    decltype(&rl_spm_free) free = nullptr;
    decltype(&rl_spm_vocab_size) vocabSize = nullptr;
    decltype(&rl_spm_id_to_piece) idToPiece = nullptr;
    decltype(&rl_spm_is_byte) isByte = nullptr;
    decltype(&rl_spm_is_control) isControl = nullptr;
    decltype(&rl_spm_encode) encode = nullptr;
    decltype(&rl_spm_free_tokens) freeTokens = nullptr;
    decltype(&rl_spm_decode) decode = nullptr;
    decltype(&rl_spm_free_string) freeString = nullptr;
    decltype(&rl_spm_train) train = nullptr;
};

std::vector<fs::path> candidatePaths() {
    std::vector<fs::path> paths;
    if (const char* env = std::getenv("RELULENS_SPM_MODULE")) paths.emplace_back(env);
    const fs::path dir = executableDir();
    paths.push_back(dir / kModuleName);
    paths.push_back(dir / ".." / "lib" / "relulens" / kModuleName);
    paths.push_back(dir / ".." / "bin" / kModuleName);
    return paths;
}

template <typename F>
bool resolve(Api& api, F& target, const char* symbol) {
    target = reinterpret_cast<F>(dlsym(api.library, symbol));
    if (!target) api.error = api.path + ": missing symbol " + symbol;
    return target != nullptr;
}

const Api& api() {
    static Api instance;
    static std::once_flag once;
    std::call_once(once, [] {
        std::string tried;
        for (const auto& candidate : candidatePaths()) {
            std::error_code ec;
            if (!fs::exists(candidate, ec)) {
                tried += " " + candidate.lexically_normal().string();
                continue;
            }
            instance.path = fs::canonical(candidate, ec).string();
#ifdef RELULENS_SPM_OWN_NAMESPACE
            // Sanitized builds: the sanitizer runtime refuses RTLD_DEEPBIND, and without it the
            // module's protobuf binds to LibTorch's and SentencePiece aborts. A link namespace of
            // its own isolates the module completely (it is built uninstrumented for this).
            instance.library = dlmopen(LM_ID_NEWLM, instance.path.c_str(), RTLD_NOW | RTLD_LOCAL);
#else
            instance.library = dlopen(instance.path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
#endif
            if (!instance.library) {
                instance.error = std::string("cannot load the tokenizer module: ") + dlerror();
                return;
            }
            auto versionFn = reinterpret_cast<decltype(&rl_spm_api_version)>(
                dlsym(instance.library, "rl_spm_api_version"));
            if (!versionFn || versionFn() != RL_SPM_API_VERSION) {
                instance.error =
                    instance.path + ": tokenizer module has the wrong interface version";
                dlclose(instance.library);
                instance.library = nullptr;
                return;
            }
            bool ok = resolve(instance, instance.load, "rl_spm_load") &&
                      resolve(instance, instance.free, "rl_spm_free") &&
                      resolve(instance, instance.vocabSize, "rl_spm_vocab_size") &&
                      resolve(instance, instance.idToPiece, "rl_spm_id_to_piece") &&
                      resolve(instance, instance.isByte, "rl_spm_is_byte") &&
                      resolve(instance, instance.isControl, "rl_spm_is_control") &&
                      resolve(instance, instance.encode, "rl_spm_encode") &&
                      resolve(instance, instance.freeTokens, "rl_spm_free_tokens") &&
                      resolve(instance, instance.decode, "rl_spm_decode") &&
                      resolve(instance, instance.freeString, "rl_spm_free_string") &&
                      resolve(instance, instance.train, "rl_spm_train");
            if (!ok) {
                dlclose(instance.library);
                instance.library = nullptr;
            }
            return;
        }
        instance.error = std::string("tokenizer module ") + kModuleName +
                         " not found (looked at:" + tried +
                         "); set RELULENS_SPM_MODULE to its path";
    });
    return instance;
}

}  // namespace

// What every kind of tokenizer model answers; Tokenizer adds the BOS token.
struct Tokenizer::Backend {
    virtual ~Backend() = default;
    virtual Result<std::vector<Token>> encode(const std::string& text) const = 0;
    virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
    virtual std::string piece(int64_t id) const = 0;
    virtual bool isSpecial(int64_t id) const = 0;
    virtual int64_t vocabSize() const = 0;
    // The bytes of text the id stands for (its piece for control and special tokens).
    virtual std::string bytesOf(int64_t id) const = 0;
    virtual int64_t pieceId(const std::string& piece) const {
        for (int64_t id = 0; id < vocabSize(); ++id) {
            if (this->piece(id) == piece) return id;
        }
        return -1;
    }
};

namespace {

class SentencePieceBackend : public Tokenizer::Backend {
public:
    explicit SentencePieceBackend(rl_spm* model) : model_(model) {}
    ~SentencePieceBackend() override { api().free(model_); }

    Result<std::vector<Token>> encode(const std::string& text) const override {
        const Api& a = api();
        rl_spm_token* raw = nullptr;
        size_t count = 0;
        char err[512] = {0};
        std::vector<Token> tokens;
        if (a.encode(model_, text.data(), text.size(), &raw, &count, err, sizeof err) != 0) {
            return Error{std::string("the tokenizer could not encode the text: ") +
                         (err[0] ? err : "no reason given")};
        }
        tokens.reserve(count);
        for (size_t i = 0; i < count; ++i) {
            tokens.push_back({raw[i].id, piece(raw[i].id), raw[i].begin, raw[i].end});
        }
        // SentencePiece gives the byte-fallback pieces of one character an empty span at the
        // character's start and the last of them the character's whole span. Each such piece
        // stands for one byte, so piece k gets byte k of the character: spans then tile the
        // text and views can map each token to bytes. A malformed byte is replaced by U+FFFD,
        // three pieces for one byte: pieces past the character's end get an empty span at its
        // end.
        for (size_t i = 0; i < count;) {
            if (a.isByte(model_, raw[i].id) == 0) {
                ++i;
                continue;
            }
            const size_t begin = raw[i].begin;
            size_t next = i, characterEnd = begin;  // pieces i..next-1 spell one character
            while (next < count && raw[next].begin == begin &&
                   a.isByte(model_, raw[next].id) != 0) {
                characterEnd = std::max<size_t>(characterEnd, raw[next].end);
                ++next;
            }
            for (size_t k = i; k < next; ++k) {
                tokens[k].start = std::min(begin + (k - i), characterEnd);
                tokens[k].end = std::min(begin + (k - i) + 1, characterEnd);
            }
            i = next;
        }
        a.freeTokens(raw);
        return tokens;
    }

    std::string decode(const std::vector<int64_t>& ids) const override {
        const Api& a = api();
        std::vector<int32_t> narrow(ids.begin(), ids.end());
        char* out = nullptr;
        size_t len = 0;
        char err[512] = {0};
        if (a.decode(model_, narrow.data(), narrow.size(), &out, &len, err, sizeof err) != 0)
            return {};
        std::string text(out, len);
        a.freeString(out);
        return text;
    }

    std::string piece(int64_t id) const override {
        const char* p = api().idToPiece(model_, static_cast<int32_t>(id));
        return p ? std::string(p) : std::string();
    }

    bool isSpecial(int64_t id) const override {
        const auto narrow = static_cast<int32_t>(id);
        return api().isByte(model_, narrow) != 0 || api().isControl(model_, narrow) != 0;
    }

    int64_t vocabSize() const override { return api().vocabSize(model_); }

    std::string bytesOf(int64_t id) const override {
        std::string p = piece(id);
        const auto narrow = static_cast<int32_t>(id);
        if (api().isByte(model_, narrow) != 0 && p.size() == 6) {  // "<0xE2>"
            return std::string(1, char(std::stoi(p.substr(3, 2), nullptr, 16)));
        }
        if (api().isControl(model_, narrow) != 0) return p;
        std::string out;  // "▁" (U+2581, 3 bytes) marks a space
        for (size_t i = 0; i < p.size();) {
            if (p.compare(i, 3, "\xE2\x96\x81") == 0) {
                out += ' ';
                i += 3;
            } else {
                out += p[i++];
            }
        }
        return out;
    }

private:
    rl_spm* model_;
};

class BpeBackend : public Tokenizer::Backend {
public:
    explicit BpeBackend(BpeTokenizer bpe) : bpe_(std::move(bpe)) {}
    Result<std::vector<Token>> encode(const std::string& text) const override {
        return bpe_.encode(text);
    }
    std::string decode(const std::vector<int64_t>& ids) const override { return bpe_.decode(ids); }
    std::string piece(int64_t id) const override { return bpe_.piece(id); }
    bool isSpecial(int64_t id) const override { return bpe_.isSpecial(id); }
    int64_t vocabSize() const override { return bpe_.vocabSize(); }
    std::string bytesOf(int64_t id) const override { return bpe_.bytesOf(id); }
    int64_t pieceId(const std::string& piece) const override { return bpe_.pieceId(piece); }

private:
    BpeTokenizer bpe_;
};

}  // namespace

Result<std::string> Tokenizer::modulePath() {
    const Api& a = api();
    if (!a.library) return Error{a.error};
    return a.path;
}

Result<Tokenizer> Tokenizer::load(const std::string& modelPath) {
    const Api& a = api();
    if (!a.library) return Error{a.error};
    std::error_code ec;
    if (!fs::is_regular_file(modelPath, ec)) return Error{modelPath + ": no such file"};
    char err[512] = {0};
    rl_spm* model = a.load(modelPath.c_str(), err, sizeof err);
    if (!model) return Error{modelPath + ": not a SentencePiece model (" + err + ")"};
    Tokenizer tokenizer;
    tokenizer.backend_ = std::make_shared<SentencePieceBackend>(model);
    tokenizer.path_ = modelPath;
    tokenizer.kind_ = "sentencepiece";
    return tokenizer;
}

Result<Tokenizer> Tokenizer::loadJson(const std::string& tokenizerJson,
                                      const std::string& tokenizerConfig) {
    auto bpe = BpeTokenizer::load(tokenizerJson, tokenizerConfig);
    if (!bpe) return Error{bpe.error()};
    Tokenizer tokenizer;
    tokenizer.bos_ = bpe->bos();
    tokenizer.backend_ = std::make_shared<BpeBackend>(std::move(*bpe));
    tokenizer.path_ = tokenizerJson;
    tokenizer.kind_ = "bpe";
    return tokenizer;
}

Status Tokenizer::train(const TokenizerTrainOptions& o) {
    const Api& a = api();
    if (!a.library) return Error{a.error};
    if (o.inputs.empty()) return Error{"no corpus files given"};
    std::string inputs;
    for (const auto& input : o.inputs) {
        std::error_code ec;
        if (!fs::is_regular_file(input, ec)) return Error{input + ": no such file"};
        inputs += (inputs.empty() ? "" : ",") + input;
    }
    std::string prefix = o.outputModel;
    if (prefix.size() > 6 && prefix.substr(prefix.size() - 6) == ".model") {
        prefix.resize(prefix.size() - 6);
    }
    // identity normalisation and kept whitespace: decode(encode(text)) == text, and offsets
    // point into the text exactly as typed. Byte fallback covers characters outside the
    // vocabulary (CJK, emoji) without an unknown token.
    const std::vector<std::pair<std::string, std::string>> options = {
        {"input", inputs},
        {"model_prefix", prefix},
        {"vocab_size", std::to_string(o.vocabSize)},
        {"model_type", o.modelType},
        {"normalization_rule_name", "identity"},
        {"remove_extra_whitespaces", "false"},
        {"byte_fallback", "true"},
        {"character_coverage", "0.9995"},
        {"split_digits", "true"},
        {"input_sentence_size", std::to_string(o.maxSentences)},
        {"shuffle_input_sentence", "true"},
        {"max_sentence_length", "16384"},
        {"num_threads", "2"},
        {"minloglevel", "2"},
        {"seed_sentencepiece_size", "200000"},
    };
    std::vector<const char*> keys, values;
    for (const auto& [k, v] : options) {
        keys.push_back(k.c_str());
        values.push_back(v.c_str());
    }
    char err[1024] = {0};
    if (a.train(keys.data(), values.data(), keys.size(), err, sizeof err) != 0) {
        return Error{std::string("tokenizer training failed: ") + err};
    }
    std::error_code ec;
    fs::remove(prefix + ".vocab", ec);
    return {};
}

Result<std::vector<Token>> Tokenizer::encode(const std::string& text) const {
    std::vector<Token> tokens;
    if (bos_ >= 0) tokens.push_back({bos_, piece(bos_), 0, 0});
    auto body = backend_->encode(text);
    if (!body) return Error{body.error()};
    if (tokens.empty()) {
        tokens = std::move(*body);
    } else {
        tokens.insert(tokens.end(), std::make_move_iterator(body->begin()),
                      std::make_move_iterator(body->end()));
    }
    for (auto& t : tokens) t.readable = readable(t.id);
    return tokens;
}

namespace {

// Bytes of text as a person reads them in a token chip: see Tokenizer::readable.
std::string readableText(const std::string& bytes) {
    std::string out;
    for (size_t i = 0; i < bytes.size();) {
        const unsigned char c = static_cast<unsigned char>(bytes[i]);
        if (c == ' ')
            out += "\xE2\x96\x81";  // ▁
        else if (c == '\n')
            out += "\xE2\x86\xB5";  // ↵
        else if (c == '\t')
            out += "\xE2\x87\xA5";  // ⇥
        else if (c == '\r')
            out += "\xE2\x90\x8D";  // ␍
        if (c == ' ' || c == '\n' || c == '\t' || c == '\r') {
            ++i;
            continue;
        }
        // one whole UTF-8 character, or a lone byte
        size_t length = c < 0x80             ? 1
                        : (c & 0xE0) == 0xC0 ? 2
                        : (c & 0xF0) == 0xE0 ? 3
                        : (c & 0xF8) == 0xF0 ? 4
                                             : 0;
        const std::string character = length ? bytes.substr(i, length) : std::string();
        if (length && character.size() == length && firstInvalidUtf8(character) < 0 && c >= 0x20 &&
            c != 0x7F) {
            out += character;
            i += length;
        } else {
            char name[16];
            std::snprintf(name, sizeof name, "%sbyte 0x%02X", out.empty() ? "" : " ", c);
            out += name;
            ++i;
        }
    }
    return out;
}

}  // namespace

std::string Tokenizer::readable(int64_t id) const {
    if (isSpecial(id) && backend_->bytesOf(id).size() != 1) return piece(id);  // <s>, <|eot_id|>
    return readableText(backend_->bytesOf(id));
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids) const {
    return backend_->decode(ids);
}
std::string Tokenizer::piece(int64_t id) const {
    return backend_->piece(id);
}
bool Tokenizer::isSpecial(int64_t id) const {
    return backend_->isSpecial(id);
}
int64_t Tokenizer::vocabSize() const {
    return backend_->vocabSize();
}
int64_t Tokenizer::pieceId(const std::string& piece) const {
    return backend_->pieceId(piece);
}

}  // namespace relulens::core
