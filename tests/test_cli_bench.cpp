// `ridge bench` as a user runs it, against a probe file the test writes ($RIDGE_PROBE_FILE, so no
// probe runs): --json is one JSON document whose numbers hold together (% of bound = 100 t/s ÷
// bound, GB/s = bytes per token × t/s, the bound from the file's ceilings, decode weight bytes as
// `ridge info` counts them), the Markdown table has its header and one row per test, and bad input
// gives one line and a non-zero exit. Speeds are only checked to be positive, never compared.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "engine_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace {

using cli_test::ridge;
using cli_test::RunResult;

const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

// The file's ceilings: 20 GB/s, 100 GFLOP/s, I* = 5 FLOP/byte.
const double kBandwidth = 20.0, kPeak = 100.0;

void expect_rel(double a, double b, double rel, const std::string& what) {
    EXPECT_NEAR(a, b, rel * std::max(std::abs(a), std::abs(b))) << what;
}

nlohmann::json bench_json(const std::vector<std::string>& extra, const std::string& probe) {
    std::vector<std::string> args = {"bench", "-m", kStories, "-t", "2", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const RunResult r = ridge(args, {{"RIDGE_PROBE_FILE", probe}});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");  // the saved ceilings are used: no note, no probe
    return nlohmann::json::parse(r.out);  // the whole of stdout is one document
}

TEST(CliBench, JsonHoldsEveryFieldWithSaneValues) {
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    const nlohmann::json j = bench_json({"-p", "16", "-n", "8", "-r", "2"}, probe);

    EXPECT_EQ(j["model"]["path"], kStories);
    EXPECT_EQ(j["model"]["arch"], "llama");
    EXPECT_EQ(j["model"]["n_layers"], 5);
    EXPECT_EQ(j["model"]["n_embd"], 64);
    EXPECT_EQ(j["model"]["weight_types"], "F32");
    EXPECT_EQ(j["threads"], 2);
    EXPECT_EQ(j["repetitions"], 2);
    EXPECT_EQ(j["kv_type"], "f32");
    EXPECT_EQ(j["counting"], true);
    EXPECT_GT(j["peak_rss_bytes"].get<double>(), 1e6);  // at least the program and the model
    EXPECT_EQ(j["weights_huge_page_bytes"].get<double>(), 0.0);  // a 1 MB file has no 2 MiB page

    // The ceilings, as the file has them.
    const auto& c = j["ceilings"];
    EXPECT_EQ(c["path"], probe);
    EXPECT_EQ(c["threads"], 2);
    EXPECT_DOUBLE_EQ(c["bandwidth_gbs"].get<double>(), kBandwidth);
    EXPECT_DOUBLE_EQ(c["peak_gflops"].get<double>(), kPeak);
    EXPECT_DOUBLE_EQ(c["matmul_gflops"].get<double>(), 0.5 * kPeak);
    EXPECT_DOUBLE_EQ(c["ridge_point"].get<double>(), kPeak / kBandwidth);
    EXPECT_EQ(c["cpu"], "Test CPU");
    EXPECT_EQ(c["measured_at"], "2026-01-02T03:04:05Z");

    const auto& tests = j["tests"];
    ASSERT_EQ(tests.size(), 2u);
    EXPECT_EQ(tests[0]["name"], "pp16");
    EXPECT_EQ(tests[0]["phase"], "prefill");
    EXPECT_EQ(tests[0]["n_tokens"], 16);
    EXPECT_EQ(tests[0]["n_past"], 0);
    EXPECT_EQ(tests[1]["name"], "tg8");
    EXPECT_EQ(tests[1]["phase"], "decode");
    EXPECT_EQ(tests[1]["n_tokens"], 8);
    for (const auto& t : tests) {
        const std::string name = t["name"];
        const auto& tps = t["tokens_per_second"];
        ASSERT_EQ(tps["samples"].size(), 2u) << name;
        const double median = tps["median"], lo = tps["min"], hi = tps["max"];
        EXPECT_GT(lo, 0.0) << name;
        EXPECT_LE(lo, median) << name;
        EXPECT_LE(median, hi) << name;
        EXPECT_GE(tps["stdev"].get<double>(), 0.0) << name;
        const double s0 = tps["samples"][0], s1 = tps["samples"][1];
        expect_rel(median, 0.5 * (s0 + s1), 1e-12, name + " median of two");

        const auto& pt = t["per_token"];
        const double flops = pt["flops"], bytes = pt["bytes"];
        EXPECT_GT(flops, 0.0) << name;
        expect_rel(bytes, pt["weight_bytes"].get<double>() + pt["kv_read_bytes"].get<double>() +
                              pt["kv_written_bytes"].get<double>(), 1e-12, name + " bytes = weights + KV");
        EXPECT_GT(pt["activation_read_bytes"].get<double>(), 0.0) << name;
        expect_rel(t["intensity"], flops / bytes, 1e-12, name + " intensity");
        expect_rel(t["achieved_gbs"], bytes * median / 1e9, 1e-12, name + " GB/s");
        expect_rel(t["achieved_gflops"], flops * median / 1e9, 1e-12, name + " GFLOP/s");

        // The bound from the file's ceilings: min(peak, I × bandwidth) ÷ FLOPs per token.
        const double I = flops / bytes;
        const double bound = std::min(kPeak, I * kBandwidth) * 1e9 / flops;
        expect_rel(t["bound_tokens_per_second"], bound, 1e-12, name + " bound");
        EXPECT_EQ(t["bound"], I >= kPeak / kBandwidth ? "compute" : "memory") << name;
        expect_rel(t["percent_of_bound"], 100.0 * median / bound, 1e-12, name + " % of bound");

        // The bound measured with the run: one read of the step's bytes after each repetition.
        ASSERT_EQ(t["stream_samples"].size(), 2u) << name;
        const double g0 = t["stream_samples"][0], g1 = t["stream_samples"][1];
        EXPECT_GT(g0, 0.0) << name;
        expect_rel(t["stream_gbs"], 0.5 * (g0 + g1), 1e-12, name + " stream median of two");
        expect_rel(t["percent_of_stream"], 100.0 * t["achieved_gbs"].get<double>() / t["stream_gbs"].get<double>(),
                   1e-12, name + " % of stream");

        // The ops add up to the token's cost.
        double op_flops = 0, op_bytes = 0, share = 0;
        std::vector<std::string> ops;
        for (const auto& o : t["ops"]) {
            ops.push_back(o["op"]);
            op_flops += o["flops_per_token"].get<double>();
            op_bytes += o["bytes_per_token"].get<double>();
            share += o["time_share"].get<double>();
        }
        expect_rel(op_flops, flops, 1e-9, name + " ops' FLOPs");
        expect_rel(op_bytes, bytes, 1e-9, name + " ops' bytes");
        expect_rel(share, 1.0, 1e-9, name + " time shares");
        for (const char* op : {"embedding", "q", "attn_scores", "down", "output_head"})
            EXPECT_NE(std::find(ops.begin(), ops.end(), op), ops.end()) << name << " " << op;
    }
    // A decode step streams every weight but the embedding table (one row of it) and its KV cache:
    // the counted bytes of a step, to within that row and the rounding of the KV to whole slots.
    const double step = tests[1]["per_token"]["bytes"].get<double>();
    EXPECT_LT(std::fabs(tests[1]["stream_bytes"].get<double>() - step), 0.01 * step);
    // A decode step reads every weight once, one embedding row: `ridge info`'s count.
    EXPECT_DOUBLE_EQ(tests[1]["per_token"]["weight_bytes"].get<double>(),
                     j["model"]["decode_weight_bytes"].get<double>());
    EXPECT_EQ(tests[1]["bound"], "memory");  // a matrix-vector product, I < 1
    expect_rel(tests[1]["bound_tokens_per_second"],
               kBandwidth * 1e9 / tests[1]["per_token"]["bytes"].get<double>(), 1e-12, "decode bound = bw ÷ bytes");
}

// The names in the first column of docs/measuring.md's `ridge bench --json` fields table (a
// "tests[]." before and a "[]" after dropped), so that a field the command prints and the
// documentation does not explain fails here.
std::vector<std::string> documented_bench_fields() {
    std::ifstream in(std::string(RIDGE_TESTS_DIR) + "/../docs/measuring.md");
    std::vector<std::string> names;
    bool in_table = false;
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("### ", 0) == 0) in_table = line == "### `ridge bench --json` fields";
        if (!in_table || line.rfind("| `", 0) != 0) continue;
        const std::string first = line.substr(2, line.find(" |", 2) - 2);
        for (size_t at = first.find('`'); at != std::string::npos; at = first.find('`', at)) {
            const size_t end = first.find('`', at + 1);
            std::string name = first.substr(at + 1, end - at - 1);
            if (name.rfind("tests[].", 0) == 0) name = name.substr(8);
            if (name.size() > 2 && name.compare(name.size() - 2, 2, "[]") == 0) name.resize(name.size() - 2);
            names.push_back(name);
            at = end + 1;
        }
    }
    return names;
}

