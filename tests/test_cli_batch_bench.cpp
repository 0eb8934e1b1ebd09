// `ridge batch-bench` as a user runs it, under ceilings the test writes itself ($RIDGE_PROBE_FILE,
// so no probe runs): the table has one row per B, --json parses and holds every field with numbers
// that agree with each other (B * n tokens counted per repetition, tokens/s = B / step time, the
// bound min(peak, I * bandwidth), intensity rising with B, the crossing of the ridge point), and
// bad -B lists and sizes give one "ridge: ..." line and a non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace {

using cli_test::expect_one_line_error;
using cli_test::RunResult;

const std::string kGguf = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

// 7.5 GB/s and 120 GFLOP/s: a ridge point at 16 FLOP/byte.
constexpr double kBandwidth = 7.5, kPeak = 120, kRidgePoint = 16;

const std::string& probe() {
    static const std::string p = cli_test::write_probe(kBandwidth, kPeak);
    return p;
}

RunResult ridge(const std::vector<std::string>& args, const std::string& probe_file = probe()) {
    return cli_test::ridge(args, {{"RIDGE_PROBE_FILE", probe_file}});
}

TEST(CliBatchBench, JsonHasEveryFieldAndTheNumbersAgree) {
    const int p = 4, n = 3, reps = 2;
    const RunResult r = ridge({"batch-bench", "-m", kGguf, "-B", "1,2,4", "-p", std::to_string(p), "-n",
                               std::to_string(n), "-r", std::to_string(reps), "-t", "2", "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");  // the probe file was used: no note about measuring
    const nlohmann::json j = nlohmann::json::parse(r.out);

    for (const char* f : {"path", "arch", "n_params", "n_layers", "n_embd", "weight_types", "weight_bytes",
                          "decode_weight_bytes"})
        EXPECT_TRUE(j["model"].contains(f)) << f;
    EXPECT_EQ(j["model"]["path"], kGguf);
    EXPECT_EQ(j["threads"], 2);
    EXPECT_EQ(j["kv_type"], "f32");
    EXPECT_EQ(j["n_prompt"], p);
    EXPECT_EQ(j["n_gen"], n);
    EXPECT_EQ(j["repetitions"], reps);
    EXPECT_EQ(j["seed"], 1);
    EXPECT_EQ(j["exact"], false);
    EXPECT_DOUBLE_EQ(j["ceilings"]["bandwidth_gbs"].get<double>(), kBandwidth);
    EXPECT_DOUBLE_EQ(j["ceilings"]["peak_gflops"].get<double>(), kPeak);
    EXPECT_DOUBLE_EQ(j["ceilings"]["ridge_point"].get<double>(), kRidgePoint);
    EXPECT_EQ(j["ceilings"]["path"], probe());
    EXPECT_GT(j["peak_rss_bytes"].get<double>(), 0.0);

    ASSERT_EQ(j["points"].size(), 3u);
    const int sizes[] = {1, 2, 4};
    double last_intensity = 0;
    for (size_t i = 0; i < 3; i++) {
        const nlohmann::json& pt = j["points"][i];
        const int B = sizes[i];
        SCOPED_TRACE("B = " + std::to_string(B));
        for (const char* f : {"batch", "kv_cache_tokens", "kv_cache_bytes", "prefill", "step_seconds",
                              "tokens_per_second", "tokens_per_second_per_sequence", "counted_steps", "counted_tokens",
                              "per_step", "per_token", "intensity", "achieved_gbs", "achieved_gflops", "bound",
                              "bound_gflops", "bound_tokens_per_second", "percent_of_bound", "stream_bytes",
                              "stream_gbs", "stream_samples", "percent_of_stream"})
            EXPECT_TRUE(pt.contains(f)) << f;
        for (const char* f : {"flops", "bytes", "weight_bytes", "kv_read_bytes", "kv_written_bytes",
                              "activation_read_bytes", "activation_written_bytes"}) {
            EXPECT_TRUE(pt["per_step"].contains(f)) << f;
            EXPECT_TRUE(pt["per_token"].contains(f)) << f;
        }
        EXPECT_EQ(pt["batch"], B);
        EXPECT_EQ(pt["kv_cache_tokens"], 16 * B);  // p + n = 7 tokens: one block of 16 per sequence
        EXPECT_EQ(pt["prefill"]["tokens"], B * p);
        EXPECT_EQ(pt["counted_steps"], reps * n);
        EXPECT_EQ(pt["counted_tokens"], reps * n * B);
        ASSERT_EQ(pt["step_seconds"]["samples"].size(), size_t(reps));
        const double step = pt["step_seconds"]["median"];
        ASSERT_GT(step, 0.0);
        EXPECT_NEAR(pt["tokens_per_second_per_sequence"].get<double>(), 1.0 / step, 1e-9 / step);
        EXPECT_NEAR(pt["tokens_per_second"].get<double>(), B / step, 1e-9 * B / step);
        const double flops = pt["per_step"]["flops"], bytes = pt["per_step"]["bytes"];
        EXPECT_NEAR(pt["per_token"]["flops"].get<double>() * B, flops, 1e-9 * flops);
        EXPECT_NEAR(pt["per_step"]["weight_bytes"].get<double>() + pt["per_step"]["kv_read_bytes"].get<double>() +
                        pt["per_step"]["kv_written_bytes"].get<double>(),
                    bytes, 1e-9 * bytes);
        const double I = pt["intensity"];
        EXPECT_NEAR(I, flops / bytes, 1e-9 * I);
        EXPECT_GT(I, last_intensity);
        last_intensity = I;
        EXPECT_NEAR(pt["achieved_gflops"].get<double>(), flops / step / 1e9, 1e-6);
        EXPECT_NEAR(pt["achieved_gbs"].get<double>(), bytes / step / 1e9, 1e-6);
        // stories260K's f32 weights: I about 0.5 B, far below 16.
        EXPECT_EQ(pt["bound"], "memory");
        EXPECT_NEAR(pt["bound_gflops"].get<double>(), std::min(kPeak, I * kBandwidth), 1e-9);
        const double bound_tps = pt["bound_tokens_per_second"];
        EXPECT_NEAR(bound_tps, pt["bound_gflops"].get<double>() * 1e9 / (flops / B), 1e-6 * bound_tps);
        EXPECT_NEAR(pt["percent_of_bound"].get<double>(), 100 * B / step / bound_tps, 1e-6);
        // The bound measured with the run: a read of a step's bytes after each repetition.
        ASSERT_EQ(pt["stream_samples"].size(), size_t(reps));
        EXPECT_GT(pt["stream_gbs"].get<double>(), 0.0);
        EXPECT_LT(std::fabs(pt["stream_bytes"].get<double>() - bytes), 0.05 * bytes);  // the embedding rows, KV rounding
        EXPECT_NEAR(pt["percent_of_stream"].get<double>(), 100 * bytes / step / 1e9 / pt["stream_gbs"].get<double>(),
                    1e-6 * pt["percent_of_stream"].get<double>());
    }
    const nlohmann::json& x = j["compute_bound"];
    EXPECT_TRUE(x["first_measured_batch"].is_null());
    ASSERT_TRUE(x["predicted_batch"].is_number());
    EXPECT_GT(x["predicted_batch"].get<double>(), 4.0);
    for (const char* f : {"weight_bytes_per_step", "flops_per_sequence", "bytes_per_sequence", "intensity_limit"})
        EXPECT_TRUE(x[f].is_number()) << f;
}

TEST(CliBatchBench, TableHasOneRowPerBatchSize) {
    const RunResult r = ridge({"batch-bench", "-m", kGguf, "-B", "1,3,8", "-p", "2", "-n", "2", "-r", "1", "-t", "2"});
    ASSERT_EQ(r.rc, 0) << r.err;
    for (const char* row : {"\n| 1 | ", "\n| 3 | ", "\n| 8 | "}) EXPECT_NE(r.out.find(row), std::string::npos) << row;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '|'), 17 * (2 + 3)) << r.out;  // header, rule, 3 rows
    EXPECT_NE(r.out.find("ridge point I* = 16.00 FLOP/byte"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("memory-bound at every B measured"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("reaches I* at B = "), std::string::npos) << r.out;
}

TEST(CliBatchBench, ALowRidgePointMakesEveryBatchComputeBound) {
    // 100 GB/s and 1 GFLOP/s: I* = 0.01 FLOP/byte, below even B = 1; the integer peak, 4 GFLOP/s, too.
    const std::string low = cli_test::write_probe(100, 1, 2, 0, 4);
    const RunResult r =
        ridge({"batch-bench", "-m", kGguf, "-B", "2,1", "-p", "1", "-n", "1", "-r", "1", "-t", "2", "--json"}, low);
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["compute_bound"]["first_measured_batch"], 1);
    for (const nlohmann::json& pt : j["points"]) {
        EXPECT_EQ(pt["bound"], "compute");
        EXPECT_DOUBLE_EQ(pt["bound_gflops"].get<double>(), 1.0);
        EXPECT_EQ(pt["int_bound"], "int");
        EXPECT_DOUBLE_EQ(pt["int_bound_gflops"].get<double>(), 4.0);
        EXPECT_NEAR(pt["int_bound_tokens_per_second"].get<double>(), 4.0 * pt["bound_tokens_per_second"].get<double>(),
                    1e-9 * pt["int_bound_tokens_per_second"].get<double>());
    }
    EXPECT_DOUBLE_EQ(j["ceilings"]["int_dot_gflops"].get<double>(), 4.0);
    const RunResult t = ridge({"batch-bench", "-m", kGguf, "-B", "2,1", "-p", "1", "-n", "1", "-r", "1"}, low);
    EXPECT_NE(t.out.find("compute-bound (I >= I*) from B = 1 on"), std::string::npos) << t.out;
    EXPECT_NE(t.out.find(" (int) | "), std::string::npos) << t.out;
    EXPECT_NE(t.out.find("int bound: the same with the integer kernels' peak, 4.0 GFLOP/s (vpdpwssd zmm)"),
              std::string::npos)
        << t.out;
}

