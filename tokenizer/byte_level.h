// GPT-2's byte-level alphabet: each of the 256 byte values stands for one printable Unicode
// character (printable Latin-1 bytes stand for themselves, the other 68 for U+0100..U+0143 in
// byte order), so that byte-level BPE vocabularies store any byte string as readable text.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ridge::byte_level {

// The code point that stands for byte b.
uint32_t byte_to_codepoint(uint8_t b);
// The byte that code point cp stands for, or -1 when cp is not in the alphabet.
int codepoint_to_byte(uint32_t cp);

// Bytes -> stand-in characters (UTF-8): "hi there" -> "hiĠthere".
std::string encode(std::string_view bytes);
// Stand-in characters (UTF-8) -> bytes. Characters outside the alphabet are kept as they are.
std::string decode(std::string_view symbols);

}  // namespace ridge::byte_level
