// UTF-8 helpers for the tokenizers: strict validation by the Unicode well-formed byte sequence
// table (no overlong forms, no surrogates, nothing past U+10FFFF), scanning one character at a
// time with "maximal subpart" error lengths (Unicode 15, section 3.9), and encoding code points.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ridge::utf8 {

// What starts at some byte of a buffer.
enum class Scan {
    Complete,    // a well-formed character of `length` bytes
    Incomplete,  // a well-formed prefix of a character that runs past the end of the buffer
    Invalid,     // an ill-formed sequence; `length` is its maximal subpart (at least 1 byte)
};
struct ScanResult {
    Scan kind;
    size_t length;
};

// Classifies the bytes starting at s[pos] (pos < s.size()).
ScanResult scan(std::string_view s, size_t pos);

// Offset of the first byte that does not begin a complete well-formed character, or npos.
size_t find_invalid(std::string_view s);

// Throws ridge::Error "<what>: invalid UTF-8 at byte N" when s is not well-formed UTF-8.
void require_valid(std::string_view s, std::string_view what);

// Number of bytes of the character whose first byte is `lead`, for text already validated
// (1 for ASCII and for bytes that cannot start a character).
inline size_t char_length(uint8_t lead) {
    if (lead < 0xC0) return 1;
    if (lead < 0xE0) return 2;
    if (lead < 0xF0) return 3;
    return 4;
}

// The UTF-8 bytes of code point cp (cp <= 0x10FFFF).
std::string encode(uint32_t cp);

// U+FFFD REPLACEMENT CHARACTER, the stand-in for ill-formed input.
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";

}  // namespace ridge::utf8
