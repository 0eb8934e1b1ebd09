// ByteTokenizer: one token per byte, plus BOS and the two ChatML markers as special tokens.
#include "tokenizer/byte_tokenizer.h"

#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/utf8.h"
#include "weights/error.h"

namespace ridge {

namespace {

class ByteTokenizer : public Tokenizer {
public:
    explicit ByteTokenizer(int n_vocab) : n_vocab_(n_vocab) {
        texts_.reserve(size_t(n_vocab));
        static const char* hex = "0123456789ABCDEF";
        for (int b = 0; b < 256; b++) {
            // Printable ASCII as itself, every other byte as <0xHH>, like SentencePiece byte tokens.
            if (b >= 0x20 && b < 0x7F) texts_.push_back(std::string(1, char(b)));
            else texts_.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
        }
        texts_.push_back("<s>");
        texts_.push_back("<|im_start|>");
        texts_.push_back("<|im_end|>");
        for (int id = int(texts_.size()); id < n_vocab; id++) texts_.push_back("<unused_" + std::to_string(id) + ">");
    }

    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override {
        utf8::require_valid(text, "text to tokenize");
        std::vector<int32_t> ids;
        if (add_bos) ids.push_back(kByteTokenizerBos);
        for (size_t i = 0; i < text.size();) {
            if (parse_special) {
                const int32_t special[] = {kByteTokenizerBos, kByteTokenizerImStart, kByteTokenizerImEnd};
                bool matched = false;
                for (int32_t id : special) {
                    const std::string& t = texts_[size_t(id)];
                    if (text.substr(i, t.size()) == t) {
                        ids.push_back(id);
                        i += t.size();
                        matched = true;
                        break;
                    }
                }
                if (matched) continue;
            }
            ids.push_back(int32_t(static_cast<unsigned char>(text[i])));
            i++;
        }
        return ids;
    }

    std::string decode_piece(int32_t prev, int32_t id) const override {
        check(id);
        return id < 256 ? std::string(1, char(id)) : std::string();
    }
    const std::string& token_text(int32_t id) const override {
        check(id);
        return texts_[size_t(id)];
    }
    std::optional<int32_t> find_token(std::string_view text) const override {
        if (text.size() == 1) return int32_t(static_cast<unsigned char>(text[0]));
        for (size_t id = 0; id < texts_.size(); id++)
            if (texts_[id] == text) return int32_t(id);
        return std::nullopt;
    }

    int n_vocab() const override { return n_vocab_; }
    int32_t bos_id() const override { return kByteTokenizerBos; }
    int32_t eos_id() const override { return -1; }
    bool add_bos_default() const override { return true; }
    bool is_end_of_generation(int32_t id) const override { return id == kByteTokenizerImEnd; }
    bool is_special(int32_t id) const override { return id >= 256; }

private:
    void check(int32_t id) const {
        if (id < 0 || id >= n_vocab_)
            throw Error("token id " + std::to_string(id) + " is outside the byte tokenizer's vocabulary [0, " +
                        std::to_string(n_vocab_) + ")");
    }
    int n_vocab_;
    std::vector<std::string> texts_;  // (n_vocab) token texts for display
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer(int n_vocab) {
    if (n_vocab < 259)
        throw Error("a byte tokenizer needs a vocabulary of at least 259 ids (256 bytes, BOS, <|im_start|>, "
                    "<|im_end|>); the model has " + std::to_string(n_vocab));
    return std::make_unique<ByteTokenizer>(n_vocab);
}

}  // namespace ridge
