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

class Tokenizer {
public:
    virtual ~Tokenizer() = default;
    static std::unique_ptr<Tokenizer> from_gguf(const GGUFFile& f);
    // llama2.c tokenizer.bin (vocab_size comes from the checkpoint header).
    static std::unique_ptr<Tokenizer> from_llama2c(const std::string& path, int vocab_size);

    // Text -> ids. add_bos prepends BOS; parse_special lets special/control token texts in the
    // input (such as "<|im_start|>") become their ids, otherwise they are tokenized as plain text.
    virtual std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const = 0;
    // The bytes a token stands for when decoded (byte tokens give their byte, "▁" gives " ",
    // byte-level BPE symbols are mapped back). `prev` is the previous id or -1: SentencePiece
    // vocabularies drop the leading space of the first piece after BOS, as llama2.c does.
    virtual std::string decode_piece(int32_t prev, int32_t id) const = 0;
    // The token's stored text, for display ("Ġthe", "<0x0A>").
    virtual const std::string& token_text(int32_t id) const = 0;
    virtual std::optional<int32_t> find_token(std::string_view text) const = 0;

    virtual int n_vocab() const = 0;
    virtual int32_t bos_id() const = 0;   // -1 when none
    virtual int32_t eos_id() const = 0;   // -1 when none
    virtual bool add_bos_default() const = 0;  // tokenizer.ggml.add_bos_token (or the model's default)
    // End of generation: EOS, EOT, <|im_end|> and the like.
    virtual bool is_end_of_generation(int32_t id) const = 0;
    virtual bool is_special(int32_t id) const = 0;  // control/user-defined tokens
    virtual std::string chat_template() const { return {}; }
};

// Decodes a stream of ids into valid UTF-8 text chunks; holds back an incomplete character
// until its remaining bytes arrive. Invalid sequences come out as U+FFFD.
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
