// NFC (Unicode normalization form C), the normalizer Qwen2/Qwen3 tokenizer.json files declare,
// done by ICU with a map from each byte of the result back to the input, so that tokens of the
// normalized text keep byte offsets into the caller's text.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <unicode/uversion.h>

U_NAMESPACE_BEGIN
class Normalizer2;
U_NAMESPACE_END

namespace relulens::core {

class Nfc {
public:
    static const Nfc& instance();

    // False when ICU could not give its NFC data (normalize() then changes nothing).
    bool available() const { return nfc_ != nullptr; }

    // Normalizes `in` into `out` and returns true, or returns false (out untouched) when `in` is
    // already in NFC. toInput[p] is the byte of `in` that position p of `out` stands for
    // (out.size() + 1 entries): exact outside the stretches NFC rewrote; inside one, its first
    // byte maps to the stretch's start and the rest to its end, so consecutive tokens still
    // cover the input exactly once. Stretches holding bytes that are not UTF-8 are kept as they
    // are.
    bool normalize(std::string_view in, std::string& out, std::vector<size_t>& toInput) const;

    // NFC of text (text itself when it is in NFC already).
    std::string normalized(std::string_view text) const;

private:
    Nfc();

    const icu::Normalizer2* nfc_ = nullptr;  // owned by ICU
};

}  // namespace relulens::core
