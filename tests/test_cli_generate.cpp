// `ridge generate` and `ridge chat` as a user runs them: stdout carries exactly the prompt and the
// generated text (checked against llama2.c's published stories260K outputs and against the
// transformers greedy continuations for SmolLM2), stderr ends with one statistics line, the
// context end stops generation with a message, and bad input gives one line and a non-zero exit.
#include <gtest/gtest.h>

#include "engine/gpu.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "weights/model_file.h"
#include "weights/model_stats.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/stories260K.bin", "llama2c-stories260K/tok512.bin", "llama2c-stories260K/expected");

namespace {

using cli_test::read_file;
using cli_test::ridge;
using cli_test::RunResult;
using cli_test::expect_one_line_error;

const std::string kData = std::string(RIDGE_TESTDATA_DIR);
const std::string kBin = kData + "/llama2c-stories260K/stories260K.bin";
const std::string kTok = kData + "/llama2c-stories260K/tok512.bin";
const std::string kGguf = kData + "/gguf-stories260K/stories260K.gguf";
const std::string kExpected = kData + "/llama2c-stories260K/expected/";
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";

// The closing statistics line; after the stop reason, when tokens were decoded, the decode step's
// bytes (weights + KV cache), its GB/s and its share of the roofline bound (or how to get one).
const std::regex kStatsLine(
    R"(ridge: prompt (\d+) tokens, [0-9.]+ tokens/s prefill \| generated (\d+) tokens, [0-9.]+ tokens/s decode )"
    R"(\([a-z ]+\)( \| decode [0-9.]+ MB/token, [0-9.]+ GB/s(, [0-9.]+% of bound \([0-9.]+ tokens/s at [0-9.]+ GB/s\))"
    R"(| \(.*`ridge probe.*` for % of bound\)))?)");

// ---- stories260K vs llama2.c ------------------------------------------------------------------
// llama2.c's -n counts positions including BOS and the prompt: for the empty prompt it generates
// n tokens, for "Zoo" (3 tokens after BOS) 60 - 3 = 57; ridge's -n counts generated tokens.

TEST(CliGenerate, Stories260kGreedyMatchesLlama2cFromBothFormats) {
    for (const std::vector<std::string>& model : {std::vector<std::string>{"-m", kBin, "--tokenizer", kTok},
                                                  std::vector<std::string>{"-m", kGguf}}) {
        auto args = [&](std::vector<std::string> extra) {
            std::vector<std::string> a = {"generate"};
            a.insert(a.end(), model.begin(), model.end());
            a.insert(a.end(), extra.begin(), extra.end());
            return a;
        };
        RunResult r = ridge(args({"--temp", "0", "-n", "256"}));
        EXPECT_EQ(r.rc, 0) << r.err;
        EXPECT_EQ(r.out, read_file(kExpected + "run_t0_n256.txt")) << model[1];
        r = ridge(args({"--temp", "0", "-p", "Zoo", "-n", "57"}));
        EXPECT_EQ(r.rc, 0) << r.err;
        EXPECT_EQ(r.out, read_file(kExpected + "run_t0_n60_i_Zoo.txt")) << model[1];
        const auto lines = r.err_lines();
        ASSERT_FALSE(lines.empty());
        std::smatch m;
        ASSERT_TRUE(std::regex_match(lines.back(), m, kStatsLine)) << lines.back();
        EXPECT_EQ(m[1], "4");   // BOS + 3 prompt tokens
        EXPECT_EQ(m[2], "57");
    }
}

TEST(CliGenerate, Llama2cSamplerReproducesPublishedSampledText) {
    const RunResult r = ridge({"generate", "-m", kBin, "--tokenizer", kTok, "--sampler", "llama2c", "--temp", "1.0",
                         "--top-p", "0.9", "--seed", "133742", "-n", "256"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, read_file(kExpected + "run_t1.0_p0.9_s133742_n256.txt"));
}

TEST(CliGenerate, StopsAtTheEndOfTheContextWithAMessage) {
    // Context 20: BOS and 19 generated tokens fill it; the 20th is sampled from the last position.
    const RunResult r = ridge({"generate", "-m", kGguf, "--temp", "0", "-c", "20"});
    EXPECT_EQ(r.rc, 0) << r.err;
    const std::string full = read_file(kExpected + "run_t0_n200.txt");
    ASSERT_FALSE(r.out.empty());
    EXPECT_EQ(full.substr(0, r.out.size()), r.out);  // a prefix of llama2.c's text
    EXPECT_NE(r.err.find("end of the context"), std::string::npos) << r.err;
    std::smatch m;
    const auto lines = r.err_lines();
    ASSERT_TRUE(std::regex_match(lines.back(), m, kStatsLine)) << lines.back();
    EXPECT_EQ(m[2], "20");
}

TEST(CliGenerate, DumpDirWritesNamedIntermediates) {
    const std::string dir = ::testing::TempDir() + "ridge_dump_" + std::to_string(getpid());
    const RunResult r = ridge({"generate", "-m", kGguf, "--temp", "0", "-p", "Zoo", "-n", "2", "--dump-dir", dir});
    ASSERT_EQ(r.rc, 0) << r.err;
    // Prefill (BOS + 3 tokens) and one decode step: 5 rows of d = 64 floats in layer.2.attn_norm.
    EXPECT_EQ(read_file(dir + "/layer.2.attn_norm.f32").size(), size_t(5 * 64 * 4));
    EXPECT_EQ(read_file(dir + "/logits.f32").size(), size_t(2 * 512 * 4));  // last row of each call
    EXPECT_NE(read_file(dir + "/manifest.txt").find("layer.4.ffn_out 64"), std::string::npos);
}

// ---- decode GB/s and % of bound ----------------------------------------------------------------
// Against a probe file the test writes (20 GB/s, 100 GFLOP/s): the decode step's bytes are the
// weights `ridge info` counts plus the KV cache read and written, GB/s is those bytes times the
// decode tokens/s, and the bound is bandwidth / bytes (stories260K decodes far below I* = 5).

const std::regex kRooflineTail(
    R"(tokens/s decode \(token limit\) \| decode ([0-9.]+) MB/token, ([0-9.]+) GB/s, ([0-9.]+)% of bound )"
    R"(\(([0-9.]+) tokens/s at 20\.0 GB/s\)$)");

// -c is the context and -b the prompt tokens per pass on every command (llama.cpp's meanings):
// explain's -c is --ctx-size too, generate takes -b; -b 0 is refused naming -b.
TEST(CliUsage, OneMeaningOfDashCAndDashB) {
    const RunResult by_short = ridge({"explain", "-m", kGguf, "-c", "300"});
    const RunResult by_long = ridge({"explain", "-m", kGguf, "--ctx-size", "300"});
    ASSERT_EQ(by_short.rc, 0) << by_short.err;
    EXPECT_EQ(by_short.out, by_long.out);
    EXPECT_NE(by_short.out.find("attending to c = 300 positions"), std::string::npos) << by_short.out;
    const RunResult b = ridge({"generate", "-m", kGguf, "--temp", "0", "-p", "Zoo", "-n", "8", "-b", "2"});
    EXPECT_EQ(b.rc, 0) << b.err;
    expect_one_line_error({"generate", "-m", kGguf, "-p", "Zoo", "-b", "0"}, "-b/--batch 0");
}

// The untimed warm-up pass (on by default, as llama.cpp's) changes no token and leaves the
// statistics to the prompt's own pass: the same text with and without it.
TEST(CliGenerate, TheWarmUpChangesNothingButTheTimes) {
    const RunResult warm = ridge({"generate", "-m", kGguf, "--temp", "0", "-p", "Zoo", "-n", "57", "-t", "2"});
    const RunResult cold = ridge({"generate", "-m", kGguf, "--temp", "0", "-p", "Zoo", "-n", "57", "-t", "2", "--no-warmup"});
    ASSERT_EQ(warm.rc, 0) << warm.err;
    ASSERT_EQ(cold.rc, 0) << cold.err;
    EXPECT_EQ(warm.out, read_file(kExpected + "run_t0_n60_i_Zoo.txt"));
    EXPECT_EQ(cold.out, warm.out);
    for (const RunResult* r : {&warm, &cold}) {
        EXPECT_NE(r->err.find("ridge: prompt 4 tokens"), std::string::npos) << r->err;
        EXPECT_NE(r->err.find("generated 57 tokens"), std::string::npos) << r->err;
    }
}

TEST(CliGenerate, StatsLineHasDecodeBandwidthAndShareOfBound) {
    const std::string probe = cli_test::write_probe(20.0, 100.0);
    const std::string text = read_file(probe);
    const RunResult r = ridge({"generate", "-m", kGguf, "--temp", "0", "-p", "Zoo", "-n", "57",
                                                   "-t", "2"},
                                                  {{"RIDGE_PROBE_FILE", probe}});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, read_file(kExpected + "run_t0_n60_i_Zoo.txt"));  // stdout: the text alone, as before
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 3u) << r.err;  // load info (2 lines), statistics
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines.back(), m, kStatsLine)) << lines.back();
    const std::string& last = lines.back();
    ASSERT_TRUE(std::regex_search(last, m, kRooflineTail)) << last;
    const double mb = std::stod(m[1]), gbs = std::stod(m[2]), pct = std::stod(m[3]), bound = std::stod(m[4]);
    std::smatch d;
    ASSERT_TRUE(std::regex_search(last, d, std::regex(R"(([0-9.]+) tokens/s decode)")));
    const double tps = std::stod(d[1]);
    ASSERT_GT(tps, 0.0);

    // 57 tokens generated from the 4-token prompt: the first from the prompt's logits, the last
    // not fed, so 56 decode steps at positions 4..59, each reading the keys and values of
    // positions 0..p (p + 1 of them, 32.5 on average) and writing its own.
    const auto file = ridge::ModelFile::open(kGguf);
    const ridge::ModelStats stats = ridge::compute_stats(*file);
    const ridge::Config& c = file->config();
    const double per_pos = 2.0 * c.n_layers * c.n_kv_heads * c.head_dim * 4;  // f32
    const double bytes = double(stats.decode_bytes_per_token) + per_pos * (32.5 + 1);
    EXPECT_NEAR(mb, bytes / 1e6, 0.0051) << last;
    EXPECT_NEAR(gbs, bytes * tps / 1e9, 0.0051 + 1e-4 * gbs) << last;
    EXPECT_NEAR(bound, 20.0e9 / bytes, 0.051) << last;
    EXPECT_NEAR(pct, 100.0 * tps / (20.0e9 / bytes), 0.051 + 1e-4 * pct) << last;
    EXPECT_EQ(read_file(probe), text);  // only read
}