TEST(CliBatchBench, BadInputIsOneLine) {
    // Small sizes, each replaced by the bad value when `extra` gives that option.
    auto bad = [](std::vector<std::string> extra, const std::string& mention) {
        std::vector<std::string> args = {"batch-bench", "-m", kGguf};
        for (const char* o : {"-p", "-n", "-r"})
            if (std::find(extra.begin(), extra.end(), o) == extra.end()) args.insert(args.end(), {o, "1"});
        args.insert(args.end(), extra.begin(), extra.end());
        expect_one_line_error(args, mention, {{"RIDGE_PROBE_FILE", probe()}});
    };
    bad({"-B", "0"}, "batch size 0 must be >= 1");
    bad({"-B", "1,-4"}, "batch size -4 must be >= 1");
    bad({"-B", "1,x"}, "'x' is not a whole number");
    bad({"-B", "2.5"}, "'2.5' is not a whole number");
    bad({"-B", "1,,2"}, "an empty entry");
    bad({"-B", "4,"}, "an empty entry");
    bad({"-B", ""}, "no batch sizes given");
    bad({"-B", "2,4,2"}, "batch size 2 is listed twice");
    bad({"-B", "99999999999"}, "is not a whole number");
    bad({"-B", "1,2000000000"}, "need a KV cache");
    bad({"-n", "0"}, "-n 0 must be >= 1");
    bad({"-p", "-1"}, "-p -1 must be >= 0");
    bad({"-p", "2048"}, "pass the model's context of 2048");
    bad({"-r", "0"}, "-r 0 must be >= 1");
    bad({"-t", "0"}, "-t/--threads 0");
    bad({"--kv-type", "q8_0"}, "--kv-type 'q8_0'");
    bad({"-B", "1", "--bogus"}, "--bogus");
    expect_one_line_error({"batch-bench", "-B", "1"}, "no model");
    expect_one_line_error({"batch-bench", "-m", "/nonexistent/model.gguf"}, "/nonexistent/model.gguf");
}

}  // namespace