TEST(CliBench, EveryJsonFieldIsInTheDocumentedTable) {
    const std::vector<std::string> names = documented_bench_fields();
    ASSERT_GT(names.size(), 10u) << "no `ridge bench --json` fields table found in docs/measuring.md";
    auto documented = [&names](const std::string& key) {
        return std::find(names.begin(), names.end(), key) != names.end();
    };
    const nlohmann::json j = bench_json({"-p", "16", "-n", "8", "-r", "1"}, cli_test::write_probe(kBandwidth, kPeak));
    for (const auto& [key, value] : j.items()) EXPECT_TRUE(documented(key)) << key;
    for (const auto& [key, value] : j["tests"][0].items()) EXPECT_TRUE(documented(key)) << "tests[]." << key;
    EXPECT_FALSE(documented("no_such_field"));
}

TEST(CliBench, OneTestAloneAndCountingOff) {
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    nlohmann::json j = bench_json({"-p", "0", "-n", "4", "-r", "1"}, probe);
    ASSERT_EQ(j["tests"].size(), 1u);
    EXPECT_EQ(j["tests"][0]["name"], "tg4");
    j = bench_json({"-p", "8", "-n", "0", "-r", "3", "--no-count"}, probe);
    ASSERT_EQ(j["tests"].size(), 1u);
    const auto& t = j["tests"][0];
    EXPECT_EQ(t["name"], "pp8");
    EXPECT_EQ(j["counting"], false);
    EXPECT_EQ(t["tokens_per_second"]["samples"].size(), 3u);
    EXPECT_GT(t["per_token"]["flops"].get<double>(), 0.0);  // from the counted warm-up
    EXPECT_GT(t["percent_of_bound"].get<double>(), 0.0);
}

