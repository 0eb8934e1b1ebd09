// The shared tokenizer machinery: llama.cpp's per-token rules for GGUF vocabularies (which
// tokens end generation, which count as control), splitting special tokens out of the text
// before the real tokenizer sees it, and decoding ids to bytes.
#include "tokenizer/vocab_tokenizer.h"

#include <algorithm>
#include <cctype>
#include <mutex>

#include "tokenizer/utf8.h"
#include "weights/error.h"

namespace ridge {

namespace {

bool is_c_space(char c) {  // C isspace in the "C" locale, as llama.cpp uses for lstrip/rstrip
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool one_of(std::string_view s, std::initializer_list<std::string_view> list) {
    for (std::string_view x : list)
        if (s == x) return true;
    return false;
}

// Token texts llama.cpp treats as end of generation (and forces to control type).
const std::initializer_list<std::string_view> kEndOfGenerationTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>", "<end_of_utterance>"};
// End-of-turn texts (one of them becomes the EOT token when the metadata names none).
const std::initializer_list<std::string_view> kEndOfTurnTexts = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek's <｜end▁of▁sentence｜>
    "<end_of_utterance>"};
// Fill-in-the-middle tokens: all are forced to control; pad, repo and file-separator tokens
// also end generation.
const std::initializer_list<std::string_view> kFimOtherTexts = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
    "\xE2\x96\x81<PRE>", "<|code_prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>", "<SUF>",
    "\xE2\x96\x81<SUF>", "<|code_suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
    "\xE2\x96\x81<MID>", "<|code_middle|>"};
const std::initializer_list<std::string_view> kFimEndTexts = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",                                   // pad
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",              // repo
    "<|file_sep|>"};                                                                     // file separator

}  // namespace

bool PieceCache::find(std::string_view piece, std::vector<int32_t>& out) const {
    if (piece.size() > kMaxPieceBytes) return false;
    std::shared_lock lock(mutex_);
    auto it = map_.find(piece);
    if (it == map_.end()) return false;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return true;
}

void PieceCache::store(std::string_view piece, const int32_t* ids, size_t n) const {
    if (piece.size() > kMaxPieceBytes) return;
    std::unique_lock lock(mutex_);
    if (map_.size() >= kMaxEntries) map_.clear();
    map_.try_emplace(std::string(piece), ids, ids + n);
}

VocabTokenizer::VocabTokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {
    const size_t n = vocab_.tokens.size();
    const std::string& src = vocab_.source;
    if (n == 0) throw Error(src + ": the vocabulary has no tokens");
    if (n > size_t(INT32_MAX)) throw Error(src + ": the vocabulary has too many tokens");
    if (vocab_.types.empty()) vocab_.types.assign(n, TokenType::Normal);
    if (vocab_.scores.empty()) vocab_.scores.assign(n, 0.0f);
    if (vocab_.types.size() != n || vocab_.scores.size() != n)
        throw Error(src + ": the vocabulary has " + std::to_string(n) + " tokens but " +
                    std::to_string(vocab_.types.size()) + " token types and " + std::to_string(vocab_.scores.size()) +
                    " scores");
    for (int32_t* id : {&vocab_.bos_id, &vocab_.eos_id, &vocab_.unk_id, &vocab_.eot_id, &vocab_.eom_id, &vocab_.pad_id})
        if (*id < -1 || *id >= int32_t(n)) *id = -1;

    token_to_id_.reserve(n);
    for (size_t i = 0; i < n; ++i)
        if (!vocab_.tokens[i].empty()) token_to_id_[vocab_.tokens[i]] = int32_t(i);

    end_of_generation_.assign(n, 0);
    lstrip_.assign(n, 0);
    rstrip_.assign(n, 0);
    auto mark_end = [&](int32_t id) {
        if (id >= 0) end_of_generation_[id] = 1;
    };

    if (vocab_.model == "llama2c") {
        // llama2.c stops generating at BOS (it delimits sequences); EOS ends a text too.
        mark_end(vocab_.bos_id);
        mark_end(vocab_.eos_id);
    } else {
        // llama.cpp recognises end-of-turn, end-of-message and fill-in-the-middle tokens by
        // their text and makes them control tokens (the conversion scripts do not always).
        auto force_control = [&](int32_t id) { vocab_.types[id] = TokenType::Control; };
        for (size_t i = 0; i < n; ++i) {
            const std::string& t = vocab_.tokens[i];
            const int32_t id = int32_t(i);
            if (one_of(t, kEndOfTurnTexts)) {
                if (vocab_.eot_id < 0) vocab_.eot_id = id, force_control(id);
            }
            if (t == "<|eom_id|>" && vocab_.eom_id < 0) vocab_.eom_id = id, force_control(id);
            if (one_of(t, kFimOtherTexts)) force_control(id);
            if (one_of(t, kFimEndTexts)) force_control(id), mark_end(id);
            if (one_of(t, kEndOfGenerationTexts)) force_control(id), mark_end(id);
        }
        mark_end(vocab_.eos_id);
        mark_end(vocab_.eot_id);
        mark_end(vocab_.eom_id);

        // Phi-3: special tokens swallow the whitespace after them (llama.cpp matches "phi-3" or
        // "phi3" in the lower-cased general.name).
        std::string name = vocab_.name;
        std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
        if (name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos) {
            for (size_t i = 0; i < n; ++i) {
                const TokenType t = vocab_.types[i];
                if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) rstrip_[i] = 1;
            }
            for (std::string_view t : {"</s>"})
                if (auto id = find_token(t)) rstrip_[*id] = 1;
            for (std::string_view t : {"<unk>", "<s>", "<|endoftext|>"})
                if (auto id = find_token(t)) rstrip_[*id] = 0;
        }
    }

    for (size_t i = 0; i < n; ++i) {
        const TokenType t = vocab_.types[i];
        if ((t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) &&
            !vocab_.tokens[i].empty())
            special_by_length_.push_back(int32_t(i));
    }
    std::stable_sort(special_by_length_.begin(), special_by_length_.end(), [&](int32_t a, int32_t b) {
        return vocab_.tokens[a].size() > vocab_.tokens[b].size();
    });
}

