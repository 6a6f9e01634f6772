// Encoding with a byte-level BPE model that bpe_loader.cpp read: added tokens, NFC, Split/Digits
// pre-tokenizers, ByteLevel and ranked merges, the way the Rust `tokenizers` crate does them, with
// offsets in bytes of the caller's text; decoding and the public accessors.
#include "core/bpe_tokenizer.h"

#include <algorithm>
#include <utility>

#include "core/bpe_model.h"
#include "core/unicode_nfc.h"

namespace relulens::core {

namespace bpe_detail {

// A stretch of normalized text on its way to BPE. `space` marks the space ByteLevel's
// add_prefix_space put before it, which has no bytes in the text.
struct Span {
    size_t start = 0, end = 0;
    bool space = false;
};

// Normalized positions of a section of the text -> byte offsets of the text.
struct OffsetMap {
    size_t base = 0;
    const std::vector<size_t>* toSection = nullptr;  // null: the normalizer changed nothing
    size_t operator()(size_t p) const { return base + (toSection ? (*toSection)[p] : p); }
};

// A stretch of a Split step's input and whether the pattern matched it.
struct Part {
    size_t start = 0, end = 0;
    bool match = false;
};

}  // namespace bpe_detail

using namespace bpe_detail;

namespace {

// Where the character that ends just before i starts (i > 0).
size_t previousCharStart(std::string_view s, size_t i) {
    do {
        --i;
    } while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80);
    return i;
}

// Bytes as text, each ill-formed subsequence replaced with U+FFFD.
std::string lossyUtf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (size_t i = 0; i < bytes.size();) {
        const int length = utf8SequenceAt(bytes, i);
        if (length > 0) {
            out.append(bytes.data() + i, size_t(length));
            i += size_t(length);
        } else {
            out += "\xEF\xBF\xBD";
            i += size_t(-length);
        }
    }
    return out;
}