// -d: the decode test starts after that many tokens. Its steps read the same weights and, per
// token, the keys and values of every position up to their own: with n steps after d tokens they
// see d + (n + 1) / 2 positions on average, in f32 or half the bytes in f16.
TEST(CliBench, DepthSetsTheTokensCachedBeforeTheDecodeTest) {
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    auto decode = [&](const std::string& depth, const std::string& kv) {
        const nlohmann::json j = bench_json({"-p", "0", "-n", "4", "-r", "1", "-d", depth, "--kv-type", kv}, probe);
        return j["tests"][0];
    };
    const nlohmann::json shallow = decode("8", "f32"), deep = decode("40", "f32"), deep_f16 = decode("40", "f16");
    EXPECT_EQ(shallow["n_past"], 8);
    EXPECT_EQ(deep["n_past"], 40);
    auto kv_read = [](const nlohmann::json& t) { return t["per_token"]["kv_read_bytes"].get<double>(); };
    expect_rel(kv_read(deep) / kv_read(shallow), (40 + 2.5) / (8 + 2.5), 1e-12, "KV read grows with the depth");
    expect_rel(kv_read(deep_f16), kv_read(deep) / 2, 1e-12, "f16 KV: half the bytes");
    auto weight_bytes = [](const nlohmann::json& t) { return t["per_token"]["weight_bytes"].get<double>(); };
    EXPECT_DOUBLE_EQ(weight_bytes(deep), weight_bytes(shallow));
}

