// Filling a Vocabulary from GGUF metadata (tokenizer.ggml.* keys, with llama.cpp's defaults for
// absent keys) or from a llama2.c tokenizer .bin, and picking the tokenizer for its model.
#include "tokenizer/vocab.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tokenizer/pretokenizer.h"
#include "weights/error.h"
#include "weights/mapped_file.h"
#include "weights/gguf.h"

namespace ridge {

namespace {

// A special token id key: absent, negative or out of range (llama.cpp writes 0xFFFFFFFF for
// "none") keeps the default, as llama.cpp does.
int32_t special_id(const GGUFFile& f, std::string_view key, int32_t dflt, size_t n_vocab) {
    const GGUFValue* v = f.find_value(key);
    if (!v) return dflt;
    int64_t id = -1;
    switch (v->type) {
        case GGUFType::INT8: case GGUFType::INT16: case GGUFType::INT32: case GGUFType::INT64:
            id = v->i;
            break;
        case GGUFType::UINT8: case GGUFType::UINT16: case GGUFType::UINT32: case GGUFType::UINT64:
            id = v->u > uint64_t(INT32_MAX) ? -1 : int64_t(v->u);
            break;
        default:
            throw Error(f.path() + ": metadata key '" + std::string(key) + "' is " +
                        std::string(gguf_type_name(v->type)) + ", expected an integer token id");
    }
    if (id < 0 || id >= int64_t(n_vocab)) return dflt;
    return int32_t(id);
}

}  // namespace

Vocabulary vocabulary_from_gguf(const GGUFFile& f) {
    Vocabulary v;
    v.source = f.path();
    v.model = f.get_string("tokenizer.ggml.model");
    v.pre = f.get_string_or("tokenizer.ggml.pre", "default");
    v.name = f.get_string_or("general.name", "");
    v.tokens = f.get_string_array("tokenizer.ggml.tokens");
    const size_t n = v.tokens.size();
    if (n == 0) throw Error(f.path() + ": metadata key 'tokenizer.ggml.tokens' is an empty array");

    if (f.has("tokenizer.ggml.scores")) {
        v.scores = f.get_f32_array("tokenizer.ggml.scores");
        if (v.scores.size() != n)
            throw Error(f.path() + ": 'tokenizer.ggml.scores' has " + std::to_string(v.scores.size()) +
                        " entries but 'tokenizer.ggml.tokens' has " + std::to_string(n));
    }
    if (f.has("tokenizer.ggml.token_type")) {
        const std::vector<int32_t> types = f.get_i32_array("tokenizer.ggml.token_type");
        if (types.size() != n)
            throw Error(f.path() + ": 'tokenizer.ggml.token_type' has " + std::to_string(types.size()) +
                        " entries but 'tokenizer.ggml.tokens' has " + std::to_string(n));
        v.types.reserve(n);
        for (int32_t t : types) {
            // Unknown type numbers count as Undefined, as in llama.cpp.
            v.types.push_back(t >= 0 && t <= 6 ? TokenType(t) : TokenType::Undefined);
        }
    }

    if (v.model == "llama") {
        v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
        v.add_bos = true;
        v.add_space_prefix = true;
    } else if (v.model == "gpt2") {
        if (!f.has("tokenizer.ggml.merges"))
            throw Error(f.path() + ": tokenizer model 'gpt2' needs metadata key 'tokenizer.ggml.merges', which is missing");
        v.merges = f.get_string_array("tokenizer.ggml.merges");
        // llama.cpp's defaults for gpt2 vocabularies (id 11 for BOS/EOS), kept only if in range.
        v.bos_id = n > 11 ? 11 : -1, v.eos_id = n > 11 ? 11 : -1;
        v.add_bos = pretokenizer_for(v.pre).add_bos;
        v.add_space_prefix = false;
    } else {
        throw Error(f.path() + ": unsupported tokenizer model '" + v.model +
                    "' (metadata key 'tokenizer.ggml.model'); ridge reads 'gpt2' and 'llama'");
    }

    v.bos_id = special_id(f, "tokenizer.ggml.bos_token_id", v.bos_id, n);
    v.eos_id = special_id(f, "tokenizer.ggml.eos_token_id", v.eos_id, n);
    v.unk_id = special_id(f, "tokenizer.ggml.unknown_token_id", v.unk_id, n);
    v.eot_id = special_id(f, "tokenizer.ggml.eot_token_id", v.eot_id, n);
    v.eom_id = special_id(f, "tokenizer.ggml.eom_token_id", v.eom_id, n);
    v.pad_id = special_id(f, "tokenizer.ggml.padding_token_id", v.pad_id, n);
    v.add_bos = f.get_bool_or("tokenizer.ggml.add_bos_token", v.add_bos);
    v.add_space_prefix = f.get_bool_or("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
    v.chat_template = f.get_string_or("tokenizer.chat_template", "");
    return v;
}

Vocabulary vocabulary_from_llama2c(const std::string& path, int vocab_size) {
    if (vocab_size <= 0)
        throw Error(path + ": llama2.c tokenizer needs a positive vocabulary size, got " + std::to_string(vocab_size));
    const std::string bytes = read_whole_file(path, "llama2.c tokenizer file");

    size_t pos = 0;
    auto read = [&](void* dst, size_t len, const std::string& what) {
        if (bytes.size() - pos < len)
            throw Error(path + ": llama2.c tokenizer truncated at byte " + std::to_string(pos) + " while reading " +
                        what + " (file has " + std::to_string(bytes.size()) + " bytes)");
        std::memcpy(dst, bytes.data() + pos, len);
        pos += len;
    };

    int32_t max_token_length = 0;
    read(&max_token_length, 4, "max_token_length");
    if (max_token_length <= 0)
        throw Error(path + ": llama2.c tokenizer header max_token_length is " + std::to_string(max_token_length) +
                    ", expected a positive length");

    Vocabulary v;
    v.model = "llama2c";
    v.source = path;
    v.tokens.resize(size_t(vocab_size));
    v.scores.resize(size_t(vocab_size));
    for (int i = 0; i < vocab_size; ++i) {
        const std::string what = "token " + std::to_string(i) + " of " + std::to_string(vocab_size);
        int32_t len = 0;
        read(&v.scores[i], 4, what + " (score)");
        read(&len, 4, what + " (length)");
        if (len < 0 || len > max_token_length)
            throw Error(path + ": " + what + " at byte " + std::to_string(pos - 4) + " has length " +
                        std::to_string(len) + ", outside [0, max_token_length " + std::to_string(max_token_length) + "]");
        v.tokens[i].resize(size_t(len));
        read(v.tokens[i].data(), size_t(len), what + " (text)");
    }

    // llama2.c's fixed layout (its tokenizer.py export): 0 <unk>, 1 BOS, 2 EOS, then 256 byte
    // tokens <0x00>..<0xFF> whose id is byte + 3.
    v.types.assign(size_t(vocab_size), TokenType::Normal);
    for (int i = 0; i < vocab_size && i < 3; ++i) v.types[i] = i == 0 ? TokenType::Unknown : TokenType::Control;
    for (int i = 3; i < vocab_size && i < 3 + 256; ++i) {
        char expect[8];
        std::snprintf(expect, sizeof expect, "<0x%02X>", i - 3);
        if (v.tokens[i] == expect) v.types[i] = TokenType::Byte;
    }
    v.unk_id = 0;
    v.bos_id = vocab_size > 1 ? 1 : -1;
    v.eos_id = vocab_size > 2 ? 2 : -1;
    v.add_bos = true;
    v.add_space_prefix = true;
    return v;
}

}  // namespace ridge