// Unicode White_Space, what Rust's char::is_whitespace and regex \s accept.
bool isWhiteSpace(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
           cp == 0x205F || cp == 0x3000;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Encoding

struct BpeTokenizer::Model::Scratch {
    MatchData match;
    bool checked = false;  // the text is valid UTF-8
    std::vector<Span> spans, next;
    std::vector<Part> parts;
    std::string prefixed, word;
    std::vector<BpePiece> result;
};

void BpeTokenizer::Model::encode(std::string_view text, WordCache& cache,
                                 std::vector<Token>& out) const {
    Scratch scratch;
    scratch.checked = isValidUtf8(text);
    // 1. Added tokens that match the text as it is; 2. the rest is normalized, and added
    // tokens that match normalized text are taken from it; 3. pre-tokenizers and BPE.
    splitAdded(rawMatcher, text, [&](size_t start, size_t end, int token) {
        if (token >= 0) {
            emitAdded(token, start, end, out);
            return;
        }
        const std::string_view section = text.substr(start, end - start);
        std::string normalizedText;
        std::vector<size_t> toSection;
        std::string_view normalized = section;
        if (nfc && Nfc::instance().normalize(section, normalizedText, toSection)) {
            normalized = normalizedText;
        }
        const OffsetMap map{start, toSection.empty() ? nullptr : &toSection};
        splitAdded(normalizedMatcher, normalized, [&](size_t a, size_t b, int inner) {
            if (inner >= 0) {
                emitAdded(inner, map(a), map(b), out);
            } else {
                encodePlain(normalized, a, b, map, cache, scratch, out);
            }
        });
    });
    closeGaps(out, text.size());
}

void BpeTokenizer::Model::emitAdded(int token, size_t start, size_t end,
                                    std::vector<Token>& out) const {
    const AddedToken& t = added[size_t(token)];
    out.push_back(Token{t.id, t.content, start, end});
}

// Every byte belongs to one token even where BPE dropped bytes it has no id for (no unk
// token) or a Split removed them: the next token starts where the previous one ended.
void BpeTokenizer::Model::closeGaps(std::vector<Token>& tokens, size_t size) {
    size_t previous = 0;
    for (Token& t : tokens) {
        if (t.start > previous) t.start = previous;
        previous = std::max(previous, t.end);
    }
    if (!tokens.empty() && tokens.back().end < size) tokens.back().end = size;
}

// Calls emit(start, end, token) over `s` in order: stretches with no added token (token -1)
// and the added tokens found, with the whitespace lstrip/rstrip take.
template <typename F>
void BpeTokenizer::Model::splitAdded(const AddedMatcher& matcher, std::string_view s,
                                     F&& emit) const {
    if (s.empty()) return;
    if (matcher.empty) {
        emit(size_t(0), s.size(), -1);
        return;
    }
    size_t emitted = 0, from = 0, start = 0;
    int token = -1;
    while (findAdded(matcher, s, from, start, token)) {
        const AddedToken& t = added[size_t(token)];
        size_t stop = start + t.pattern.size();
        from = stop;
        if (t.singleWord && !isSingleWord(s, start, stop)) continue;
        if (t.lstrip) {
            size_t k = start;
            while (k > 0) {
                size_t p = previousCharStart(s, k);
                const size_t q = p;
                if (!isWhiteSpace(nextCodePoint(s, p))) break;
                k = q;
            }
            start = std::max(k, emitted);  // an earlier token may have taken those spaces
        }
        if (t.rstrip) {
            while (stop < s.size()) {
                size_t q = stop;
                if (!isWhiteSpace(nextCodePoint(s, q))) break;
                stop = q;
            }
            from = stop;
        }
        if (emitted < start) emit(emitted, start, -1);
        emit(start, stop, token);
        emitted = stop;
    }
    if (emitted < s.size()) emit(emitted, s.size(), -1);
}

// The leftmost position at or after `from` where an added token matches, and the longest
// token matching there.
bool BpeTokenizer::Model::findAdded(const AddedMatcher& matcher, std::string_view s, size_t from,
                                    size_t& start, int& token) const {
    for (size_t i = from; i < s.size(); ++i) {
        for (const int k : matcher.byFirstByte[static_cast<unsigned char>(s[i])]) {
            const std::string& pattern = added[size_t(k)].pattern;
            if (s.compare(i, pattern.size(), pattern) == 0) {
                start = i;
                token = k;
                return true;
            }
        }
    }
    return false;
}

// single_word: no word character (Rust regex \w) touches the match on either side.
bool BpeTokenizer::Model::isSingleWord(std::string_view s, size_t start, size_t stop) const {
    if (start > 0) {
        const size_t p = previousCharStart(s, start);
        if (wordChar->matchesAt(s.substr(p, start - p))) return false;
    }
    if (stop < s.size()) {
        size_t q = stop;
        nextCodePoint(s, q);
        if (wordChar->matchesAt(s.substr(stop, q - stop))) return false;
    }
    return true;
}

// Pre-tokenizes text[a, b) (normalized, no added tokens in it) and appends its BPE tokens.
void BpeTokenizer::Model::encodePlain(std::string_view text, size_t a, size_t b,
                                      const OffsetMap& map, WordCache& cache, Scratch& scratch,
                                      std::vector<Token>& out) const {
    std::vector<Span>& spans = scratch.spans;
    spans.assign(1, Span{a, b, false});
    for (const SplitStep& step : splits) {
        scratch.next.clear();
        for (const Span& span : spans) split(step, text, span, scratch, scratch.next);
        spans.swap(scratch.next);
    }
    for (const Span& span : spans) {
        byteLevelSplit(text, span, scratch,
                       [&](const Span& piece) { merge(text, piece, map, cache, scratch, out); });
    }
}

// One Split step over a span, with the delimiter behaviours of the Rust crate
// (NormalizedString::split); empty pieces are dropped, as PreTokenizedString does.
void BpeTokenizer::Model::split(const SplitStep& step, std::string_view text, const Span& span,
                                Scratch& scratch, std::vector<Span>& out) const {
    const std::string_view subject = text.substr(span.start, span.end - span.start);
    std::vector<Part>& parts = scratch.parts;
    parts.clear();
    size_t previous = 0;
    const auto found = [&](size_t start, size_t end) {
        if (start > previous) parts.push_back({previous, start, false});
        parts.push_back({start, end, true});
        previous = end;
    };
    step.regex->forEachMatch(subject, scratch.match.data, scratch.checked, found);
    if (previous < subject.size()) parts.push_back({previous, subject.size(), false});
    if (step.invert) {
        for (Part& p : parts) p.match = !p.match;
    }
    std::vector<Part> kept;
    bool previousMatch = false;
    switch (step.behavior) {
        case Behavior::Isolated:
            kept = parts;
            break;
        case Behavior::Removed:
            for (const Part& p : parts) {
                if (!p.match) kept.push_back(p);
            }
            break;
        case Behavior::Contiguous:
            for (const Part& p : parts) {
                if (p.match == previousMatch && !kept.empty()) {
                    kept.back().end = p.end;
                } else {
                    kept.push_back(p);
                }
                previousMatch = p.match;
            }
            break;
        case Behavior::MergedWithPrevious:
            for (const Part& p : parts) {
                if (p.match && !previousMatch && !kept.empty()) {
                    kept.back().end = p.end;
                } else {
                    kept.push_back(p);
                }
                previousMatch = p.match;
            }
            break;
        case Behavior::MergedWithNext:
            for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
                if (it->match && !previousMatch && !kept.empty()) {
                    kept.back().start = it->start;
                } else {
                    kept.push_back(*it);
                }
                previousMatch = it->match;
            }
            std::reverse(kept.begin(), kept.end());
            break;
    }
    for (const Part& p : kept) {
        if (p.end > p.start) {
            out.push_back(Span{span.start + p.start, span.start + p.end, false});
        }
    }
}

