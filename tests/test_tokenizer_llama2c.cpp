// The llama2.c tokenizer .bin: the expected ids of llama2.c's own test.c for the Llama 2
// vocabulary (32000), decoding as run.c does, the stories260K vocabulary (512) against the same
// vocabulary as GGUF, and loud errors for bad files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tokenizer/tokenizer.h"
#include "weights/error.h"
#include "weights/gguf.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/tok512.bin", "llama2c-tokenizer/tokenizer.bin", "llamacpp-vocab/ggml-vocab-llama-spm.gguf");

namespace {

const std::string kData = RIDGE_TESTDATA_DIR;
const std::string kLlama2Bin = kData + "/llama2c-tokenizer/tokenizer.bin";
const std::string kTok512 = kData + "/llama2c-stories260K/tok512.bin";

std::string decode_all(const ridge::Tokenizer& tok, const std::vector<int32_t>& ids) {
    ridge::StreamDecoder dec(tok);
    std::string out;
    for (int32_t id : ids) out += dec.push(id);
    return out + dec.flush();
}

// Expected ids from karpathy/llama2.c test.c (commit 7b0017c6cdb15fede07d60e1c2e877473131be88,
// test_prompt_encodings), which encodes with BOS and without EOS. The prompts come from Meta's
// Llama 2 example_text_completion.py; test 0 (the empty string) is Karpathy's own.
struct Llama2cCase {
    const char* prompt;
    std::vector<int32_t> ids;
};
const Llama2cCase kTestC[] = {
    {"", {1}},
    {"I believe the meaning of life is", {1, 306, 4658, 278, 6593, 310, 2834, 338}},
    {"Simply put, the theory of relativity states that ",
     {1, 3439, 17632, 1925, 29892, 278, 6368, 310, 14215, 537, 5922, 393, 29871}},
    {"A brief message congratulating the team on the launch:\n\n        Hi everyone,\n\n        I just ",
     {1, 319, 11473, 2643, 378, 629, 271, 18099, 278, 3815, 373, 278, 6826, 29901, 13, 13, 4706, 6324, 14332, 29892, 13,
      13, 4706, 306, 925, 29871}},
    {"Translate English to French:\n\n        sea otter => loutre de mer\n        peppermint => menthe poivrée\n        "
     "plush girafe => girafe peluche\n        cheese =>",
     {1,   4103, 9632, 4223, 304,  5176, 29901, 13,   13,  4706, 7205, 4932, 357,  1149, 301,   449, 276,
      316, 2778, 13,   4706, 1236, 407,  837,   524,  1149, 6042, 354, 772,  440,  29878, 1318, 13,  4706,
      715, 1878, 330,  3055, 1725, 1149, 330,   3055, 1725, 4639, 28754, 13,  4706, 923,   968,  1149}},
};

TEST(Llama2cTokenizer, MatchesLlama2cTestC) {
    auto tok = ridge::Tokenizer::from_llama2c(kLlama2Bin, 32000);
    EXPECT_EQ(tok->n_vocab(), 32000);
    EXPECT_EQ(tok->bos_id(), 1);
    EXPECT_EQ(tok->eos_id(), 2);
    for (const auto& c : kTestC) {
        EXPECT_EQ(tok->encode(c.prompt, /*add_bos=*/true, /*parse_special=*/false), c.ids) << "prompt: " << c.prompt;
    }
}

TEST(Llama2cTokenizer, DecodesLikeRunC) {
    auto tok = ridge::Tokenizer::from_llama2c(kLlama2Bin, 32000);
    // The leading space of the first piece after BOS goes; the dummy-prefix space never shows.
    for (const auto& c : kTestC) EXPECT_EQ(decode_all(*tok, c.ids), c.prompt);
    // Without BOS in front, a piece keeps its space.
    EXPECT_EQ(tok->decode_piece(-1, 306), " I");
    EXPECT_EQ(tok->decode_piece(1, 306), "I");
    // <0x0A> is byte 10.
    EXPECT_EQ(tok->token_text(13), "<0x0A>");
    EXPECT_EQ(tok->decode_piece(1, 13), "\n");
    EXPECT_TRUE(tok->is_end_of_generation(1));  // run.c stops at BOS
    EXPECT_TRUE(tok->is_end_of_generation(2));
    EXPECT_FALSE(tok->is_end_of_generation(306));
}

TEST(Llama2cTokenizer, ByteFallbackForCharactersNotInTheVocabulary) {
    auto tok = ridge::Tokenizer::from_llama2c(kLlama2Bin, 32000);
    // U+1F999 (llama) is not a Llama 2 token: its four UTF-8 bytes F0 9F A6 99 become ids byte + 3.
    const auto ids = tok->encode("\xF0\x9F\xA6\x99", true, false);
    EXPECT_EQ(ids, (std::vector<int32_t>{1, 29871, 0xF0 + 3, 0x9F + 3, 0xA6 + 3, 0x99 + 3}));
    EXPECT_EQ(decode_all(*tok, ids), "\xF0\x9F\xA6\x99");  // the dummy " " after BOS is dropped
}

// stories260K's 512-token vocabulary in llama2.c form and as GGUF (same tokens and scores):
// llama2.c's encode and the SentencePiece-style GGUF path must agree.
TEST(Llama2cTokenizer, Tok512AgreesWithStories260kGguf) {
    auto bin = ridge::Tokenizer::from_llama2c(kTok512, 512);
    auto gguf = ridge::GGUFFile::open(kData + "/gguf-stories260K/stories260K.gguf");
    auto spm = ridge::Tokenizer::from_gguf(*gguf);
    ASSERT_EQ(spm->n_vocab(), 512);
    const char* texts[] = {"Once upon a time, there was a little girl named Lily.",
                           "Zoo",
                           "There was a big",
                           "She said, \"I'm sorry, mom. I didn't know what to do.\"\nThe end.",
                           "  two spaces, a tab\tand unicode: caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC"};
    for (const char* t : texts) {
        const auto a = bin->encode(t, true, false);
        const auto b = spm->encode(t, true, false);
        EXPECT_EQ(a, b) << t;
        EXPECT_EQ(decode_all(*bin, a), t);
        EXPECT_EQ(decode_all(*spm, b), t);
    }
    // Hand-checked: "Zoo" after the dummy space.
    const auto zoo = bin->encode("Zoo", true, false);
    ASSERT_GE(zoo.size(), 2u);
    EXPECT_EQ(zoo[0], 1);
    std::string joined;
    for (size_t i = 1; i < zoo.size(); ++i) joined += bin->token_text(zoo[i]);
    EXPECT_EQ(joined, " Zoo");
}

// The Llama 2 vocabulary in llama2.c form and as llama.cpp's GGUF test vocabulary: on llama.cpp's
// tokenizer test strings, llama2.c's encode must agree with the SentencePiece-style GGUF path.
TEST(Llama2cTokenizer, Llama2BinAgreesWithLlamaSpmGguf) {
    auto bin = ridge::Tokenizer::from_llama2c(kLlama2Bin, 32000);
    auto gguf = ridge::GGUFFile::open(kData + "/llamacpp-vocab/ggml-vocab-llama-spm.gguf");
    auto spm = ridge::Tokenizer::from_gguf(*gguf);
    std::ifstream in(kData + "/llamacpp-vocab/ggml-vocab-llama-spm.gguf.inp", std::ios::binary);
    const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string sep = "\n__ggml_vocab_test__\n";
    int compared = 0;
    for (size_t begin = 0; begin < all.size();) {
        size_t end = all.find(sep, begin);
        if (end == std::string::npos) end = all.size();
        const std::string text = all.substr(begin, end - begin);
        begin = end == all.size() ? end : end + sep.size();
        EXPECT_EQ(bin->encode(text, true, false), spm->encode(text, true, false)) << text;
        ++compared;
    }
    EXPECT_GT(compared, 40);
}

TEST(Llama2cTokenizer, BadFilesGiveOneLineErrors) {
    EXPECT_THROW(ridge::Tokenizer::from_llama2c("/nonexistent/tokenizer.bin", 32000), ridge::Error);
    // The file has 512 tokens: asking for more runs off its end.
    try {
        ridge::Tokenizer::from_llama2c(kTok512, 513);
        FAIL() << "expected ridge::Error";
    } catch (const ridge::Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("tok512.bin"), std::string::npos) << msg;
        EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
        EXPECT_NE(msg.find("token 512"), std::string::npos) << msg;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    }
    EXPECT_THROW(ridge::Tokenizer::from_llama2c(kTok512, 0), ridge::Error);

    // A record whose length is negative.
    const std::string path = testing::TempDir() + "bad_tokenizer_" + std::to_string(::getpid()) + ".bin";
    {
        std::ofstream out(path, std::ios::binary);
        const int32_t max_len = 8, len = -5;
        const float score = 0;
        out.write(reinterpret_cast<const char*>(&max_len), 4);
        out.write(reinterpret_cast<const char*>(&score), 4);
        out.write(reinterpret_cast<const char*>(&len), 4);
    }
    EXPECT_THROW(ridge::Tokenizer::from_llama2c(path, 1), ridge::Error);
    std::remove(path.c_str());
}

}  // namespace
