// Ceilings: this machine's measured roofline (memory read bandwidth and peak FLOP/s, for a given
// thread count; on a CPU also the integer kernels' peak, a second compute roof), as measured by
// `ridge probe` and saved as a small JSON file that the other commands (bench, generate, explain,
// roofline) reuse. Attainable = min(peak, I * bandwidth).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ridge {

// How the CPU probe measures, for telling saved files of an older way: 3 since it also measures the
// integer kernels' ceiling; 2 since its bandwidth buffer asks for 2 MiB pages (1: 4 KiB pages, which
// read slower than the weights' mapping).
inline constexpr int kProbeVersion = 3;

struct Ceilings {
    int version = kProbeVersion;   // the probe that measured them (files without one: 1)
    std::string device = "cpu";    // "cpu", or "cuda" (ridge probe --device cuda)
    int threads = 0;               // CPU threads; on a GPU its multiprocessors
    double bandwidth_gbs = 0;      // sustained read bandwidth, GB/s (median of repetitions)
    double bandwidth_spread = 0;   // (max - min) / median of the bandwidth samples
    double fma_gflops = 0;         // FMA-bound loop, GFLOP/s (median)
    // CPU: the integer kernels' ceiling, their 16-bit multiply-add instruction's rate, GFLOP/s at 2 per
    // multiply-add (median; 0 where the build has no integer kernel or the file predates it), and
    // the instruction ("vpdpwssd zmm"). A second compute roof, beside the FMA peak.
    double int_dot_gflops = 0;
    std::string int_dot_name;
    double matmul_gflops = 0;      // the engine's best f32 matmul on a large problem, GFLOP/s (median)
    std::string matmul_name;       // which kernel and problem size
    double reference_gflops = 0;   // GPU: cuBLAS on the same problem (0 when it could not be run)
    std::string reference_name;    // GPU: "cuBLAS bf16 4096x4096x4096", or why there is no reference
    // GPU: every tiled matmul variant on that problem, (name, GFLOP/s), as measured now (not saved).
    std::vector<std::pair<std::string, double>> matmul_variants;
    std::string cpu;               // model name, from /proc/cpuinfo (the GPU's name on a GPU)
    std::string measured_at;       // ISO 8601 time
    bool quick = false;            // measured with ProbeOptions::quick (smaller, fewer repetitions)
    size_t bandwidth_bytes = 0;    // size of the buffer the bandwidth probe streamed
    size_t bandwidth_huge_bytes = 0;  // of it, the bytes the kernel backed with 2 MiB pages (CPU)
    int reps = 0;                  // repetitions of the bandwidth and FMA probes
    std::string path;              // where it was loaded from / saved to (not serialized)

    // The compute ceiling: the FMA loop's rate on a CPU; on a GPU the best measured of the CUDA
    // cores' FMA rate, ridge's matmul and cuBLAS (the tensor cores, which the FMA loop cannot reach).
    double peak_gflops() const;
    double ridge_point() const { return peak_gflops() / bandwidth_gbs; }     // I* in FLOP/byte
    double attainable_gflops(double intensity) const;                         // min(peak, I * bw)
    double int_attainable_gflops(double intensity) const;  // min(int dot peak, I * bw); 0 without one
};

// Default file: $RIDGE_PROBE_FILE, else $XDG_CACHE_HOME/ridge/probe-t<threads>.json, else
// ~/.cache/ridge/probe-t<threads>.json. For the GPU (gpu_ceilings_path): $RIDGE_GPU_PROBE_FILE, else
// probe-cuda.json in the same directory.
std::string default_ceilings_path(int threads);
std::string gpu_ceilings_path();
std::optional<Ceilings> load_ceilings(const std::string& path);  // nullopt if absent; Error if malformed
void save_ceilings(const Ceilings& c, const std::string& path);   // creates the directory
std::string ceilings_to_json(const Ceilings& c);                  // pretty JSON text

struct ProbeOptions {
    int threads = 1;
    size_t bandwidth_bytes = size_t(1) << 30;  // >> last-level cache
    int reps = 7;
    bool quick = false;                        // smaller, fewer repetitions (for tests)
};
// Runs the probes of kernels/cpu/probe.h and the matmul measurement.
Ceilings measure_ceilings(const ProbeOptions& opt);

// The size in bytes of the CPU's last-level cache (the L3 of most x86 parts): the largest of the
// caches Linux lists in cache_dir/index*/size ("491520K", "32M"); 0 where none is listed or
// readable. Weights that fit in it may be read faster than the probe's DRAM bandwidth.
// Without an argument: the listing in $RIDGE_CPU_CACHE_DIR, else /sys/devices/system/cpu/cpu0/cache.
size_t last_level_cache_bytes(const std::string& cache_dir);
size_t last_level_cache_bytes();

// The saved ceilings for `threads`, or measured now (full probe, a few seconds) and saved when
// none are saved, or the saved file is for another thread count or from an older probe
// ($RIDGE_PROBE_FILE names one file).
Ceilings ceilings_for(int threads, bool* measured_now = nullptr);
// The GPU's roofline (ridge probe --device cuda, kernels/cuda/probe.h): device-memory read
// bandwidth, the CUDA cores' FMA rate, ridge's best matmul variant and cuBLAS on one BF16 problem
// (4096^3; quick: 1024^3 and a smaller buffer). ridge::Error without a usable GPU.
Ceilings measure_gpu_ceilings(bool quick);
// The same as ceilings_for, for the GPU (ridge::Error without a usable GPU).
Ceilings gpu_ceilings_for(bool* measured_now = nullptr);

}  // namespace ridge
