// Vocabulary: everything a tokenizer needs, as plain data (token texts, scores, token types,
// merges, special ids and flags), filled from GGUF metadata or from a llama2.c tokenizer .bin.
// make_tokenizer builds the matching Tokenizer; tests can also fill a Vocabulary by hand.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ridge {

class GGUFFile;

// GGUF tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

struct Vocabulary {
    // "gpt2" (byte-level BPE), "llama" (SentencePiece-style BPE) or "llama2c" (llama2.c .bin).
    std::string model;
    std::string pre = "default";       // tokenizer.ggml.pre: which pre-tokenizer regexes (gpt2 only)
    std::string name;                  // general.name (a few per-model rules look at it)
    std::string source;                // file the vocabulary came from, for error messages
    std::vector<std::string> tokens;   // (n_vocab) token texts as stored
    std::vector<float> scores;         // (n_vocab) or empty: merge priority for "llama"/"llama2c"
    std::vector<TokenType> types;      // (n_vocab) or empty: all Normal
    std::vector<std::string> merges;   // (n_merges) "left right", in rank order ("gpt2" only)

    int32_t bos_id = -1;
    int32_t eos_id = -1;
    int32_t unk_id = -1;
    int32_t eot_id = -1;               // end of turn, when the metadata names one
    int32_t eom_id = -1;               // end of message, when the metadata names one
    int32_t pad_id = -1;
    bool add_bos = false;              // whether encoding for a model prepends BOS by default
    bool add_space_prefix = true;      // "llama": prepend " " to the text (SentencePiece dummy prefix)
    std::string chat_template;         // tokenizer.chat_template, may be empty
};

// Reads the tokenizer.* keys of a GGUF file, applying llama.cpp's defaults where keys are
// absent ("llama": BOS 1, EOS 2, UNK 0, add_bos and add_space_prefix true; "gpt2": add_bos only
// for the llama3 family of pre-tokenizers). Throws ridge::Error naming the file and key.
Vocabulary vocabulary_from_gguf(const GGUFFile& f);

// Reads a llama2.c tokenizer .bin: int32 max_token_length, then vocab_size records of
// (f32 score, int32 length, bytes). Throws ridge::Error naming the file and the record.
Vocabulary vocabulary_from_llama2c(const std::string& path, int vocab_size);

// The tokenizer for vocab.model; ridge::Error for an unsupported model or inconsistent data.
std::unique_ptr<Tokenizer> make_tokenizer(Vocabulary vocab);

}  // namespace ridge
