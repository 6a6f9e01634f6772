// NFC with ICU, one segment at a time: a segment starts at a character with a normalization
// boundary before it, so NFC of a text is NFC of its segments put together, and only segments
// ICU finds not normalized are rewritten (which keeps the byte map exact everywhere else).
#include "core/unicode_nfc.h"

#include <algorithm>
#include <cstdint>

#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>
#include <unicode/unistr.h>
#include <unicode/utf8.h>

namespace relulens::core {

namespace {

// Characters below U+0300 are starters that NFC neither changes nor joins to anything before.
constexpr UChar32 kFirstNonInert = 0x300;

// Texts and segments ICU takes as one string (its lengths are int32_t).
constexpr size_t kMaxIcuLength = INT32_MAX;

bool isContinuation(std::string_view s, size_t i) {
    return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
}

// The code point at s[i], advancing i past it; negative for bytes that are not UTF-8, which
// i then skips as their maximal ill-formed subpart.
UChar32 nextCodePoint(std::string_view s, size_t& i) {
    const auto* bytes = reinterpret_cast<const uint8_t*>(s.data());
    const size_t length = s.size();
    UChar32 c = 0;
    U8_NEXT(bytes, i, length, c);
    return c;
}

icu::StringPiece icuPiece(std::string_view s) {
    return icu::StringPiece(s.data(), static_cast<int32_t>(s.size()));
}

// Appends a segment as it is, each byte standing for itself.
void appendKept(std::string_view in, size_t start, size_t end, std::string& out,
                std::vector<size_t>& toInput) {
    for (size_t k = start; k < end; ++k) toInput.push_back(k);
    out.append(in.substr(start, end - start));
}

// Appends a rewritten segment: bytes it shares with the input at either end keep their exact
// positions, the rewritten middle maps as Nfc::normalize() describes.
void appendRewritten(std::string_view segment, std::string_view rewritten, size_t base,
                     std::string& out, std::vector<size_t>& toInput) {
    const size_t most = std::min(segment.size(), rewritten.size());
    size_t prefix = 0;
    while (prefix < most && segment[prefix] == rewritten[prefix]) ++prefix;
    while (prefix > 0 && (isContinuation(segment, prefix) || isContinuation(rewritten, prefix))) {
        --prefix;
    }
    size_t suffix = 0;
    while (suffix < most - prefix &&
           segment[segment.size() - 1 - suffix] == rewritten[rewritten.size() - 1 - suffix]) {
        ++suffix;
    }
    while (suffix > 0 && (isContinuation(segment, segment.size() - suffix) ||
                          isContinuation(rewritten, rewritten.size() - suffix))) {
        --suffix;
    }
    const size_t middleEnd = base + segment.size() - suffix;
    for (size_t k = 0; k < rewritten.size(); ++k) {
        if (k < prefix) {
            toInput.push_back(base + k);
        } else if (k >= rewritten.size() - suffix) {
            toInput.push_back(middleEnd + (k - (rewritten.size() - suffix)));
        } else {
            toInput.push_back(k == prefix ? base + prefix : middleEnd);
        }
    }
    out.append(rewritten);
}

}  // namespace

const Nfc& Nfc::instance() {
    static const Nfc nfc;
    return nfc;
}

Nfc::Nfc() {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
    if (U_SUCCESS(status)) nfc_ = nfc;
}

bool Nfc::normalize(std::string_view in, std::string& out, std::vector<size_t>& toInput) const {
    if (!nfc_) return false;
    // Lead bytes below 0xCC are code points below U+0300: text made of them alone is NFC.
    if (std::all_of(in.begin(), in.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0xCC; })) {
        return false;
    }
    if (in.size() <= kMaxIcuLength) {
        UErrorCode status = U_ZERO_ERROR;
        const bool isNfc = nfc_->isNormalizedUTF8(icuPiece(in), status);
        if (U_SUCCESS(status) && isNfc) return false;
    }

    out.clear();
    toInput.clear();
    out.reserve(in.size() + 8);
    toInput.reserve(in.size() + 9);
    std::string rewritten;
    size_t i = 0;
    while (i < in.size()) {
        // A segment: one character (or bytes that are not UTF-8) and the characters after it
        // that have no boundary before them, such as combining marks and Hangul vowels.
        const size_t start = i;
        const UChar32 first = nextCodePoint(in, i);
        bool single = true;
        while (i < in.size()) {
            size_t j = i;
            const UChar32 c = nextCodePoint(in, j);
            if (c < kFirstNonInert || nfc_->hasBoundaryBefore(c)) break;  // c < 0: not UTF-8
            i = j;
            single = false;
        }
        const std::string_view segment = in.substr(start, i - start);
        if (first < 0 || (single && first < kFirstNonInert) || segment.size() > kMaxIcuLength) {
            appendKept(in, start, i, out, toInput);
            continue;
        }
        UErrorCode status = U_ZERO_ERROR;
        if (nfc_->isNormalizedUTF8(icuPiece(segment), status) || U_FAILURE(status)) {
            appendKept(in, start, i, out, toInput);
            continue;
        }
        const icu::UnicodeString result =
            nfc_->normalize(icu::UnicodeString::fromUTF8(icuPiece(segment)), status);
        rewritten.clear();
        if (U_SUCCESS(status)) result.toUTF8String(rewritten);
        if (U_FAILURE(status) || rewritten == segment) {
            appendKept(in, start, i, out, toInput);
        } else {
            appendRewritten(segment, rewritten, start, out, toInput);
        }
    }
    toInput.push_back(in.size());
    return true;
}

std::string Nfc::normalized(std::string_view text) const {
    std::string out;
    std::vector<size_t> toInput;
    return normalize(text, out, toInput) ? out : std::string(text);
}

}  // namespace relulens::core
