// Memory-bandwidth and FMA-peak probes (see probe.h). AVX2/FMA paths with plain C++ fallbacks;
// the bandwidth buffer is touched once before timing so page faults are not measured.
#include "kernels/cpu/probe.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "weights/mapped_file.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

namespace ridge {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}
struct FreeDeleter {
    void operator()(void* p) const { std::free(p); }
};
}  // namespace

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double probe_sum_scalar(const float* x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    return s;
}

double probe_sum(const float* x, size_t n) {
#if defined(__AVX2__) && defined(__FMA__)
    // Four independent accumulators so the loop is bound by loads, not by add latency.
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(x + i));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(x + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(x + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(x + i + 24));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    double s = 0;
    for (float l : lanes) s += l;
    return s;
#else
    return probe_sum_scalar(x, n);
#endif
}

namespace {
// The 64-bit words of [p, p + n) summed into acc: four independent loads a step, so that the loop
// is bound by loads (the compiler vectorizes it); the tail byte by byte.
void read_words(const uint8_t* p, size_t n, uint64_t (&acc)[4]) {
    size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        uint64_t w[4];
        std::memcpy(w, p + i, 32);
        for (int q = 0; q < 4; q++) acc[q] += w[q];
    }
    for (; i < n; i++) acc[0] += p[i];
}
}  // namespace

double stream_read_seconds(const std::vector<ReadRegion>& regions, int threads) {
    uint64_t sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        uint64_t acc[4] = {0, 0, 0, 0};
        for (const ReadRegion& r : regions) {
            const size_t lines = (r.bytes + 63) / 64;
            const size_t b = std::min(r.bytes, lines * size_t(t) / size_t(nt) * 64);
            const size_t e = std::min(r.bytes, lines * size_t(t + 1) / size_t(nt) * 64);
            if (b < e) read_words(static_cast<const uint8_t*>(r.data) + b, e - b, acc);
        }
        sink += acc[0] + acc[1] + acc[2] + acc[3];
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    __asm__ volatile("" : : "r"(sink) : "memory");  // the sum is used: the reads stay
    return s;
}

std::vector<ProbeSample> probe_read_bandwidth(size_t bytes, int reps, int threads, size_t* huge_page_bytes) {
    size_t n = bytes / sizeof(float) / 32 / size_t(threads) * 32 * size_t(threads);  // floats
    // In 2 MiB pages where the kernel gives them, as the weights and the KV cache are: the probe is
    // the ceiling of a decode step that streams them, and a read in 2 MiB pages is faster than in
    // 4 KiB ones (docs/measurements/source-comment-history.md).
    const size_t alloc = (n * sizeof(float) + kHugePage - 1) / kHugePage * kHugePage;
    std::unique_ptr<float, FreeDeleter> buf(static_cast<float*>(std::aligned_alloc(kHugePage, alloc)));
    if (!buf) return {};
    ::madvise(buf.get(), alloc, MADV_HUGEPAGE);  // best effort: EINVAL where the kernel has no THP
    float* x = buf.get();
    size_t chunk = n / size_t(threads);  // a multiple of 32
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int t = 0; t < threads; t++)  // first touch by the thread that will read it
        for (size_t i = 0; i < chunk; i++) x[size_t(t) * chunk + i] = float((i & 7) + 1) * 0.125f;
    if (huge_page_bytes) *huge_page_bytes = std::min(huge_page_bytes_at(x), n * sizeof(float));

    std::vector<ProbeSample> out;
    volatile double sink = 0;
    for (int r = 0; r < reps; r++) {
        double total = 0;
        auto t0 = Clock::now();
#pragma omp parallel for num_threads(threads) schedule(static) reduction(+ : total)
        for (int t = 0; t < threads; t++) total += probe_sum(x + size_t(t) * chunk, chunk);
        double s = seconds_since(t0);
        sink = sink + total;
        out.push_back({s, double(n * sizeof(float)) / s / 1e9});
    }
    return out;
}