// A synthetic SmolLM2 (Q4_0 blocks): the real shapes, and a decode step still reads each weight once.
TEST(CliBench, SyntheticModel) {
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    const RunResult r = ridge({"bench", "--synthetic", "smollm2-135m", "-t", "2", "-p", "4", "-n", "2", "-r", "1",
                               "--json"},
                              {{"RIDGE_PROBE_FILE", probe}});
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["model"]["n_layers"], 30);
    EXPECT_EQ(j["model"]["n_embd"], 576);
    EXPECT_EQ(j["model"]["n_params"], 134515008);
    EXPECT_EQ(j["model"]["weight_types"], "F32+Q4_0");
    ASSERT_EQ(j["tests"].size(), 2u);
    EXPECT_EQ(j["tests"][1]["name"], "tg2");
    EXPECT_DOUBLE_EQ(j["tests"][1]["per_token"]["weight_bytes"].get<double>(),
                     j["model"]["decode_weight_bytes"].get<double>());
}

TEST(CliBench, MarkdownTableHasTheHeaderAndOneRowPerTest) {
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    const RunResult r =
        ridge({"bench", "-m", kStories, "-t", "2", "-p", "16", "-n", "8", "-r", "1"}, {{"RIDGE_PROBE_FILE", probe}});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    std::vector<std::string> table;
    std::stringstream ss(r.out);
    for (std::string l; std::getline(ss, l);)
        if (!l.empty() && l[0] == '|') table.push_back(l);
    ASSERT_EQ(table.size(), 4u) << r.out;
    EXPECT_EQ(table[0], "| test | t/s | min .. max | FLOP/token | bytes/token | FLOP/byte | GB/s | GFLOP/s | bound t/s | "
                        "% of bound | stream GB/s | % of stream |");
    EXPECT_EQ(table[1].substr(0, 8), "|---|--:");
    EXPECT_EQ(table[2].rfind("| pp16 | ", 0), 0u) << table[2];
    EXPECT_EQ(table[3].rfind("| tg8 | ", 0), 0u) << table[3];
    EXPECT_NE(table[3].find("(memory)"), std::string::npos) << table[3];
    for (size_t i = 2; i < 4; i++)  // twelve columns
        EXPECT_EQ(std::count(table[i].begin(), table[i].end(), '|'), 13) << table[i];
    EXPECT_NE(r.out.find("ceilings: 20.00 GB/s read, 100.0 GFLOP/s FMA peak, ridge point 5.00 FLOP/byte (2 threads; " +
                         probe),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("peak resident memory: "), std::string::npos) << r.out;
}

// A listing of the CPU's caches for $RIDGE_CPU_CACHE_DIR.
std::string cache_listing(const std::vector<std::string>& sizes) {
    return ridge::test::write_cache_listing(cli_test::scratch("cache"), sizes);
}

