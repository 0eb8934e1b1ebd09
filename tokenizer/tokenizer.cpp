// Tokenizer factories (GGUF metadata, llama2.c .bin) and StreamDecoder, which joins decoded
// pieces and lets out only whole UTF-8 characters: an incomplete character waits for its
// remaining bytes, an ill-formed sequence becomes U+FFFD (one per maximal subpart).
#include "tokenizer/tokenizer.h"

#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"
#include "weights/error.h"
#include "weights/gguf.h"

namespace ridge {

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const GGUFFile& f) { return make_tokenizer(vocabulary_from_gguf(f)); }

std::unique_ptr<Tokenizer> Tokenizer::from_llama2c(const std::string& path, int vocab_size) {
    return make_tokenizer(vocabulary_from_llama2c(path, vocab_size));
}

std::vector<int32_t> Tokenizer::encode_pieces(const std::vector<PromptPiece>& pieces, bool add_bos) const {
    std::vector<int32_t> out;
    if (add_bos) out = encode("", true, false);  // BOS alone, or the tokenizer's error without one
    for (const PromptPiece& p : pieces) {
        if (p.token >= 0) {
            if (p.token >= n_vocab())
                throw Error("prompt: token id " + std::to_string(p.token) + " is outside the vocabulary of " +
                            std::to_string(n_vocab()));
            out.push_back(p.token);
        } else if (!p.text.empty()) {
            const std::vector<int32_t> ids = encode(p.text, false, /*parse_special=*/false);
            out.insert(out.end(), ids.begin(), ids.end());
        }
    }
    return out;
}

std::string StreamDecoder::push(int32_t id) {
    pending_ += tok_.decode_piece(prev_, id);
    prev_ = id;

    std::string out;
    size_t pos = 0;
    while (pos < pending_.size()) {
        const utf8::ScanResult r = utf8::scan(pending_, pos);
        if (r.kind == utf8::Scan::Incomplete) break;  // wait for the next piece
        if (r.kind == utf8::Scan::Complete) {
            out.append(pending_, pos, r.length);
        } else {
            out += utf8::kReplacement;
        }
        pos += r.length;
    }
    pending_.erase(0, pos);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    if (!pending_.empty()) out += utf8::kReplacement;  // a character that never completed
    pending_.clear();
    return out;
}

}  // namespace ridge
