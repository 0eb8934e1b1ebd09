// The llama2.c tokenizer (run.c encode/decode): a dummy " " token in front of non-empty text,
// one token per UTF-8 character (bytes as tokens byte + 3 when the character is not in the
// vocabulary), then repeatedly the adjacent pair whose concatenated text is the token with the
// best score is merged (leftmost among equal scores). Special-token texts are never parsed.
#include <queue>

#include "tokenizer/utf8.h"
#include "tokenizer/vocab_tokenizer.h"
#include "weights/error.h"

namespace ridge {

namespace {

class Llama2cTokenizer final : public VocabTokenizer {
public:
    explicit Llama2cTokenizer(Vocabulary vocab);
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const override;

protected:
    void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;
};

Llama2cTokenizer::Llama2cTokenizer(Vocabulary vocab) : VocabTokenizer(std::move(vocab)) {
    strip_space_at_start_ = true;  // run.c: "following BOS token, sentencepiece decoder strips any leading whitespace"
    pieces_.resize(vocab_.tokens.size());
    for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
        switch (vocab_.types[i]) {
            case TokenType::Byte: pieces_[i] = std::string(1, char(i - 3)); break;
            case TokenType::Control:
            case TokenType::Unknown: break;  // <unk>, BOS, EOS decode to nothing
            default: pieces_[i] = vocab_.tokens[i];
        }
    }
}

std::vector<int32_t> Llama2cTokenizer::encode(std::string_view text, bool add_bos, bool) const {
    utf8::require_valid(text, "text to tokenize");
    std::vector<int32_t> out;
    if (add_bos) {
        if (vocab_.bos_id < 0) throw Error(vocab_.source + ": BOS requested but the vocabulary has no BOS token");
        out.push_back(vocab_.bos_id);
    }
    encode_text(text, true, out);
    return out;
}

void Llama2cTokenizer::encode_text(std::string_view text, bool, std::vector<int32_t>& out) const {
    // run.c merges over the whole token list, BOS included, so the list starts with what is
    // already in `out` (at most the BOS).
    std::vector<int32_t> ids(out.begin(), out.end());
    out.clear();
    if (!text.empty()) {
        if (auto space = find_token(" ")) ids.push_back(*space);  // the dummy prefix
    }
    for (size_t pos = 0; pos < text.size();) {
        const size_t len = utf8::char_length(uint8_t(text[pos]));
        if (auto id = find_token(text.substr(pos, len))) {
            ids.push_back(*id);
        } else {
            for (size_t k = 0; k < len; ++k) {
                const int32_t byte_id = int32_t(uint8_t(text[pos + k])) + 3;
                if (byte_id >= n_vocab())
                    throw Error(vocab_.source + ": byte-fallback token " + std::to_string(byte_id) +
                                " is outside the vocabulary of " + std::to_string(n_vocab()));
                ids.push_back(byte_id);
            }
        }
        pos += len;
    }

    const int n = int(ids.size());
    struct Symbol {
        int32_t id;
        int prev, next;
    };
    std::vector<Symbol> symbols(n);
    for (int i = 0; i < n; ++i) symbols[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1};

    struct Candidate {
        float score;
        int left, right;
        int32_t left_id, right_id, result;
        bool operator<(const Candidate& o) const { return score != o.score ? score < o.score : left > o.left; }
    };
    std::priority_queue<Candidate> queue;
    auto consider = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const int32_t a = symbols[left].id, b = symbols[right].id;
        auto id = find_token(vocab_.tokens[a] + vocab_.tokens[b]);
        // run.c starts its search for the best score at -1e10, so worse pairs never merge.
        if (id && vocab_.scores[*id] > -1e10f) queue.push({vocab_.scores[*id], left, right, a, b, *id});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = symbols[c.left];
        Symbol& r = symbols[c.right];
        if (l.id != c.left_id || r.id != c.right_id || l.next != c.right) continue;
        l.id = c.result;
        l.next = r.next;
        if (r.next >= 0) symbols[r.next].prev = c.left;
        r.id = -1;
        r.prev = r.next = -1;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }
    for (int i = n > 0 ? 0 : -1; i >= 0; i = symbols[i].next) out.push_back(symbols[i].id);
}

}  // namespace

std::unique_ptr<Tokenizer> make_llama2c_tokenizer(Vocabulary vocab) {
    return std::make_unique<Llama2cTokenizer>(std::move(vocab));
}

}  // namespace ridge