// No probe saved for this thread count: the line says how to get the bound; generate measures
// nothing and writes no file. A malformed file is named on a line of its own.
TEST(CliGenerate, StatsLineWithoutASavedProbe) {
    const std::string absent = cli_test::scratch("absent/probe.json");
    const std::vector<std::string> args = {"generate", "-m", kGguf, "--temp", "0", "-p", "Zoo", "-n", "8", "-t", "2"};
    RunResult r = ridge(args, {{"RIDGE_PROBE_FILE", absent}});
    ASSERT_EQ(r.rc, 0) << r.err;
    auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 3u) << r.err;
    EXPECT_TRUE(std::regex_match(lines.back(), kStatsLine)) << lines.back();
    EXPECT_NE(lines.back().find(" GB/s (run `ridge probe` for % of bound)"), std::string::npos) << lines.back();
    EXPECT_FALSE(std::filesystem::exists(absent));

    const std::string other = cli_test::write_probe(20.0, 100.0, /*threads=*/4);
    r = ridge(args, {{"RIDGE_PROBE_FILE", other}});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_TRUE(std::regex_match(r.err_lines().back(), kStatsLine)) << r.err;
    EXPECT_NE(r.err.find("(the saved probe is for 4 threads: run `ridge probe -t 2` for % of bound)"),
              std::string::npos)
        << r.err;

    const std::string corrupt = cli_test::scratch("corrupt.json");
    std::ofstream(corrupt, std::ios::binary) << "{\"threads\": ";
    r = ridge(args, {{"RIDGE_PROBE_FILE", corrupt}});
    ASSERT_EQ(r.rc, 0) << r.err;
    lines = r.err_lines();
    ASSERT_EQ(lines.size(), 4u) << r.err;
    EXPECT_NE(lines[2].find(corrupt + ": malformed probe file"), std::string::npos) << lines[2];
    EXPECT_TRUE(std::regex_match(lines.back(), kStatsLine)) << lines.back();
    EXPECT_EQ(r.out, read_file(kExpected + "run_t0_n60_i_Zoo.txt").substr(0, r.out.size()));
}