// ByteLevel: the prefix space when asked for, then GPT-2's pattern when use_regex.
template <typename F>
void BpeTokenizer::Model::byteLevelSplit(std::string_view text, const Span& span, Scratch& scratch,
                                         F&& emit) const {
    const bool space = addPrefixSpace && text[span.start] != ' ';
    if (!byteLevelRegex) {
        emit(Span{span.start, span.end, space});
        return;
    }
    std::string_view subject = text.substr(span.start, span.end - span.start);
    if (space) {
        scratch.prefixed.assign(1, ' ');
        scratch.prefixed.append(subject);
        subject = scratch.prefixed;
    }
    const size_t shift = space ? 1 : 0;
    const auto toText = [&](size_t q) { return span.start + (q > shift ? q - shift : 0); };
    const auto piece = [&](size_t x, size_t y) {
        if (y > x) emit(Span{toText(x), toText(y), space && x == 0});
    };
    size_t previous = 0;
    byteLevelRegex->forEachMatch(subject, scratch.match.data, scratch.checked,
                                 [&](size_t start, size_t end) {
                                     piece(previous, start);
                                     piece(start, end);
                                     previous = end;
                                 });
    piece(previous, subject.size());
}

// BPE of one pre-token, appended as tokens with their offsets in the text.
void BpeTokenizer::Model::merge(std::string_view text, const Span& piece, const OffsetMap& map,
                                WordCache& cache, Scratch& scratch, std::vector<Token>& out) const {
    std::string& word = scratch.word;
    word.assign(piece.space ? 1 : 0, ' ');
    word.append(text.data() + piece.start, piece.end - piece.start);
    std::vector<BpePiece>& result = scratch.result;
    result.clear();
    const auto whole = ignoreMerges ? rawVocab.find(word) : rawVocab.end();
    if (whole != rawVocab.end()) {
        result.push_back({whole->second, int32_t(word.size())});  // ignore_merges
    } else if (word.size() > kMaxCachedWord) {
        bpe(word, result);
    } else if (!cache.find(word, result)) {
        bpe(word, result);
        cache.store(word, result);
    }
    // Word byte q -> text position; the prefix space stands at the piece's start.
    const auto toText = [&](size_t q) {
        return piece.space ? piece.start + (q > 0 ? q - 1 : 0) : piece.start + q;
    };
    size_t q = 0;
    for (const BpePiece& p : result) {
        const size_t start = map(toText(q));
        q += size_t(p.length);
        out.push_back(Token{p.id, pieces[size_t(p.id)], start, map(toText(q))});
    }
}

