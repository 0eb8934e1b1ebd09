// Tests for engine/ceilings: the roofline arithmetic on hand-worked numbers, the JSON file (round
// trip, a missing file, malformed files as one-line errors naming the file, the default path's
// environment variables) and a quick probe that must return positive, finite numbers. No timing
// is asserted: speed is measured by `ridge probe`, not by tests.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "kernels/cpu/probe.h"
#include "measure/ceilings.h"
#include "engine_test_util.h"
#include "weights/error.h"

namespace ridge {
namespace {

// A per-process scratch directory (ctest runs the cases of this file as parallel processes).
std::string scratch(const std::string& name) {
    const std::string dir = ::testing::TempDir() + "ridge_ceilings_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    return dir + "/" + name;
}

std::string read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

Ceilings sample() {
    Ceilings c;
    c.threads = 2;
    c.bandwidth_gbs = 30.0;
    c.bandwidth_spread = 0.125;
    c.fma_gflops = 150.0;
    c.int_dot_gflops = 280.0;
    c.int_dot_name = "vpdpwssd zmm";
    c.matmul_gflops = 97.5;
    c.matmul_name = "v2_eigen f32 2048x2048x2048";
    c.cpu = "Test CPU \"quoted\"";
    c.measured_at = "2026-11-29T12:00:00Z";
    c.quick = true;
    c.bandwidth_bytes = size_t(1) << 30;
    c.bandwidth_huge_bytes = size_t(1000) << 20;
    c.reps = 7;
    return c;
}

TEST(Ceilings, RidgePointAndAttainableByHand) {
    const Ceilings c = sample();
    // I* = 150 / 30 = 5 FLOP/byte.
    EXPECT_DOUBLE_EQ(c.ridge_point(), 5.0);
    EXPECT_DOUBLE_EQ(c.peak_gflops(), 150.0);
    // Below I*: memory-bound, I * bandwidth.
    EXPECT_DOUBLE_EQ(c.attainable_gflops(0.5), 15.0);  // a Q8-ish matvec
    EXPECT_DOUBLE_EQ(c.attainable_gflops(2.0), 60.0);
    EXPECT_DOUBLE_EQ(c.attainable_gflops(0.0), 0.0);
    // At and above I*: the compute ceiling.
    EXPECT_DOUBLE_EQ(c.attainable_gflops(5.0), 150.0);
    EXPECT_DOUBLE_EQ(c.attainable_gflops(100.0), 150.0);
    // The integer roof: its own peak, the same bandwidth (its ridge point 280 / 30).
    EXPECT_DOUBLE_EQ(c.int_attainable_gflops(2.0), 60.0);
    EXPECT_DOUBLE_EQ(c.int_attainable_gflops(5.0), 150.0);
    EXPECT_DOUBLE_EQ(c.int_attainable_gflops(100.0), 280.0);
    Ceilings none = c;  // a file without the integer probe: no integer roof
    none.int_dot_gflops = 0;
    EXPECT_DOUBLE_EQ(none.int_attainable_gflops(100.0), 0.0);
}

TEST(Ceilings, JsonRoundTrip) {
    const std::string path = scratch("round/trip/probe.json");  // directories are created
    const Ceilings c = sample();
    save_ceilings(c, path);
    const std::optional<Ceilings> back = load_ceilings(path);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->threads, c.threads);
    EXPECT_DOUBLE_EQ(back->bandwidth_gbs, c.bandwidth_gbs);
    EXPECT_DOUBLE_EQ(back->bandwidth_spread, c.bandwidth_spread);
    EXPECT_DOUBLE_EQ(back->fma_gflops, c.fma_gflops);
    EXPECT_DOUBLE_EQ(back->matmul_gflops, c.matmul_gflops);
    EXPECT_DOUBLE_EQ(back->int_dot_gflops, c.int_dot_gflops);
    EXPECT_EQ(back->int_dot_name, c.int_dot_name);
    EXPECT_EQ(back->matmul_name, c.matmul_name);
    EXPECT_EQ(back->cpu, c.cpu);
    EXPECT_EQ(back->measured_at, c.measured_at);
    EXPECT_EQ(back->quick, c.quick);
    EXPECT_EQ(back->bandwidth_bytes, c.bandwidth_bytes);
    EXPECT_EQ(back->reps, c.reps);
    EXPECT_EQ(back->path, path);