// ---- SmolLM2 vs transformers ------------------------------------------------------------------

nlohmann::json goldens() {
    std::ifstream in(std::string(RIDGE_TESTS_DIR) + "/data/smollm2/goldens.json");
    return nlohmann::json::parse(in);
}

const nlohmann::json& prompt_named(const nlohmann::json& g, const std::string& name) {
    for (const auto& p : g["prompts"])
        if (p["name"] == name) return p;
    throw std::runtime_error("no golden prompt " + name);
}

TEST(CliGenerate, SmolLM2GreedyTextIsTheTransformersContinuation) {
    const auto g = goldens();
    const auto& p = prompt_named(g, "english");
    const std::string prompt = p["text"], cont = p["greedy_text"];
    const RunResult r = ridge({"generate", "-m", kSmol, "-p", prompt, "--temp", "0", "-n", "64", "-t", "2"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, prompt + cont);
    std::smatch m;
    const auto lines = r.err_lines();
    ASSERT_TRUE(std::regex_match(lines.back(), m, kStatsLine)) << lines.back();
    EXPECT_EQ(m[1], std::to_string(p["ids"].size()));
    EXPECT_EQ(m[2], "64");
}

// --stop: the text ends just before the first stop string (the Hugging Face continuation cut there)
// and generation ends with it; the statistics say why.
TEST(CliGenerate, StopEndsTheTextJustBeforeTheStopString) {
    const auto g = goldens();
    const auto& p = prompt_named(g, "english");
    const std::string prompt = p["text"], cont = p["greedy_text"];
    ASSERT_GT(cont.size(), 12u);
    const std::string stop = cont.substr(8, 3);
    const RunResult r = ridge({"generate", "-m", kSmol, "-p", prompt, "--temp", "0", "-n", "64", "-t", "2", "--stop",
                               "never in it", "--stop", stop});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, prompt + cont.substr(0, cont.find(stop)));
    EXPECT_NE(r.err.find("(stop string)"), std::string::npos) << r.err;
    const RunResult bad = ridge({"generate", "-m", kSmol, "-p", prompt, "--stop", ""});
    EXPECT_NE(bad.rc, 0);
}

