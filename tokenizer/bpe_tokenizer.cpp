// Byte-level BPE (GGUF tokenizer.ggml.model "gpt2"): the pre-tokenizer regexes cut the text
// into pieces; within a piece every byte starts as its own symbol (the GPT-2 byte alphabet) and
// the adjacent pair with the lowest merge rank is merged until no listed pair remains
// (leftmost first among equal ranks). A cache maps recently seen pieces to their ids.
#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/vocab_tokenizer.h"
#include "weights/error.h"

namespace ridge {

namespace {

class BpeTokenizer final : public VocabTokenizer {
public:
    explicit BpeTokenizer(Vocabulary vocab);

protected:
    void encode_text(std::string_view text, bool after_special, std::vector<int32_t>& out) const override;

private:
    struct Merge {
        int32_t rank;    // position in tokenizer.ggml.merges: lower merges first
        int32_t result;  // id of the merged token
    };
    static uint64_t pair_key(int32_t left, int32_t right) { return (uint64_t(uint32_t(left)) << 32) | uint32_t(right); }
    void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

    PretokenizerSpec spec_;
    std::unique_ptr<RegexSplitter> splitter_;
    std::unordered_map<uint64_t, Merge> merges_;  // (left id, right id) -> rank and result
    int32_t byte_symbol_[256];                    // id of the one-character token for each byte, or -1

    PieceCache cache_;
};

BpeTokenizer::BpeTokenizer(Vocabulary vocab) : VocabTokenizer(std::move(vocab)), spec_(pretokenizer_for(vocab_.pre)) {
    splitter_ = std::make_unique<RegexSplitter>(spec_.patterns, vocab_.source + " (pre-tokenizer '" + vocab_.pre + "')");

    for (int b = 0; b < 256; ++b) {
        auto id = find_token(byte_level::encode(std::string(1, char(b))));
        byte_symbol_[b] = id ? *id : -1;
    }

    // "left right" -> ids. A merge whose parts or result are not tokens can never apply to
    // symbols that are tokens, so it is left out.
    merges_.reserve(vocab_.merges.size());
    for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
        const std::string& m = vocab_.merges[rank];
        const size_t space = m.find(' ', 1);
        if (space == std::string::npos)
            throw Error(vocab_.source + ": merge " + std::to_string(rank) + " '" + m +
                        "' is not two symbols separated by a space");
        const std::string_view left = std::string_view(m).substr(0, space);
        const std::string_view right = std::string_view(m).substr(space + 1);
        auto l = find_token(left), r = find_token(right), result = find_token(m.substr(0, space) + m.substr(space + 1));
        if (!l || !r || !result) continue;
        merges_.try_emplace(pair_key(*l, *r), Merge{int32_t(rank), *result});  // first listing wins
    }

    // Decoded bytes of each token.
    pieces_.resize(vocab_.tokens.size());
    const std::vector<int32_t> byte_ids = byte_token_ids();
    for (size_t i = 0; i < vocab_.tokens.size(); ++i) {
        switch (vocab_.types[i]) {
            case TokenType::Normal: pieces_[i] = byte_level::decode(vocab_.tokens[i]); break;
            case TokenType::UserDefined: pieces_[i] = vocab_.tokens[i]; break;
            case TokenType::Byte:
                for (int b = 0; b < 256; ++b)
                    if (byte_ids[b] == int32_t(i)) pieces_[i] = std::string(1, char(b));
                break;
            default: break;  // control, unknown, unused: nothing, as llama.cpp renders them
        }
    }
}

void BpeTokenizer::encode_text(std::string_view text, bool, std::vector<int32_t>& out) const {
    for (std::string_view piece : splitter_->split(text)) {
        if (cache_.find(piece, out)) continue;
        const size_t first = out.size();
        encode_piece(piece, out);
        cache_.store(piece, out.data() + first, out.size() - first);
    }
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
    if (spec_.ignore_merges) {  // a piece that is a token is taken whole (llama3)
        if (auto id = find_token(byte_level::encode(piece))) {
            out.push_back(*id);
            return;
        }
    }
    const int n = int(piece.size());
    if (n == 1) {
        if (byte_symbol_[uint8_t(piece[0])] >= 0) out.push_back(byte_symbol_[uint8_t(piece[0])]);
        return;
    }

    // Symbols in a doubly linked list; a merge keeps the left symbol and kills the right one.
    struct Symbol {
        int32_t id;  // -1 once merged away (or for a byte with no token)
        int prev, next;
    };
    std::vector<Symbol> symbols(n);
    for (int i = 0; i < n; ++i) symbols[i] = {byte_symbol_[uint8_t(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};

    struct Candidate {
        int32_t rank;
        int left, right;
        int32_t left_id, right_id, result;
        bool operator<(const Candidate& o) const {  // priority_queue pops the "largest"
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };
    std::priority_queue<Candidate> queue;
    auto consider = [&](int left, int right) {
        if (left < 0 || right < 0) return;
        const int32_t a = symbols[left].id, b = symbols[right].id;
        if (a < 0 || b < 0) return;
        auto it = merges_.find(pair_key(a, b));
        if (it != merges_.end()) queue.push({it->second.rank, left, right, a, b, it->second.result});
    };
    for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);

    while (!queue.empty()) {
        const Candidate c = queue.top();
        queue.pop();
        Symbol& l = symbols[c.left];
        Symbol& r = symbols[c.right];
        // Stale when either side has changed since the candidate was queued.
        if (l.id != c.left_id || r.id != c.right_id || l.next != c.right) continue;
        l.id = c.result;
        l.next = r.next;
        if (r.next >= 0) symbols[r.next].prev = c.left;
        r.id = -1;
        r.prev = r.next = -1;
        consider(l.prev, c.left);
        consider(c.left, l.next);
    }
    for (int i = 0; i >= 0; i = symbols[i].next)
        if (symbols[i].id >= 0) out.push_back(symbols[i].id);
}

}  // namespace

std::unique_ptr<Tokenizer> make_bpe_tokenizer(Vocabulary vocab) { return std::make_unique<BpeTokenizer>(std::move(vocab)); }

}  // namespace ridge