std::vector<ProbeSample> probe_fma_peak(long iters, int reps, int threads) {
    std::vector<ProbeSample> out;
    volatile float sink = 0;
    for (int r = 0; r < reps; r++) {
        float total = 0;
        auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
#if defined(__AVX512F__)
            // The widest vectors the build targets (the engine's kernels, Eigen included, use
            // them too): 12 chains of 16 lanes, enough to cover FMA latency on two pipes.
            __m512 acc[12];
            for (int c = 0; c < 12; c++) acc[c] = _mm512_set1_ps(0.001f * float(c + omp_get_thread_num()));
            const __m512 mul = _mm512_set1_ps(0.999999f), add = _mm512_set1_ps(1e-7f);
            for (long i = 0; i < iters; i++)
                for (int c = 0; c < 12; c++) acc[c] = _mm512_fmadd_ps(acc[c], mul, add);
            __m512 s = acc[0];
            for (int c = 1; c < 12; c++) s = _mm512_add_ps(s, acc[c]);
            alignas(64) float lanes[16];  // summed through memory: GCC 12 warns on _mm512_reduce_add_ps's header
            _mm512_store_ps(lanes, s);
            for (float l : lanes) total += l;
#elif defined(__AVX2__) && defined(__FMA__)
            // 12 chains: enough to cover FMA latency (4-5 cycles) on two pipes.
            __m256 acc[12];
            for (int c = 0; c < 12; c++) acc[c] = _mm256_set1_ps(0.001f * float(c + omp_get_thread_num()));
            const __m256 mul = _mm256_set1_ps(0.999999f), add = _mm256_set1_ps(1e-7f);
            for (long i = 0; i < iters; i++)
                for (int c = 0; c < 12; c++) acc[c] = _mm256_fmadd_ps(acc[c], mul, add);
            alignas(32) float lanes[8];
            __m256 s = acc[0];
            for (int c = 1; c < 12; c++) s = _mm256_add_ps(s, acc[c]);
            _mm256_store_ps(lanes, s);
            for (float l : lanes) total += l;
#else
            float acc[12][8];
            for (int c = 0; c < 12; c++)
                for (int l = 0; l < 8; l++) acc[c][l] = 0.001f * float(c + l);
            for (long i = 0; i < iters; i++)
                for (int c = 0; c < 12; c++)
                    for (int l = 0; l < 8; l++) acc[c][l] = acc[c][l] * 0.999999f + 1e-7f;
            for (int c = 0; c < 12; c++)
                for (int l = 0; l < 8; l++) total += acc[c][l];
#endif
        }
        double s = seconds_since(t0);
        sink = sink + total;
        double flops = double(threads) * double(iters) * 12 * kProbeFmaLanes * 2;
        out.push_back({s, flops / s / 1e9});
    }
    return out;
}

const char* probe_int_dot_name() {
#if defined(__AVX512BW__) && defined(__AVX512VNNI__)
    return "vpdpwssd zmm";
#elif defined(__AVX512BW__)
    return "vpmaddwd+vpaddd zmm";
#elif defined(__AVX2__) && defined(__AVXVNNI__)
    return "vpdpwssd ymm";
#elif defined(__AVX2__)
    return "vpmaddwd+vpaddd ymm";
#else
    return "";
#endif
}

std::vector<ProbeSample> probe_int_dot_peak(long iters, int reps, int threads) {
    std::vector<ProbeSample> out;
    if (kProbeIntMacs == 0) return out;
    volatile int64_t sink = 0;
    for (int r = 0; r < reps; r++) {
        int64_t total = 0;
        auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
        {
            // Small codes, so that no lane overflows however long the chains (the sums wrap
            // harmlessly in any case: only the instruction rate is measured).
#if defined(__AVX512BW__)
            __m512i acc[12];
            for (int c = 0; c < 12; c++) acc[c] = _mm512_set1_epi32(c + omp_get_thread_num());
            const __m512i a = _mm512_set1_epi16(3), b = _mm512_set1_epi16(-1);
            for (long i = 0; i < iters; i++)
                for (int c = 0; c < 12; c++) {
#if defined(__AVX512VNNI__)
                    acc[c] = _mm512_dpwssd_epi32(acc[c], a, b);
#else
                    acc[c] = _mm512_add_epi32(acc[c], _mm512_madd_epi16(a, b));
#endif
                }
            alignas(64) int32_t lanes[16];
            __m512i s = acc[0];
            for (int c = 1; c < 12; c++) s = _mm512_add_epi32(s, acc[c]);
            _mm512_store_si512(lanes, s);
            for (int32_t l : lanes) total += l;
#elif defined(__AVX2__)
            __m256i acc[12];
            for (int c = 0; c < 12; c++) acc[c] = _mm256_set1_epi32(c + omp_get_thread_num());
            const __m256i a = _mm256_set1_epi16(3), b = _mm256_set1_epi16(-1);
            for (long i = 0; i < iters; i++)
                for (int c = 0; c < 12; c++) {
#if defined(__AVXVNNI__)
                    acc[c] = _mm256_dpwssd_avx_epi32(acc[c], a, b);
#else
                    acc[c] = _mm256_add_epi32(acc[c], _mm256_madd_epi16(a, b));
#endif
                }
            alignas(32) int32_t lanes[8];
            __m256i s = acc[0];
            for (int c = 1; c < 12; c++) s = _mm256_add_epi32(s, acc[c]);
            _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
            for (int32_t l : lanes) total += l;
#endif
        }
        double s = seconds_since(t0);
        sink = sink + total;
        const double ops = double(threads) * double(iters) * 12 * kProbeIntMacs * 2;
        out.push_back({s, ops / s / 1e9});
    }
    return out;
}

}  // namespace ridge
