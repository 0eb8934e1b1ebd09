// bench_cuda_decode: the GPU's decode kernels on Llama-3-8B's shapes, against the device's own read
// bandwidth measured in the same run. The matvec (one row of X) on every weight matrix shape of the
// 8B model (q/o 4096x4096, k/v 1024x4096, gate/up 14336x4096, down 4096x14336, the output head
// 128256x4096) in BF16, Q8_0 and Q4_0: microseconds, GB/s of weights read, % of the read
// bandwidth; then decode attention (v1_split and v3_wide) over 1K, 4K and 16K keys of an F16 cache
// (32 query heads, 8 KV heads of 128). Prints "no CUDA device (why)" and exits 0 where there is none (or no CUDA in the
// build). Part of the GPU bundle (tools/gpu_bundle.sh).
//   bench_cuda_decode [--reps N]
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>

#include "weights/error.h"
#include "weights/types.h"

#if RIDGE_HAVE_CUDA
#include "kernels/cuda/probe.h"
#include "kernels/cuda/runtime.h"
#endif

int main(int argc, char** argv) {
    CLI::App app{"the GPU's decode matvec and attention on Llama-3-8B's shapes, against its read bandwidth"};
    int reps = 20;
    app.add_option("--reps", reps, "timed repetitions of each kernel (median)")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
#if !RIDGE_HAVE_CUDA
    std::printf("no CUDA device (this build has no CUDA kernels)\n");
    return 0;
#else
    try {
        if (ridge::cuda::device_count() == 0) {
            std::printf("no CUDA device (%s)\n", ridge::cuda::no_device_reason().c_str());
            return 0;
        }
        ridge::cuda::set_device(0);
        const size_t bw_bytes = size_t(2) << 30;
        const ridge::cuda::Timing bw = ridge::cuda::time_read(bw_bytes, 9);
        const double read_gbs = double(bw_bytes) / bw.median_s / 1e9;
        std::printf("read bandwidth: %.1f GB/s (2 GiB, median of 9)\n", read_gbs);
        struct Shape {
            const char* name;
            int64_t n, k;
        };
        const Shape shapes[] = {{"q,o", 4096, 4096},       {"k,v", 1024, 4096},     {"gate,up", 14336, 4096},
                                {"down", 4096, 14336},     {"output", 128256, 4096}};
        std::printf("%-8s %-16s %10s %10s %9s\n", "type", "matvec n x k", "us", "GB/s", "% of read");
        // One row per variant (the type column says which: "BF16" matvec, "BF16:v2" matvec_v2_inflight).
        for (const char* variant : {"matvec", "matvec_v2_inflight"})
        for (ridge::DType t : {ridge::DType::BF16, ridge::DType::Q8_0, ridge::DType::Q4_0})
            for (const Shape& s : shapes) {
                double bytes = 0;
                const ridge::cuda::Timing m = ridge::cuda::time_matvec(t, s.n, s.k, 1, reps, &bytes, variant);
                const double gbs = bytes / m.median_s / 1e9;
                const std::string label = std::string(ridge::dtype_name(t)) + (std::string(variant) == "matvec" ? "" : ":v2");
                std::printf("%-8s %-16s %10.1f %10.1f %8.1f%%   (%s)\n", label.c_str(),
                            (std::to_string(s.n) + " x " + std::to_string(s.k)).c_str(), m.median_s * 1e6, gbs,
                            100.0 * gbs / read_gbs, s.name);
            }
        for (const char* variant : {"v1_split", "v3_wide"})
            for (int keys : {1024, 4096, 16384}) {
                double bytes = 0;
                const ridge::cuda::Timing a = ridge::cuda::time_decode_attention(keys, 32, 8, 128, reps, &bytes, variant);
                const double gbs = bytes / a.median_s / 1e9;
                std::printf("attention %s %5d keys: %8.1f us, %7.1f GB/s, %5.1f%% of read\n", variant, keys,
                            a.median_s * 1e6, gbs, 100.0 * gbs / read_gbs);
            }
    } catch (const ridge::Error& e) {
        std::fprintf(stderr, "bench_cuda_decode: %s\n", e.what());
        return 1;
    }
    return 0;
#endif
}
