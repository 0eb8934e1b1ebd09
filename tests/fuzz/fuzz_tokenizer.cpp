// libFuzzer target for the tokenizers: the first input byte picks a vocabulary and the flags
// (parse_special, add_bos), the rest is the text. Invalid UTF-8 must be rejected with
// ridge::Error and nothing else; valid text must encode to in-range ids, stream-decode to valid
// UTF-8 chunks, and (where the vocabulary allows it) decode back to exactly the text.
//
// Vocabularies come from the shared test data: $RIDGE_FUZZ_TESTDATA, else the compiled-in
// RIDGE_TESTDATA_DIR, else ../shared/testdata; SmolLM2 is added when $RIDGE_FUZZ_MODELS (else
// RIDGE_MODELS_DIR, else ./models) holds it. Build and run, from the repository root:
//   clang++ -std=c++20 -O1 -g -I. -fsanitize=fuzzer,address,undefined tests/fuzz/fuzz_tokenizer.cpp \
//       tokenizer/*.cpp weights/*.cpp $(pkg-config --cflags --libs libpcre2-8) -o fuzz_tokenizer
//   ./fuzz_tokenizer -max_total_time=30
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "weights/error.h"
#include "weights/gguf.h"

namespace {

struct FuzzVocab {
    std::string name;
    std::unique_ptr<ridge::GGUFFile> file;  // keeps GGUF metadata alive (not needed after load, kept for clarity)
    std::unique_ptr<ridge::Tokenizer> tok;
    bool needs_bos_for_round_trip;  // SentencePiece: the dummy space is dropped only after BOS
    bool round_trips;               // false where special tokens strip whitespace (phi-3)
    std::array<bool, 256> byte_known;  // byte-level BPE: the byte's symbol is a token (else it is dropped)
};

void find_known_bytes(FuzzVocab& v, bool byte_level) {
    for (int b = 0; b < 256; ++b)
        v.byte_known[b] = !byte_level || v.tok->find_token(ridge::byte_level::encode(std::string(1, char(b)))).has_value();
}

std::string dir_from(const char* env, const char* fallback) {
    const char* v = std::getenv(env);
    return v && *v ? v : fallback;
}

std::vector<FuzzVocab> load_vocabs() {
#ifdef RIDGE_TESTDATA_DIR
    const std::string data = dir_from("RIDGE_FUZZ_TESTDATA", RIDGE_TESTDATA_DIR);
#else
    const std::string data = dir_from("RIDGE_FUZZ_TESTDATA", "../shared/testdata");
#endif
#ifdef RIDGE_MODELS_DIR
    const std::string models = dir_from("RIDGE_FUZZ_MODELS", RIDGE_MODELS_DIR);
#else
    const std::string models = dir_from("RIDGE_FUZZ_MODELS", "models");
#endif
    std::vector<FuzzVocab> out;
    auto add_gguf = [&](const std::string& name, const std::string& path, bool spm, bool round_trips) {
        if (!std::filesystem::exists(path)) return;
        FuzzVocab v{name, ridge::GGUFFile::open(path), nullptr, spm, round_trips, {}};
        v.tok = ridge::Tokenizer::from_gguf(*v.file);
        find_known_bytes(v, !spm);
        out.push_back(std::move(v));
    };
    const std::string vocab = data + "/llamacpp-vocab/ggml-vocab-";
    add_gguf("gpt-2", vocab + "gpt-2.gguf", false, true);
    add_gguf("llama-spm", vocab + "llama-spm.gguf", true, true);
    add_gguf("deepseek-coder", vocab + "deepseek-coder.gguf", false, true);
    add_gguf("starcoder", vocab + "starcoder.gguf", false, true);
    add_gguf("mpt", vocab + "mpt.gguf", false, true);
    add_gguf("phi-3", vocab + "phi-3.gguf", true, false);
    add_gguf("smollm2", models + "/SmolLM2-135M-Instruct.Q4_1.gguf", false, true);
    const std::string tok512 = data + "/llama2c-stories260K/tok512.bin";
    if (std::filesystem::exists(tok512)) {
        out.push_back({"tok512", nullptr, ridge::Tokenizer::from_llama2c(tok512, 512), true, true, {}});
        find_known_bytes(out.back(), false);
    }
    if (out.empty()) {
        std::fprintf(stderr, "fuzz_tokenizer: no vocabulary found under %s (set RIDGE_FUZZ_TESTDATA)\n", data.c_str());
        std::abort();
    }
    std::fprintf(stderr, "fuzz_tokenizer: %zu vocabularies from %s\n", out.size(), data.c_str());
    return out;
}

std::vector<FuzzVocab>& vocabs() {
    static std::vector<FuzzVocab> v = load_vocabs();
    return v;
}

[[noreturn]] void fail(const FuzzVocab& v, const char* what) {
    std::fprintf(stderr, "fuzz_tokenizer: %s: %s\n", v.name.c_str(), what);
    std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    vocabs();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    auto& all = vocabs();
    const uint8_t control = data[0];
    const FuzzVocab& v = all[(control & 0x3F) % all.size()];
    const bool parse_special = control & 0x40;
    const bool add_bos = (control & 0x80) && v.tok->bos_id() >= 0;
    const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
    const bool valid = ridge::utf8::find_invalid(text) == std::string::npos;

    std::vector<int32_t> ids;
    try {
        ids = v.tok->encode(text, add_bos, parse_special);
    } catch (const ridge::Error&) {
        if (valid) fail(v, "ridge::Error on valid UTF-8");
        return 0;
    }
    if (!valid) fail(v, "invalid UTF-8 was accepted");
    if (add_bos && (ids.empty() || ids[0] != v.tok->bos_id())) fail(v, "BOS missing");

    ridge::StreamDecoder dec(*v.tok);
    std::string decoded;
    for (int32_t id : ids) {
        if (id < 0 || id >= v.tok->n_vocab()) fail(v, "id out of range");
        const std::string chunk = dec.push(id);
        if (ridge::utf8::find_invalid(chunk) != std::string::npos) fail(v, "decoder emitted invalid UTF-8");
        decoded += chunk;
    }
    decoded += dec.flush();
    // Byte-level BPE and SentencePiece with byte fallback lose nothing: without special-token
    // parsing the text comes back exactly (SentencePiece: after BOS, which drops the dummy space),
    // unless a byte-level vocabulary lacks the symbol of some byte (those bytes are dropped, as
    // Hugging Face tokenizers drops them) or SentencePiece meets a literal "▁" (its space mark,
    // which decodes to " ").
    bool all_bytes_known = true;
    for (char c : text) all_bytes_known = all_bytes_known && v.byte_known[uint8_t(c)];
    if (v.needs_bos_for_round_trip && text.find("\xE2\x96\x81") != std::string::npos) all_bytes_known = false;
    if (!parse_special && v.round_trips && all_bytes_known && (add_bos || !v.needs_bos_for_round_trip) &&
        decoded != text)
        fail(v, "decode(encode(text)) != text");
    return 0;
}
