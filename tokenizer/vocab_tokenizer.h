// VocabTokenizer: the part every ridge tokenizer shares (token lookup, special-token splitting,
// end-of-generation set, decoded pieces), and the three concrete kinds built on it:
// byte-level BPE ("gpt2"), SentencePiece-style BPE ("llama") and the llama2.c tokenizer.
// The special-token rules follow llama.cpp (src/llama-vocab.cpp), the reference for GGUF files.
#pragma once
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"

namespace ridge {

// Hash for looking up std::string keys by std::string_view without building a string.
struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenMap = std::unordered_map<std::string, int32_t, TextHash, std::equal_to<>>;

// Piece -> ids, for pieces of text seen before; shared by all threads encoding with one
// tokenizer, emptied when full. Long pieces are not kept.
class PieceCache {
public:
    static constexpr size_t kMaxEntries = 1 << 16;
    static constexpr size_t kMaxPieceBytes = 256;
    // Appends the cached ids of `piece` to `out` and returns true, or returns false.
    bool find(std::string_view piece, std::vector<int32_t>& out) const;
    void store(std::string_view piece, const int32_t* ids, size_t n) const;

private:
    mutable std::shared_mutex mutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>, TextHash, std::equal_to<>> map_;
};

class VocabTokenizer : public Tokenizer {
public:
    explicit VocabTokenizer(Vocabulary vocab);

    // Validates UTF-8 (ridge::Error "... invalid UTF-8 at byte N" otherwise), splits out special
    // tokens, and encodes the plain-text pieces with encode_text.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override;
    std::string decode_piece(int32_t prev, int32_t id) const override;
    const std::string& token_text(int32_t id) const override;
    std::optional<int32_t> find_token(std::string_view text) const override;

    int n_vocab() const override { return int(vocab_.tokens.size()); }
    int32_t bos_id() const override { return vocab_.bos_id; }
    int32_t eos_id() const override { return vocab_.eos_id; }
    bool add_bos_default() const override { return vocab_.add_bos; }
    bool is_end_of_generation(int32_t id) const override;
    bool is_special(int32_t id) const override;
    std::string chat_template() const override { return vocab_.chat_template; }

    TokenType token_type(int32_t id) const;
    const Vocabulary& vocabulary() const { return vocab_; }

protected:
    // Appends the ids of `text`, which holds no special token. `after_special`: the text starts
    // the input or directly follows a special token (SentencePiece adds its dummy space there).
    virtual void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const = 0;

    // Throws ridge::Error unless 0 <= id < n_vocab.
    void check_id(int32_t id) const;
    // The id of the token "<0xHH>" for each byte, or -1.
    std::vector<int32_t> byte_token_ids() const;

    Vocabulary vocab_;
    TokenMap token_to_id_;             // text -> id (the last id wins for duplicate texts)
    std::vector<std::string> pieces_;  // (n_vocab) bytes each token decodes to; set by subclasses
    bool strip_space_at_start_ = false;  // drop the leading space of the first piece (after BOS)

private:
    std::vector<int32_t> special_by_length_;  // control/user-defined/unknown ids, longest text first
    std::vector<uint8_t> lstrip_, rstrip_;    // (n_vocab) strip whitespace around a matched special
    std::vector<uint8_t> end_of_generation_;  // (n_vocab)
};

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocabulary vocab);      // "gpt2"
std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocabulary vocab);      // "llama"
std::unique_ptr<Tokenizer> make_llama2c_tokenizer(Vocabulary vocab);  // "llama2c"

}  // namespace ridge
