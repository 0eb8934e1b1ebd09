// measure_gpu_ceilings (ceilings.h): the GPU's roofline from kernels/cuda's probes. Without CUDA in
// the build it throws a one-line error.
#include <algorithm>
#include <ctime>
#include <string>

#include "measure/ceilings.h"
#include "weights/error.h"

#if RIDGE_HAVE_CUDA
#include "kernels/cuda/probe.h"
#include "kernels/cuda/runtime.h"
#endif

namespace ridge {

#if !RIDGE_HAVE_CUDA

Ceilings measure_gpu_ceilings(bool) {
    throw Error("--device cuda: this ridge was built without CUDA (nvcc was not found when it was configured)");
}

#else

Ceilings measure_gpu_ceilings(bool quick) {
    cuda::set_device(0);
    const cuda::DeviceInfo info = cuda::device_info(0);
    Ceilings c;
    c.device = "cuda";
    c.threads = info.sm_count;
    c.cpu = info.name;
    c.quick = quick;
    c.reps = quick ? 3 : 9;
    // Bandwidth: a buffer far larger than L2 (4 GiB; quick 256 MiB), but at most a quarter of memory.
    c.bandwidth_bytes = std::min<size_t>(quick ? size_t(256) << 20 : size_t(4) << 30, info.global_bytes / 4);
    const cuda::Timing bw = cuda::time_read(c.bandwidth_bytes, c.reps);
    c.bandwidth_gbs = double(c.bandwidth_bytes) / bw.median_s / 1e9;
    c.bandwidth_spread = bw.spread;
    double flops = 0;
    const cuda::Timing fma = cuda::time_fma(&flops, c.reps);
    c.fma_gflops = flops / fma.median_s / 1e9;
    // ridge's tiled variants on one BF16 problem; the best is the engine's matmul ceiling.
    const int64_t n = quick ? 1024 : 4096;
    const int mm_reps = quick ? 3 : 7;
    const std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    for (const char* v : {"v2_smem", "v3_regblock", "v4_mma"}) {
        const cuda::Timing t = cuda::time_matmul(v, n, n, n, mm_reps);
        const double gf = 2.0 * double(n) * double(n) * double(n) / t.median_s / 1e9;
        c.matmul_variants.emplace_back(v, gf);
        if (gf > c.matmul_gflops) c.matmul_gflops = gf, c.matmul_name = std::string(v) + " bf16 W, f32 X " + shape;
    }
    cuda::Timing ref;
    std::string why;
    if (cuda::time_cublas_bf16(n, n, n, mm_reps, &ref, &why)) {
        c.reference_gflops = 2.0 * double(n) * double(n) * double(n) / ref.median_s / 1e9;
        c.reference_name = "cuBLAS bf16 " + shape + " (" + why + ")";
    } else {
        c.reference_name = why;
    }
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
    c.measured_at = buf;
    return c;
}

#endif

}  // namespace ridge
