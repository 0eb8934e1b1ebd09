// Tokenizer: text <-> token ids for the vocabularies ridge loads: GGUF "gpt2" (byte-level BPE
// with merges and a pre-tokenizer regex), GGUF "llama" (SentencePiece-style BPE with scores and
// <0xHH> byte fallback) and the llama2.c tokenizer .bin. StreamDecoder turns ids back into text
// without ever emitting half a UTF-8 character.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ridge {

class GGUFFile;

// A prompt as a chat template renders it: text segments, and the template's own control tokens
// by id. Keeping them apart is what keeps message content text: a message that contains
// "<|im_end|>" is those characters, never the token.
struct PromptPiece {
    int32_t token = -1;  // >= 0: this control token
    std::string text;    // otherwise: this text
};

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& f);
    // llama2.c tokenizer.bin (vocab_size comes from the checkpoint header).
    static std::unique_ptr<Tokenizer> from_llama2c(const std::string& path, int vocab_size);

    // Text -> ids. add_bos prepends BOS; parse_special lets special/control token texts in the
    // input (such as "<|im_start|>") become their ids, otherwise they are tokenized as plain text.
    // As in llama.cpp, user-defined tokens (GGUF token type 4) are recognised either way, and the
    // llama2.c tokenizer never parses special tokens.
    // The text must be well-formed UTF-8: anything else throws ridge::Error "text to tokenize:
    // invalid UTF-8 at byte N (0xHH)". (Hugging Face tokenizers cannot even be given such input;
    // rejecting it beats guessing a repair that no reference would agree with.)
    // Thread-safe: one Tokenizer may encode from several threads at once.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const = 0;
    // Pieces -> ids: each text piece encoded with parse_special false (special-token texts in it
    // stay text), each token piece as its id. For text free of special-token texts this is
    // encode(the pieces' texts joined, add_bos, /*parse_special=*/true), since that encodes the
    // text between special tokens fragment by fragment too. ridge::Error for an id outside
    // [0, n_vocab) or invalid UTF-8.
    std::vector<int32_t> encode_pieces(const std::vector<PromptPiece>& pieces, bool add_bos) const;
    // The bytes a token stands for when decoded (byte tokens give their byte, "▁" gives " ",
    // byte-level BPE symbols are mapped back). `prev` is the previous id or -1: SentencePiece
    // vocabularies drop the leading space of the first piece after BOS, as llama2.c does.
    // Control and unknown tokens (BOS, EOS, <|im_start|>, ...) decode to nothing; user-defined
    // tokens to their text. ridge::Error for an id outside [0, n_vocab).
    virtual std::string decode_piece(int32_t prev, int32_t id) const = 0;
    // The token's stored text, for display ("Ġthe", "<0x0A>").
    virtual const std::string& token_text(int32_t id) const = 0;
    virtual std::optional<int32_t> find_token(std::string_view text) const = 0;

    virtual int n_vocab() const = 0;
    virtual int32_t bos_id() const = 0;   // -1 when none
    virtual int32_t eos_id() const = 0;   // -1 when none
    virtual bool add_bos_default() const = 0;  // tokenizer.ggml.add_bos_token (or the model's default)
    // End of generation: EOS, EOT, <|im_end|> and the like (llama.cpp's list, found by token
    // text); for the llama2.c tokenizer EOS and BOS (run.c stops at BOS).
    virtual bool is_end_of_generation(int32_t id) const = 0;
    virtual bool is_special(int32_t id) const = 0;  // control/user-defined/unknown tokens
    virtual std::string chat_template() const { return {}; }
};

// Decodes a stream of ids into valid UTF-8 text chunks; holds back an incomplete character
// until its remaining bytes arrive. Invalid sequences come out as U+FFFD (one per maximal
// ill-formed subpart): at once when bytes can never become a character, at flush() for a
// character that never completed.
class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
    std::string push(int32_t id);  // text that is complete after this id
    std::string flush();           // whatever is held back (as U+FFFD if incomplete)

private:
    const Tokenizer& tok_;
    int32_t prev_ = -1;
    std::string pending_;
};

}  // namespace ridge
