// `--synthetic` through the ridge program: `ridge info` on a synthetic SmolLM2 reports the same
// shape and parameter count as the real GGUF; generate, chat and tokenize run on synthetic models;
// bad names, types and flag combinations give one "ridge: ..." line and a non-zero exit.
#include <gtest/gtest.h>

#include <cstdint>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "test_paths.h"

namespace {

using cli_test::field;
using cli_test::ridge;
using cli_test::RunResult;
using cli_test::type_row;

const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";

TEST(CliSynthetic, InfoMatchesTheRealSmolLM2) {
    const RunResult real = ridge({"info", "-m", kSmol});
    ASSERT_EQ(real.rc, 0) << real.err;
    const RunResult syn = ridge({"info", "--synthetic", "smollm2-135m", "--synthetic-type", "q8_0"});
    ASSERT_EQ(syn.rc, 0) << syn.err;
    EXPECT_EQ(syn.err, "");
    EXPECT_NE(syn.out.find("model: synthetic smollm2-135m (q8_0, seed 1)"), std::string::npos) << syn.out;
    EXPECT_NE(syn.out.find("format: synthetic"), std::string::npos) << syn.out;
    for (const char* f : {"n_embd", "n_layers", "n_ff", "n_heads", "n_kv_heads", "head_dim", "n_vocab", "n_ctx_train",
                          "rope_dim", "rope_freq_base", "parameters"})
        EXPECT_EQ(field(syn.out, f), field(real.out, f)) << f;
    EXPECT_EQ(field(syn.out, "parameters"), 134515008);
    EXPECT_NE(syn.out.find("tied_output: yes"), std::string::npos);

    // Every matrix and the embedding in Q8_0 (34 bytes per 32 weights), norms in F32.
    const int64_t d = 576, L = 30, norms = 2 * L * d + d, matrices = 134515008 - norms;
    EXPECT_EQ(type_row(syn.out, "F32"), (std::vector<int64_t>{2 * L + 1, norms, 4 * norms}));
    EXPECT_EQ(type_row(syn.out, "Q8_0"), (std::vector<int64_t>{7 * L + 1, matrices, matrices / 32 * 34}));
    // Decode reads every weight (the tied embedding is the output head) plus one embedding row.
    EXPECT_EQ(field(syn.out, "decode bytes per token"), 4 * norms + matrices / 32 * 34 + d / 32 * 34);
}

TEST(CliSynthetic, InfoListsTensorsAndTheSeedChangesNothingButBytes) {
    const RunResult a = ridge({"info", "--synthetic", "llama-3.2-1b", "--tensors"});
    ASSERT_EQ(a.rc, 0) << a.err;
    EXPECT_EQ(field(a.out, "parameters"), 1235814400);
    EXPECT_NE(a.out.find("Q4_0"), std::string::npos);  // the default type
    int blk = 0;
    std::istringstream in(a.out);
    for (std::string line; std::getline(in, line);)
        if (line.rfind("  blk.", 0) == 0) blk++;
    EXPECT_EQ(blk, 16 * 9);
    const RunResult b = ridge({"info", "--synthetic", "llama-3.2-1b", "--tensors", "--synthetic-seed", "99"});
    ASSERT_EQ(b.rc, 0) << b.err;
    EXPECT_EQ(a.out.substr(a.out.find("architecture:")), b.out.substr(b.out.find("architecture:")));
}

TEST(CliSynthetic, GenerateRuns) {
    const std::vector<std::string> args = {"generate", "--synthetic", "smollm2-135m", "-n", "4",
                                           "--temp", "0", "-t", "2", "-c", "64"};
    const RunResult r = ridge(args);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("synthetic smollm2-135m (q4_0, seed 1)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("generated 4 tokens"), std::string::npos) << r.err;
    // Greedy decoding of the same weights is repeatable; the text itself is meaningless.
    const RunResult again = ridge(args);
    EXPECT_EQ(again.out, r.out);
    const RunResult q8 = ridge(
        {"generate", "--synthetic", "smollm2-135m", "--synthetic-type", "q8_0", "-p", "hi", "-n", "4", "--temp", "0",
         "-c", "64"});
    ASSERT_EQ(q8.rc, 0) << q8.err;
    EXPECT_EQ(q8.out.rfind("hi", 0), 0u);  // stdout starts with the prompt
}

TEST(CliSynthetic, ChatRuns) {
    const RunResult r =
        ridge({"chat", "--synthetic", "smollm2-135m", "-n", "4", "--temp", "0", "-c", "128"}, {}, "hello\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(ridge: \d+ tokens in the context)"))) << r.err;
}

TEST(CliSynthetic, TokenizeUsesTheByteStandIn) {
    // Builds no weights.
    const RunResult r = ridge({"tokenize", "--synthetic", "llama-3-8b", "-p", "hi <|im_end|>", "--ids"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, "256 104 105 32 60 124 105 109 95 101 110 100 124 62\n");
    const RunResult s = ridge(
        {"tokenize", "--synthetic", "smollm2-135m", "-p", "hi<|im_end|>", "--parse-special", "--no-bos"});
    ASSERT_EQ(s.rc, 0) << s.err;
    EXPECT_EQ(s.out, "104\th\n105\ti\n258\t<|im_end|>\n");
}

void expect_one_line_error(const RunResult& r, const std::vector<std::string>& needles) {
    EXPECT_NE(r.rc, 0);
    EXPECT_EQ(r.out, "");
    ASSERT_FALSE(r.err.empty());
    EXPECT_EQ(r.err.rfind("ridge: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // exactly one line
    for (const std::string& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << n << " in: " << r.err;
}

TEST(CliSynthetic, BadInputGivesOneLineErrors) {
    const std::string names = "smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3-8b";
    const std::string types = "q4_0, q4_1, q5_0, q5_1, q8_0, f16, bf16, f32";
    for (const std::vector<std::string>& cmd : std::vector<std::vector<std::string>>{
             {"info"}, {"generate"}, {"tokenize", "-p", "hi"}, {"chat"}}) {
        std::string words;
        for (const std::string& w : cmd) words += (words.empty() ? "" : " ") + w;
        SCOPED_TRACE(words);
        // ridge with `cmd` and then `extra`.
        auto run = [&](const std::vector<std::string>& extra) {
            std::vector<std::string> args = cmd;
            args.insert(args.end(), extra.begin(), extra.end());
            return ridge(args);
        };
        expect_one_line_error(run({"--synthetic", "llama-9000"}), {"'llama-9000'", names});
        expect_one_line_error(run({"--synthetic", "smollm2-135m", "--synthetic-type", "q4_k"}), {"'q4_k'", types});
        expect_one_line_error(run({}), {"-m/--model", "--synthetic", names});
        expect_one_line_error(run({"-m", kSmol, "--synthetic", "smollm2-135m"}), {"both"});
        expect_one_line_error(run({"-m", kSmol, "--synthetic-type", "q8_0"}), {"--synthetic-type"});
        expect_one_line_error(run({"-m", kSmol, "--synthetic-seed", "3"}), {"--synthetic-seed"});
    }
    expect_one_line_error(ridge({"generate", "--synthetic", "smollm2-135m", "--tokenizer", "tok.bin"}),
                          {"--tokenizer"});
    expect_one_line_error(ridge({"generate", "--synthetic", "smollm2-135m", "--synthetic-seed", "x"}),
                          {"--synthetic-seed"});
}

}  // namespace