// Byte-level BPE of a word, as the Rust crate's Word::merge_all does it: the pair of lowest
// rank merges first, the leftmost among equals.
void BpeTokenizer::Model::bpe(const std::string& word, std::vector<BpePiece>& out) const {
    struct Symbol {
        int32_t id, length, prev, next;
    };
    std::vector<Symbol> symbols;
    symbols.reserve(word.size());
    int32_t carried = 0;  // bytes with no id and no unk token: given to the next symbol
    bool lastUnk = false;
    for (const char c : word) {
        const int32_t id = byteIds[static_cast<unsigned char>(c)];
        if (id >= 0) {
            symbols.push_back({id, 1 + carried, 0, 0});
            carried = 0;
            lastUnk = false;
        } else if (unkId >= 0) {
            if (fuseUnk && lastUnk) {
                ++symbols.back().length;
            } else {
                symbols.push_back({unkId, 1 + carried, 0, 0});
                carried = 0;
            }
            lastUnk = true;
        } else {
            ++carried;
        }
    }
    if (carried > 0 && !symbols.empty()) symbols.back().length += carried;
    const auto n = int32_t(symbols.size());
    for (int32_t k = 0; k < n; ++k) {
        symbols[size_t(k)].prev = k - 1;
        symbols[size_t(k)].next = k + 1 < n ? k + 1 : -1;
    }

    struct Candidate {
        uint32_t rank;
        int32_t pos, merged;
    };
    const auto later = [](const Candidate& x, const Candidate& y) {
        return x.rank != y.rank ? x.rank > y.rank : x.pos > y.pos;
    };
    std::vector<Candidate> heap;
    const auto consider = [&](int32_t pos) {
        const int32_t next = symbols[size_t(pos)].next;
        if (next < 0) return;
        const auto it = merges.find(pairKey(symbols[size_t(pos)].id, symbols[size_t(next)].id));
        if (it == merges.end()) return;
        heap.push_back({uint32_t(it->second >> 32), pos, int32_t(uint32_t(it->second))});
        std::push_heap(heap.begin(), heap.end(), later);
    };
    for (int32_t k = 0; k + 1 < n; ++k) consider(k);
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const Candidate top = heap.back();
        heap.pop_back();
        Symbol& left = symbols[size_t(top.pos)];
        if (left.length == 0 || left.next < 0) continue;  // merged away since
        Symbol& right = symbols[size_t(left.next)];
        const auto it = merges.find(pairKey(left.id, right.id));
        if (it == merges.end() || int32_t(uint32_t(it->second)) != top.merged) continue;
        left.id = top.merged;
        left.length += right.length;
        right.length = 0;
        left.next = right.next;
        if (left.next >= 0) symbols[size_t(left.next)].prev = top.pos;
        if (left.prev >= 0) consider(left.prev);
        consider(top.pos);
    }
    for (int32_t k = n > 0 ? 0 : -1; k >= 0; k = symbols[size_t(k)].next) {
        out.push_back({symbols[size_t(k)].id, symbols[size_t(k)].length});
    }
}

// ---------------------------------------------------------------------------------------------
// The public methods

std::vector<Token> BpeTokenizer::encode(const std::string& text) const {
    std::vector<Token> tokens;
    tokens.reserve(text.size() / 4 + 1);
    model_->encode(text, *cache_, tokens);
    return tokens;
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids) const {
    std::string bytes;
    for (const int64_t id : ids) {
        if (id >= 0 && id < int64_t(model_->known.size()) && model_->known[size_t(id)]) {
            bytes += model_->decoded[size_t(id)];
        }
    }
    return lossyUtf8(bytes);
}

std::string BpeTokenizer::piece(int64_t id) const {
    if (id < 0 || id >= int64_t(model_->pieces.size())) return {};
    return model_->pieces[size_t(id)];
}

std::string BpeTokenizer::bytesOf(int64_t id) const {
    const std::string p = piece(id);
    if (model_->addedIds.count(p)) return p;
    std::string bytes;
    return bpe_detail::byteLevelBytes(p, bytes) ? bytes : p;
}

bool BpeTokenizer::isSpecial(int64_t id) const {
    return id >= 0 && id < int64_t(model_->special.size()) && model_->special[size_t(id)];
}

int64_t BpeTokenizer::vocabSize() const {
    return model_->size;
}

int64_t BpeTokenizer::pieceId(const std::string& piece) const {
    const auto added = model_->addedIds.find(piece);
    if (added != model_->addedIds.end()) return added->second;
    const auto it = model_->vocab.find(piece);
    return it == model_->vocab.end() ? -1 : it->second;
}

int64_t BpeTokenizer::bos() const {
    return model_->bos;
}

}  // namespace relulens::core