TEST(CliChat, FirstReplyIsTheTransformersContinuationAndTurnsContinue) {
    // The golden "chat" prompt is exactly what `ridge chat` sends for this message without
    // --system (the template's default system message, then the user turn, then the assistant
    // prefix), so the first greedy reply, cut at 16 tokens, starts the golden continuation.
    const auto g = goldens();
    const auto& p = prompt_named(g, "chat");
    const std::string cont = p["greedy_text"];
    const std::string question = "Explain in two sentences why the sky is blue.";
    const RunResult r = ridge({"chat", "-m", kSmol, "--temp", "0", "-n", "16", "-c", "1024"}, {},
                              question + "\nAnd why is the sunset red?\n");
    ASSERT_EQ(r.rc, 0) << r.err;
    const size_t end_first = r.out.find('\n');
    ASSERT_NE(end_first, std::string::npos) << r.out;
    const std::string first = r.out.substr(0, end_first);
    EXPECT_GT(first.size(), 40u) << first;
    EXPECT_EQ(cont.substr(0, first.size()), first);
    EXPECT_GT(r.out.size() - end_first, 20u) << "no second reply: " << r.out;
    // Both turns stay in one KV cache: 40 prompt tokens + 16 + the second turn and its reply.
    std::smatch m;
    const auto lines = r.err_lines();
    ASSERT_FALSE(lines.empty());
    ASSERT_TRUE(std::regex_search(lines.back(), m, std::regex(R"(ridge: (\d+) tokens in the context)"))) << r.err;
    EXPECT_GT(std::stoi(m[1]), 40 + 16 + 10);
}

