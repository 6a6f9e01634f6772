// Internal to the byte-level BPE tokenizer: the model bpe_loader.cpp reads from tokenizer.json
// and bpe_tokenizer.cpp encodes with, and the pieces both use (UTF-8 stepping, the PCRE2 regex
// wrapper, the byte-level alphabet). Not for use outside those two files.
#pragma once
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/bpe_tokenizer.h"
#include "core/error.h"

namespace relulens::core {

namespace bpe_detail {

// ---------------------------------------------------------------------------------------------
// UTF-8

// The code point at s[i], advancing i past it. A malformed byte reads as U+FFFD on its own.
inline uint32_t nextCodePoint(std::string_view s, size_t& i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
        ++i;
        return c;
    }
    const size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    if (length == 1 || i + length > s.size()) {
        ++i;
        return 0xFFFD;
    }
    uint32_t cp = c & (0x7F >> length);
    for (size_t k = 1; k < length; ++k) {
        cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    i += length;
    return cp;
}

// Length of the well-formed UTF-8 sequence at s[i], or of its longest well-formed prefix
// (at least 1) negated when it is cut short or invalid: the "maximal subpart" that
// String::from_utf8_lossy and the WHATWG decoder replace with one U+FFFD.
inline int utf8SequenceAt(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) return 1;
    int length = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
        length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        length = 3;
        if (c == 0xE0) low = 0xA0;
        if (c == 0xED) high = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        length = 4;
        if (c == 0xF0) low = 0x90;
        if (c == 0xF4) high = 0x8F;
    } else {
        return -1;
    }
    for (int k = 1; k < length; ++k) {
        if (i + k >= s.size()) return -k;
        const auto b = static_cast<unsigned char>(s[i + k]);
        if (k == 1 ? (b < low || b > high) : (b & 0xC0) != 0x80) return -k;
    }
    return length;
}

inline bool isValidUtf8(std::string_view s) {
    for (size_t i = 0; i < s.size();) {
        const int length = utf8SequenceAt(s, i);
        if (length < 0) return false;
        i += size_t(length);
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// PCRE2 regexes, with Unicode properties (\p{L}), case-insensitive groups and lookahead.

// tokenizer.json patterns come from Oniguruma, which reads \uXXXX; PCRE2 spells it \x{XXXX}.
inline std::string pcreSyntax(const std::string& pattern) {
    std::string out;
    out.reserve(pattern.size());
    for (size_t i = 0; i < pattern.size(); ++i) {
        if (pattern[i] != '\\' || i + 1 >= pattern.size()) {
            out += pattern[i];
            continue;
        }
        if (pattern[i + 1] == 'u' && i + 6 <= pattern.size() &&
            std::all_of(pattern.begin() + long(i) + 2, pattern.begin() + long(i) + 6,
                        [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); })) {
            out += "\\x{" + pattern.substr(i + 2, 4) + "}";
            i += 5;
        } else {
            out += pattern[i];
            out += pattern[++i];
        }
    }
    return out;
}

class Regex {
public:
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    ~Regex() { pcre2_code_free(code_); }

    static Result<std::shared_ptr<const Regex>> compile(const std::string& source) {
        const std::string pattern = pcreSyntax(source);
        int error = 0;
        PCRE2_SIZE where = 0;
        pcre2_code* code =
            pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                          PCRE2_UTF | PCRE2_UCP, &error, &where, nullptr);
        if (!code) {
            PCRE2_UCHAR message[256];
            pcre2_get_error_message(error, message, sizeof message);
            return Error{"regex '" + source + "' does not compile (" +
                         reinterpret_cast<const char*>(message) + " at offset " +
                         std::to_string(where) + ")"};
        }
        // Best effort: when JIT is unavailable pcre2_match interprets the pattern.
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
        return std::shared_ptr<const Regex>(new Regex(code));
    }

    // Calls found(start, end) for each non-empty match in `subject`, left to right. `checked`
    // says the subject is valid UTF-8: PCRE2 would otherwise validate the whole subject again
    // at every call, which is quadratic over a long text.
    template <typename F>
    void forEachMatch(std::string_view subject, pcre2_match_data* data, bool checked,
                      F&& found) const {
        const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
        uint32_t options = checked ? PCRE2_NO_UTF_CHECK : 0;
        size_t offset = 0;
        while (offset < subject.size()) {
            const int rc = pcre2_match(code_, s, subject.size(), offset, options, data, nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) return;
            if (rc < 0) {
                // The JIT's stack is small; the interpreter takes what its stack can't.
                if (options & PCRE2_NO_JIT) return;
                options |= PCRE2_NO_JIT;
                continue;
            }
            const PCRE2_SIZE* range = pcre2_get_ovector_pointer(data);
            if (range[1] <= range[0] || range[0] < offset) {  // empty: step over a character
                size_t next = std::max<size_t>(range[0], offset);
                if (next >= subject.size()) return;
                nextCodePoint(subject, next);
                offset = next;
                continue;
            }
            found(size_t(range[0]), size_t(range[1]));
            offset = range[1];
        }
    }

    // Whether the pattern matches at the start of `subject`.
    bool matchesAt(std::string_view subject) const {
        pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
        const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(subject.data()),
                                   subject.size(), 0, PCRE2_ANCHORED, data, nullptr);
        pcre2_match_data_free(data);
        return rc >= 0;
    }