    // The text is what ceilings_to_json makes, and carries the derived ridge point for readers.
    const nlohmann::json j = nlohmann::json::parse(ceilings_to_json(c));
    EXPECT_DOUBLE_EQ(j.at("ridge_point").get<double>(), 5.0);
    EXPECT_EQ(j.at("threads").get<int>(), 2);
}

TEST(Ceilings, MissingFileIsNullopt) {
    EXPECT_FALSE(load_ceilings(scratch("does-not-exist.json")).has_value());
}

TEST(Ceilings, MalformedFileIsOneLineErrorNamingTheFile) {
    const std::string cases[] = {
        "{ not json",
        "[1, 2, 3]",
        R"({"threads": 2, "fma_gflops": 150})",                                // no bandwidth
        R"({"threads": 2, "bandwidth_gbs": "fast", "fma_gflops": 150})",       // wrong type
        R"({"threads": 2, "bandwidth_gbs": 0, "fma_gflops": 150})",            // not positive
        R"({"threads": 0, "bandwidth_gbs": 30, "fma_gflops": 150})",
        "",
    };
    int i = 0;
    for (const std::string& text : cases) {
        const std::string path = scratch("bad" + std::to_string(i++) + ".json");
        write_file(path, text);
        try {
            load_ceilings(path);
            ADD_FAILURE() << "no error for: " << text;
        } catch (const Error& e) {
            const std::string what = e.what();
            EXPECT_NE(what.find(path), std::string::npos) << what;
            EXPECT_NE(what.find("malformed"), std::string::npos) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        }
    }
}

TEST(Ceilings, DefaultPathFollowsTheEnvironment) {
    const char* saved_probe = std::getenv("RIDGE_PROBE_FILE");
    const char* saved_xdg = std::getenv("XDG_CACHE_HOME");
    const std::string keep_probe = saved_probe ? saved_probe : "", keep_xdg = saved_xdg ? saved_xdg : "";

    ::setenv("RIDGE_PROBE_FILE", "/tmp/x/probe.json", 1);
    EXPECT_EQ(default_ceilings_path(4), "/tmp/x/probe.json");
    ::unsetenv("RIDGE_PROBE_FILE");
    ::setenv("XDG_CACHE_HOME", "/tmp/cache", 1);
    EXPECT_EQ(default_ceilings_path(4), "/tmp/cache/ridge/probe-t4.json");
    ::unsetenv("XDG_CACHE_HOME");
    const std::string p = default_ceilings_path(3);
    EXPECT_NE(p.find("/.cache/ridge/probe-t3.json"), std::string::npos) << p;

    if (saved_probe) ::setenv("RIDGE_PROBE_FILE", keep_probe.c_str(), 1);
    if (saved_xdg) ::setenv("XDG_CACHE_HOME", keep_xdg.c_str(), 1);
}

TEST(Ceilings, QuickProbeGivesPositiveFiniteNumbers) {
    ProbeOptions opt;
    opt.threads = 1;
    opt.quick = true;
    const Ceilings c = measure_ceilings(opt);
    EXPECT_EQ(c.threads, 1);
    EXPECT_TRUE(c.quick);
    for (double v : {c.bandwidth_gbs, c.fma_gflops, c.matmul_gflops, c.ridge_point()}) {
        EXPECT_TRUE(std::isfinite(v)) << v;
        EXPECT_GT(v, 0.0);
    }
    EXPECT_GE(c.bandwidth_spread, 0.0);
    EXPECT_GE(c.bandwidth_bytes, size_t(32) << 20);  // larger than a last-level cache
    // Whether the kernel backs the buffer with 2 MiB pages is its choice; they are whole pages of it.
    EXPECT_LE(c.bandwidth_huge_bytes, c.bandwidth_bytes);
    EXPECT_EQ(c.bandwidth_huge_bytes % (size_t(2) << 20), 0u);
    EXPECT_GE(c.reps, 1);
    EXPECT_FALSE(c.cpu.empty());
    EXPECT_FALSE(c.measured_at.empty());
    EXPECT_NE(c.matmul_name.find("v2_eigen"), std::string::npos);
    // The integer kernels' ceiling, where the build has them (AVX2 or more).
    if (kProbeIntMacs > 0) {
        EXPECT_TRUE(std::isfinite(c.int_dot_gflops));
        EXPECT_GT(c.int_dot_gflops, 0.0);
        EXPECT_EQ(c.int_dot_name, probe_int_dot_name());
        EXPECT_EQ(c.int_dot_name.rfind("vp", 0), 0u) << c.int_dot_name;  // an instruction, named
    }
}

TEST(Ceilings, BadProbeOptionsAreErrors) {
    ProbeOptions opt;
    opt.threads = 0;
    EXPECT_THROW(measure_ceilings(opt), Error);
    opt.threads = 1;
    opt.reps = 0;
    EXPECT_THROW(measure_ceilings(opt), Error);
}

// $RIDGE_PROBE_FILE set to a path for a scope, and as it was after.
class ProbeFileEnv {
public:
    explicit ProbeFileEnv(const std::string& path) {
        if (const char* v = std::getenv("RIDGE_PROBE_FILE")) had_ = true, old_ = v;
        ::setenv("RIDGE_PROBE_FILE", path.c_str(), 1);
    }
    ~ProbeFileEnv() {
        if (had_) ::setenv("RIDGE_PROBE_FILE", old_.c_str(), 1);
        else ::unsetenv("RIDGE_PROBE_FILE");
    }
    ProbeFileEnv(const ProbeFileEnv&) = delete;
    ProbeFileEnv& operator=(const ProbeFileEnv&) = delete;

private:
    bool had_ = false;
    std::string old_;
};

TEST(Ceilings, CeilingsForUsesTheSavedFile) {
    const std::string path = scratch("for.json");
    const ProbeFileEnv env(path);
    Ceilings c = sample();
    save_ceilings(c, path);
    bool measured = true;
    const Ceilings got = ceilings_for(2, &measured);
    EXPECT_FALSE(measured);
    EXPECT_DOUBLE_EQ(got.bandwidth_gbs, 30.0);
    EXPECT_EQ(got.path, path);
}

// A file from the probe before 2 MiB pages (no probe_version) is measured again and replaced.
TEST(Ceilings, CeilingsForMeasuresAgainOverAnOlderProbe) {
    const std::string path = scratch("older.json");
    const ProbeFileEnv env(path);
    Ceilings c = sample();
    c.bandwidth_gbs = 1e-3;  // no machine reads this slowly, so a measured value differs
    save_ceilings(c, path);
    nlohmann::json j = nlohmann::json::parse(read_text(path));
    EXPECT_EQ(j["probe_version"], kProbeVersion);
    j.erase("probe_version");
    write_file(path, j.dump());
    ASSERT_EQ(load_ceilings(path)->version, 1);
    bool measured = false;
    const Ceilings got = ceilings_for(2, &measured);
    EXPECT_TRUE(measured);
    EXPECT_GT(got.bandwidth_gbs, 1e-3);
    EXPECT_EQ(got.version, kProbeVersion);
    EXPECT_EQ(load_ceilings(path)->version, kProbeVersion);
}

std::string cache_dir(const std::string& name, const std::vector<std::string>& sizes) {
    return test::write_cache_listing(scratch(name), sizes);
}

TEST(Ceilings, LastLevelCacheIsTheLargestListed) {
    // An Intel Xeon's listing: 48K L1d, 64K L1i, 2048K L2, 491520K L3 (lscpu's "480 MiB").
    EXPECT_EQ(last_level_cache_bytes(cache_dir("xeon", {"48K", "64K", "2048K", "491520K"})), size_t(491520) * 1024);
    // The largest wherever it is listed; in M, in bytes, in G.
    EXPECT_EQ(last_level_cache_bytes(cache_dir("order", {"32M", "512K", "16M"})), size_t(32) << 20);
    EXPECT_EQ(last_level_cache_bytes(cache_dir("bytes", {"1048576"})), size_t(1) << 20);
    EXPECT_EQ(last_level_cache_bytes(cache_dir("giga", {"1G", "96M"})), size_t(1) << 30);
}

TEST(Ceilings, LastLevelCacheUnknownIsZero) {
    EXPECT_EQ(last_level_cache_bytes(scratch("no_such_dir")), 0u);
    EXPECT_EQ(last_level_cache_bytes(cache_dir("empty", {})), 0u);
    // Sizes that cannot be read as a number and K, M or G are passed over, not guessed.
    EXPECT_EQ(last_level_cache_bytes(cache_dir("junk", {"lots", "32Q", ""})), 0u);
    EXPECT_EQ(last_level_cache_bytes(cache_dir("mixed", {"2048K", "32MiB"})), size_t(2048) * 1024);
}

}  // namespace
}  // namespace ridge