TEST(CliBench, SaysWhenTheWeightsFitInTheLastLevelCache) {
    // stories260K's weights are about 1 MB: they fit in a 1 GiB cache, not in a 512 KiB one.
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    const std::string note = "note: the weights (";
    struct Case {
        std::vector<std::string> sizes;
        double bytes;
        bool fits;
    };
    for (const Case& c : {Case{{"48K", "2048K", "1G"}, 1073741824.0, true}, Case{{"32K", "512K"}, 524288.0, false},
                          Case{{}, 0.0, false}}) {
        const std::string dir = cache_listing(c.sizes);
        const std::vector<std::string> args = {"bench", "-m", kStories, "-t", "2", "-p", "0", "-n", "4", "-r", "1"};
        const RunResult text = ridge(args, {{"RIDGE_PROBE_FILE", probe}, {"RIDGE_CPU_CACHE_DIR", dir}});
        ASSERT_EQ(text.rc, 0) << text.err;
        EXPECT_EQ(text.out.find(note) != std::string::npos, c.fits) << text.out;
        std::vector<std::string> json_args = args;
        json_args.push_back("--json");
        const RunResult json = ridge(json_args, {{"RIDGE_PROBE_FILE", probe}, {"RIDGE_CPU_CACHE_DIR", dir}});
        ASSERT_EQ(json.rc, 0) << json.err;
        const nlohmann::json j = nlohmann::json::parse(json.out);
        EXPECT_EQ(j["last_level_cache_bytes"].get<double>(), c.bytes);
        EXPECT_EQ(j["weights_fit_in_cache"].get<bool>(), c.fits);
    }
    // The note names both sizes.
    const RunResult r = ridge({"bench", "-m", kStories, "-t", "2", "-p", "0", "-n", "4", "-r", "1"},
                              {{"RIDGE_PROBE_FILE", probe}, {"RIDGE_CPU_CACHE_DIR", cache_listing({"1G"})}});
    EXPECT_NE(r.out.find("fit in this CPU's 1.07 GB last-level cache"), std::string::npos) << r.out;
}

TEST(CliBench, BadInputGivesOneLineAndNonZeroExit) {
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    const cli_test::Env env = {{"RIDGE_PROBE_FILE", probe}};
    auto bench = [&](std::vector<std::string> extra, const std::string& mention) {
        std::vector<std::string> args = {"bench"};
        args.insert(args.end(), extra.begin(), extra.end());
        cli_test::expect_one_line_error(args, mention, env);
    };
    bench({"-m", kStories, "--nonsense"}, "--nonsense");
    bench({"-m", kStories, "-r", "0"}, "-r");
    bench({"-m", kStories, "-p", "-1"}, "-p");
    bench({"-m", kStories, "-n", "-5"}, "-n");
    bench({"-m", kStories, "-p", "0", "-n", "0"}, "no test");
    bench({"-m", kStories, "-t", "0"}, "--threads");
    bench({"-m", kStories, "-b", "0"}, "--batch");
    bench({"-m", kStories, "--kv-type", "q8_0"}, "--kv-type");
    bench({"-m", kStories, "-r", "two"}, "-r");
    bench({"-m", kStories, "-n", "100000"}, "context");
    bench({"-m", kStories, "-d", "0"}, "--depth");
    bench({"-m", kStories, "-p", "0", "-d", "100000"}, "context");
    bench({"-m", "/nonexistent/model.gguf"}, "/nonexistent/model.gguf");
    bench({"-p", "4"}, "--model");
    bench({"-m", kStories, "--synthetic", "smollm2-135m"}, "--synthetic");
    bench({"-m", kStories, "--synthetic-type", "q8_0"}, "--synthetic");

    // A corrupt probe file is named, and left as it is (not measured over).
    for (const std::string text : {"{\"threads\": 2, \"bandwidth_gbs\": ", "[1, 2]", "",
                                   "{\"threads\": 2, \"bandwidth_gbs\": -3, \"fma_gflops\": 10}"}) {
        const std::string bad = cli_test::scratch("corrupt.json");
        std::ofstream(bad, std::ios::binary) << text;
        cli_test::expect_one_line_error({"bench", "-m", kStories, "-t", "2", "-p", "4", "-n", "4", "-r", "1"}, bad,
                                        {{"RIDGE_PROBE_FILE", bad}});
        EXPECT_EQ(cli_test::read_file(bad), text);
    }
}

