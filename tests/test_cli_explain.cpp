// `ridge explain` as a user runs it on SmolLM2, against a probe file the test writes: the shape of
// every op of a layer and of the output head, each row's memory/compute verdict on the right side
// of the file's ridge point, the KV cache and memory lines, --bandwidth/--peak without any probe
// file, and bad input as one line and a non-zero exit.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace {

using cli_test::ridge;
using cli_test::RunResult;

const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

// One row of the op table: "  name  shape  type  FLOPs  weights  KV  act  FLOP/B  bound  t_min".
struct Row {
    std::string name, line, intensity, bound;
};

// The rows of the tables (every line ending in an intensity, a verdict and a least time).
std::vector<Row> rows(const std::string& out) {
    static const std::regex row(R"(^  (\S+) .* ([0-9.]+|-) +(memory|compute|cache) +[0-9.]+ \S+$)");
    std::vector<Row> r;
    std::stringstream ss(out);
    std::smatch m;
    for (std::string l; std::getline(ss, l);)
        if (std::regex_match(l, m, row)) r.push_back({m[1], l, m[2], m[3]});
    return r;
}

const Row* find_row(const std::vector<Row>& rs, const std::string& name) {
    for (const Row& r : rs)
        if (r.name == name) return &r;
    return nullptr;
}

// Every verdict follows the intensity printed beside it: memory below I*, compute at or above it,
// cache where no weight or KV byte moves.
void expect_verdicts_follow(const std::vector<Row>& rs, double ridge_point) {
    for (const Row& r : rs) {
        if (r.intensity == "-") {
            EXPECT_EQ(r.bound, "cache") << r.line;
            continue;
        }
        const double I = std::stod(r.intensity);
        if (std::abs(I - ridge_point) < 0.01) continue;  // too close to call from two decimals
        EXPECT_EQ(r.bound, I < ridge_point ? "memory" : "compute") << r.line;
    }
}