private:
    explicit Regex(pcre2_code* code) : code_(code) {}
    pcre2_code* code_;
};

// Match data for one encode call (the pattern objects themselves are shared and read-only).
struct MatchData {
    pcre2_match_data* data = pcre2_match_data_create(16, nullptr);
    MatchData() = default;
    MatchData(const MatchData&) = delete;
    MatchData& operator=(const MatchData&) = delete;
    ~MatchData() { pcre2_match_data_free(data); }
};

// ---------------------------------------------------------------------------------------------
// GPT-2's byte-level alphabet: every byte stands for a printable character, so vocabulary
// strings hold no spaces or control characters ("Ġ" is the space). Printable Latin-1 bytes
// stand for themselves, the others for U+0100 onwards in byte order.

struct ByteLevelAlphabet {
    std::array<std::string, 256> charOf;  // byte -> UTF-8 of its character
    std::array<int, 0x144> byteOf{};      // character -> byte, -1 for other characters

    ByteLevelAlphabet() {
        byteOf.fill(-1);
        uint32_t next = 0x100;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
            const uint32_t cp = printable ? uint32_t(b) : next++;
            byteOf[cp] = b;
            // cp < U+0144: one or two bytes of UTF-8
            if (cp < 0x80) {
                charOf[b] += char(cp);
            } else {
                charOf[b] += char(0xC0 | (cp >> 6));
                charOf[b] += char(0x80 | (cp & 0x3F));
            }
        }
    }
};

inline const ByteLevelAlphabet& alphabet() {
    static const ByteLevelAlphabet table;
    return table;
}

// The bytes a byte-level string stands for; false when it holds characters outside the
// alphabet (added tokens such as "<think>\n", or a vocabulary that is not byte-level).
inline bool byteLevelBytes(std::string_view piece, std::string& out) {
    const ByteLevelAlphabet& table = alphabet();
    out.clear();
    for (size_t i = 0; i < piece.size();) {
        const uint32_t cp = nextCodePoint(piece, i);
        if (cp >= table.byteOf.size() || table.byteOf[cp] < 0) return false;
        out += char(table.byteOf[cp]);
    }
    return true;
}

// ---------------------------------------------------------------------------------------------
// Pieces of the pipeline

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

// A Split pre-tokenizer (Digits is one too: \p{N} or \p{N}+, isolated).
struct SplitStep {
    std::shared_ptr<const Regex> regex;
    Behavior behavior = Behavior::Isolated;
    bool invert = false;
};

struct AddedToken {
    int32_t id = 0;
    std::string content;  // as tokenizer.json writes it
    std::string pattern;  // what is matched: the content, in NFC when `normalized`
    bool singleWord = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// Leftmost-longest matching of a set of added tokens, as the Rust crate's Aho-Corasick
// automaton (MatchKind::LeftmostLongest) finds them.
struct AddedMatcher {
    std::array<std::vector<int>, 256> byFirstByte;  // indices into the added tokens, longest first
    bool empty = true;
};

// One BPE result: a vocabulary id and how many bytes of the word it covers.
struct BpePiece {
    int32_t id;
    int32_t length;
};

struct Span;       // a stretch of normalized text on its way to BPE (bpe_tokenizer.cpp)
struct OffsetMap;  // normalized positions -> byte offsets of the text (bpe_tokenizer.cpp)

inline uint64_t pairKey(int32_t left, int32_t right) {
    return uint64_t(uint32_t(left)) << 32 | uint32_t(right);
}

// Longer words are rare and would only fill the cache.
constexpr size_t kMaxCachedWord = 256;
constexpr size_t kCacheCapacity = 1 << 18;
constexpr int64_t kMaxId = 1 << 24;

}  // namespace bpe_detail

