// Ceilings: this machine's measured roofline (memory read bandwidth and peak FLOP/s, for a given
// thread count), as measured by `ridge probe` and saved as a small JSON file that the other
// commands (bench, generate, explain, roofline) reuse. Attainable = min(peak, I * bandwidth).
#pragma once
#include <optional>
#include <string>

namespace ridge {

struct Ceilings {
    int threads = 0;
    double bandwidth_gbs = 0;      // sustained read bandwidth, GB/s (median of repetitions)
    double bandwidth_spread = 0;   // (max - min) / median of the bandwidth samples
    double fma_gflops = 0;         // FMA-bound loop, GFLOP/s (median)
    double matmul_gflops = 0;      // the engine's best f32 matmul on a large problem, GFLOP/s (median)
    std::string matmul_name;       // which kernel and problem size
    std::string cpu;               // model name, from /proc/cpuinfo
    std::string measured_at;       // ISO 8601 time
    bool quick = false;            // measured with ProbeOptions::quick (smaller, fewer repetitions)
    size_t bandwidth_bytes = 0;    // size of the buffer the bandwidth probe streamed
    int reps = 0;                  // repetitions of the bandwidth and FMA probes
    std::string path;              // where it was loaded from / saved to (not serialized)

    double peak_gflops() const { return fma_gflops; }                          // the compute ceiling
    double ridge_point() const { return fma_gflops / bandwidth_gbs; }         // I* in FLOP/byte
    double attainable_gflops(double intensity) const;                         // min(peak, I * bw)
};

// Default file: $RIDGE_PROBE_FILE, else $XDG_CACHE_HOME/ridge/probe-t<threads>.json, else
// ~/.cache/ridge/probe-t<threads>.json.
std::string default_ceilings_path(int threads);
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

// The saved ceilings for `threads`, or measured now (full probe, a few seconds) and saved when
// none are saved or the saved file is for another thread count ($RIDGE_PROBE_FILE names one file).
Ceilings ceilings_for(int threads, bool* measured_now = nullptr);

}  // namespace ridge
