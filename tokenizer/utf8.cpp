// UTF-8 scanning by the well-formed byte sequence table of the Unicode standard (Table 3-7):
// the lead byte fixes the length and the allowed range of the second byte; every later byte
// is a continuation byte 80..BF.
#include "tokenizer/utf8.h"

#include "weights/error.h"

namespace ridge::utf8 {

ScanResult scan(std::string_view s, size_t pos) {
    const auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
    const uint8_t lead = byte(pos);
    if (lead < 0x80) return {Scan::Complete, 1};

    size_t length = 0;            // bytes in the whole character
    uint8_t second_lo = 0x80;     // allowed range of the second byte
    uint8_t second_hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead == 0xE0) {
        length = 3, second_lo = 0xA0;           // no overlong 3-byte forms
    } else if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) {
        length = 3;
    } else if (lead == 0xED) {
        length = 3, second_hi = 0x9F;           // no surrogates D800..DFFF
    } else if (lead == 0xF0) {
        length = 4, second_lo = 0x90;           // no overlong 4-byte forms
    } else if (lead >= 0xF1 && lead <= 0xF3) {
        length = 4;
    } else if (lead == 0xF4) {
        length = 4, second_hi = 0x8F;           // nothing past U+10FFFF
    } else {
        return {Scan::Invalid, 1};              // 80..C1, F5..FF never start a character
    }

    for (size_t k = 1; k < length; ++k) {
        if (pos + k >= s.size()) return {Scan::Incomplete, k};
        const uint8_t b = byte(pos + k);
        const uint8_t lo = k == 1 ? second_lo : 0x80;
        const uint8_t hi = k == 1 ? second_hi : 0xBF;
        if (b < lo || b > hi) return {Scan::Invalid, k};
    }
    return {Scan::Complete, length};
}

size_t find_invalid(std::string_view s) {
    size_t pos = 0;
    while (pos < s.size()) {
        // Fast path over ASCII.
        if (static_cast<uint8_t>(s[pos]) < 0x80) {
            ++pos;
            continue;
        }
        const ScanResult r = scan(s, pos);
        if (r.kind != Scan::Complete) return pos;
        pos += r.length;
    }
    return std::string_view::npos;
}

void require_valid(std::string_view s, std::string_view what) {
    const size_t bad = find_invalid(s);
    if (bad == std::string_view::npos) return;
    const ScanResult r = scan(s, bad);
    static const char* hex = "0123456789ABCDEF";
    const uint8_t b = static_cast<uint8_t>(s[bad]);
    std::string msg = std::string(what) + ": invalid UTF-8 at byte " + std::to_string(bad) + " (0x" +
                      hex[b >> 4] + hex[b & 15] +
                      (r.kind == Scan::Incomplete ? ", truncated character at the end)" : ")");
    throw Error(msg);
}

std::string encode(uint32_t cp) {
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
}

}  // namespace ridge::utf8