// ---------------------------------------------------------------------------------------------
// The tokenizer's state

struct BpeTokenizer::WordCache {
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<bpe_detail::BpePiece>> words;

    bool find(const std::string& word, std::vector<bpe_detail::BpePiece>& out) {
        std::lock_guard<std::mutex> lock(mutex);
        const auto it = words.find(word);
        if (it == words.end()) return false;
        out = it->second;
        return true;
    }
    void store(const std::string& word, const std::vector<bpe_detail::BpePiece>& pieces) {
        std::lock_guard<std::mutex> lock(mutex);
        if (words.size() >= bpe_detail::kCacheCapacity) words.clear();
        words.emplace(word, pieces);
    }
};

struct BpeTokenizer::Model {
    using Regex = bpe_detail::Regex;
    using BpePiece = bpe_detail::BpePiece;
    using Span = bpe_detail::Span;
    using OffsetMap = bpe_detail::OffsetMap;
    using AddedMatcher = bpe_detail::AddedMatcher;

    std::unordered_map<std::string, int32_t> vocab;     // model vocabulary string -> id
    std::unordered_map<std::string, int32_t> rawVocab;  // the same, by the bytes stood for
    std::unordered_map<std::string, int32_t> addedIds;  // added token content -> id
    std::vector<std::string> pieces;                    // id -> vocabulary string or added content
    std::vector<std::string> decoded;                   // id -> bytes the decoder writes for it
    std::vector<uint8_t> known;                         // ids that have a string
    std::vector<uint8_t> special;
    std::array<int32_t, 256> byteIds{};             // byte -> id of its character, or -1
    std::unordered_map<uint64_t, uint64_t> merges;  // pairKey -> rank << 32 | merged id
    int32_t unkId = -1;
    bool fuseUnk = false, ignoreMerges = false, nfc = false;
    std::vector<bpe_detail::SplitStep> splits;  // pre-tokenizers before ByteLevel
    bool addPrefixSpace = false;
    std::shared_ptr<const Regex> byteLevelRegex;  // GPT-2's pattern when use_regex
    std::vector<bpe_detail::AddedToken> added;
    AddedMatcher rawMatcher, normalizedMatcher;
    std::shared_ptr<const Regex> wordChar;  // when a token is single_word
    int64_t bos = -1;
    int64_t size = 0;  // 1 + the largest id

    // Loading (bpe_loader.cpp): each returns the refusal, without the file's name.
    Status readVocabulary(const nlohmann::json& model);
    Status readMerges(const nlohmann::json& list);
    Status readAddedTokens(const nlohmann::json& list);
    void place(int64_t id, const std::string& piece);  // the string of an id
    void prepareDecoding();
    // tokenizer_config.json's add_bos_token and bos_token; its refusals name that file.
    Status readConfig(const std::string& path);

    // Encoding (bpe_tokenizer.cpp)
    struct Scratch;  // per-call state of encode()

    void encode(std::string_view text, WordCache& cache, std::vector<Token>& out) const;
    void emitAdded(int token, size_t start, size_t end, std::vector<Token>& out) const;
    static void closeGaps(std::vector<Token>& tokens, size_t size);
    template <typename F>
    void splitAdded(const AddedMatcher& matcher, std::string_view s, F&& emit) const;
    bool findAdded(const AddedMatcher& matcher, std::string_view s, size_t from, size_t& start,
                   int& token) const;
    bool isSingleWord(std::string_view s, size_t start, size_t stop) const;
    void encodePlain(std::string_view text, size_t a, size_t b, const OffsetMap& map,
                     WordCache& cache, Scratch& scratch, std::vector<Token>& out) const;
    void split(const bpe_detail::SplitStep& step, std::string_view text, const Span& span,
               Scratch& scratch, std::vector<Span>& out) const;
    template <typename F>
    void byteLevelSplit(std::string_view text, const Span& span, Scratch& scratch, F&& emit) const;
    void merge(std::string_view text, const Span& piece, const OffsetMap& map, WordCache& cache,
               Scratch& scratch, std::vector<Token>& out) const;
    void bpe(const std::string& word, std::vector<BpePiece>& out) const;
};

}  // namespace relulens::core
