// `ridge probe` as a user runs it (the quick probe, a fraction of a second): the JSON it prints is
// the file it saves, load_ceilings reads that file back, its location is printed, $RIDGE_PROBE_FILE
// is the default place, bench and explain reuse the file, and bad input gives one line. No measured
// value is compared with anything but zero: speed is reported, never asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "measure/ceilings.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace {

using cli_test::ridge;
using cli_test::RunResult;

const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

TEST(CliProbe, JsonIsTheSavedFileAndLoads) {
    const std::string path = cli_test::scratch("probe-out.json");
    const RunResult r = ridge({"probe", "--quick", "-t", "2", "-o", path, "--json"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, cli_test::read_file(path));  // --json prints what it saves
    EXPECT_NE(r.err.find("saved to " + path), std::string::npos) << r.err;

    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["threads"], 2);
    EXPECT_EQ(j["quick"], true);
    const std::optional<ridge::Ceilings> c = ridge::load_ceilings(path);
    ASSERT_TRUE(c.has_value());
    EXPECT_EQ(c->threads, 2);
    EXPECT_TRUE(c->quick);
    EXPECT_EQ(c->path, path);
    EXPECT_DOUBLE_EQ(c->bandwidth_gbs, j["bandwidth_gbs"].get<double>());
    EXPECT_DOUBLE_EQ(c->fma_gflops, j["fma_gflops"].get<double>());
    EXPECT_DOUBLE_EQ(c->matmul_gflops, j["matmul_gflops"].get<double>());
    EXPECT_DOUBLE_EQ(c->ridge_point(), j["ridge_point"].get<double>());
    EXPECT_EQ(c->cpu, j["cpu"]);
    EXPECT_EQ(c->measured_at, j["measured_at"]);
    EXPECT_EQ(c->bandwidth_bytes, j["bandwidth_buffer_bytes"].get<size_t>());
    EXPECT_EQ(c->reps, j["reps"].get<int>());
    EXPECT_EQ(j["probe_version"], ridge::kProbeVersion);
    EXPECT_EQ(c->version, ridge::kProbeVersion);
    static_assert(cli_test::kProbeFileVersion == ridge::kProbeVersion, "write_probe's files must be current");
    EXPECT_EQ(c->bandwidth_huge_bytes, j["bandwidth_huge_page_bytes"].get<size_t>());
    EXPECT_LE(c->bandwidth_huge_bytes, c->bandwidth_bytes);
    for (double v : {c->bandwidth_gbs, c->fma_gflops, c->matmul_gflops}) {
        EXPECT_TRUE(std::isfinite(v));
        EXPECT_GT(v, 0.0);
    }
    // Saved again, the ceilings print the same JSON.
    EXPECT_EQ(ridge::ceilings_to_json(*c), r.out);
}

// Without -o the file goes to $RIDGE_PROBE_FILE (directories created); the table names the ridge
// point; bench and explain then use that file as it is.
TEST(CliProbe, DefaultFileIsReusedByBenchAndExplain) {
    const std::string path = cli_test::scratch("dir") + "/sub/probe.json";
    const cli_test::Env env = {{"RIDGE_PROBE_FILE", path}};
    const RunResult r = ridge({"probe", "--quick", "-t", "2"}, env);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("ridge point: I* = "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("bandwidth: "), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("saved to " + path), std::string::npos) << r.err;
    const std::string saved = cli_test::read_file(path);
    const nlohmann::json probe = nlohmann::json::parse(saved);

    const RunResult b = ridge({"bench", "-m", kStories, "-t", "2", "-p", "4", "-n", "2", "-r", "1", "--json"}, env);
    ASSERT_EQ(b.rc, 0) << b.err;
    EXPECT_EQ(b.err, "");  // nothing measured
    const nlohmann::json j = nlohmann::json::parse(b.out);
    EXPECT_EQ(j["ceilings"]["path"], path);
    EXPECT_DOUBLE_EQ(j["ceilings"]["bandwidth_gbs"].get<double>(), probe["bandwidth_gbs"].get<double>());
    EXPECT_DOUBLE_EQ(j["ceilings"]["peak_gflops"].get<double>(), probe["fma_gflops"].get<double>());

    const RunResult e = ridge({"explain", "-m", kStories, "-t", "2"}, env);
    ASSERT_EQ(e.rc, 0) << e.err;
    EXPECT_EQ(e.err, "");
    EXPECT_NE(e.out.find(path), std::string::npos) << e.out;
    EXPECT_EQ(cli_test::read_file(path), saved);  // read, not rewritten
}

TEST(CliProbe, BadInputGivesOneLineAndNonZeroExit) {
    cli_test::expect_one_line_error({"probe", "-t", "0"}, "--threads");
    cli_test::expect_one_line_error({"probe", "-t", "-2"}, "--threads");
    cli_test::expect_one_line_error({"probe", "--fast"}, "--fast");
    // Places no file can go: one line naming them, before any measuring.
    cli_test::expect_one_line_error({"probe", "--quick", "-t", "1", "-o", "/proc/ridge-test/probe.json"},
                                    "/proc/ridge-test/probe.json");
    const std::string dir = cli_test::scratch("a-directory");
    std::filesystem::create_directories(dir);
    cli_test::expect_one_line_error({"probe", "--quick", "-t", "1", "-o", dir}, "is a directory");
}

}  // namespace
