// `ridge probe [-t THREADS] [--json] [-o FILE] [--quick]`: measures this machine's roofline with the
// engine's threads (streaming read bandwidth, FMA peak, the engine's f32 matmul), prints it with the
// ridge point I* = peak / bandwidth, and saves it as JSON for bench, explain and roofline to reuse.
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "measure/ceilings.h"
#include "engine/gpu.h"
#include "kernels/cpu/probe.h"
#include "tools/commands.h"
#include "weights/error.h"

namespace ridge::cli {

namespace {

struct ProbeArgs {
    int threads = 0;  // 0: OpenMP's default, as generate uses
    bool threads_set = false;
    bool json = false;
    bool quick = false;
    std::string out_path;  // -o; default: default_ceilings_path(threads), or gpu_ceilings_path()
    std::string device = "cpu";
};

void print_gpu_ceilings(const Ceilings& c) {
    std::printf("gpu: %s (%d multiprocessors)%s\n", c.cpu.c_str(), c.threads,
                c.quick ? " (quick probe: smaller buffer and matmul, fewer repetitions)" : "");
    std::printf("bandwidth: %.1f GB/s  (read of %zu MiB of device memory, median of %d, spread %.0f%%)\n",
                c.bandwidth_gbs, c.bandwidth_bytes >> 20, c.reps, 100.0 * c.bandwidth_spread);
    std::printf("fma: %.1f GFLOP/s  (f32 FMA chains on the CUDA cores)\n", c.fma_gflops);
    std::printf("matmul: %.1f GFLOP/s  (ridge's best: %s)\n", c.matmul_gflops, c.matmul_name.c_str());
    for (const auto& [name, gflops] : c.matmul_variants)  // every variant beside cuBLAS
        std::printf("  %-12s %9.1f GFLOP/s%s\n", name.c_str(), gflops,
                    c.reference_gflops > 0 ? (" (" + std::to_string(int(100.0 * gflops / c.reference_gflops + 0.5)) +
                                              "% of cuBLAS)").c_str()
                                           : "");
    if (c.reference_gflops > 0)
        std::printf("reference: %.1f GFLOP/s  (%s; ridge's best is %.0f%% of it)\n", c.reference_gflops,
                    c.reference_name.c_str(), 100.0 * c.matmul_gflops / c.reference_gflops);
    else
        std::printf("reference: none (%s)\n", c.reference_name.c_str());
    std::printf("peak: %.1f GFLOP/s  (the best of the three)\n", c.peak_gflops());
    std::printf("ridge point: I* = %.2f FLOP/byte  (peak / bandwidth)\n", c.ridge_point());
}

void print_ceilings(const Ceilings& c) {
    std::printf("cpu: %s\n", c.cpu.c_str());
    std::printf("threads: %d%s\n", c.threads, c.quick ? " (quick probe: smaller buffer, fewer repetitions)" : "");
    std::printf("bandwidth: %.1f GB/s  (streaming read of %zu MiB, %zu MiB of it in 2 MiB pages, median of %d, "
                "spread %.0f%%)\n",
                c.bandwidth_gbs, c.bandwidth_bytes >> 20, c.bandwidth_huge_bytes >> 20, c.reps,
                100.0 * c.bandwidth_spread);
    std::printf("fma peak: %.1f GFLOP/s  (independent %d-lane FMA chains, the compute ceiling)\n", c.fma_gflops,
                kProbeFmaLanes);
    if (c.int_dot_gflops > 0)
        std::printf("int dot peak: %.1f GFLOP/s  (independent %s chains, 2 ops per 16-bit multiply-add: the "
                    "integer kernels' compute ceiling)\n",
                    c.int_dot_gflops, c.int_dot_name.c_str());
    std::printf("matmul: %.1f GFLOP/s  (%s, %.0f%% of the FMA peak)\n", c.matmul_gflops, c.matmul_name.c_str(),
                c.fma_gflops > 0 ? 100.0 * c.matmul_gflops / c.fma_gflops : 0.0);
    std::printf("ridge point: I* = %.2f FLOP/byte  (fma peak / bandwidth)\n", c.ridge_point());
    std::printf("operations below %.2f FLOP/byte are memory-bound here; at or above it, compute-bound.\n",
                c.ridge_point());
}

// One line before the seconds of measuring, rather than after, when the file cannot go there:
// creates the directory and writes (then removes) the temporary file save_ceilings renames.
void check_writable(const std::string& path) {
    const std::filesystem::path p(path);
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) throw Error(path + ": is a directory, not a probe file");
    if (p.has_parent_path()) {
        std::filesystem::create_directories(p.parent_path(), ec);
        if (ec) throw Error(path + ": cannot create directory " + p.parent_path().string() + ": " + ec.message());
    }
    const std::string tmp = path + ".tmp";
    if (!std::ofstream(tmp, std::ios::binary | std::ios::trunc)) throw Error(path + ": cannot write the probe file");
    std::filesystem::remove(tmp, ec);
}

void run_probe(const ProbeArgs& a) {
    if (a.threads_set && a.threads <= 0) throw Error("-t/--threads " + std::to_string(a.threads) + " must be >= 1");
    // Which machine: the GPU, or the CPU with this many threads; then the same measure, save, print.
    const bool gpu = a.device == "cuda";
    if (gpu && a.threads_set) throw Error("-t/--threads is for the CPU probe, not --device cuda");
    if (gpu && !gpu::available()) throw Error("--device cuda: " + gpu::unavailable_reason());
    ProbeOptions opt;
    opt.threads = a.threads_set ? a.threads : omp_get_max_threads();
    opt.quick = a.quick;
    const std::string path = !a.out_path.empty() ? a.out_path : gpu ? gpu_ceilings_path() : default_ceilings_path(opt.threads);
    check_writable(path);

    if (gpu)
        std::fprintf(stderr, "ridge: probing the GPU (%s)...\n", a.quick ? "quick" : "about a minute");
    else
        std::fprintf(stderr, "ridge: probing with %d threads (%s)...\n", opt.threads,
                     a.quick ? "quick" : "a few seconds; other work on this machine disturbs the numbers");
    Ceilings c = gpu ? measure_gpu_ceilings(a.quick) : measure_ceilings(opt);
    save_ceilings(c, path);
    c.path = path;
    if (a.json)
        std::fputs(ceilings_to_json(c).c_str(), stdout);
    else if (gpu)
        print_gpu_ceilings(c);
    else
        print_ceilings(c);
    std::fflush(stdout);
    std::fprintf(stderr, "ridge: saved to %s\n", path.c_str());
}

}  // namespace

void register_probe(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("probe", "Measure this machine's roofline: bandwidth, peak FLOP/s, ridge point");
    auto a = std::make_shared<ProbeArgs>();
    cmd->add_option("-t,--threads", a->threads, "CPU threads (default: all, as generate)")
        ->each([a](const std::string&) { a->threads_set = true; });
    cmd->add_flag("--json", a->json, "print the JSON that is saved instead of the table");
    cmd->add_option("-o,--output", a->out_path,
                    "where to save (default: $RIDGE_PROBE_FILE, else ~/.cache/ridge/probe-t<threads>.json)");
    cmd->add_option("--device", a->device, "what to probe: cpu, or cuda (the GPU: device memory, CUDA cores, matmul)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    cmd->add_flag("--quick", a->quick, "a smaller, faster probe (128 MiB, 3 repetitions; less precise)");
    cmd->callback([a] { run_probe(*a); });
}

}  // namespace ridge::cli
