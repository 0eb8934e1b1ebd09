// --device on the commands that run a model, as a user without a GPU meets it: `cuda` is a clear
// one-line error and a non-zero exit (never a crash), anything but cpu|cuda is refused, --no-graph
// without --device cuda is refused; and `explain --device cuda` plans the GPU's path (no quantize
// op: the GPU's matmuls take f32 activations) against a GPU probe file. Where a GPU is present the
// error tests skip (test_engine_gpu runs the model there).
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "engine/gpu.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace ridge {
namespace {

using cli_test::ridge;
using cli_test::RunResult;

const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

TEST(CliDevice, CudaWithoutAGpuIsAOneLineError) {
    if (gpu::available()) GTEST_SKIP() << "this machine has a GPU";
    const std::vector<std::vector<std::string>> commands = {
        {"generate", "-m", kStories, "-p", "Once", "-n", "4"},
        {"chat", "-m", kStories},
        {"bench", "-m", kStories, "-p", "4", "-n", "2", "-r", "1"},
        {"batch-bench", "-m", kStories, "-B", "1,2", "-p", "4", "-n", "2", "-r", "1"},
        {"perplexity", "-m", kStories, "-f", std::string(RIDGE_TESTS_DIR) + "/../README.md", "-c", "64"},
        {"roofline", "-m", kStories, "-o", cli_test::scratch("r.svg")},
        {"serve", "-m", kStories, "--port", "0"},
        {"probe", "--quick"}};
    for (std::vector<std::string> args : commands) {
        args.push_back("--device");
        args.push_back("cuda");
        const RunResult r = ridge(args);
        SCOPED_TRACE(args[0]);
        EXPECT_NE(r.rc, 0);
        ASSERT_EQ(r.err_lines().size(), 1u) << r.err;
        EXPECT_NE(r.err.find("CUDA"), std::string::npos) << r.err;
    }
}

TEST(CliDevice, UnknownDevicesAndMisplacedFlagsAreRefused) {
    RunResult r = ridge({"generate", "-m", kStories, "-p", "x", "-n", "1", "--device", "tpu"});
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("tpu"), std::string::npos) << r.err;
    r = ridge({"bench", "-m", kStories, "-p", "4", "-n", "1", "-r", "1", "--no-graph"});
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("--no-graph is for --device cuda"), std::string::npos) << r.err;
    // --probe-now probes the CPU: refused for the GPU before anything is loaded, in any build.
    r = ridge({"bench", "-m", kStories, "-p", "4", "-n", "1", "-r", "1", "--device", "cuda", "--probe-now"});
    EXPECT_NE(r.rc, 0);
    EXPECT_NE(r.err.find("--probe-now measures the CPU"), std::string::npos) << r.err;
}

TEST(CliDevice, ExplainPlansTheGpuPathAgainstTheGpuProbe) {
    // A GPU probe file as `ridge probe --device cuda` saves it.
    const std::string probe = cli_test::scratch("probe-cuda.json");
    std::ofstream(probe) << R"J({"device": "cuda", "threads": 132, "bandwidth_gbs": 4000.0, "fma_gflops": 60000.0,
        "matmul_gflops": 300000.0, "matmul_name": "v4_mma (test)", "reference_gflops": 700000.0,
        "reference_name": "cuBLAS (test)", "cpu": "Test GPU", "measured_at": "2026-01-02T03:04:05Z"})J";
    const cli_test::Env env = {{"RIDGE_GPU_PROBE_FILE", probe}};
    const RunResult gpu = ridge({"explain", "--synthetic", "smollm2-135m", "--device", "cuda"}, env);
    ASSERT_EQ(gpu.rc, 0) << gpu.err;
    EXPECT_NE(gpu.out.find("4000.0 GB/s"), std::string::npos) << gpu.out;
    EXPECT_NE(gpu.out.find("peak 700000.0 GFLOP/s"), std::string::npos) << gpu.out;  // cuBLAS: the best measured
    EXPECT_EQ(gpu.out.find("quantize"), std::string::npos) << gpu.out;
    const RunResult cpu = ridge({"explain", "--synthetic", "smollm2-135m", "--bandwidth", "20", "--peak", "100"});
    ASSERT_EQ(cpu.rc, 0) << cpu.err;
    EXPECT_NE(cpu.out.find("quantize"), std::string::npos) << cpu.out;  // the CPU's fast path quantizes
}

}  // namespace
}  // namespace ridge
