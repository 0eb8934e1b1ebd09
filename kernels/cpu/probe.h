// Probes of this machine's two roofline ceilings, measured with the engine's own threads:
// sustained memory read bandwidth (a streaming sum over a buffer far larger than the last-level
// cache) and peak FLOP/s (independent FMA chains that keep every FMA pipe busy).
#pragma once
#include <cstddef>
#include <vector>

namespace ridge {

struct ProbeSample {
    double seconds = 0;
    double value = 0;  // GB/s or GFLOP/s
};

// Reads `bytes` of memory `reps` times with `threads` threads; one sample per repetition. The buffer
// asks for 2 MiB pages, as the weights' mapping does; *huge_page_bytes (when given) gets how many of
// its bytes the kernel backed with them.
// Cost: FLOPs ~ bytes/4 (one add per float); bytes read = bytes per repetition.
std::vector<ProbeSample> probe_read_bandwidth(size_t bytes, int reps, int threads, size_t* huge_page_bytes = nullptr);

// Lanes of the widest float vector this build targets: 16 with AVX-512, else 8 (AVX2, or the
// plain C++ fallback written 8 wide).
#if defined(__AVX512F__)
constexpr int kProbeFmaLanes = 16;
#else
constexpr int kProbeFmaLanes = 8;
#endif

// Runs `iters` rounds of 12 independent kProbeFmaLanes-wide FMA chains per thread; one sample per
// repetition. Cost: FLOPs = threads * iters * 12 * kProbeFmaLanes * 2 per repetition; no memory traffic.
std::vector<ProbeSample> probe_fma_peak(long iters, int reps, int threads);

// The integer kernels' own ceiling (matmul v4_int's 16-bit multiply-adds): `iters` rounds of 12
// independent chains of the instruction they use, on the widest registers they use (the 16-bit pair
// multiply-add into 32-bit lanes: vpdpwssd where the build has VNNI, else vpmaddwd and vpaddd), one
// sample per repetition, in GFLOP/s counted as the matmuls count theirs (2 per multiply-add).
// kProbeIntMacs: multiply-adds per instruction (32 on zmm, 16 on ymm); 0 where the build has no
// integer kernel (no AVX2), where the probe returns no samples.
#if defined(__AVX512BW__)
constexpr int kProbeIntMacs = 32;
#elif defined(__AVX2__)
constexpr int kProbeIntMacs = 16;
#else
constexpr int kProbeIntMacs = 0;
#endif
std::vector<ProbeSample> probe_int_dot_peak(long iters, int reps, int threads);
// How the build multiplies 16-bit pairs: "vpdpwssd zmm", "vpmaddwd+vpaddd ymm", ... ("" without).
const char* probe_int_dot_name();

// One plain read of every byte of `regions` (pointer, bytes), each region split among the threads
// of one OpenMP region (`threads` of them, each its static share of every region, on 64-byte
// boundaries; no waiting between regions): the most a pass that reads these bytes could stream
// with these threads. Returns the seconds it took. Cost: bytes read = the regions' total.
struct ReadRegion {
    const void* data;
    size_t bytes;
};
double stream_read_seconds(const std::vector<ReadRegion>& regions, int threads);

// Scalar twin of the bandwidth probe's sum (the reference its result is checked against).
double probe_sum_scalar(const float* x, size_t n);
// The vectorized sum the bandwidth probe streams with (x 32-byte aligned, n a multiple of 32).
double probe_sum(const float* x, size_t n);

double median(std::vector<double> v);

}  // namespace ridge
