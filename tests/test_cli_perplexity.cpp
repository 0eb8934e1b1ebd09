// `ridge perplexity`: the printed number is the engine's for the same tokens; the fast path held to
// the exact one over the perplexity text through --kl-base / --kl (mean KL <= 1e-3, top-1 >= 99%);
// --exact changes nothing for an F32 model; bad input gives one-line errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <regex>

#include "cli_test_util.h"
#include "measure/perplexity.h"
#include "engine_test_util.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/expected/run_t0_n256.txt");

namespace ridge {
namespace {

using cli_test::expect_one_line_error;
using cli_test::ridge;

const std::string kData = std::string(RIDGE_TESTDATA_DIR);
const std::string kStories = kData + "/gguf-stories260K/stories260K.gguf";
const std::string kStoriesText = kData + "/llama2c-stories260K/expected/run_t0_n256.txt";
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kShakespeare = std::string(RIDGE_TESTS_DIR) + "/data/text/tinyshakespeare-head.txt";

// The closing line: "perplexity P ± E over N tokens in W windows of C".
struct Closing {
    double ppl = 0, err = 0;
    long tokens = 0, windows = 0, n_ctx = 0;
};
Closing closing(const std::string& out) {
    static const std::regex re(R"(perplexity ([0-9.]+) ± ([0-9.]+) over ([0-9]+) tokens in ([0-9]+) windows of ([0-9]+)\n$)");
    std::smatch m;
    Closing c;
    EXPECT_TRUE(std::regex_search(out, m, re)) << out;
    if (m.empty()) return c;
    c.ppl = std::stod(m[1]), c.err = std::stod(m[2]);
    c.tokens = std::stol(m[3]), c.windows = std::stol(m[4]), c.n_ctx = std::stol(m[5]);
    return c;
}

TEST(CliPerplexity, PrintsTheEnginesNumberForTheFilesTokens) {
    const cli_test::RunResult r = ridge({"perplexity", "-m", kStories, "-f", kStoriesText, "-c", "64"});
    ASSERT_EQ(r.rc, 0) << r.err;
    const Closing c = closing(r.out);
    // The same text through the library: tokenized with the model's BOS rule, 64-token windows.
    const test::Loaded& l = test::load(kStories);
    const auto tok = Tokenizer::from_gguf(*l.file->gguf());
    const std::vector<int32_t> ids =
        tok->encode(cli_test::read_file(kStoriesText), tok->add_bos_default(), /*parse_special=*/false);
    PerplexityOptions o;
    o.n_ctx = 64;
    o.bos = tok->add_bos_default() ? tok->bos_id() : -1;
    const PerplexityResult want = perplexity(l.engine(), ids, o);
    EXPECT_EQ(c.windows, want.windows);
    EXPECT_EQ(c.tokens, want.scored);
    EXPECT_EQ(c.n_ctx, 64);
    EXPECT_NEAR(c.ppl, want.ppl(), 1e-4 * want.ppl());  // printed to 4 decimals
    EXPECT_NEAR(c.err, want.ppl_error(), 1e-4 + 1e-4 * want.ppl_error());
    // Progress: one "[w/W]" line per window on stderr after the header.
    EXPECT_NE(r.err.find("[1/" + std::to_string(want.windows) + "]"), std::string::npos) << r.err;
}

double number_after(const std::string& text, const std::string& label) {
    const size_t at = text.find(label);
    EXPECT_NE(at, std::string::npos) << label << " in " << text;
    return at == std::string::npos ? NAN : std::stod(text.substr(at + label.size()));
}

// The CPU performance issue's bound on the fast path: against the exact path over the perplexity
// text, mean KL divergence <= 1e-3 and top-1 agreement >= 99%. -b 8 keeps every forward pass
// below the tiled prefill's threshold, so the fast run's matmuls take 16-bit integer activations
// as decode does. Two windows (510 positions) keep the base file at 100 MB (the sanitizer build:
// one window of 128).
TEST(CliPerplexity, FastPathWithinTheKLBoundOfTheExactPath) {
    const std::string base = cli_test::scratch("exact.kl");
    const std::vector<std::string> text = {"-f", kShakespeare, "--chunks", test::kSanitized ? "1" : "2", "-c",
                                           test::kSanitized ? "128" : "512"};
    auto args = [&](std::vector<std::string> a) {
        a.insert(a.begin() + 1, text.begin(), text.end());
        return a;
    };
    const cli_test::RunResult a = ridge(args({"perplexity", "-m", kSmol, "--exact", "--kl-base", base}));
    ASSERT_EQ(a.rc, 0) << a.err;
    EXPECT_NE(a.out.find(test::kSanitized ? "of 63 positions" : "of 510 positions"), std::string::npos) << a.out;
    const cli_test::RunResult b = ridge(args({"perplexity", "-m", kSmol, "-b", "8", "--kl", base}));
    ASSERT_EQ(b.rc, 0) << b.err;
    const double kl = number_after(b.out, "mean KL divergence "), top1 = number_after(b.out, "top-1 agreement ");
    EXPECT_LE(kl, 1e-3);
    EXPECT_GE(top1, 99.0);
    EXPECT_GT(kl, 0.0);  // the fast path really ran
    // The two perplexities agree as closely.
    EXPECT_NEAR(closing(b.out).ppl, closing(a.out).ppl, 1e-3 * closing(a.out).ppl);
    // The exact path against itself: no divergence at all.
    const cli_test::RunResult c = ridge(args({"perplexity", "-m", kSmol, "--exact", "--kl", base}));
    ASSERT_EQ(c.rc, 0) << c.err;
    EXPECT_EQ(number_after(c.out, "mean KL divergence "), 0.0);
    EXPECT_EQ(number_after(c.out, "top-1 agreement "), 100.0);
    // A base of another window count does not compare.
    expect_one_line_error({"perplexity", "-m", kSmol, "-f", kShakespeare, "--chunks", "1", "-c", "256", "--kl", base},
                          "another text");
    std::remove(base.c_str());
}

TEST(CliPerplexity, ExactChangesNothingForAnF32Model) {
    // stories260K is F32: no matmul has an integer kernel, so --exact gives the same greedy text.
    const cli_test::RunResult a = ridge({"generate", "-m", kStories, "-p", "Once upon a time", "-n", "60", "--temp", "0"});
    const cli_test::RunResult b =
        ridge({"generate", "-m", kStories, "-p", "Once upon a time", "-n", "60", "--temp", "0", "--exact"});
    ASSERT_EQ(a.rc, 0) << a.err;
    EXPECT_GT(a.out.size(), 100u);
    EXPECT_EQ(a.out, b.out);
}

TEST(CliPerplexity, BadInputGivesOneLineErrors) {
    const std::string bad_utf8 = cli_test::scratch("bad.txt");
    {
        std::FILE* fp = std::fopen(bad_utf8.c_str(), "wb");
        std::fputs("Once upon a time \xff there was", fp);
        std::fclose(fp);
    }
    expect_one_line_error({"perplexity", "-m", kStories}, "--file");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", "/nonexistent/text.txt"}, "/nonexistent/text.txt");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", bad_utf8}, "UTF-8");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "-c", "512"}, "fewer than one window");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "-c", "4096"}, "training context");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "-c", "63"}, "even");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "-c", "64", "-b", "0"}, "-b");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "--kl", "a", "--kl-base", "b"}, "--kl");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "-c", "64", "--kl", kStoriesText},
                          "not a ridge KL base");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "-c", "64", "--kl-base", "/nonexistent/x.kl"},
                          "/nonexistent/x.kl");
    expect_one_line_error({"perplexity", "-m", kStories, "-f", kStoriesText, "-t", "0"}, "--threads");
}

}  // namespace
}  // namespace ridge