RunResult explain(const std::vector<std::string>& extra, const std::string& probe) {
    std::vector<std::string> args = {"explain", "-m", kSmol, "-t", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return ridge(args, {{"RIDGE_PROBE_FILE", probe}});
}

TEST(CliExplain, SmolLM2DecodeStepShapesAndVerdicts) {
    const std::string probe = cli_test::write_probe(20.0, 100.0);  // I* = 5
    const RunResult r = explain({}, probe);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");  // the saved probe is used
    EXPECT_NE(r.out.find("machine: 2 threads, bandwidth 20.0 GB/s, peak 100.0 GFLOP/s -> I* = 5.00 FLOP/byte"),
              std::string::npos)
        << r.out;
    for (const char* shape : {"x(1×576) · Wq(576×576)", "x(1×576) · Wk(576×192)", "x(1×576) · Wv(576×192)",
                              "attn(1×576) · Wo(576×576)", "x(1×576) · Wgate(576×1536)", "x(1×576) · Wup(576×1536)",
                              "act(1×1536) · Wdown(1536×576)", "9h × q(1×64) · Kᵀ(64×512)",
                              "9h × p(1×512) · V(512×64)", "x(1×576) · Eᵀ(576×49152)", "1 row of E(49152×576)"})
        EXPECT_NE(r.out.find(shape), std::string::npos) << shape << "\n" << r.out;

    const std::vector<Row> rs = rows(r.out);
    for (const char* op : {"attn_norm", "q", "k", "v", "rope", "kv_store", "attn_scores", "attn_mix", "o",
                           "attn_resid", "ffn_norm", "gate", "up", "swiglu", "down", "ffn_resid", "layer",
                           "all", "embedding", "final_norm", "logits", "pass"})
        EXPECT_NE(find_row(rs, op), nullptr) << op << "\n" << r.out;
    expect_verdicts_follow(rs, 5.0);
    // Q4_1 matvecs: 2 FLOPs per 20/32 byte = 3.20 FLOP/byte, below 5.
    ASSERT_NE(find_row(rs, "q"), nullptr);
    EXPECT_EQ(find_row(rs, "q")->intensity, "3.20");
    EXPECT_EQ(find_row(rs, "q")->bound, "memory");
    EXPECT_EQ(find_row(rs, "rope")->bound, "cache");
    EXPECT_EQ(find_row(rs, "pass")->bound, "memory");
    EXPECT_NE(r.out.find("intensity 2.54 FLOP/B: memory-bound"), std::string::npos) << r.out;

    // KV cache at 512 positions: 2 · 30 · 3 · 64 · 512 · 4 = 23 592 960 bytes (f16: half).
    EXPECT_NE(r.out.find("KV cache at 512 positions: f32 23.59 MB, f16 11.80 MB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("memory to run (context 512, T = 1): weights "), std::string::npos) << r.out;
}

// The same file with I* = 2.5: the decode matvecs (3.2 FLOP/byte) are compute-bound there.
TEST(CliExplain, VerdictsMoveWithTheRidgePoint) {
    const std::string probe = cli_test::write_probe(40.0, 100.0, 2, 0, 400.0);
    const RunResult r = explain({}, probe);
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::vector<Row> rs = rows(r.out);
    expect_verdicts_follow(rs, 2.5);
    // The integer kernels' peak is stated beside the FMA one, with its own ridge point (400 / 40).
    EXPECT_NE(r.out.find("integer roof: 400.0 GFLOP/s (vpdpwssd zmm), the quantized matmuls' own compute ceiling -> "
                         "I* = 10.00 FLOP/byte"),
              std::string::npos)
        << r.out;
    ASSERT_NE(find_row(rs, "q"), nullptr);
    EXPECT_EQ(find_row(rs, "q")->bound, "compute");
    EXPECT_EQ(find_row(rs, "attn_scores")->bound, "memory");  // f32 keys: about 1.5 FLOP/byte
}

// A prefill of T = 64 rows in one pass: every weight is used 64 times, I = 64 × 3.2 = 204.8.
TEST(CliExplain, SmolLM2PrefillIsComputeBound) {
    const std::string probe = cli_test::write_probe(20.0, 100.0);
    const RunResult r = explain({"-T", "64", "-c", "1024", "--kv-type", "f16"}, probe);
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* shape : {"x(64×576) · Wq(576×576)", "act(64×1536) · Wdown(1536×576)",
                              "9h × q(64×64) · Kᵀ(64×64) causal", "64 rows of E(49152×576)"})
        EXPECT_NE(r.out.find(shape), std::string::npos) << shape << "\n" << r.out;
    const std::vector<Row> rs = rows(r.out);
    expect_verdicts_follow(rs, 5.0);
    for (const char* op : {"q", "k", "v", "o", "gate", "up", "down"}) {
        ASSERT_NE(find_row(rs, op), nullptr) << op;
        EXPECT_EQ(find_row(rs, op)->intensity, "204.80") << op;
        EXPECT_EQ(find_row(rs, op)->bound, "compute") << op;
    }
    // KV cache at max(T, c) = 1024 positions, f16 as asked.
    EXPECT_NE(r.out.find("KV cache at 1024 positions: f32 47.19 MB, f16 23.59 MB"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("memory to run (context 1024, T = 64)"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("KV cache (f16) 23.59 MB"), std::string::npos) << r.out;
}

// --bandwidth and --peak together stand in for the probe: no file is read, measured or written.
TEST(CliExplain, GivenCeilingsNeedNoProbeFile) {
    const std::string absent = cli_test::scratch("absent/probe.json");
    const RunResult r = explain({"--bandwidth", "10", "--peak", "50"}, absent);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("bandwidth 10.0 GB/s, peak 50.0 GFLOP/s -> I* = 5.00 FLOP/byte (given with --bandwidth and "
                         "--peak)"),
              std::string::npos)
        << r.out;
    EXPECT_FALSE(std::filesystem::exists(absent));
    expect_verdicts_follow(rows(r.out), 5.0);
}

TEST(CliExplain, BadInputGivesOneLineAndNonZeroExit) {
    const std::string probe = cli_test::write_probe(20.0, 100.0);
    const cli_test::Env env = {{"RIDGE_PROBE_FILE", probe}};
    auto bad = [&](std::vector<std::string> extra, const std::string& mention) {
        std::vector<std::string> args = {"explain"};
        args.insert(args.end(), extra.begin(), extra.end());
        cli_test::expect_one_line_error(args, mention, env);
    };
    bad({"-m", kStories, "-T", "0"}, "-T");
    bad({"-m", kStories, "-c", "0"}, "-c");
    bad({"-m", kStories, "-c", "-4"}, "-c");
    bad({"-m", kStories, "-t", "0"}, "--threads");
    bad({"-m", kStories, "--kv-type", "q4_0"}, "--kv-type");
    bad({"-m", kStories, "--bandwidth", "0", "--peak", "10"}, "--bandwidth");
    bad({"-m", kStories, "--bandwidth", "10", "--peak", "-1"}, "--peak");
    bad({"-m", kStories, "--what"}, "--what");
    bad({"-m", "/nonexistent/model.gguf"}, "/nonexistent/model.gguf");
    bad({}, "--model");
    bad({"-m", kStories, "--synthetic", "smollm2-135m"}, "--synthetic");
    const std::string corrupt = cli_test::scratch("corrupt.json");
    std::ofstream(corrupt, std::ios::binary) << "{\"threads\": 2,";
    cli_test::expect_one_line_error({"explain", "-m", kStories, "-t", "2"}, corrupt, {{"RIDGE_PROBE_FILE", corrupt}});
}

}  // namespace

// The plan explain prints follows --exact and --device: f32 rows and the f32 threshold under
// --exact, the GPU's matvec and tiled kernel on cuda (planned without a GPU: nothing runs).
TEST(CliExplain, PrintsThePlanForTheOptionsGiven) {
    const RunResult fast = explain({"--bandwidth", "10", "--peak", "50"}, cli_test::scratch("absent/probe.json"));
    ASSERT_EQ(fast.rc, 0) << fast.err;
    EXPECT_NE(fast.out.find("  device cpu\n  q,k,v,o,gate,up,down Q4_1: rows v4_int (int16 input"), std::string::npos)
        << fast.out;
    const RunResult exact = explain({"--exact", "--bandwidth", "10", "--peak", "50"}, cli_test::scratch("absent/probe.json"));
    ASSERT_EQ(exact.rc, 0) << exact.err;
    EXPECT_NE(exact.out.find("  device cpu, --exact (f32 activations)\n"), std::string::npos) << exact.out;
    EXPECT_NE(exact.out.find("  q,k,v,o,gate,up,down Q4_1: rows v3_simd; tiled v6_packed from 22 rows\n"),
              std::string::npos)
        << exact.out;
    const RunResult gpu = explain({"--device", "cuda", "--bandwidth", "3000", "--peak", "60000"},
                                  cli_test::scratch("absent/probe.json"));
    ASSERT_EQ(gpu.rc, 0) << gpu.err;
    EXPECT_NE(gpu.out.find("  q,k,v,o,gate,up,down Q4_1: rows cuda matvec; tiled cuda v3_regblock from 16 rows\n"),
              std::string::npos)
        << gpu.out;
}
