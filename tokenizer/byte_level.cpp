// The GPT-2 byte <-> character table, built once: bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map
// to the same code point; the remaining bytes (controls, space, DEL, 0x80..0xA0, soft hyphen)
// take U+0100, U+0101, ... in increasing byte order.
#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace ridge::byte_level {

namespace {

struct Table {
    std::array<uint32_t, 256> to_cp{};
    std::array<int16_t, 0x144> to_byte{};  // every stand-in is below U+0144
    Table() {
        to_byte.fill(-1);
        uint32_t next_extra = 0x100;
        for (int b = 0; b < 256; ++b) {
            const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
            to_cp[b] = printable ? uint32_t(b) : next_extra++;
            to_byte[to_cp[b]] = int16_t(b);
        }
    }
};

const Table& table() {
    static const Table t;
    return t;
}

}  // namespace

uint32_t byte_to_codepoint(uint8_t b) { return table().to_cp[b]; }

int codepoint_to_byte(uint32_t cp) { return cp < table().to_byte.size() ? table().to_byte[cp] : -1; }

std::string encode(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (char c : bytes) out += utf8::encode(byte_to_codepoint(static_cast<uint8_t>(c)));
    return out;
}

std::string decode(std::string_view symbols) {
    std::string out;
    out.reserve(symbols.size());
    size_t pos = 0;
    while (pos < symbols.size()) {
        const utf8::ScanResult r = utf8::scan(symbols, pos);
        if (r.kind != utf8::Scan::Complete) {  // not UTF-8: keep the bytes
            out.append(symbols.substr(pos, r.length));
            pos += r.length;
            continue;
        }
        // Decode the code point.
        const auto* p = reinterpret_cast<const uint8_t*>(symbols.data() + pos);
        uint32_t cp = 0;
        switch (r.length) {
            case 1: cp = p[0]; break;
            case 2: cp = (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F); break;
            case 3: cp = (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
            default:
                cp = (uint32_t(p[0] & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) | (uint32_t(p[2] & 0x3F) << 6) |
                     (p[3] & 0x3F);
        }
        const int b = codepoint_to_byte(cp);
        if (b >= 0) {
            out += static_cast<char>(b);
        } else {
            out.append(symbols.substr(pos, r.length));
        }
        pos += r.length;
    }
    return out;
}

}  // namespace ridge::byte_level