TEST(CliChat, ContextFullEndsTheChatWithAMessage) {
    const RunResult r = ridge({"chat", "-m", kSmol, "--temp", "0", "-n", "8", "-c", "64"}, {},
                        "Tell me a story about a dragon who learns to fly over the mountains.\nAnd then?\nMore!\n");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("context is full"), std::string::npos) << r.err;
}

TEST(CliChat, EndOfInputExitsCleanly) {
    const RunResult r = ridge({"chat", "-m", kGguf}, {}, "");
    // stories260K has no <|im_start|>: chat refuses it with one line.
    EXPECT_NE(r.rc, 0);
    EXPECT_EQ(r.err_lines().size(), 1u) << r.err;
    const RunResult s = ridge({"chat", "-m", kSmol}, {}, "");
    EXPECT_EQ(s.rc, 0) << s.err;
    EXPECT_EQ(s.out, "");
}

// ---- bad input ------------------------------------------------------------------------------

TEST(CliGenerate, BadInputGivesOneLineAndNonZeroExit) {
    const std::string long_prompt(400, 'a');
    expect_one_line_error({"generate", "-m", kGguf, "-c", "16", "-p", "Once upon a time there was a big dog and a small cat"},
                          "longer than the context");
    expect_one_line_error({"generate", "-m", kGguf, "-c", "32", "-n", "100"}, "passes the context");
    expect_one_line_error({"generate", "-m", "/nonexistent/model.gguf"}, "/nonexistent/model.gguf");
    expect_one_line_error({"generate", "-m", kData}, kData);  // a directory
    expect_one_line_error({"generate", "-m", kBin}, "--tokenizer");
    expect_one_line_error({"generate", "-m", kGguf, "--temp", "-1"}, "--temp");
    expect_one_line_error({"generate", "-m", kGguf, "--temp=-0.5"}, "--temp");
    expect_one_line_error({"generate", "-m", kGguf, "--top-p", "0"}, "--top-p");
    expect_one_line_error({"generate", "-m", kGguf, "--top-p", "1.5"}, "--top-p");
    expect_one_line_error({"generate", "-m", kGguf, "--top-k=-1"}, "--top-k");
    expect_one_line_error({"generate", "-m", kGguf, "-c", "0"}, "-c");
    expect_one_line_error({"generate", "-m", kGguf, "-c", "100000"}, "context of 2048");
    expect_one_line_error({"generate", "-m", kGguf, "-t", "0"}, "--threads");
    expect_one_line_error({"generate", "-m", kGguf, "--kv-type", "q8"}, "--kv-type");
    expect_one_line_error({"generate", "-m", kGguf, "--bogus-flag"}, "--bogus-flag");
    expect_one_line_error({"generate", "-p", "hi"}, "--model");
}

