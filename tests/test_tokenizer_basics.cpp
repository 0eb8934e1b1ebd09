// Hand-worked tokenizer cases: UTF-8 scanning, rejection of invalid UTF-8 input, pre-tokenizer
// splits, BPE merge order and SentencePiece scores on tiny vocabularies built by hand, special-
// token rules, and StreamDecoder on characters split across tokens (an emoji over byte tokens).
#include <gtest/gtest.h>

#include "tokenizer/byte_level.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tokenizer/vocab.h"
#include "weights/error.h"
#include "weights/gguf.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("llamacpp-vocab/ggml-vocab-llama-bpe.gguf", "llamacpp-vocab/ggml-vocab-qwen2.gguf", "llamacpp-vocab/ggml-vocab-llama-spm.gguf");

namespace {

using ridge::TokenType;
using ridge::Vocabulary;
using Ids = std::vector<int32_t>;
namespace utf8 = ridge::utf8;

const std::string kVocabDir = std::string(RIDGE_TESTDATA_DIR) + "/llamacpp-vocab/";
const std::string kLlama = "\xF0\x9F\xA6\x99";  // U+1F999 LLAMA

std::unique_ptr<ridge::Tokenizer> load_vocab(const std::string& name) {
    auto f = ridge::GGUFFile::open(kVocabDir + "ggml-vocab-" + name + ".gguf");
    return ridge::Tokenizer::from_gguf(*f);
}

bool is_valid_utf8(const std::string& s) { return utf8::find_invalid(s) == std::string::npos; }

// ---------------------------------------------------------------------------------- UTF-8

TEST(Utf8, ScanFollowsTheWellFormedTable) {
    using utf8::Scan;
    auto scan0 = [](std::string_view s) { return utf8::scan(s, 0); };
    EXPECT_EQ(scan0("A").kind, Scan::Complete);
    EXPECT_EQ(scan0("\xC3\xA9").length, 2u);                    // é
    EXPECT_EQ(scan0(kLlama).length, 4u);
    EXPECT_EQ(scan0("\xC0\x80").kind, Scan::Invalid);           // overlong NUL
    EXPECT_EQ(scan0("\xE0\x80\x80").length, 1u);                // overlong: maximal subpart is E0
    EXPECT_EQ(scan0("\xED\xA0\x80").kind, Scan::Invalid);       // surrogate U+D800
    EXPECT_EQ(scan0("\xF4\x90\x80\x80").kind, Scan::Invalid);   // past U+10FFFF
    EXPECT_EQ(scan0("\xFF").kind, Scan::Invalid);
    EXPECT_EQ(scan0("\x80").kind, Scan::Invalid);               // lone continuation byte
    EXPECT_EQ(scan0("\xE2\x82").kind, Scan::Incomplete);        // € cut short
    EXPECT_EQ(scan0("\xF0\x9F\xA6").kind, Scan::Incomplete);
    EXPECT_EQ(scan0("\xF0\x9F" "A").length, 2u);                // F0 9F then not a continuation
    EXPECT_EQ(utf8::encode(0x1F999), kLlama);
    EXPECT_EQ(utf8::encode(0xE9), "\xC3\xA9");
}

TEST(Utf8, EncodeRejectsInvalidInputNamingTheByte) {
    auto tok = load_vocab("gpt-2");
    try {
        tok->encode("ab\xFF" "cd", false, false);
        FAIL() << "expected ridge::Error";
    } catch (const ridge::Error& e) {
        EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 2"), std::string::npos) << e.what();
    }
    try {
        tok->encode("abc\xE2\x82", false, false);
        FAIL() << "expected ridge::Error";
    } catch (const ridge::Error& e) {
        EXPECT_NE(std::string(e.what()).find("invalid UTF-8 at byte 3"), std::string::npos) << e.what();
    }
    EXPECT_THROW(load_vocab("llama-spm")->encode("\xED\xA0\x80", false, false), ridge::Error);
    EXPECT_NO_THROW(tok->encode(std::string("nul\0byte", 8), false, false));  // NUL is valid UTF-8
}

// -------------------------------------------------------------------------- pre-tokenizers

std::vector<std::string> split(std::string_view pre, std::string_view text) {
    const auto spec = ridge::pretokenizer_for(pre);
    ridge::RegexSplitter splitter(spec.patterns, "test");
    std::vector<std::string> out;
    for (auto piece : splitter.split(text)) out.emplace_back(piece);
    return out;
}
using Pieces = std::vector<std::string>;

TEST(Pretokenizer, Gpt2KeepsTheSpaceBeforeAWord) {
    EXPECT_EQ(split("gpt-2", "Hello world  123 it's"), (Pieces{"Hello", " world", " ", " 123", " it", "'s"}));
    EXPECT_EQ(split("gpt-2", "a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));  // "\n\n" then b: the last \n is a gap piece
    EXPECT_EQ(split("mpt", "x  "), (Pieces{"x", "  "}));
    EXPECT_EQ(split("gpt-2", "caf\xC3\xA9!!"), (Pieces{"caf\xC3\xA9", "!!"}));  // \p{L} is Unicode
}

TEST(Pretokenizer, StarcoderFamilySplitsEveryDigit) {
    for (const char* pre : {"starcoder", "refact", "smollm"})
        EXPECT_EQ(split(pre, "a 123"), (Pieces{"a", " ", "1", "2", "3"})) << pre;
    // The digit split comes first, so the whitespace before a digit is a piece of its own.
    EXPECT_EQ(split("smollm", "x  1"), (Pieces{"x", "  ", "1"}));
    EXPECT_EQ(split("gpt-2", "x  1"), (Pieces{"x", " ", " 1"}));
}

TEST(Pretokenizer, Llama3GroupsDigitsByThreeAndQwen2ByOne) {
    EXPECT_EQ(split("llama-bpe", "12345 ok"), (Pieces{"123", "45", " ok"}));
    EXPECT_EQ(split("llama-bpe", "IT'S"), (Pieces{"IT", "'S"}));  // case-insensitive contractions
    EXPECT_EQ(split("qwen2", "123"), (Pieces{"1", "2", "3"}));
    EXPECT_TRUE(ridge::pretokenizer_for("llama3").ignore_merges);
    EXPECT_TRUE(ridge::pretokenizer_for("llama-bpe").add_bos);
}

TEST(Pretokenizer, DeepseekCoderAppliesItsRegexesInSequence) {
    EXPECT_EQ(split("deepseek-coder", "ab\ncd 12"), (Pieces{"ab", "\n", "cd", " ", "1", "2"}));
    EXPECT_EQ(split("deepseek-coder", "\xE4\xBD\xA0\xE5\xA5\xBD"), (Pieces{"\xE4\xBD\xA0\xE5\xA5\xBD"}));  // 你好 together
}

TEST(Pretokenizer, UnknownNamesUseTheDefault) {
    const auto spec = ridge::pretokenizer_for("no-such-pre");
    EXPECT_FALSE(spec.known);
    EXPECT_EQ(spec.kind, "default");
    EXPECT_TRUE(ridge::pretokenizer_for("default").known);
    EXPECT_EQ(split("default", "1234"), (Pieces{"123", "4"}));
}

TEST(Pretokenizer, BadRegexIsALocatedError) {
    try {
        ridge::RegexSplitter s({"(unclosed"}, "my.gguf");
        FAIL() << "expected ridge::Error";
    } catch (const ridge::Error& e) {
        EXPECT_NE(std::string(e.what()).find("my.gguf"), std::string::npos) << e.what();
    }
}

// ------------------------------------------------------------- tiny hand-built vocabularies

// A byte-level vocabulary: the 256 byte symbols, then `extra` tokens, with `merges` in rank order.
Vocabulary tiny_bpe(const std::vector<std::string>& extra, const std::vector<std::string>& merges) {
    Vocabulary v;
    v.model = "gpt2";
    v.pre = "gpt-2";
    v.source = "tiny-bpe";
    for (int b = 0; b < 256; ++b) v.tokens.push_back(ridge::byte_level::encode(std::string(1, char(b))));
    for (const auto& t : extra) v.tokens.push_back(t);
    v.types.assign(v.tokens.size(), TokenType::Normal);
    v.merges = merges;
    return v;
}
int32_t byte_id(char c) {  // in tiny_bpe, token b is the symbol for byte b
    return int32_t(uint8_t(c));
}

TEST(BytePairEncoding, LowestRankMergesFirst) {
    // Tokens 256 "ab", 257 "bc", 258 "abc". "b c" ranks before "a b": abc = a + bc.
    auto tok = ridge::make_tokenizer(tiny_bpe({"ab", "bc", "abc"}, {"b c", "a b", "a bc"}));
    EXPECT_EQ(tok->encode("abc", false, false), (Ids{258}));
    // With "a b" first, "ab" + "c" has no merge: two tokens.
    auto tok2 = ridge::make_tokenizer(tiny_bpe({"ab", "bc", "abc"}, {"a b", "b c", "a bc"}));
    EXPECT_EQ(tok2->encode("abc", false, false), (Ids{256, byte_id('c')}));
}

TEST(BytePairEncoding, EqualRanksMergeLeftmostFirst) {
    auto tok = ridge::make_tokenizer(tiny_bpe({"aa"}, {"a a"}));
    EXPECT_EQ(tok->encode("aaa", false, false), (Ids{256, byte_id('a')}));
    EXPECT_EQ(tok->encode("aaaa", false, false), (Ids{256, 256}));
}

TEST(BytePairEncoding, SpecialTokensFollowLlamaCppRules) {
    Vocabulary v = tiny_bpe({"<|c|>", "<u>"}, {});
    v.types[256] = TokenType::Control;
    v.types[257] = TokenType::UserDefined;
    auto tok = ridge::make_tokenizer(v);
    // User-defined tokens are always recognised; control tokens only with parse_special.
    const Ids plain = tok->encode("x<|c|>y<u>", false, false);
    EXPECT_EQ(plain.back(), 257);
    EXPECT_EQ(std::count(plain.begin(), plain.end(), 256), 0);
    EXPECT_EQ(tok->encode("x<|c|>y<u>", false, true), (Ids{byte_id('x'), 256, byte_id('y'), 257}));
    // Control tokens decode to nothing, user-defined ones to their text.
    EXPECT_EQ(tok->decode_piece(-1, 256), "");
    EXPECT_EQ(tok->decode_piece(-1, 257), "<u>");
    EXPECT_TRUE(tok->is_special(256));
    EXPECT_TRUE(tok->is_special(257));
    EXPECT_FALSE(tok->is_special(byte_id('x')));
}

TEST(BytePairEncoding, EndOfGenerationTokensAreFoundByText) {
    Vocabulary v = tiny_bpe({"<|im_end|>", "<|endoftext|>", "<fim_pad>"}, {});
    auto tok = ridge::make_tokenizer(v);
    EXPECT_TRUE(tok->is_end_of_generation(256));
    EXPECT_TRUE(tok->is_end_of_generation(257));
    EXPECT_TRUE(tok->is_end_of_generation(258));
    EXPECT_TRUE(tok->is_special(256));  // forced to control, as llama.cpp does
    EXPECT_FALSE(tok->is_end_of_generation(byte_id('a')));
    EXPECT_EQ(tok->bos_id(), -1);  // a hand-built vocabulary has only what it says
}

TEST(BytePairEncoding, Llama3TakesAPieceThatIsATokenWhole) {
    // "abc" is a token but no merge builds it: llama3-style pre-tokenizers (ignore_merges) still
    // emit it whole; GPT-2's does not.
    Vocabulary v = tiny_bpe({"abc"}, {});
    v.pre = "llama-bpe";
    EXPECT_EQ(ridge::make_tokenizer(v)->encode("abc", false, false), (Ids{256}));
    v.pre = "gpt-2";
    EXPECT_EQ(ridge::make_tokenizer(v)->encode("abc", false, false), (Ids{byte_id('a'), byte_id('b'), byte_id('c')}));
}

// A SentencePiece-style vocabulary: <unk> <s> </s>, 256 byte tokens, then `pieces` with scores.
Vocabulary tiny_spm(const std::vector<std::pair<std::string, float>>& pieces) {
    Vocabulary v;
    v.model = "llama";
    v.source = "tiny-spm";
    v.tokens = {"<unk>", "<s>", "</s>"};
    v.types = {TokenType::Unknown, TokenType::Control, TokenType::Control};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        v.tokens.push_back(name);
        v.types.push_back(TokenType::Byte);
    }
    for (const auto& [text, score] : pieces) {
        v.tokens.push_back(text);
        v.types.push_back(TokenType::Normal);
    }
    v.scores.assign(v.tokens.size(), 0.0f);
    for (size_t i = 0; i < pieces.size(); ++i) v.scores[259 + i] = pieces[i].second;
    v.bos_id = 1, v.eos_id = 2, v.unk_id = 0;
    v.add_bos = true;
    v.add_space_prefix = true;
    return v;
}

TEST(SentencePiece, HighestScoreMergesFirst) {
    // 259 "▁", 260 "a", 261 "b", 262 "▁a", 263 "ab"
    const std::string sp = "\xE2\x96\x81";
    auto a_first = ridge::make_tokenizer(tiny_spm({{sp, 0}, {"a", 0}, {"b", 0}, {sp + "a", -1}, {"ab", -2}}));
    EXPECT_EQ(a_first->encode("ab", false, false), (Ids{262, 261}));
    auto ab_first = ridge::make_tokenizer(tiny_spm({{sp, 0}, {"a", 0}, {"b", 0}, {sp + "a", -2}, {"ab", -1}}));
    EXPECT_EQ(ab_first->encode("ab", false, false), (Ids{259, 263}));
    // BOS, and "c" (not in the vocabulary) falls back to its byte token <0x63> = 3 + 0x63.
    EXPECT_EQ(ab_first->encode("abc", true, false), (Ids{1, 259, 263, 3 + 0x63}));
    EXPECT_TRUE(ab_first->add_bos_default());
}

TEST(SentencePiece, DecodeDropsTheDummySpaceAfterBos) {
    const std::string sp = "\xE2\x96\x81";
    auto tok = ridge::make_tokenizer(tiny_spm({{sp + "hi", -1}, {sp, -2}}));
    EXPECT_EQ(tok->decode_piece(1, 259), "hi");     // after BOS
    EXPECT_EQ(tok->decode_piece(-1, 259), " hi");   // anywhere else the space stays
    EXPECT_EQ(tok->decode_piece(259, 260), " ");
    EXPECT_EQ(tok->decode_piece(-1, 1), "");        // control tokens render as nothing
    EXPECT_EQ(tok->decode_piece(-1, 3 + 'A'), "A");  // <0x41>
    EXPECT_THROW(tok->decode_piece(-1, 100000), ridge::Error);
    EXPECT_THROW(tok->token_text(-1), ridge::Error);
}

TEST(SentencePiece, DummySpaceAlsoFollowsEverySpecialToken) {
    auto tok = load_vocab("llama-spm");
    const Ids hello = tok->encode("Hello", false, false);  // "▁Hello"
    Ids expected = {1};
    expected.insert(expected.end(), hello.begin(), hello.end());
    EXPECT_EQ(tok->encode("<s>Hello", false, true), expected);
    // Without parse_special "<s>" is text.
    EXPECT_NE(tok->encode("<s>Hello", false, false).front(), 1);
}

TEST(SentencePiece, Phi3SpecialTokensSwallowTheWhitespaceAfterThem) {
    // llama.cpp gives Phi-3's special tokens (general.name "Phi3") rstrip, except <unk>, <s> and
    // <|endoftext|>; "</s>" is user-defined there, so it is split out even without parse_special.
    auto tok = load_vocab("phi-3");
    const auto user = tok->find_token("<|user|>");
    ASSERT_TRUE(user.has_value());
    EXPECT_EQ(tok->encode("<|user|>\n  Hi", false, true), tok->encode("<|user|>Hi", false, true));
    EXPECT_EQ(tok->encode("<|user|>Hi", false, true).front(), *user);
    EXPECT_EQ(tok->encode("a</s>  b", false, false), tok->encode("a</s>b", false, false));
    EXPECT_EQ(tok->encode("a</s>b", false, false), (Ids{263, 2, 289}));  // "▁a" "</s>" "▁b": a dummy space after it
    EXPECT_TRUE(tok->is_end_of_generation(*tok->find_token("<|end|>")));
    EXPECT_TRUE(tok->is_end_of_generation(32000));  // <|endoftext|>, the EOS
}

TEST(Vocabulary, UnsupportedModelIsAnError) {
    Vocabulary v;
    v.model = "bert";
    v.source = "x.gguf";
    v.tokens = {"a"};
    EXPECT_THROW(ridge::make_tokenizer(v), ridge::Error);
}

// ---------------------------------------------------------------------------- StreamDecoder

TEST(StreamDecoder, HoldsBackAnEmojiSplitOverByteTokens) {
    auto tok = load_vocab("llama-spm");
    const Ids ids = tok->encode(kLlama, true, false);  // BOS, "▁", then <0xF0> <0x9F> <0xA6> <0x99>
    ASSERT_EQ(ids.size(), 6u);
    EXPECT_EQ(tok->token_text(ids[2]), "<0xF0>");
    ridge::StreamDecoder dec(*tok);
    EXPECT_EQ(dec.push(ids[0]), "");
    EXPECT_EQ(dec.push(ids[1]), "");  // the dummy space after BOS
    EXPECT_EQ(dec.push(ids[2]), "");
    EXPECT_EQ(dec.push(ids[3]), "");
    EXPECT_EQ(dec.push(ids[4]), "");
    EXPECT_EQ(dec.push(ids[5]), kLlama);
    EXPECT_EQ(dec.flush(), "");
}

TEST(StreamDecoder, ByteLevelTokensThatCutACharacter) {
    auto tok = load_vocab("gpt-2");
    const std::string text = " this is " + kLlama + ".cpp";
    const Ids ids = tok->encode(text, false, false);
    EXPECT_EQ(ids, (Ids{428, 318, 12520, 99, 247, 13, 20322}));  // llama.cpp's gpt-2 .out
    ridge::StreamDecoder dec(*tok);
    std::string out;
    for (int32_t id : ids) {
        const std::string chunk = dec.push(id);
        EXPECT_TRUE(is_valid_utf8(chunk)) << "token " << id;
        out += chunk;
    }
    out += dec.flush();
    EXPECT_EQ(out, text);
}

TEST(StreamDecoder, InvalidBytesBecomeReplacementCharacters) {
    auto tok = load_vocab("llama-spm");
    const int32_t b_ff = 3 + 0xFF, b_f0 = 3 + 0xF0, b_9f = 3 + 0x9F, b_a = 3 + 'A';
    {
        ridge::StreamDecoder dec(*tok);
        EXPECT_EQ(dec.push(b_ff), utf8::kReplacement);  // can never start a character: at once
        EXPECT_EQ(dec.push(b_a), "A");
    }
    {
        ridge::StreamDecoder dec(*tok);
        EXPECT_EQ(dec.push(b_f0), "");
        EXPECT_EQ(dec.push(b_9f), "");
        EXPECT_EQ(dec.flush(), utf8::kReplacement);  // never completed
        EXPECT_EQ(dec.flush(), "");
    }
    {
        ridge::StreamDecoder dec(*tok);
        EXPECT_EQ(dec.push(b_f0), "");
        EXPECT_EQ(dec.push(b_a), std::string(utf8::kReplacement) + "A");  // F0 then 'A': F0 is ill-formed
    }
}

// ----------------------------------------------------------------------------- long inputs

TEST(LongInputs, LongRunsEncodeAndRoundTrip) {
    auto tok = load_vocab("gpt-2");
    for (const std::string& text : {std::string(100000, ' '), std::string(100000, 'a'), std::string(50000, '7'),
                                    std::string(30000, '\n') + "x", [] {
                                        std::string s;
                                        for (int i = 0; i < 20000; ++i) s += kLlama;
                                        return s;
                                    }()}) {
        const Ids ids = tok->encode(text, false, false);
        EXPECT_FALSE(ids.empty());
        ridge::StreamDecoder dec(*tok);
        std::string back;
        for (int32_t id : ids) back += dec.push(id);
        back += dec.flush();
        EXPECT_EQ(back, text);
    }
}

}  // namespace