std::vector<int32_t> VocabTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
    utf8::require_valid(text, "text to tokenize");
    std::vector<int32_t> out;
    out.reserve(text.size() / 3 + 2);
    if (add_bos) {
        if (vocab_.bos_id < 0) throw Error(vocab_.source + ": BOS requested but the vocabulary has no BOS token");
        out.push_back(vocab_.bos_id);
    }

    // Fragments of the text: special tokens found in it, and the plain text between them.
    // Each special token (longest first) splits every plain fragment at its occurrences, left to
    // right. Control and unknown tokens only count when parse_special is set; user-defined tokens
    // always do (llama.cpp, after Hugging Face tokenizers' added-token handling).
    struct Fragment {
        int32_t token;  // >= 0: a special token; -1: plain text [begin, end)
        size_t begin, end;
    };
    std::vector<Fragment> fragments;
    if (!text.empty()) fragments.push_back({-1, 0, text.size()});
    std::vector<Fragment> split;
    for (int32_t sid : special_by_length_) {
        const TokenType type = vocab_.types[sid];
        if (!parse_special && (type == TokenType::Control || type == TokenType::Unknown)) continue;
        const std::string& st = vocab_.tokens[sid];
        if (text.find(st) == std::string_view::npos) continue;  // the common case: absent
        split.clear();
        for (const Fragment& f : fragments) {
            if (f.token >= 0) {
                split.push_back(f);
                continue;
            }
            size_t begin = f.begin;
            while (begin < f.end) {
                const size_t match = text.substr(0, f.end).find(st, begin);
                if (match == std::string_view::npos) break;
                size_t left_end = match;
                if (lstrip_[sid])
                    while (left_end > begin && is_c_space(text[left_end - 1])) --left_end;
                if (left_end > begin) split.push_back({-1, begin, left_end});
                split.push_back({sid, match, match + st.size()});
                begin = match + st.size();
                if (rstrip_[sid])
                    while (begin < f.end && is_c_space(text[begin])) ++begin;
            }
            if (begin < f.end) split.push_back({-1, begin, f.end});
        }
        fragments.swap(split);
    }

    bool after_special = true;  // the start of the text counts as "after a special token"
    for (const Fragment& f : fragments) {
        if (f.token >= 0) {
            out.push_back(f.token);
            after_special = true;
        } else {
            encode_text(text.substr(f.begin, f.end - f.begin), after_special, out);
            after_special = false;
        }
    }
    return out;
}

std::string VocabTokenizer::decode_piece(int32_t prev, int32_t id) const {
    check_id(id);
    const std::string& piece = pieces_[id];
    if (strip_space_at_start_ && prev >= 0 && prev == vocab_.bos_id && !piece.empty() && piece[0] == ' ')
        return piece.substr(1);
    return piece;
}

const std::string& VocabTokenizer::token_text(int32_t id) const {
    check_id(id);
    return vocab_.tokens[id];
}

std::optional<int32_t> VocabTokenizer::find_token(std::string_view text) const {
    auto it = token_to_id_.find(text);
    if (it == token_to_id_.end()) return std::nullopt;
    return it->second;
}

bool VocabTokenizer::is_end_of_generation(int32_t id) const {
    return id >= 0 && id < n_vocab() && end_of_generation_[id];
}

bool VocabTokenizer::is_special(int32_t id) const {
    if (id < 0 || id >= n_vocab()) return false;
    const TokenType t = vocab_.types[id];
    return t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown;
}

TokenType VocabTokenizer::token_type(int32_t id) const {
    check_id(id);
    return vocab_.types[id];
}

void VocabTokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= n_vocab())
        throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " + std::to_string(n_vocab()) +
                    ") of " + vocab_.source);
}

std::vector<int32_t> VocabTokenizer::byte_token_ids() const {
    std::vector<int32_t> ids(256, -1);
    static const char* hex = "0123456789ABCDEF";
    for (int b = 0; b < 256; ++b) {
        const char name[7] = {'<', '0', 'x', hex[b >> 4], hex[b & 15], '>', 0};
        if (auto id = find_token(name)) ids[b] = *id;
    }
    return ids;
}

std::unique_ptr<Tokenizer> make_tokenizer(Vocabulary vocab) {
    if (vocab.model == "gpt2") return make_bpe_tokenizer(std::move(vocab));
    if (vocab.model == "llama") return make_spm_tokenizer(std::move(vocab));
    if (vocab.model == "llama2c") return make_llama2c_tokenizer(std::move(vocab));
    throw Error(vocab.source + ": unsupported tokenizer model '" + vocab.model + "'; ridge reads gpt2, llama and llama2c");
}

}  // namespace ridge