// The CPU performance issue's memory budget: the weights are mapped, not copied, so the whole
// process stays within the weights + the KV cache + 64 MiB, prefill of 512 tokens included.
// --probe-now: the bound comes from two probes run in this bench, before and after the tests, the
// faster read taken; not from the saved file (which stays as it was). The probes run in child
// processes, so their 1 GiB buffer is not in the bench's peak memory.
TEST(CliBench, ProbeNowMeasuresTheCeilingsInTheRun) {
    if (ridge::test::kSanitized) GTEST_SKIP() << "two 1 GiB probes under AddressSanitizer take minutes";
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    std::string saved;
    {
        std::ifstream in(probe);
        saved.assign(std::istreambuf_iterator<char>(in), {});
    }
    const RunResult r = ridge({"bench", "-m", kStories, "-t", "2", "-p", "0", "-n", "4", "-r", "1", "--json", "--probe-now"},
                              {{"RIDGE_PROBE_FILE", probe}});
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    const auto& c = j["ceilings"];
    const std::string path = c["path"];
    double before = 0, after = 0;
    ASSERT_EQ(std::sscanf(path.c_str(), "measured in this run: %lf GB/s before the tests, %lf after", &before, &after), 2)
        << path;
    EXPECT_GT(before, 0.0);
    EXPECT_GT(after, 0.0);
    const double bw = c["bandwidth_gbs"];
    EXPECT_NEAR(bw, std::max(before, after), 0.006) << path;  // printed to 2 decimals
    EXPECT_NE(c["measured_at"], "2026-01-02T03:04:05Z");       // not the file's
    EXPECT_EQ(c["threads"], 2);

    const auto& t = j["tests"][0];
    expect_rel(t["bound_tokens_per_second"], bw * 1e9 / t["per_token"]["bytes"].get<double>(), 1e-12,
               "decode bound = measured bw ÷ bytes");
    expect_rel(t["percent_of_bound"], 100.0 * t["tokens_per_second"]["median"].get<double>() /
                                          t["bound_tokens_per_second"].get<double>(), 1e-12, "% of bound");
    EXPECT_LT(j["peak_rss_bytes"].get<double>(), 512.0 * 1024 * 1024);  // the probes' buffers are elsewhere

    std::ifstream in(probe);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), saved) << "the saved probe file was rewritten";
}

TEST(CliBench, PeakMemoryIsTheMappedWeightsPlusKVCachePlus64MiB) {
    if (ridge::test::kSanitized) GTEST_SKIP() << "AddressSanitizer's shadow memory is not the engine's";
    const std::string smol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    const std::string probe = cli_test::write_probe(kBandwidth, kPeak);
    const RunResult r = ridge({"bench", "-m", smol, "-t", "2", "-p", "512", "-n", "16", "-r", "1", "--json"},
                              {{"RIDGE_PROBE_FILE", probe}});
    ASSERT_EQ(r.rc, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    // KV cache: 2 (K, V) x 30 layers x 3 KV heads x 64 x 4 bytes = 46080 bytes a position, for
    // the 512 + 16 positions of the tests.
    const double kv = 46080.0 * (512 + 16);
    const double weights = j["model"]["weight_bytes"].get<double>();
    EXPECT_EQ(weights, 96576768.0);  // `ridge info`: 92.10 MiB
    const double rss = j["peak_rss_bytes"].get<double>();
    EXPECT_LE(rss, weights + kv + 64.0 * 1024 * 1024) << "peak RSS " << rss / 1048576 << " MiB";
    EXPECT_GE(rss, 0.5 * weights);  // the weights really were read (and counted once)
    // How much of the file the kernel mapped in 2 MiB pages is its choice (weights/mapped_file.cpp);
    // whole pages, and no more than the file.
    const double huge = j["weights_huge_page_bytes"].get<double>(), page = 2.0 * 1024 * 1024;
    EXPECT_LE(huge, weights + page);
    EXPECT_EQ(std::fmod(huge, page), 0.0) << huge;
}

}  // namespace

