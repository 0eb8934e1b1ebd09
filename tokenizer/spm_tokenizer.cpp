// SentencePiece-style BPE (GGUF tokenizer.ggml.model "llama"), as llama.cpp runs it: spaces
// become "▁" (with one dummy "▁" in front of the text and after each special token when
// add_space_prefix is set), every UTF-8 character starts as a symbol, and the adjacent pair
// whose concatenation is the token with the highest score is merged first (leftmost among
// equal scores) until no pair forms a token. Characters left without a token become <0xHH>
// byte tokens. For speed the text is cut where no token could ever span the cut (two characters
// never adjacent inside any token): merges never cross such a cut, so each segment is encoded on
// its own, through a cache, with exactly the result of encoding the whole text at once.
#include <queue>
#include <unordered_set>

#include "tokenizer/utf8.h"
#include "tokenizer/vocab_tokenizer.h"
#include "weights/error.h"

namespace ridge {

namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK "▁"

class SpmTokenizer final : public VocabTokenizer {
public:
    explicit SpmTokenizer(Vocabulary vocab);

protected:
    void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;

private:
    // The bytes of the character at s[pos] (at most 4) packed in an integer, and its length.
    static uint32_t char_key(std::string_view s, size_t pos, size_t* len) {
        *len = std::min(utf8::char_length(uint8_t(s[pos])), s.size() - pos);
        uint32_t key = 0;
        for (size_t k = 0; k < *len; ++k) key |= uint32_t(uint8_t(s[pos + k])) << (8 * k);
        return key;
    }
    static uint64_t pair_key(uint32_t left, uint32_t right) { return (uint64_t(left) << 32) | right; }
    void encode_segment(std::string_view segment, std::vector<int32_t>& out) const;

    std::vector<int32_t> byte_ids_;               // (256) id of <0xHH>, or -1
    std::unordered_set<uint64_t> adjacent_pairs_;  // character pairs adjacent inside some token
    PieceCache cache_;
};

SpmTokenizer::SpmTokenizer(Vocabulary vocab) : VocabTokenizer(std::move(vocab)) {
    byte_ids_ = byte_token_ids();
    for (const std::string& t : vocab_.tokens) {
        size_t len = 0, pos = 0;
        uint32_t prev = 0;
        for (bool first = true; pos < t.size(); first = false) {
            const uint32_t key = char_key(t, pos, &len);
            if (!first) adjacent_pairs_.insert(pair_key(prev, key));
            prev = key;
            pos += len;
        }
    }
    strip_space_at_start_ = vocab_.add_space_prefix;
    pieces_.resize(vocab_.tokens.size());
    for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
        const std::string& t = vocab_.tokens[i];
        switch (vocab_.types[i]) {
            case TokenType::Normal: {
                std::string p;  // "▁" -> " "
                for (size_t k = 0; k < t.size();) {
                    if (t.compare(k, kSpaceMark.size(), kSpaceMark) == 0) {
                        p += ' ';
                        k += kSpaceMark.size();
                    } else {
                        p += t[k++];
                    }
                }
                pieces_[i] = std::move(p);
                break;
            }
            case TokenType::UserDefined: pieces_[i] = t; break;
            case TokenType::Byte:
                for (int b = 0; b < 256; ++b)
                    if (byte_ids_[b] == int32_t(i)) pieces_[i] = std::string(1, char(b));
                break;
            default: break;  // control, unknown, unused: nothing
        }
    }
}

void SpmTokenizer::encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const {
    std::string s;
    s.reserve(text.size() * 3 + 3);
    if (vocab_.add_space_prefix && after_special) s += kSpaceMark;
    for (char c : text) {
        if (c == ' ') {
            s += kSpaceMark;
        } else {
            s += c;
        }
    }

    // Cut between two characters that are never adjacent inside a token.
    size_t begin = 0, pos = 0, len = 0;
    uint32_t prev = 0;
    while (pos < s.size()) {
        const uint32_t key = char_key(s, pos, &len);
        if (pos > begin && !adjacent_pairs_.count(pair_key(prev, key))) {
            encode_segment(std::string_view(s).substr(begin, pos - begin), out);
            begin = pos;
        }
        prev = key;
        pos += len;
    }
    if (pos > begin) encode_segment(std::string_view(s).substr(begin, pos - begin), out);
}

void SpmTokenizer::encode_segment(std::string_view s, std::vector<int32_t>& out) const {
    if (cache_.find(s, out)) return;
    const size_t first = out.size();

    // One symbol per character; a merge grows the left symbol and empties the right one.
    struct Symbol {
        size_t begin, size;  // bytes of s
        int prev, next;
    };
    std::vector<Symbol> symbols;
    symbols.reserve(s.size());
    for (size_t pos = 0; pos < s.size();) {
        const size_t len = std::min(utf8::char_length(uint8_t(s[pos])), s.size() - pos);
        const int index = int(symbols.size());
        symbols.push_back({pos, len, index - 1, pos + len < s.size() ? index + 1 : -1});
        pos += len;
    }

    struct Candidate {
        float score;
        int left, right;
        size_t size;  // bytes of the merged text: a changed side makes the candidate stale
        bool operator<(const Candidate& o) const {  // pops the highest score, then the leftmost
            return score != o.score ? score < o.score : left > o.left;
        }
    };
    std::priority_queue<Candidate> queue;
    auto consider = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const size_t size = symbols[left].size + symbols[right].size;
        auto id = find_token(s.substr(symbols[left].begin, size));
        if (id) queue.push({vocab_.scores[*id], left, right, size});
    };
    for (int i = 0; i + 1 < int(symbols.size()); ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = symbols[c.left];
        Symbol& r = symbols[c.right];
        if (l.size == 0 || r.size == 0 || l.size + r.size != c.size) continue;
        l.size += r.size;
        r.size = 0;
        l.next = r.next;
        if (r.next >= 0) symbols[r.next].prev = c.left;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }

    // Every merged symbol is a token; a single character may not be, and falls back to bytes.
    for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
        const std::string_view sym = s.substr(symbols[i].begin, symbols[i].size);
        if (auto id = find_token(sym)) {
            out.push_back(*id);
            continue;
        }
        for (char c : sym) {
            int32_t id = byte_ids_[uint8_t(c)];
            if (id < 0) {  // no <0xHH> token: the one-byte token, else <unk>
                auto single = find_token(std::string_view(&c, 1));
                id = single ? *single : vocab_.unk_id;
            }
            if (id < 0)
                throw Error(vocab_.source + ": cannot encode byte " + std::to_string(uint8_t(c)) +
                            ": the vocabulary has no byte token, no one-byte token and no <unk>");
            out.push_back(id);
        }
    }
    cache_.store(s, out.data() + first, out.size() - first);
}

}  // namespace

std::unique_ptr<Tokenizer> make_spm_tokenizer(Vocabulary vocab) { return std::make_unique<SpmTokenizer>(std::move(vocab)); }

}  // namespace ridge