// The prompt from a file (-f), from stdin (-p -) or with escapes (-e) is the same prompt: the same
// stdout as -p with the text itself.
TEST(CliGenerate, PromptFromAFileFromStdinOrWithEscapes) {
    const std::string text = "Once upon a time\nthere was";
    const RunResult want = ridge({"generate", "-m", kGguf, "-p", text, "-n", "8", "--temp", "0"});
    ASSERT_EQ(want.rc, 0) << want.err;
    const std::string file = cli_test::scratch("prompt.txt");
    std::ofstream(file, std::ios::binary) << text;
    const RunResult from_file = ridge({"generate", "-m", kGguf, "-f", file, "-n", "8", "--temp", "0"});
    EXPECT_EQ(from_file.out, want.out) << from_file.err;
    const RunResult from_stdin = ridge({"generate", "-m", kGguf, "-p", "-", "-n", "8", "--temp", "0"}, {}, text);
    EXPECT_EQ(from_stdin.out, want.out) << from_stdin.err;
    const RunResult escaped = ridge({"generate", "-m", kGguf, "-p", "Once upon a time\\nthere was", "-e", "-n", "8", "--temp", "0"});
    EXPECT_EQ(escaped.out, want.out) << escaped.err;
    expect_one_line_error({"generate", "-m", kGguf, "-f", "/tmp"}, "/tmp: prompt file is a directory");
    expect_one_line_error({"generate", "-m", kGguf, "-f", file, "-p", "x"}, "excludes");
}

// Exit codes as scripts expect them: 2 for a usage error (an unknown command or option, a bad value),
// with the nearest name where there is one; 1 for an error while running; 0 for --help.
TEST(CliUsage, UsageErrorsExit2WithDidYouMeanAndRunErrorsExit1) {
    auto expect = [](const std::vector<std::string>& args, int rc, const std::string& mention) {
        const RunResult r = ridge(args);
        EXPECT_EQ(r.rc, rc) << r.err;
        EXPECT_EQ(r.err_lines().size(), 1u) << r.err;
        EXPECT_NE(r.err.find(mention), std::string::npos) << r.err;
    };
    expect({"bnech"}, 2, "unknown command 'bnech' (did you mean 'bench'?)");
    expect({"frobnicate"}, 2, "unknown command 'frobnicate'; the commands are info, tokenize, template, generate");
    expect({"generate", "-m", kGguf, "--temperature", "0.5"}, 2, "(did you mean --temp?)");
    expect({"generate", "-m", kGguf, "--top_k", "3"}, 2, "(did you mean --top-k?)");
    expect({"generate", "-m", kGguf, "-n", "many"}, 2, "--n-predict");
    expect({"generate", "-m", "/nonexistent/model.gguf"}, 1, "/nonexistent/model.gguf");
    EXPECT_EQ(ridge({"generate", "--help"}).rc, 0);
    EXPECT_EQ(ridge({"--version"}).rc, 0);
}

// llama.cpp's -ngl: 0 keeps the model on the CPU (the same text), N > 0 asks for CUDA, which without
// a GPU is the one-line error of --device cuda.
TEST(CliUsage, NglIsTheDeviceAsLlamaCppSpellsIt) {
    const RunResult cpu = ridge({"generate", "-m", kGguf, "-p", "Once upon", "-n", "8", "--temp", "0", "-ngl", "0"});
    ASSERT_EQ(cpu.rc, 0) << cpu.err;
    EXPECT_EQ(cpu.out, ridge({"generate", "-m", kGguf, "-p", "Once upon", "-n", "8", "--temp", "0"}).out);
    if (ridge::gpu::available()) GTEST_SKIP() << "this machine has a GPU";
    const RunResult gpu = ridge({"generate", "-m", kGguf, "-p", "Once upon", "-n", "8", "-ngl", "99"});
    const RunResult dev = ridge({"generate", "-m", kGguf, "-p", "Once upon", "-n", "8", "--device", "cuda"});
    EXPECT_EQ(gpu.rc, 1);
    EXPECT_EQ(gpu.err, dev.err);
    EXPECT_EQ(gpu.err_lines().size(), 1u) << gpu.err;
    EXPECT_EQ(ridge({"generate", "-m", kGguf, "-ngl", "0", "--device", "cuda"}).rc, 1);  // they disagree
}

TEST(CliGenerate, GarbageModelFileGivesOneLine) {
    const std::string path = ::testing::TempDir() + "ridge_garbage_" + std::to_string(getpid()) + ".bin";
    std::ofstream(path, std::ios::binary) << std::string(1000, '\x07');
    expect_one_line_error({"generate", "-m", path, "--tokenizer", kTok}, path);
}

}  // namespace
