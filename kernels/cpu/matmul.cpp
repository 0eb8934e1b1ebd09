// Linear layers on the CPU (see matmul.h): Y = X . W^T, every numbered variant side by side.
//   The row jobs: one matmul's, or several matmuls', output rows split among the threads of one
//     OpenMP region.
//   Float activations: v0 the scalar reference, v1 OpenMP over rows dequantizing one weight row at
//     a time, v2 Eigen for f32 weights, v3 AVX2 decoding blocks in registers straight into FMAs, v5
//     Eigen over dequantized tiles (v6, the packed GEMM, is matmul_packed.cpp).
//   Integer activations: quantize_rows, the scalar twin, v4_int (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0;
//     ymm, and zmm where the build has AVX-512) and v4_int_k (Q4_K, Q5_K, Q6_K).
//   The entry points forward() calls: matmul_rows, matmul_rows_fused, matmul_tiled.
// The weight formats' decoders are weights/formats/'s; the loops here call them.
#include "kernels/cpu/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <Eigen/Dense>

#include "kernels/cpu/row_groups.h"
#include "kernels/cpu/simd.h"
#define RIDGE_MATMUL_V3 RIDGE_CPU_SIMD
#define RIDGE_MATMUL_V4 RIDGE_CPU_SIMD
#define RIDGE_MATMUL_V4_ZMM RIDGE_FORMAT_ZMM
#define RIDGE_MATMUL_V4K RIDGE_CPU_SIMD

#include "weights/error.h"
#include "weights/formats.h"
#include "weights/quant.h"


// ===============================================================================================
// Row jobs: output rows split among the threads of one OpenMP region (matmul.h)
// ===============================================================================================

namespace ridge::cpu {

void run_row_jobs(const RowJob* jobs, int n_jobs, bool parallel) {
    if (!parallel) {
        for (int o = 0; o < n_jobs; o++)
            if (jobs[o].rows > 0) jobs[o].run(0, jobs[o].rows);
        return;
    }
    // Job o covers [start[o], start[o] + rows * row_cost) of the cost line; a thread's share is
    // [total * t / T, total * (t + 1) / T). A cut at x falls in job o at row ceil((x - start) /
    // row_cost), rounded up to the job's alignment: neighbouring threads compute the same cut.
    std::vector<double> start(size_t(n_jobs) + 1, 0.0);
    for (int o = 0; o < n_jobs; o++) start[size_t(o) + 1] = start[size_t(o)] + double(jobs[o].rows) * jobs[o].row_cost;
    const double total = start[size_t(n_jobs)];
    auto cut = [&](int o, double x) {
        const RowJob& job = jobs[o];
        const double r = std::ceil((x - start[size_t(o)]) / job.row_cost);
        int64_t j = int64_t(std::clamp(r, 0.0, double(job.rows)));
        j = (j + job.align - 1) / job.align * job.align;
        return std::min(j, job.rows);
    };
#pragma omp parallel
    {
        const int t = omp_get_thread_num(), n_threads = omp_get_num_threads();
        const double a = total * t / n_threads, b = t + 1 == n_threads ? total : total * (t + 1) / n_threads;
        for (int o = 0; o < n_jobs; o++) {
            const int64_t j0 = t == 0 ? 0 : cut(o, a), j1 = t + 1 == n_threads ? jobs[o].rows : cut(o, b);
            if (j0 < j1) jobs[o].run(j0, j1);
        }
    }
}

}  // namespace ridge::cpu

// ===============================================================================================
// Float activations: v0, v1, v2, v3, v5, and the entry points
// ===============================================================================================

namespace ridge::cpu {

Dims check_weight(const TensorView& W, const char* who) {
    if (W.shape.empty() || W.shape.size() > 2 || W.data == nullptr)
        throw Error(std::string(who) + ": weight '" + W.name + "' must be a 2-D tensor, has shape " +
                    shape_str(W.shape));
    const Dims d{W.ne(0), W.ne(1)};
    if (d.k % block_elems(W.type) != 0)
        throw Error(std::string(who) + ": weight '" + W.name + "' row length " + std::to_string(d.k) +
                    " is not a multiple of the " + std::string(dtype_name(W.type)) + " block size " +
                    std::to_string(block_elems(W.type)));
    return d;
}

namespace {

// sum a[i]*b[i] in f32; the loop is written so the compiler vectorizes it.
inline float dot_f32(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

bool any_loadable(DType t) { return can_dequantize(t); }
bool only_f32(DType t) { return t == DType::F32; }

// The weight types v3 decodes in registers (F32 too, so it takes every hand-worked case).
bool v3_types(DType t) {
    return RIDGE_MATMUL_V3 && (t == DType::F32 || t == DType::F16 || t == DType::BF16 || t == DType::Q8_0 ||
                               t == DType::Q4_0 || t == DType::Q4_1);
}

#if RIDGE_MATMUL_V3
// Weight rows [j, j1) of W, asked for ahead into the cache, called with the next pass's rows while
// the current pass computes. A pass decodes its neighbouring rows side by side, block by block:
// short runs that the hardware prefetchers do not follow (v4_rows below), so without this the decode
// waits on memory about as long as the pass computes at 16 rows of X
// (docs/measurements/, the Xeon model 207). No arithmetic changes.
inline void prefetch_rows(const TensorView& W, size_t row_bytes, int64_t j, int64_t j1) {
    const char* from = reinterpret_cast<const char*>(W.data) + size_t(j) * row_bytes;
    const char* to = reinterpret_cast<const char*>(W.data) + size_t(j1) * row_bytes;
    for (const char* p = from; p < to; p += 64) _mm_prefetch(p, _MM_HINT_T1);
}

// ---- v3: the decoders (DecQ4_0, DecQ4_1, DecQ8_0, DecF16, DecBF16, DecF32) are the formats'
// (weights/formats/); their contract is in floats.h. The caller forms, per x row,
//   quantized blocks:  acc += d * (q . x)   (q the integer codes as f32, exact), and for Q4_1 also
//                      macc += mn * sum(x) per block, with sum(x) precomputed once per row of X;
//   F16 / F32 (kScaled false): acc += q * x lane-wise.
// All arithmetic is f32; only the order of summation differs from v0 (which sums in double).

// R weight rows (w[r], each k elements in Dec's format) times M x rows (x + i*k):
// y[i * y_stride + r] = sum_c w[r][c] * x[i*k + c]. Each loaded x vector feeds R rows and each
// decoded weight block feeds M x rows.
// Preconditions: k % 32 == 0 for the quantized decoders; F16 / F32 take any k, the last k % 8
// elements scalar. xsum (M, k/32) per-block sums of x (row stride xsum_stride), Q4_1 only.
// Cost: 2*R*M*k FLOPs; decode of R rows once; reads R rows of W and M rows of x.
template <class Dec, int R, int M>
inline void dot_rows(const uint8_t* const* w, const float* x, int64_t k, const float* xsum,
                     int64_t xsum_stride, float* y, int64_t y_stride) {
    constexpr int V = Dec::kBlk / 8;  // vectors per block
    const int64_t nb = k / Dec::kBlk;
    __m256 acc[R][M];
    float macc[R][M];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) {
            acc[r][i] = _mm256_setzero_ps();
            macc[r][i] = 0.0f;
        }
    for (int64_t b = 0; b < nb; b++) {
        __m256 xv[M][V];
        for (int i = 0; i < M; i++)
            for (int v = 0; v < V; v++) xv[i][v] = _mm256_loadu_ps(x + i * k + b * Dec::kBlk + 8 * v);
        for (int r = 0; r < R; r++) {
            __m256 q[V];
            float d = 1.0f, mn = 0.0f;
            Dec::decode(w[r], b, q, d, mn);
            for (int i = 0; i < M; i++) {
                if constexpr (Dec::kScaled) {
                    __m256 s = _mm256_mul_ps(q[0], xv[i][0]);
                    for (int v = 1; v < V; v++) s = _mm256_fmadd_ps(q[v], xv[i][v], s);
                    acc[r][i] = _mm256_fmadd_ps(_mm256_set1_ps(d), s, acc[r][i]);
                    if constexpr (Dec::kUsesXsum) macc[r][i] += mn * xsum[i * xsum_stride + b];
                } else {
                    acc[r][i] = _mm256_fmadd_ps(q[0], xv[i][0], acc[r][i]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) {
            float s = simd::hsum8(acc[r][i]) + macc[r][i];
            if constexpr (Dec::kBlk == 8)
                for (int64_t c = nb * 8; c < k; c++) s += Dec::elem(w[r], c) * x[i * k + c];
            y[i * y_stride + r] = s;
        }
}

// F16 / BF16 / F32 rows (no block scale to apply): one weight row at a time, dotted with each of
// the m rows of X with 4 independent accumulators. The hardware prefetcher follows one stream per
// core better than four interleaved rows, and a software prefetch 2 KiB ahead of the stream helps
// it further (1-4 KiB alike, 512 B worse; docs/measurements/source-comment-history.md). Each row
// of X meets the weights in the same order whatever m is.
constexpr size_t kElementsAhead = 2048;
template <class Dec>
void gemv_elements(const TensorView& W, int64_t k, int64_t n, const float* X, int64_t m, float* Y, int64_t j_begin,
                   int64_t j_end) {
    static_assert(!Dec::kScaled && Dec::kBlk == 8);
    const int64_t nb = k / 8;
    const size_t step = 4 * row_bytes(W.type, 8);  // bytes of 4 blocks: 64 (F16, BF16) or 128 (F32)
    for (int64_t j = j_begin; j < j_end; j++) {
        const uint8_t* row = W.row(j);
        for (int64_t i = 0; i < m; i++) {
            const float* x = X + i * k;
            __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
            float d, mn;
            __m256 q;
            int64_t b = 0;
            for (; b + 4 <= nb; b += 4) {
                if (i == 0)  // the weight stream, kElementsAhead bytes on (into the next rows)
                    for (size_t o = 0; o < step; o += 64)
                        _mm_prefetch(reinterpret_cast<const char*>(row) + size_t(b / 4) * step + o + kElementsAhead, _MM_HINT_T0);
                for (int v = 0; v < 4; v++) {
                    Dec::decode(row, b + v, &q, d, mn);
                    acc[v] = _mm256_fmadd_ps(q, _mm256_loadu_ps(x + 8 * (b + v)), acc[v]);
                }
            }
            for (; b < nb; b++) {
                Dec::decode(row, b, &q, d, mn);
                acc[0] = _mm256_fmadd_ps(q, _mm256_loadu_ps(x + 8 * b), acc[0]);
            }
            float s = simd::hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
            for (int64_t c = nb * 8; c < k; c++) s += Dec::elem(row, c) * x[c];
            Y[i * n + j] = s;
        }
    }
}

// ---- F16 / BF16 / F32 with the rows of X in the lanes -------------------------------------------
// From 16 rows of X on (8 in an AVX2 build), gemv_elements decodes every weight row once per row of
// X and runs an 8-lane FMA per 8 elements. Here a weight row is decoded once into f32, and each
// element, broadcast, multiplies one vector holding that element of 16 (8) rows of X. gemv_elements
// keeps, per (weight row, X row), 32 float chains: lane l of accumulator v takes the products of
// elements 8b + l for blocks b = v mod 4, in block order (the blocks past the last whole 4 going to
// accumulator 0); its result is hsum8((acc0 + acc1) + (acc2 + acc3)). Each of those chains is here
// one vector across the rows of X, taking the same FMAs in the same order, so a row's output is bit
// for bit gemv_elements' alone (the tests check it). k % 8 == 0 (gemv_elements' scalar tail has no
// lanes form; the caller falls back). The chains are taken a sweep at a time, H lanes of one
// accumulator for R weight rows, so that the R x H accumulators stay in registers and each vector
// of X, loaded once, serves R weight rows; a sweep's chains wait in a buffer for the final sums.
// zmm: R = 6, H = 4 (24 of 32 registers) was faster than R = 2, H = 8, which loads a vector of X
// for every 2 FMAs (docs/measurements/, the Xeon model 207).
struct FloatLanesYmm {
    static constexpr int64_t L = 8;
    static constexpr int R = 3, H = 4;  // 12 accumulators of 16 registers
    using F = __m256;
    static F load(const float* p) { return _mm256_load_ps(p); }
    static F set1(const float* p) { return _mm256_broadcast_ss(p); }
    static F zero() { return _mm256_setzero_ps(); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static void store(float* p, F v) { _mm256_store_ps(p, v); }
};

#if RIDGE_FORMAT_ZMM
struct FloatLanesZmm {
    static constexpr int64_t L = 16;
    static constexpr int R = 6, H = 4;  // 24 accumulators of 32 registers
    using F = __m512;
    static F load(const float* p) { return _mm512_load_ps(p); }
    static F set1(const float* p) { return _mm512_set1_ps(*p); }
    static F zero() { return _mm512_setzero_ps(); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static void store(float* p, F v) { _mm512_store_ps(p, v); }
};
using FloatLanes = FloatLanesZmm;
#else
using FloatLanes = FloatLanesYmm;
#endif

// Output rows [j0, j1) for the first L * floor(m / L) rows of X (m x k, k % 8 == 0), V::R weight
// rows a pass (a short last pass repeats its last row), each decoded once into f32 for every group
// of L rows of X. Returns the rows of X it computed.
// Cost: 2 * (j1 - j0) * k FLOPs per row of X computed, each weight row read once; besides, each
// calling thread transposes its groups of X once (m * k copies) and decodes its share of W once.
template <class Dec, class V>
int64_t gemv_lane_rows(const TensorView& W, int64_t k, int64_t n, const float* X, int64_t m, float* Y, int64_t j0,
                       int64_t j1) {
    using F = typename V::F;
    constexpr int64_t L = V::L;
    constexpr int R = V::R;
    const int64_t groups = m / L, nb = k / 8, nb4 = nb / 4 * 4;
    if (groups == 0 || k % 8 != 0) return 0;
    // xt[(g * k + c) * L + i] = X[(g * L + i) * k + c]: element c of a group's rows, one vector.
    static thread_local std::vector<float, CacheLineAllocator<float>> xt, wf, chains;
    xt.resize(size_t(groups * k * L)), wf.resize(size_t(R * k)), chains.resize(size_t(4 * R * 8 * L));
    for (int64_t g = 0; g < groups; g++)
        for (int64_t i = 0; i < L; i++)
            for (int64_t c = 0; c < k; c++) xt[size_t((g * k + c) * L + i)] = X[(g * L + i) * k + c];
    const size_t rb = row_bytes(W.type, k);
    for (int64_t j = j0; j < j1; j += R) {
        const int rows = int(std::min<int64_t>(R, j1 - j));
        for (int r = 0; r < R; r++) {  // wf[r * k + c]: element c of weight row r, as gemv_elements decodes it
            const uint8_t* row = W.row(j + std::min(r, rows - 1));
            for (int64_t b = 0; b < nb; b++) {
                __m256 q;
                float d, mn;
                Dec::decode(row, b, &q, d, mn);
                _mm256_storeu_ps(wf.data() + r * k + 8 * b, q);
            }
        }
        prefetch_rows(W, rb, std::min(j + R, j1), std::min(j + 2 * R, j1));
        for (int64_t g = 0; g < groups; g++) {
            const float* x = xt.data() + g * k * L;
            // Accumulator v (blocks v, v + 4, ..., and for v = 0 the tail), lanes l0 .. l0 + H - 1
            for (int v = 0; v < 4; v++)
                for (int l0 = 0; l0 < 8; l0 += V::H) {
                    F acc[R][V::H];
                    for (int r = 0; r < R; r++)
                        for (int l = 0; l < V::H; l++) acc[r][l] = V::zero();
                    auto block = [&](int64_t b) {
                        for (int l = 0; l < V::H; l++) {
                            const int64_t c = 8 * b + l0 + l;
                            const F xv = V::load(x + c * L);
                            for (int r = 0; r < R; r++) acc[r][l] = V::fma(V::set1(wf.data() + r * k + c), xv, acc[r][l]);
                        }
                    };
                    for (int64_t b = v; b < nb4; b += 4) block(b);
                    if (v == 0)
                        for (int64_t b = nb4; b < nb; b++) block(b);
                    for (int r = 0; r < R; r++)
                        for (int l = 0; l < V::H; l++) V::store(chains.data() + ((v * R + r) * 8 + l0 + l) * L, acc[r][l]);
                }
            alignas(64) float out[R][L];
            for (int r = 0; r < R; r++) {
                auto chain = [&](int v, int l) { return V::load(chains.data() + ((v * R + r) * 8 + l) * L); };
                F t[8];  // (acc0 + acc1) + (acc2 + acc3), lane by lane
                for (int l = 0; l < 8; l++) t[l] = V::add(V::add(chain(0, l), chain(1, l)), V::add(chain(2, l), chain(3, l)));
                // hsum8's order: ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7))
                V::store(out[r], V::add(V::add(V::add(t[0], t[4]), V::add(t[2], t[6])), V::add(V::add(t[1], t[5]), V::add(t[3], t[7]))));
            }
            for (int64_t i = 0; i < L; i++)
                for (int r = 0; r < rows; r++) Y[(g * L + i) * n + j + r] = out[r][i];
        }
    }
    return groups * L;
}

// The v3 driver for one decoder, as a row job: output rows in groups of kRows (each thread takes a
// contiguous share); within a group the X rows pass kXRows at a time, so the group's kRows weight
// rows are read from memory once (they stay in L1) and each decoded block serves kXRows rows of X.
// Element types (no block scale) go row by row (gemv_elements, above).
template <class Dec>
RowJob v3_job(const TensorView& W, int64_t k, int64_t n, const float* X, int64_t m, float* Y) {
    RowJob job;
    job.rows = n;
    job.row_cost = double(row_bytes(W.type, k));
    if constexpr (!Dec::kScaled) {
        job.run = [&W, k, n, X, m, Y](int64_t j0, int64_t j1) {
            const int64_t t0 = gemv_lane_rows<Dec, FloatLanes>(W, k, n, X, m, Y, j0, j1);
            if (t0 < m) gemv_elements<Dec>(W, k, n, X + t0 * k, m - t0, Y + t0 * n, j0, j1);
        };
        return job;
    }
    constexpr int kRows = 4, kXRows = 2;
    const int64_t nb = k / Dec::kBlk;
    auto xsum = std::make_shared<std::vector<float>>();  // (m, k/32) per-block sums of X, Q4_1 only
    if constexpr (Dec::kUsesXsum) {
        xsum->resize(size_t(m * nb));
        for (int64_t i = 0; i < m; i++)
            for (int64_t b = 0; b < nb; b++) {
                float s = 0.0f;
                for (int c = 0; c < Dec::kBlk; c++) s += X[i * k + b * Dec::kBlk + c];
                (*xsum)[size_t(i * nb + b)] = s;
            }
    }
    job.align = kRows;
    job.run = [&W, k, n, X, m, Y, nb, xsum](int64_t j_begin, int64_t j_end) {
        for_row_groups<kRows, kXRows>(j_begin, j_end, m, n, Y, [&](int64_t j) { return W.row(j); },
                                      [&]<int R, int M>(const uint8_t* const* w, int64_t i, float* y, int64_t ys) {
                                          const float* xs = Dec::kUsesXsum ? xsum->data() + i * nb : nullptr;
                                          dot_rows<Dec, R, M>(w, X + i * k, k, xs, nb, y, ys);
                                      });
    };
    return job;
}

// The v3 decoders as a plain dequantizer: rows [j0, j0 + rows) of W into out (rows, k) f32.
template <class Dec>
void dequantize_rows_v3(const TensorView& W, int64_t j0, int64_t rows, int64_t k, float* out) {
    constexpr int V = Dec::kBlk / 8;
    const int64_t nb = k / Dec::kBlk;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t* row = W.row(j0 + r);
        float* o = out + r * k;
        for (int64_t b = 0; b < nb; b++) {
            __m256 q[V];
            float d = 1.0f, mn = 0.0f;
            Dec::decode(row, b, q, d, mn);
            for (int v = 0; v < V; v++) {
                const __m256 w = Dec::kScaled ? _mm256_fmadd_ps(q[v], _mm256_set1_ps(d), _mm256_set1_ps(mn)) : q[v];
                _mm256_storeu_ps(o + b * Dec::kBlk + 8 * v, w);
            }
        }
        if constexpr (Dec::kBlk == 8)
            for (int64_t c = nb * 8; c < k; c++) o[c] = Dec::elem(row, c);
    }
}
#endif  // RIDGE_MATMUL_V3


}  // namespace

void dequantize_rows(const TensorView& W, int64_t j0, int64_t rows, int64_t k, float* out) {
#if RIDGE_MATMUL_V3
    switch (W.type) {
        case DType::F16: return dequantize_rows_v3<DecF16>(W, j0, rows, k, out);
        case DType::BF16: return dequantize_rows_v3<DecBF16>(W, j0, rows, k, out);
        case DType::Q8_0: return dequantize_rows_v3<DecQ8_0>(W, j0, rows, k, out);
        case DType::Q4_0: return dequantize_rows_v3<DecQ4_0>(W, j0, rows, k, out);
        case DType::Q4_1: return dequantize_rows_v3<DecQ4_1>(W, j0, rows, k, out);
        default: break;
    }
#endif
    for (int64_t r = 0; r < rows; r++) dequantize_row(W.type, W.row(j0 + r), out + r * k, k);
}

// v0: the plain reference. One thread; the row is dequantized with the weights/ reference
// decoder and every dot product is accumulated in double.
Cost matmul_v0_scalar(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v0_scalar");
    std::vector<float> w_row(static_cast<size_t>(d.k));  // (k) one dequantized weight row
    for (int64_t j = 0; j < d.n; j++) {
        dequantize_row(W.type, W.row(j), w_row.data(), d.k);
        for (int64_t i = 0; i < m; i++) {
            double acc = 0.0;
            for (int64_t c = 0; c < d.k; c++) acc += double(X[i * d.k + c]) * double(w_row[c]);
            Y[i * d.n + j] = float(acc);
        }
    }
    return matmul_cost(W, m);
}

// v1: output rows split across OpenMP threads. F32 rows are used in place; any other type is
// dequantized once per row into the thread's buffer and reused for all m input rows.
Cost matmul_v1_rows(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v1_rows");
    const bool is_f32 = W.type == DType::F32;
    const double work = double(m) * double(d.n) * double(d.k);  // multiply-adds
#pragma omp parallel if (work >= kParallelMinWork)
    {
        std::vector<float> w_buf(is_f32 ? 0 : size_t(d.k));  // (k) this thread's dequantized row
#pragma omp for schedule(static)
        for (int64_t j = 0; j < d.n; j++) {
            const float* w_row;  // (k)
            if (is_f32) {
                w_row = reinterpret_cast<const float*>(W.row(j));
            } else {
                dequantize_row(W.type, W.row(j), w_buf.data(), d.k);
                w_row = w_buf.data();
            }
            for (int64_t i = 0; i < m; i++) Y[i * d.n + j] = dot_f32(X + i * d.k, w_row, d.k);
        }
    }
    return matmul_cost(W, m);
}

// v2: F32 weights through Eigen, mapped without a copy: Y (m,n) = X (m,k) * W(n,k)^T.
Cost matmul_v2_eigen(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v2_eigen");
    if (W.type != DType::F32)
        throw Error("matmul_v2_eigen: weight '" + W.name + "' is " + std::string(dtype_name(W.type)) +
                    ", this variant takes F32 only");
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const RowMajor> w(reinterpret_cast<const float*>(W.data), d.n, d.k);  // (n, k)
    Eigen::Map<const RowMajor> x(X, m, d.k);                                        // (m, k)
    Eigen::Map<RowMajor> y(Y, m, d.n);                                              // (m, n)
    if (m == 1)
        y.row(0).noalias() = (w * x.row(0).transpose()).transpose();
    else
        y.noalias() = x * w.transpose();
    return matmul_cost(W, m);
}

// v3: AVX2 + FMA + F16C; Q4_0 / Q4_1 / Q8_0 / F16 (and F32) blocks decoded in registers straight
// into FMAs, kRows output rows per pass so each x vector is reused (see matmul_v3_typed).
Cost matmul_v3_simd(const TensorView& W, const float* X, int64_t m, float* Y) {
    const RowJob job = v3_row_job(W, X, m, Y);  // checks W
    run_row_jobs(&job, 1, double(m) * double(W.ne(1)) * double(W.ne(0)) >= kParallelMinWork);
    return matmul_cost(W, m);
}

RowJob v3_row_job(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v3_simd");
    if (!v3_types(W.type))
        throw Error("matmul_v3_simd: weight '" + W.name + "' is " + std::string(dtype_name(W.type)) +
                    (RIDGE_MATMUL_V3 ? ", this variant takes F32, F16, BF16, Q8_0, Q4_0, Q4_1 only"
                                     : ", and this build has no AVX2 + FMA + F16C"));
#if RIDGE_MATMUL_V3
    switch (W.type) {
        case DType::F32: return v3_job<DecF32>(W, d.k, d.n, X, m, Y);
        case DType::F16: return v3_job<DecF16>(W, d.k, d.n, X, m, Y);
        case DType::BF16: return v3_job<DecBF16>(W, d.k, d.n, X, m, Y);
        case DType::Q8_0: return v3_job<DecQ8_0>(W, d.k, d.n, X, m, Y);
        case DType::Q4_0: return v3_job<DecQ4_0>(W, d.k, d.n, X, m, Y);
        case DType::Q4_1: return v3_job<DecQ4_1>(W, d.k, d.n, X, m, Y);
        default: break;
    }
#endif
    return RowJob{};
}

// v5: prefill in tiles. Each OpenMP thread takes kTileRows weight rows at a time, dequantizes them
// once into an f32 tile (F32 rows are used in place) and multiplies all m rows of X by it with
// Eigen's GEMM: every weight loaded from memory serves all m tokens, and the tile stays in cache
// while it does. Arithmetic: f32 weights times f32 activations, as v0 (summation order differs).
Cost matmul_v5_tiled(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v5_tiled");
    const int64_t tiles = (d.n + kTileRows - 1) / kTileRows;
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    const Eigen::Map<const RowMajor> x(X, m, d.k);  // (m, k)
    const double work = double(m) * double(d.n) * double(d.k);
#pragma omp parallel if (work >= kParallelMinWork)
    {
        std::vector<float> tile(W.type == DType::F32 ? 0 : size_t(kTileRows * d.k));  // (kTileRows, k)
#pragma omp for schedule(static)
        for (int64_t t = 0; t < tiles; t++) {
            const int64_t j0 = t * kTileRows, rows = std::min(kTileRows, d.n - j0);
            const float* w_rows = reinterpret_cast<const float*>(W.row(j0));
            if (W.type != DType::F32) {
                dequantize_rows(W, j0, rows, d.k, tile.data());
                w_rows = tile.data();
            }
            const Eigen::Map<const RowMajor> w(w_rows, rows, d.k);  // (rows, k)
            Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> y(Y + j0, m, rows, Eigen::OuterStride<>(d.n));
            y.noalias() = x * w.transpose();  // (m, rows) columns j0.. of Y
        }
    }
    return matmul_cost(W, m);
}

bool has_int_kernel(DType t) { return int_simd_types(t) || int_k_simd_types(t); }
int64_t tiled_min_rows(DType t, bool integers) {
    if (int_zmm_kernel() && (t == DType::F16 || t == DType::BF16)) return kTiledMinRowsFloatZmm;  // the float lanes
    if (!integers || !has_int_kernel(t)) return kTiledMinRows;
    if (int_zmm_kernel()) return int_k_types(t) ? kTiledMinRowsIntKZmm : kTiledMinRowsIntZmm;  // against v7
    return int_simd_types(t) ? kTiledMinRowsInt : kTiledMinRows;
}
bool takes_int_input(DType t, int64_t m) { return has_int_kernel(t) && m < tiled_min_rows(t); }

Cost matmul_rows(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y) {
    if (Xq != nullptr && has_int_kernel(W.type)) {
        if (Xq->m != m) throw Error("matmul: weight '" + W.name + "' got integer rows for another batch");
        return int_k_simd_types(W.type) ? matmul_v4_int_k(W, *Xq, Y) : matmul_v4_int(W, *Xq, Y);
    }
    if (v3_types(W.type)) return matmul_v3_simd(W, X, m, Y);
    if (!can_dequantize(W.type))
        throw Error("matmul: weight '" + W.name + "' has type " + std::string(dtype_name(W.type)) +
                    ", which ridge cannot multiply");
    return matmul_v1_rows(W, X, m, Y);
}

void matmul_rows_fused(const MatmulOutput* outs, int n_outs, const float* X, int64_t m, const QuantizedRows* Xq,
                       Cost* costs) {
    // Each output as matmul_rows would take it: a row job for the integer and v3 kernels, v1 alone.
    std::vector<RowJob> jobs;
    double work = 0;  // multiply-adds
    for (int o = 0; o < n_outs; o++) {
        const TensorView& W = *outs[o].w;
        if (Xq != nullptr && has_int_kernel(W.type)) {
            if (Xq->m != m) throw Error("matmul: weight '" + W.name + "' got integer rows for another batch");
            jobs.push_back(int_k_simd_types(W.type) ? int_k_row_job(W, *Xq, outs[o].y) : int_row_job(W, *Xq, outs[o].y));
            costs[o] = matmul_int_cost(W, m);
        } else if (v3_types(W.type)) {
            jobs.push_back(v3_row_job(W, X, m, outs[o].y));
            costs[o] = matmul_cost(W, m);
        } else {
            costs[o] = matmul_rows(W, X, m, Xq, outs[o].y);
            continue;
        }
        work += double(m) * double(W.ne(1)) * double(W.ne(0));
    }
    run_row_jobs(jobs.data(), int(jobs.size()), work >= kParallelMinWork);
}

Cost matmul_tiled(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y) {
    if (Xq != nullptr && Xq->m != m) throw Error("matmul: weight '" + W.name + "' got integer rows for another batch");
    if (Xq != nullptr && v7_types(W.type)) return matmul_v7_int_packed(W, *Xq, Y);
    if (W.type == DType::F32) return matmul_v2_eigen(W, X, m, Y);
    if (!can_dequantize(W.type))
        throw Error("matmul: weight '" + W.name + "' has type " + std::string(dtype_name(W.type)) +
                    ", which ridge cannot multiply");
    return matmul_v6_packed(W, X, m, Y);
}

Cost matmul(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y) {
    return m < tiled_min_rows(W.type, Xq != nullptr) ? matmul_rows(W, X, m, Xq, Y) : matmul_tiled(W, X, m, Xq, Y);
}

Cost matmul(const TensorView& W, const float* X, int64_t m, float* Y) { return matmul(W, X, m, nullptr, Y); }

Cost matmul_cost(const TensorView& W, int64_t m, bool int_input) {
    return int_input && (takes_int_input(W.type, m) || v7_types(W.type)) ? matmul_int_cost(W, m) : matmul_cost(W, m);
}

const std::vector<MatmulVariant>& matmul_variants() {
    static const std::vector<MatmulVariant> variants = {
        {"v0_scalar", matmul_v0_scalar, any_loadable},
        {"v1_rows", matmul_v1_rows, any_loadable},
        {"v2_eigen", matmul_v2_eigen, only_f32},
        {"v3_simd", matmul_v3_simd, v3_types},
        {"v5_tiled", matmul_v5_tiled, any_loadable},
        {"v6_packed", matmul_v6_packed, any_loadable},
    };
    return variants;
}

}  // namespace ridge::cpu

// ===============================================================================================
// Integer activations (matmul.h): quantize_rows, the scalar twin, v4_int
// ===============================================================================================

namespace ridge::cpu {

namespace {

void check_int(const TensorView& W, const QuantizedRows& X, const char* who) {
    if (!int_types(W.type))
        throw Error(std::string(who) + ": weight '" + W.name + "' is " + std::string(dtype_name(W.type)) +
                    ", the integer kernels take Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 only");
    if (W.shape.size() != 2 || W.ne(0) != X.k || X.k % 32 != 0)
        throw Error(std::string(who) + ": weight '" + W.name + "' of shape " + shape_str(W.shape) +
                    " does not take rows of " + std::to_string(X.k) + " activations");
}

// The integer codes of weight block b of a row, as w[c] = d * code[c] (+ mn), in element order:
// the formats' int_codes, by type.
void codes(DType t, const uint8_t* row, int64_t b, int32_t* code, float& d, float& mn) {
    switch (t) {
        case DType::Q4_0: return int_codes(block_at<block_q4_0>(row, b), code, d, mn);
        case DType::Q4_1: return int_codes(block_at<block_q4_1>(row, b), code, d, mn);
        case DType::Q5_0: return int_codes(block_at<block_q5_0>(row, b), code, d, mn);
        case DType::Q5_1: return int_codes(block_at<block_q5_1>(row, b), code, d, mn);
        default: return int_codes(block_at<block_q8_0>(row, b), code, d, mn);  // check() admits no other
    }
}

#if RIDGE_MATMUL_V4
// ---- v4 building blocks ------------------------------------------------------------------------
// Integer dot products with simd::dot_add_i16: |a| <= 128, |b| <= 32767, so a lane grows by at most
// 2^23 per block, and a block's whole sum stays below 2^28.

// The decoders (IntQ4_0, IntQ4_1, IntQ5_0, IntQ5_1, IntQ8_0) are the formats' (weights/formats/;
// their contract is in q4.h): block b of a row as 32 int16 codes (simd::Codes, or one zmm).
using ridge::simd::Codes;

// Block b's f16 scale d of 4 weight rows and the 2 bytes after it (Q4_1's mn; codes, unused, for
// the others), as f32 lanes (d0 m0 d1 m1 | d2 m2 d3 m3). Each row's 4 bytes go into a register of
// their own and are joined by unpacks (a store read back as one vector would stall store forwarding).
template <class Dec>
inline __m256 scales4(const uint8_t* const* w, int64_t b) {
    __m128i f[4];
    for (int r = 0; r < 4; r++) {
        int32_t v;
        std::memcpy(&v, w[r] + size_t(b) * Dec::kBlockBytes + Dec::kScaleOffset, sizeof(v));
        f[r] = _mm_cvtsi32_si128(v);
    }
    return _mm256_cvtph_ps(_mm_unpacklo_epi64(_mm_unpacklo_epi32(f[0], f[1]), _mm_unpacklo_epi32(f[2], f[3])));
}

// 4 int32 vectors p0..p3 -> one vector with lanes (0 1 0 1 | 2 3 2 3): the two lanes marked r
// together hold the sum of p_r's lanes. That is the layout of the scales above with each d
// repeated in place of its m (one in-lane permute), so no lane-crossing shuffle of scales is needed.
inline __m256i fold4(const __m256i* p) {
    const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
    const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(t0, t1, 0x20), _mm256_permute2x128_si256(t0, t1, 0x31));
}

// One row of X as the kernels read it.
struct XRow {
    const int16_t* q;         // (k) codes
    const float* d;           // (k/32) block scales
    const float* sum;         // (k/32) block sums
    const int32_t* code_sum;  // (k/32) 4 * each block's sum of codes (for Q4_0's and Q5_0's offsets; else unused)
};

// v's 4 lanes to y[0], y[y_lane], y[2 y_lane], y[3 y_lane]: one store where they are neighbours.
inline void store4(float* y, int64_t y_lane, __m128 v) {
    if (y_lane == 1) {
        _mm_storeu_ps(y, v);
    } else {
        alignas(16) float out[4];
        _mm_store_ps(out, v);
        for (int r = 0; r < 4; r++) y[r * y_lane] = out[r];
    }
}

// 4 weight rows w[0..4) times M rows of X into y[i * y_stride + r * y_lane], one block of every
// row at a time: the 4 rows' integer dot products with X's block fold into one vector (two lanes
// per row, as fold4 lays them out), converted once and scaled by d_w * d_x lane by lane; Q4_1's
// mn * sum_x goes to an accumulator of its own (its odd lanes, as scales4 lays the mn out), and a
// row's two lanes and its mn lane are added at the end. The rows ride in lanes (any 4 rows,
// anywhere in W), so a row has no tail of blocks and no horizontal sum of its own (SmolLM2's rows
// are 18 blocks long), and each block of X, loaded once, serves 4 rows. Every (weight row, X row)
// pair takes the same operations in the same order whatever its group, its lane and M are.
template <class Dec, int M>
inline void dot4(const uint8_t* const* w, const XRow* x, int64_t nb, float* y, int64_t y_stride, int64_t y_lane) {
    __m256 acc[M], macc[M];
    for (int i = 0; i < M; i++) acc[i] = _mm256_setzero_ps(), macc[i] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        Codes wq[4];
        for (int r = 0; r < 4; r++) wq[r] = Dec::decode(w[r], b);
        const __m256 dm = scales4<Dec>(w, b);                                     // d0 m0 d1 m1 | d2 m2 d3 m3
        const __m256 d = _mm256_permute_ps(dm, _MM_SHUFFLE(2, 0, 2, 0));          // d0 d1 d0 d1 | d2 d3 d2 d3
        for (int i = 0; i < M; i++) {
            const __m256i* q = reinterpret_cast<const __m256i*>(x[i].q + b * 32);
            const __m256i q0 = _mm256_load_si256(q), q1 = _mm256_load_si256(q + 1);
            __m256i p[4];
            for (int r = 0; r < 4; r++)
                p[r] = simd::dot_add_i16(_mm256_madd_epi16(wq[r].lo, q0), wq[r].hi, q1);
            __m256i sums = fold4(p);
            if constexpr (Dec::kOffsetByCodeSum)  // offset * sum q off each row: half from each of its lanes
                sums = _mm256_sub_epi32(sums, _mm256_set1_epi32(x[i].code_sum[b] * (Dec::kCodeOffset / 8)));
            const __m256 scale = _mm256_mul_ps(d, _mm256_broadcast_ss(x[i].d + b));
            acc[i] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sums), acc[i]);
            if constexpr (Dec::kUsesSum)  // mn * sum_x, in the odd lanes
                macc[i] = _mm256_fmadd_ps(dm, _mm256_broadcast_ss(x[i].sum + b), macc[i]);
        }
    }
    for (int i = 0; i < M; i++) {
        // Row r: its two lanes of acc, plus lane 2r + 1 of macc (mn * sum_x) for Q4_1.
        __m256 t = _mm256_add_ps(acc[i], _mm256_permute_ps(acc[i], _MM_SHUFFLE(1, 0, 3, 2)));  // r0 r1 . . | r2 r3 . .
        if constexpr (Dec::kUsesSum) t = _mm256_add_ps(t, _mm256_permute_ps(macc[i], _MM_SHUFFLE(3, 1, 3, 1)));
        const __m128 lo = _mm256_castps256_ps128(t), hi = _mm256_extractf128_ps(t, 1);
        store4(y + i * y_stride, y_lane, _mm_movelh_ps(lo, hi));
    }
}

#if RIDGE_MATMUL_V4_ZMM
// ---- the same kernel on AVX-512 registers, 8 weight rows a step ---------------------------------
// A block's 32 codes fill one zmm of 16-bit lanes, so one madd takes a whole (weight row, block)
// pair, and the fold and the scaling are shared by 8 rows instead of 4: about 10 instructions a
// pair in the compiled one-X-row loop, against 16 in dot4's. Nibbles go through gf2p8affine (two
// instructions instead of four for Q4_0, three for Q4_1). Both speed the kernel in cache much more
// than decode, which mostly waits on memory (docs/measurements/source-comment-history.md).

// 8 int32 vectors p0..p7 (p_r: row r's 16 partial sums) -> lo and hi, whose four 128-bit quarters
// each hold one partial sum of rows 0-3 (lo) or 4-7 (hi), row r in lane r % 4 of every quarter.
inline void fold8(const __m512i* p, __m512i& lo, __m512i& hi) {
    __m512i a[4];  // a[k]: quarters (2k, 2k+1, 2k, 2k+1)
    for (int k = 0; k < 4; k++) {
        const __m512i e = p[2 * k], o = p[2 * k + 1];
        a[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(e, o), _mm512_unpackhi_epi32(e, o));
    }
    lo = _mm512_add_epi32(_mm512_unpacklo_epi64(a[0], a[1]), _mm512_unpackhi_epi64(a[0], a[1]));
    hi = _mm512_add_epi32(_mm512_unpacklo_epi64(a[2], a[3]), _mm512_unpackhi_epi64(a[2], a[3]));
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12's own AVX-512 casts and extracts (its bug 105593)
// The 4 lanes of row r = 0..3 of acc's quarters summed, plus lane 2r + 1 of macc (mn * sum_x, as
// scales4 lays the mn out; zero for the types without a minimum).
inline __m128 rows4(__m512 acc, __m256 macc) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    const __m128 m_lo = _mm256_castps256_ps128(macc), m_hi = _mm256_extractf128_ps(macc, 1);
    const __m128 m = _mm_shuffle_ps(m_lo, m_hi, _MM_SHUFFLE(3, 1, 3, 1));
    return _mm_add_ps(s, m);
}
#pragma GCC diagnostic pop

// Block b's f16 scale d of 8 weight rows and the 2 bytes after it, as 16 f32 lanes
// (d0 m0 d1 m1 ... d7 m7). With kGather, one gather of each row's 4 bytes at offsets `rows`
// (w[r] - w[0]) from w[0]'s block, converted at once; else scales4 twice (8 loads, then 6 unpacks
// and 2 conversions, on the ports that dot8 is short of) and one join. The same values either way.
// The gather is a little faster in cache where gathers run at full speed, decode not measurably
// (docs/measurements/source-comment-history.md). Where the CPU's gathers are slowed by Intel's GDS
// mitigation the loads stay (int_form()).
template <class Dec, bool kGather>
inline __m512 scales8(const uint8_t* const* w, __m256i rows, int64_t b) {
    if constexpr (kGather) {
        const auto* at = reinterpret_cast<const int*>(w[0] + size_t(b) * Dec::kBlockBytes + Dec::kScaleOffset);
        return _mm512_cvtph_ps(_mm256_i32gather_epi32(at, rows, 1));
    } else {
        return _mm512_insertf32x8(_mm512_castps256_ps512(scales4<Dec>(w, b)), scales4<Dec>(w + 4, b), 1);
    }
}

// dot4's arithmetic for 8 weight rows w[0..8): per block, the 8 rows' madds with X's block fold
// into two vectors (rows 0-3, rows 4-7), converted and scaled by d_w * d_x, each quarter of a vector
// accumulating on its own; a row's 4 quarters and its mn * sum_x are added at the end. Every
// (weight row, X row) pair takes the same operations in the same order whatever its group and M.
// With kGather, the rows' offsets from w[0] must fit in int32 (v4_job checks the tensor's size).
template <class Dec, int M, bool kGather>
inline void dot8(const uint8_t* const* w, const XRow* x, int64_t nb, float* y, int64_t y_stride, int64_t y_lane) {
    const __m512i d_lanes[2] = {_mm512_set_epi32(6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0, 6, 4, 2, 0),  // d0 d1 d2 d3
                                _mm512_set_epi32(14, 12, 10, 8, 14, 12, 10, 8, 14, 12, 10, 8, 14, 12, 10, 8)};
    [[maybe_unused]] const __m256i rows = _mm256_setr_epi32(0, int(w[1] - w[0]), int(w[2] - w[0]), int(w[3] - w[0]), int(w[4] - w[0]),
                                                            int(w[5] - w[0]), int(w[6] - w[0]), int(w[7] - w[0]));
    __m512 acc[M][2], macc[M];
    for (int i = 0; i < M; i++) acc[i][0] = acc[i][1] = macc[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i wq[8];
        for (int r = 0; r < 8; r++) wq[r] = Dec::decode_zmm(w[r], b);
        const __m512 dm = scales8<Dec, kGather>(w, rows, b);  // d0 m0 d1 m1 ... d7 m7
        __m512 d[2];                                          // rows 4h .. 4h + 3's d in every quarter
        for (int h = 0; h < 2; h++) d[h] = _mm512_permutexvar_ps(d_lanes[h], dm);
        for (int i = 0; i < M; i++) {
            const __m512i q = _mm512_load_si512(x[i].q + b * 32);
            __m512i p[8], f[2];
            for (int r = 0; r < 8; r++) p[r] = _mm512_madd_epi16(wq[r], q);
            fold8(p, f[0], f[1]);
            const __m512 dx = _mm512_set1_ps(x[i].d[b]);
            for (int h = 0; h < 2; h++)
                acc[i][h] = _mm512_fmadd_ps(_mm512_mul_ps(d[h], dx), _mm512_cvtepi32_ps(f[h]), acc[i][h]);
            if constexpr (Dec::kUsesSum) macc[i] = _mm512_fmadd_ps(dm, _mm512_set1_ps(x[i].sum[b]), macc[i]);
        }
    }
    for (int i = 0; i < M; i++) {
        const __m256 m[2] = {_mm512_castps512_ps256(macc[i]), _mm512_extractf32x8_ps(macc[i], 1)};
        for (int h = 0; h < 2; h++)  // rows 4h .. 4h + 3
            store4(y + i * y_stride + 4 * h * y_lane, y_lane, rows4(acc[i][h], m[h]));
    }
}

#endif  // RIDGE_MATMUL_V4_ZMM

// ---- many rows of X: the rows of X in the lanes --------------------------------------------------
// From 16 rows of X on (batched decode, short prompts), dot8 spends most of its instructions on
// decoding and folding: 8 madds per block and row of X need 18 shuffles and adds to fold. With the
// rows of X in the lanes instead, 4 weight rows are decoded once into 16-bit codes for all the rows
// of X, and each pair of codes, broadcast, multiplies one vector that holds the same pair of codes
// of 16 rows of X (8 on ymm): 16 pairs per block, no fold, every vector of X serving the 4 weight
// rows. It is the fold's arithmetic for each (weight row, X row), so a row's output is bit for bit
// what dot8 (dot4 on ymm) gives it alone, which the tests check:
//   zmm (dot_lanes): the int32 sum of each quarter of the block (codes 8Q .. 8Q + 7), exact
//     whatever order forms it, converted and multiplied by the same d_w * d_x into the same 4
//     accumulators; the row's result is (acc0 + acc2) + (acc1 + acc3) + macc, as rows4 adds them.
//   ymm (dot_lanes8): dot4 folds a block's 16 pair products into two lanes, A (the even pairs) and
//     B (the odd ones), each less kCodeOffset / 8 * (4 * the sum of X's codes) for Q4_0 and Q5_0
//     (whose ymm codes lack their offset), each converted and multiplied by d_w * d_x into an
//     accumulator of its own; the row's result is A + B (+ macc for Q4_1 and Q5_1).
constexpr int kLaneWRows = 4;  // weight rows per pass

// A group of L rows of X repacked (L = 16 on zmm, 8 on ymm): pairs[(b * 16 + p) * L + i] holds codes
// 2p and 2p + 1 of block b of row i; d, sum and code_sum (4 * the sum of the block's codes) are per
// block in the same order ((b * L + i)); code_sum only for L = 8.
struct LaneRows {
    const int32_t* pairs;
    const float* d;
    const float* sum;
    const int32_t* code_sum;
};

// The first L * floor(m / L) rows of X as groups of L, in a buffer of the calling thread's that the
// next call overwrites (each thread of a matmul packs its own: m * k copies against the matmul's
// n * m * k multiply-adds).
template <int64_t L>
struct LanePack {
    std::vector<int32_t, CacheLineAllocator<int32_t>> pairs, code_sum;
    std::vector<float, CacheLineAllocator<float>> d, sum;
    LaneRows group(int64_t g, int64_t nb) const {
        const int64_t at = g * nb * L;
        return {pairs.data() + at * 16, d.data() + at, sum.data() + at, code_sum.data() + at};
    }
};

template <int64_t L>
const LanePack<L>& lane_pack(const QuantizedRows& X) {
    static thread_local LanePack<L> pack;
    const int64_t groups = X.m / L, nb = X.k / 32;
    const size_t blocks = size_t(groups * nb * L);
    if (pack.d.size() < blocks)
        pack.pairs.resize(blocks * 16), pack.code_sum.resize(blocks), pack.d.resize(blocks), pack.sum.resize(blocks);
    for (int64_t g = 0; g < groups; g++)
        for (int64_t i = 0; i < L; i++) {
            const int64_t row = g * L + i;
            const int16_t* q = X.codes(row);
            for (int64_t b = 0; b < nb; b++) {
                const size_t at = size_t((g * nb + b) * L + i);
                pack.d[at] = X.scales(row)[b];
                pack.sum[at] = X.sums(row)[b];
                if constexpr (L == 8) {  // only dot_lanes8 takes the offset off (its codes lack it)
                    int32_t code_sum = 0;
                    for (int c = 0; c < 32; c++) code_sum += q[b * 32 + c];
                    pack.code_sum[at] = 4 * code_sum;
                }
                for (int p = 0; p < 16; p++) {
                    int32_t pair;
                    std::memcpy(&pair, q + b * 32 + 2 * p, sizeof pair);
                    pack.pairs[size_t(((g * nb + b) * 16 + p) * L + i)] = pair;
                }
            }
        }
    return pack;
}

// kLaneWRows weight rows decoded once for every group of rows of X: block b's 32 codes of row r at
// codes[(b * kLaneWRows + r) * 32] (by the zmm decoders, or the ymm ones, which leave Q4_0's and
// Q5_0's offset out), its scale d and its minimum (Q4_1, Q5_1; else unused) at d[b * kLaneWRows + r]
// and mn[...]. Decoding a whole row ahead, rather than block by block just before its use, keeps the
// broadcasts of the codes from waiting on the stores that wrote them, and serves all the groups
// with one decode.
struct LaneWeights {
    std::vector<int16_t, CacheLineAllocator<int16_t>> codes;
    std::vector<float> d, mn;
};

template <class Dec, bool kZmm>
void decode_lane_weights(const uint8_t* const* w, int64_t nb, LaneWeights& out) {
    constexpr int R = kLaneWRows;
    if (out.d.size() < size_t(nb * R)) out.codes.resize(size_t(nb * R * 32)), out.d.resize(size_t(nb * R)), out.mn.resize(size_t(nb * R));
    for (int64_t b = 0; b < nb; b++)
        for (int r = 0; r < R; r++) {
            int16_t* to = out.codes.data() + (b * R + r) * 32;
#if RIDGE_MATMUL_V4_ZMM
            if constexpr (kZmm) _mm512_store_si512(to, Dec::decode_zmm(w[r], b));
#endif
            if constexpr (!kZmm) {
                const Codes c = Dec::decode(w[r], b);
                _mm256_store_si256(reinterpret_cast<__m256i*>(to), c.lo);
                _mm256_store_si256(reinterpret_cast<__m256i*>(to) + 1, c.hi);
            }
            uint16_t h[2];  // d, and the 2 bytes after it (the minimum, where kUsesSum)
            std::memcpy(h, w[r] + size_t(b) * Dec::kBlockBytes + Dec::kScaleOffset, sizeof h);
            out.d[size_t(b * R + r)] = _cvtsh_ss(h[0]);
            out.mn[size_t(b * R + r)] = Dec::kUsesSum ? _cvtsh_ss(h[1]) : 0.0f;
        }
}

// The 32-bit broadcast of one pair of codes.
inline __m256i pair_at_ymm(const int16_t* w2) {
    int32_t pair;
    std::memcpy(&pair, w2, sizeof pair);
    return _mm256_set1_epi32(pair);
}

#if RIDGE_MATMUL_V4_ZMM
inline __m512i pair_at_zmm(const int16_t* w2) {
    int32_t pair;
    std::memcpy(&pair, w2, sizeof pair);
    return _mm512_set1_epi32(pair);
}

constexpr int64_t kLaneRows = 16;  // rows of X in a zmm's lanes

// The kLaneWRows decoded weight rows times G groups of 16 rows of X, x[0..G): row r's output for
// row i of group g goes to y[(g * 16 + i) * y_stride + r], for r < rows (the others repeat a row, to
// keep the pass whole). Each broadcast pair of weight codes serves the G groups: a broadcast costs
// about what a multiply-add does, and two groups at a time made 64 rows of X 8-12% faster than one
// (the measurements are linked from docs/cpu-kernels.md).
template <class Dec, int G>
inline void dot_lanes(const LaneWeights& w, const LaneRows* x, int64_t nb, float* y, int64_t y_stride, int rows) {
    constexpr int R = kLaneWRows;
    __m512 acc[R][4][G], macc[R][G];
    for (int r = 0; r < R; r++)
        for (int g = 0; g < G; g++) {
            macc[r][g] = _mm512_setzero_ps();
            for (int h = 0; h < 4; h++) acc[r][h][g] = _mm512_setzero_ps();
        }
    for (int64_t b = 0; b < nb; b++) {
        __m512 scale[R][G];
        for (int g = 0; g < G; g++) {
            const __m512 dx = _mm512_load_ps(x[g].d + b * kLaneRows);
            for (int r = 0; r < R; r++) scale[r][g] = _mm512_mul_ps(_mm512_set1_ps(w.d[size_t(b * R + r)]), dx);
            if constexpr (Dec::kUsesSum) {
                const __m512 sx = _mm512_load_ps(x[g].sum + b * kLaneRows);
                for (int r = 0; r < R; r++)
                    macc[r][g] = _mm512_fmadd_ps(_mm512_set1_ps(w.mn[size_t(b * R + r)]), sx, macc[r][g]);
            }
        }
        const int16_t* wb = w.codes.data() + b * R * 32;
        for (int h = 0; h < 4; h++) {  // codes 8h .. 8h + 7: pairs 4h .. 4h + 3
            const int p = 4 * h;
            __m512i xv[G][4];
            for (int g = 0; g < G; g++)
                for (int q = 0; q < 4; q++) xv[g][q] = _mm512_load_si512(x[g].pairs + (b * 16 + p + q) * kLaneRows);
            for (int r = 0; r < R; r++) {
                const int16_t* c = wb + r * 32 + 2 * p;
                const __m512i w0 = pair_at_zmm(c), w1 = pair_at_zmm(c + 2), w2 = pair_at_zmm(c + 4), w3 = pair_at_zmm(c + 6);
                for (int g = 0; g < G; g++) {
                    // The first pair by a plain multiply-add, the three others added to it
                    // (vpdpwssd where the CPU has VNNI); written out, as a loop over the pairs
                    // leaves GCC copying the sums between registers at every step.
#if defined(__AVX512VNNI__)
                    __m512i sum = _mm512_madd_epi16(xv[g][0], w0);
                    sum = _mm512_dpwssd_epi32(sum, xv[g][1], w1);
                    sum = _mm512_dpwssd_epi32(sum, xv[g][2], w2);
                    sum = _mm512_dpwssd_epi32(sum, xv[g][3], w3);
#else
                    const __m512i sum = _mm512_add_epi32(
                        _mm512_add_epi32(_mm512_madd_epi16(xv[g][0], w0), _mm512_madd_epi16(xv[g][1], w1)),
                        _mm512_add_epi32(_mm512_madd_epi16(xv[g][2], w2), _mm512_madd_epi16(xv[g][3], w3)));
#endif
                    acc[r][h][g] = _mm512_fmadd_ps(scale[r][g], _mm512_cvtepi32_ps(sum), acc[r][h][g]);
                }
            }
        }
    }
    for (int g = 0; g < G; g++) {
        alignas(64) float out[R][kLaneRows];
        for (int r = 0; r < R; r++) {
            const __m512 s = _mm512_add_ps(_mm512_add_ps(acc[r][0][g], acc[r][2][g]), _mm512_add_ps(acc[r][1][g], acc[r][3][g]));
            _mm512_store_ps(out[r], _mm512_add_ps(s, macc[r][g]));
        }
        for (int64_t i = 0; i < kLaneRows; i++)
            for (int r = 0; r < rows; r++) y[(g * kLaneRows + i) * y_stride + r] = out[r][i];
    }
}

#endif  // RIDGE_MATMUL_V4_ZMM

constexpr int64_t kLaneRows8 = 8;  // rows of X in a ymm's lanes

// The decoded weight rows times the 8 rows of X in x: row r's output for X row i goes to
// y[i * y_stride + r], for r < rows.
template <class Dec>
inline void dot_lanes8(const LaneWeights& w, const LaneRows& x, int64_t nb, float* y, int64_t y_stride, int rows) {
    constexpr int R = kLaneWRows;
    __m256 acc[R][2], macc[R];
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = macc[r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256 dx = _mm256_load_ps(x.d + b * kLaneRows8);
        [[maybe_unused]] __m256i offset;
        if constexpr (Dec::kOffsetByCodeSum)
            offset = _mm256_mullo_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(x.code_sum + b * kLaneRows8)),
                                        _mm256_set1_epi32(Dec::kCodeOffset / 8));
        [[maybe_unused]] __m256 sx;
        if constexpr (Dec::kUsesSum) sx = _mm256_load_ps(x.sum + b * kLaneRows8);
        const int32_t* xb = x.pairs + b * 16 * kLaneRows8;
        const int16_t* wb = w.codes.data() + b * R * 32;
        for (int h = 0; h < 2; h++) {  // A: the even pairs, B: the odd ones
            __m256i xv[8];  // the 8 pairs of this part, loaded once for the R weight rows
            for (int t = 0; t < 8; t++) xv[t] = _mm256_load_si256(reinterpret_cast<const __m256i*>(xb + (2 * t + h) * kLaneRows8));
            for (int r = 0; r < R; r++) {
                const int16_t* c = wb + r * 32 + 2 * h;
                __m256i sum = _mm256_madd_epi16(xv[0], pair_at_ymm(c));
                for (int t = 1; t < 8; t++) sum = simd::dot_add_i16(sum, xv[t], pair_at_ymm(c + 4 * t));
                if constexpr (Dec::kOffsetByCodeSum) sum = _mm256_sub_epi32(sum, offset);
                const __m256 scale = _mm256_mul_ps(_mm256_set1_ps(w.d[size_t(b * R + r)]), dx);
                acc[r][h] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sum), acc[r][h]);
            }
        }
        if constexpr (Dec::kUsesSum)
            for (int r = 0; r < R; r++) macc[r] = _mm256_fmadd_ps(_mm256_set1_ps(w.mn[size_t(b * R + r)]), sx, macc[r]);
    }
    alignas(32) float out[R][kLaneRows8];
    for (int r = 0; r < R; r++) {
        __m256 t = _mm256_add_ps(acc[r][0], acc[r][1]);
        if constexpr (Dec::kUsesSum) t = _mm256_add_ps(t, macc[r]);
        _mm256_store_ps(out[r], t);
    }
    for (int64_t i = 0; i < kLaneRows8; i++)
        for (int r = 0; r < rows; r++) y[i * y_stride + r] = out[r][i];
}

// Output rows [j0, j1) for the first L * floor(m / L) rows of X (L = 16 on zmm, 8 on ymm),
// kLaneWRows weight rows a pass (a short last pass repeats its last row) against each group of L
// rows of X in turn (zmm: two groups at a time), so the pass's weight rows are read from memory once
// and decoded once. Returns the rows of X it computed.
// Cost: that of matmul_int_cost for these rows (the same multiply-adds and weight bytes as the fold);
// besides, each calling thread packs the rows of X (m * k codes copied) and decodes its share of W
// once into a buffer of 4 rows.
template <class Dec, IntForm F>
int64_t v4_lane_rows(const TensorView& W, const QuantizedRows& X, float* Y, int64_t j0, int64_t j1) {
    constexpr bool kZmm = F != IntForm::ymm;
    constexpr int64_t L = kZmm ? 16 : 8;
    const int64_t groups = X.m / L;
    if (groups == 0) return 0;
    const int64_t n = W.ne(1), nb = X.k / 32;
    const size_t rb = row_bytes(W.type, X.k);
    const LanePack<L>& pack = lane_pack<L>(X);
    static thread_local LaneWeights decoded;
    for (int64_t j = j0; j < j1; j += kLaneWRows) {
        const int rows = int(std::min<int64_t>(kLaneWRows, j1 - j));
        const uint8_t* w[kLaneWRows];
        for (int r = 0; r < kLaneWRows; r++) w[r] = W.data + size_t(j + std::min(r, rows - 1)) * rb;
        decode_lane_weights<Dec, kZmm>(w, nb, decoded);
        prefetch_rows(W, rb, std::min(j + kLaneWRows, j1), std::min(j + 2 * kLaneWRows, j1));
        int64_t g = 0;
#if RIDGE_MATMUL_V4_ZMM
        if constexpr (kZmm) {
            for (; g + 2 <= groups; g += 2) {
                const LaneRows x[2] = {pack.group(g, nb), pack.group(g + 1, nb)};
                dot_lanes<Dec, 2>(decoded, x, nb, Y + g * L * n + j, n, rows);
            }
            if (g < groups) {
                const LaneRows x = pack.group(g, nb);
                dot_lanes<Dec, 1>(decoded, &x, nb, Y + g * L * n + j, n, rows);
            }
        }
#endif
        if constexpr (!kZmm)
            for (; g < groups; g++) dot_lanes8<Dec>(decoded, pack.group(g, nb), nb, Y + g * L * n + j, n, rows);
    }
    return groups * L;
}

// Weight rows w[0..kRows) times the M rows of X at x, row r's output at y[i * y_stride + r * y_lane]:
// dot4 or dot8, as the form F says.
template <IntForm F>
inline constexpr int kRowsOf = F == IntForm::ymm ? 4 : 8;

template <class Dec, IntForm F, int M>
inline void dot_rows_int(const uint8_t* const* w, const XRow* x, int64_t nb, float* y, int64_t y_stride, int64_t y_lane) {
#if RIDGE_MATMUL_V4_ZMM
    if constexpr (F != IntForm::ymm) dot8<Dec, M, F == IntForm::zmm_gather>(w, x, nb, y, y_stride, y_lane);
#endif
    if constexpr (F == IntForm::ymm) dot4<Dec, M>(w, x, nb, y, y_stride, y_lane);
}

// 4 * the sum of each block's 32 codes, for every row of X (Q4_0's and Q5_0's offsets, see IntQ4_0), in a
// buffer of the calling thread's that the next call overwrites. Each thread of a matmul computes
// its own: m * k additions, against the matmul's n * m * k multiply-adds.
const int32_t* code_sums(const QuantizedRows& X) {
    static thread_local std::vector<int32_t> sums;
    const int64_t n_blocks = X.m * (X.k / 32);
    if (sums.size() < size_t(n_blocks)) sums.resize(size_t(n_blocks));
    for (int64_t u = 0; u < n_blocks; u++) {
        const int16_t* q = X.q.data() + u * 32;
        int32_t sum = 0;
        for (int c = 0; c < 32; c++) sum += q[c];
        sums[size_t(u)] = 4 * sum;
    }
    return sums.data();
}

// Output rows [j0, j1) (j0 a multiple of kRows), kRows = 4 (dot4) or 8 (dot8) weight rows per
// pass (a short last group padded), the rows of X 2 at a time; on zmm, the rows of X 16 at a time
// in lanes first (v4_lane_rows), this loop taking only the m % 16 left.
//
// The share is read as kRows runs of whole rows, one per lane: with g = (j1 - j0) / kRows, lane r
// takes rows j0 + r g, j0 + r g + 1, ... one after another, so each lane streams one long run of
// memory, which the hardware prefetchers follow, and the kernel asks for nothing itself; each pass
// serves every row of X, 2 at a time. A group of neighbouring rows instead reads kRows runs of one
// row each (360-612 bytes) side by side, which they do not follow: it needs software prefetches,
// and even with them reads more slowly than a plain read of the same bytes, where the runs read
// faster. Decode is faster with the runs (ymm on a Zen 3, zmm on a Xeon); with several rows of X
// the gain shrinks to nothing where the arithmetic sets the pace
// (docs/measurements/source-comment-history.md).
//
// The loops read W and X through locals: Y's stores go through intrinsics, which may alias
// anything, and the compiler would otherwise reload W's and X's fields at every group. The runs go
// straight to the kernel, outside for_row_groups, whose functors (taken by value) make the same
// loop slower.
template <class Dec, IntForm F>
void v4_rows(const TensorView& W, const QuantizedRows& X, float* Y, int64_t j0, int64_t j1) {
    constexpr int kRows = kRowsOf<F>;
    const int64_t n = W.ne(1), k = X.k, nb = k / 32;
    const size_t rb = row_bytes(W.type, k);
    const uint8_t* const data = W.data;
    const bool offset = Dec::kOffsetByCodeSum && kRows == 4;  // dot8's decoders take the offset off themselves
    int64_t t0 = 0;  // the rows of X before t0 are done
    t0 = v4_lane_rows<Dec, F>(W, X, Y, j0, j1);
    if (t0 == X.m) return;
    const XRow x0{X.codes(0), X.scales(0), X.sums(0), offset ? code_sums(X) : nullptr};
    auto x_row = [x0, k, nb](int64_t i) {  // row i of X
        const int64_t at = i * nb;
        return XRow{x0.q + i * k, x0.d + at, x0.sum + at, x0.code_sum ? x0.code_sum + at : nullptr};
    };
    {  // lane r: rows j0 + r g + i, i = 0 .. g - 1
        const int64_t g = (j1 - j0) / kRows, m = X.m;
        for (int64_t i = 0; i < g; i++) {
            const uint8_t* w[kRows];
            for (int r = 0; r < kRows; r++) w[r] = data + size_t(j0 + r * g + i) * rb;
            int64_t t = t0;
            for (; t + 2 <= m; t += 2) {
                const XRow x[2] = {x_row(t), x_row(t + 1)};
                dot_rows_int<Dec, F, 2>(w, x, nb, Y + t * n + j0 + i, n, g);
            }
            if (t < m) {
                const XRow x = x_row(t);
                dot_rows_int<Dec, F, 1>(w, &x, nb, Y + t * n + j0 + i, n, g);
            }
        }
        j0 += kRows * g;
    }
    // What is left: the last j1 - j0 < kRows rows, as one padded group.
    for_row_groups<kRows, 2, true>(
        j0, j1, X.m - t0, n, Y + t0 * n, [data, rb](int64_t j) { return data + size_t(j) * rb; },
        [x_row, nb, t0]<int R, int M>(const uint8_t* const* w, int64_t i, float* y, int64_t ys) {
            static_assert(R == kRows);
            XRow x[M];
            for (int t = 0; t < M; t++) x[t] = x_row(t0 + i + t);
            dot_rows_int<Dec, F, M>(w, x, nb, y, ys, 1);
        });
}

template <class Dec>
RowJob v4_job(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form) {
    RowJob job;
    job.rows = W.ne(1);
    job.row_cost = double(row_bytes(W.type, X.k));
    job.align = form == IntForm::ymm ? 4 : 8;
    // The gather's offsets between a group's rows are int32.
    if (form == IntForm::zmm_gather && double(job.rows) * job.row_cost >= 2147483648.0) form = IntForm::zmm_loads;
    switch (form) {
#if RIDGE_MATMUL_V4_ZMM
        case IntForm::zmm_gather:
            job.run = [&W, &X, Y](int64_t j0, int64_t j1) { v4_rows<Dec, IntForm::zmm_gather>(W, X, Y, j0, j1); };
            break;
        case IntForm::zmm_loads:
            job.run = [&W, &X, Y](int64_t j0, int64_t j1) { v4_rows<Dec, IntForm::zmm_loads>(W, X, Y, j0, j1); };
            break;
#endif
        default: job.run = [&W, &X, Y](int64_t j0, int64_t j1) { v4_rows<Dec, IntForm::ymm>(W, X, Y, j0, j1); };
    }
    return job;
}
#endif  // RIDGE_MATMUL_V4

}  // namespace

bool int_types(DType t) {
    return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q5_0 || t == DType::Q5_1 || t == DType::Q8_0;
}
bool int_simd_types(DType t) { return RIDGE_MATMUL_V4 && int_types(t); }

void QuantizedRows::reserve(int64_t rows, int64_t len) {
    const size_t blocks = size_t(rows * (len / 32));
    if (q.size() < blocks * 32) q.resize(blocks * 32);
    if (d.size() < blocks) d.resize(blocks), sum.resize(blocks);
}

namespace {
// The scale of a block whose largest magnitude is amax, and its inverse (0 for an all-zero block).
inline void block_scale(float amax, float& d, float& id) {
    d = amax / 32767.0f;
    id = d > 0.0f ? 1.0f / d : 0.0f;
}

void check_quantize(int64_t k, const char* who) {
    if (k % 32 != 0) throw Error(std::string(who) + ": row length " + std::to_string(k) + " is not a multiple of 32");
}
}  // namespace

Cost quantize_rows_scalar(const float* X, int64_t m, int64_t k, QuantizedRows& out) {
    check_quantize(k, "quantize_rows_scalar");
    out.reserve(m, k);
    out.m = m, out.k = k;
    for (int64_t i = 0; i < m * (k / 32); i++) {
        const float* x = X + i * 32;
        float amax = 0.0f, sum = 0.0f, id;
        for (int c = 0; c < 32; c++) amax = std::max(amax, std::fabs(x[c])), sum += x[c];
        block_scale(amax, out.d[size_t(i)], id);
        out.sum[size_t(i)] = sum;
        for (int c = 0; c < 32; c++) out.q[size_t(i * 32 + c)] = int16_t(std::nearbyint(x[c] * id));
    }
    return quantize_rows_cost(m, k);
}

Cost quantize_rows(const float* X, int64_t m, int64_t k, QuantizedRows& out) {
#if RIDGE_MATMUL_V4
    check_quantize(k, "quantize_rows");
    out.reserve(m, k);
    out.m = m, out.k = k;
    parallel_for(m * (k / 32), double(m) * double(k) >= 4 * kParallelMinWork, [&](int64_t i) {
        const float* x = X + i * 32;
        __m256 v[4], a = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) {
            v[j] = _mm256_loadu_ps(x + 8 * j);
            a = _mm256_max_ps(a, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v[j]));  // |x|
        }
        __m128 a4 = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
        a4 = _mm_max_ps(a4, _mm_movehl_ps(a4, a4));
        a4 = _mm_max_ss(a4, _mm_movehdup_ps(a4));
        float id;
        block_scale(_mm_cvtss_f32(a4), out.d[size_t(i)], id);
        out.sum[size_t(i)] = simd::hsum8(_mm256_add_ps(_mm256_add_ps(v[0], v[1]), _mm256_add_ps(v[2], v[3])));
        // Round to nearest even (as std::nearbyint), pack to int16 and undo pack's lane interleave.
        __m256i c[4];
        for (int j = 0; j < 4; j++) c[j] = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], _mm256_set1_ps(id)));
        __m256i* q = reinterpret_cast<__m256i*>(out.q.data() + i * 32);
        _mm256_store_si256(q, _mm256_permute4x64_epi64(_mm256_packs_epi32(c[0], c[1]), 0xd8));
        _mm256_store_si256(q + 1, _mm256_permute4x64_epi64(_mm256_packs_epi32(c[2], c[3]), 0xd8));
    });
    return quantize_rows_cost(m, k);
#else
    return quantize_rows_scalar(X, m, k, out);
#endif
}

Cost matmul_int_scalar(const TensorView& W, const QuantizedRows& X, float* Y) {
    check_int(W, X, "matmul_int_scalar");
    const int64_t n = W.ne(1), nb = X.k / 32;
    int32_t code[32];
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < X.m; i++) {
            double acc = 0.0;
            for (int64_t b = 0; b < nb; b++) {
                float d, mn;
                codes(W.type, W.row(j), b, code, d, mn);
                const ActBlock x = X.block(i, b);
                int64_t isum = 0;
                for (int c = 0; c < 32; c++) isum += int64_t(code[c]) * int64_t(x.q[c]);
                acc += double(d) * double(x.d) * double(isum) + double(mn) * double(x.sum);
            }
            Y[i * n + j] = float(acc);
        }
    return matmul_int_cost(W, X.m);
}

bool int_zmm_kernel() { return RIDGE_MATMUL_V4_ZMM; }

IntForm int_form() {
    if (!int_zmm_kernel()) return IntForm::ymm;
    // Linux names the CPU's state against Gather Data Sampling (Intel's "Downfall"): "Not affected",
    // or a mitigation that makes every gather several times slower, or "Unknown" in a guest whose
    // host decides. Only the first is sure to gather at full speed.
    static const bool fast_gathers = [] {
        std::ifstream f("/sys/devices/system/cpu/vulnerabilities/gather_data_sampling");
        std::string state;
        return std::getline(f, state) && state == "Not affected";
    }();
    return fast_gathers ? IntForm::zmm_gather : IntForm::zmm_loads;
}

Cost matmul_v4_int(const TensorView& W, const QuantizedRows& X, float* Y) { return matmul_v4_int_as(W, X, Y, int_form()); }

Cost matmul_v4_int_as(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form) {
    const RowJob job = int_row_job(W, X, Y, form);
    run_row_jobs(&job, 1, double(X.m) * double(W.ne(1)) * double(X.k) >= kParallelMinWork);
    return matmul_int_cost(W, X.m);
}

RowJob int_row_job(const TensorView& W, const QuantizedRows& X, float* Y) { return int_row_job(W, X, Y, int_form()); }

RowJob int_row_job(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form) {
    check_int(W, X, "matmul_v4_int");
    if (!int_simd_types(W.type)) throw Error("matmul_v4_int: this build has no AVX2 + FMA + F16C");
    if (!int_zmm_kernel()) form = IntForm::ymm;
#if RIDGE_MATMUL_V4
    switch (W.type) {
        case DType::Q4_0: return v4_job<IntQ4_0>(W, X, Y, form);
        case DType::Q4_1: return v4_job<IntQ4_1>(W, X, Y, form);
        case DType::Q5_0: return v4_job<IntQ5_0>(W, X, Y, form);
        case DType::Q5_1: return v4_job<IntQ5_1>(W, X, Y, form);
        case DType::Q8_0: return v4_job<IntQ8_0>(W, X, Y, form);
        default: break;
    }
#endif
    return RowJob{};
}

}  // namespace ridge::cpu

// ===============================================================================================
// Integer activations for K-quant weights: Q4_K, Q5_K and Q6_K super-blocks of 256 dotted with
// 8 ActBlocks of 32, each ActBlock's products exact in int32 and scaled once:
//   Q4_K:  sum_j  d*sc_j * d_x,j * sum q x  -  dmin*m_j * sum_x,j    (q nibbles in [0, 15])
//   Q5_K:  the same with q in [0, 31] (bit j of qh[l] is bit 4 of element l of sub-block j)
//   Q6_K:  sum_g  d*sc_g * d_x,g * sum q x                           (q in [-32, 31], g of 16)
// The scalar twin, and the AVX2 (+VNNI) path: X is first rearranged to the weight decoders' lane
// order, so that each 32 weight bytes become int16 codes with two unpacks and no lane crossing.
// ===============================================================================================

namespace ridge::cpu {

namespace {

constexpr int kSubBlocks = QK_K / 32;  // ActBlocks per super-block (8)

void check_int_k(const TensorView& W, const QuantizedRows& X, const char* who) {
    if (!int_k_types(W.type))
        throw Error(std::string(who) + ": weight '" + W.name + "' is " + std::string(dtype_name(W.type)) +
                    ", the K-quant integer kernels take Q4_K, Q5_K, Q6_K only");
    if (W.shape.size() != 2 || W.data == nullptr || W.ne(0) != X.k || X.k % QK_K != 0)
        throw Error(std::string(who) + ": weight '" + W.name + "' of shape " + shape_str(W.shape) +
                    " does not take rows of " + std::to_string(X.k) + " activations (a multiple of " +
                    std::to_string(QK_K) + ")");
    if (int64_t(X.d.size()) < X.m * (X.k / 32))
        throw Error(std::string(who) + ": quantized input holds " + std::to_string(X.d.size()) +
                    " blocks, not the " + std::to_string(X.m * (X.k / 32)) + " of " + std::to_string(X.m) +
                    " rows of " + std::to_string(X.k));
}

// The scalar twin's dots (dot_q4_K, dot_q6_K) and the SIMD decoders (IntQ4_K, IntQ6_K) are the
// formats' (weights/formats/k_quants.h, with the lane order below).

#if RIDGE_MATMUL_V4K
// ---- v4_int_k building blocks --------------------------------------------------------------------
// Lane order (k_quants.h): the decoders unpack 32 weight bytes to int16 vectors of elements
// [0..7 | 16..23] and [8..15 | 24..31], so X is rearranged once per call to the same order.

// One row of X as the kernels read it: codes in lane order, and each ActBlock's d and sum in
// contiguous arrays (8 of them, one super-block's worth, load as one vector).
struct XRowK {
    const int16_t* q;  // (k) codes, each ActBlock as elements 0-7, 16-23, 8-15, 24-31
    const float* d;    // (k/32) ActBlock scales
    const float* sum;  // (k/32) ActBlock sums
};

// X's codes rearranged to lane order; the scales and sums are read from X as they are.
struct XPrepared {
    std::vector<int16_t, CacheLineAllocator<int16_t>> q;  // (m, k)
    const QuantizedRows* x = nullptr;
    XRowK row(int64_t i) const { return {q.data() + i * x->k, x->scales(i), x->sums(i)}; }
};

XPrepared prepare(const QuantizedRows& X) {
    XPrepared p;
    const int64_t nb = X.m * (X.k / 32);
    p.x = &X;
    p.q.resize(size_t(nb * 32));
    for (int64_t b = 0; b < nb; b++) {
        const __m256i* in = reinterpret_cast<const __m256i*>(X.q.data() + b * 32);
        const __m256i lo = _mm256_load_si256(in), hi = _mm256_load_si256(in + 1);  // 0..15, 16..31
        __m256i* out = reinterpret_cast<__m256i*>(p.q.data() + b * 32);
        _mm256_store_si256(out, _mm256_permute2x128_si256(lo, hi, 0x20));      // 0..7, 16..23
        _mm256_store_si256(out + 1, _mm256_permute2x128_si256(lo, hi, 0x31));  // 8..15, 24..31
    }
    return p;
}

// R weight rows times M rows of X: y[i * y_stride + r * y_lane] = w[r] . x_i. With kZmm (where the
// build has AVX-512), an even R goes two rows to a zmm (Dec::add2: the same lanes and values as
// add(), so the same results), which halves the multiply-adds, conversions and FMAs a block takes.
// Cost: 2 * R * M * k FLOPs (k = 256 nsb); reads the R weight rows once for all M rows of X.
template <class Dec, int R, int M, bool kZmm = false>
void dot_rows_k(const uint8_t* const* w, const XRowK* x, int64_t nsb, float* y, int64_t y_stride, int64_t y_lane = 1) {
    using Block = typename Dec::Block;
#if RIDGE_MATMUL_V4_ZMM
    if constexpr (kZmm && R % 2 == 0) {
        __m512 acc[R / 2][M];
        for (int r = 0; r < R / 2; r++)
            for (int i = 0; i < M; i++) acc[r][i] = _mm512_setzero_ps();
        for (int64_t s = 0; s < nsb; s++)
            for (int r = 0; r < R / 2; r++)
                Dec::template add2<M, XRowK>(reinterpret_cast<const Block*>(w[2 * r])[s], reinterpret_cast<const Block*>(w[2 * r + 1])[s], x, s,
                                             acc[r]);
        for (int r = 0; r < R / 2; r++)
            for (int i = 0; i < M; i++) {
                y[i * y_stride + 2 * r * y_lane] = simd::hsum8(_mm512_castps512_ps256(acc[r][i]));
                y[i * y_stride + (2 * r + 1) * y_lane] = simd::hsum8(_mm512_extractf32x8_ps(acc[r][i], 1));
            }
        return;
    }
#endif
    __m256 acc[R][M];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) acc[r][i] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++)
        for (int r = 0; r < R; r++) Dec::template add<M, XRowK>(reinterpret_cast<const Block*>(w[r])[s], x, s, acc[r]);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) y[i * y_stride + r * y_lane] = simd::hsum8(acc[r][i]);
}

// ---- many rows of X: the rows of X in the lanes ---------------------------------------------------
// As for the other integer types (v4_lane_rows above), from 16 rows of X on (8 in the AVX2 form)
// the rows of X ride in the lanes: each weight row's super-blocks are decoded once (Dec::decode)
// for all the rows of X, and each pair of weight codes, broadcast, multiplies one vector holding
// the same pair of 16 (8) rows of X, packed by lane_pack in element order. add() keeps 8 float
// lanes per (weight row, X row), lane l of ActBlock j the int32 sum of 4 products, pairs l and
// 8 + l of its lane order, converted and scaled by the scale of its half (lanes 0-3, 4-7) into
// lane l's accumulator; the rows' 8 lanes are added at the end as hsum8 adds them. Here each of
// those 8 lanes is an accumulator of its own, a vector across rows of X, taking the same integer
// sums, scales and operations in the same order: a row's output is bit for bit add()'s alone.

// Pair p of an ActBlock in add()'s lane order is pair kPairOf[p] in element order: lane order
// holds elements 0-7, 16-23, 8-15, 24-31.
constexpr int kPairOf[16] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

// The vector forms, L rows of X in a register's lanes: ymm (AVX2, 8) and zmm (AVX-512, 16).
struct LanesYmm {
    static constexpr int64_t L = 8;
    using F = __m256;
    using I = __m256i;
    static I pairs(const int32_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
    static I bcast(const int16_t* w2) { return pair_at_ymm(w2); }  // one pair of codes in every lane
    // The int32 sum of x0 . w0 and x1 . w1, pair by pair.
    static I dot2(I x0, I w0, I x1, I w1) { return simd::dot_add_i16(_mm256_madd_epi16(x0, w0), x1, w1); }
    static F load(const float* p) { return _mm256_load_ps(p); }
    static F set1(float v) { return _mm256_set1_ps(v); }
    static F zero() { return _mm256_setzero_ps(); }
    static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    static F add(F a, F b) { return _mm256_add_ps(a, b); }
    static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
    static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
    static F cvt(I v) { return _mm256_cvtepi32_ps(v); }
    static void store(float* p, F v) { _mm256_store_ps(p, v); }
};

#if RIDGE_MATMUL_V4_ZMM
struct LanesZmm {
    static constexpr int64_t L = 16;
    using F = __m512;
    using I = __m512i;
    static I pairs(const int32_t* p) { return _mm512_load_si512(p); }
    static I bcast(const int16_t* w2) { return pair_at_zmm(w2); }
    static I dot2(I x0, I w0, I x1, I w1) {
#if defined(__AVX512VNNI__)
        return _mm512_dpwssd_epi32(_mm512_madd_epi16(x0, w0), x1, w1);
#else
        return _mm512_add_epi32(_mm512_madd_epi16(x0, w0), _mm512_madd_epi16(x1, w1));
#endif
    }
    static F load(const float* p) { return _mm512_load_ps(p); }
    static F set1(float v) { return _mm512_set1_ps(v); }
    static F zero() { return _mm512_setzero_ps(); }
    static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    static F add(F a, F b) { return _mm512_add_ps(a, b); }
    static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
    static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
    static F cvt(I v) { return _mm512_cvtepi32_ps(v); }
    static void store(float* p, F v) { _mm512_store_ps(p, v); }
};
#endif

// R weight rows' super-blocks as Dec::decode lays them out: super-block s of row r at
// codes[(s * R + r) * 256], scale[(s * R + r) * 16], mn[(s * R + r) * 8].
struct LaneWeightsK {
    std::vector<int16_t, CacheLineAllocator<int16_t>> codes;
    std::vector<float> scale, mn;
};

template <class Dec, int R>
void decode_lane_weights_k(const uint8_t* const* w, int64_t nsb, LaneWeightsK& out) {
    if (out.scale.size() < size_t(nsb * R * 16))
        out.codes.resize(size_t(nsb * R * QK_K)), out.scale.resize(size_t(nsb * R * 16)), out.mn.resize(size_t(nsb * R * 8));
    for (int64_t s = 0; s < nsb; s++)
        for (int r = 0; r < R; r++) {
            const size_t at = size_t(s * R + r);
            Dec::decode(reinterpret_cast<const typename Dec::Block*>(w[r])[s], out.codes.data() + at * QK_K,
                        out.scale.data() + at * 16, out.mn.data() + at * 8);
        }
}

// The R decoded weight rows times the L rows of X in x (V::L): y[i * y_stride + r] = w[r] . x_i for
// r < rows (the others repeat a row, to keep the pass whole). acc[r][l] is add()'s lane l for
// weight row r, across the L rows of X; each vector of X serves the R weight rows.
// Cost: 2 * R * L * k FLOPs (k = 256 nsb); reads the R decoded rows and the group's packed X (both
// in cache: the caller decodes a pass once for every group), writes R * L outputs.
template <class Dec, class V, int R>
inline void dot_lanes_k(const LaneWeightsK& w, const LaneRows& x, int64_t nsb, float* y, int64_t y_stride, int rows) {
    using F = typename V::F;
    constexpr int64_t L = V::L;
    constexpr int kSub = QK_K / 32;
    F acc[R][8];
    for (int r = 0; r < R; r++)
        for (int l = 0; l < 8; l++) acc[r][l] = V::zero();
    for (int64_t s = 0; s < nsb; s++) {
        if constexpr (Dec::kHasMin)  // - dmin m_j sum_j, lane l taking sub-block l's
            for (int l = 0; l < 8; l++) {
                const F sx = V::load(x.sum + (s * kSub + l) * L);
                for (int r = 0; r < R; r++) acc[r][l] = V::fnma(V::set1(w.mn[size_t((s * R + r) * 8 + l)]), sx, acc[r][l]);
            }
        for (int j = 0; j < kSub; j++) {  // ActBlock j of the super-block
            const int64_t b = s * kSub + j;
            const F dx = V::load(x.d + b * L);
            F scale[R][2];  // lanes 0-3, lanes 4-7
            for (int r = 0; r < R; r++)
                for (int h = 0; h < 2; h++) scale[r][h] = V::mul(V::set1(w.scale[size_t((s * R + r) * 16 + 2 * j + h)]), dx);
            const int32_t* xb = x.pairs + b * 16 * L;
            for (int l = 0; l < 8; l++) {
                const typename V::I x0 = V::pairs(xb + kPairOf[l] * L), x1 = V::pairs(xb + kPairOf[8 + l] * L);
                for (int r = 0; r < R; r++) {
                    const int16_t* c = w.codes.data() + size_t((s * R + r) * QK_K + 32 * j);
                    const typename V::I sum = V::dot2(x0, V::bcast(c + 2 * l), x1, V::bcast(c + 2 * (8 + l)));
                    acc[r][l] = V::fma(scale[r][l / 4], V::cvt(sum), acc[r][l]);
                }
            }
        }
    }
    alignas(64) float out[R][L];
    for (int r = 0; r < R; r++) {  // hsum8's order: ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7))
        const F* a = acc[r];
        V::store(out[r], V::add(V::add(V::add(a[0], a[4]), V::add(a[2], a[6])), V::add(V::add(a[1], a[5]), V::add(a[3], a[7]))));
    }
    for (int64_t i = 0; i < L; i++)
        for (int r = 0; r < rows; r++) y[i * y_stride + r] = out[r][i];
}

// Output rows [j0, j1) for the first L * floor(m / L) rows of X (V::L), R weight rows a pass (a
// short last pass repeats its last row) decoded once for every group of L rows of X. Returns the
// rows of X it computed. Cost: that of matmul_int_cost for these rows; besides, each calling thread
// packs the rows of X (m * k codes copied) and decodes its share of W once, R rows at a time.
template <class Dec, class V>
int64_t v4_k_lane_rows(const TensorView& W, const QuantizedRows& X, float* Y, int64_t j0, int64_t j1) {
    constexpr int64_t L = V::L;
    // The accumulators fill the registers: 2 weight rows on zmm (16 of 32), 1 on ymm (8 of 16). One
    // group of X a pass: sharing the loads of X between 2 weight rows was faster than sharing the
    // broadcasts of the codes between 2 groups (docs/measurements/, the Xeon model 207).
    constexpr int R = L == 16 ? 2 : 1;
    const int64_t groups = X.m / L;
    if (groups == 0) return 0;
    const int64_t n = W.ne(1), nb = X.k / 32, nsb = X.k / QK_K;
    const size_t rb = row_bytes(W.type, X.k);
    const LanePack<L>& pack = lane_pack<L>(X);
    static thread_local LaneWeightsK decoded;
    for (int64_t j = j0; j < j1; j += R) {
        const int rows = int(std::min<int64_t>(R, j1 - j));
        const uint8_t* w[R];
        for (int r = 0; r < R; r++) w[r] = W.row(j + std::min(r, rows - 1));
        decode_lane_weights_k<Dec, R>(w, nsb, decoded);
        prefetch_rows(W, rb, std::min(j + R, j1), std::min(j + 2 * R, j1));
        for (int64_t g = 0; g < groups; g++) dot_lanes_k<Dec, V, R>(decoded, pack.group(g, nb), nsb, Y + g * L * n + j, n, rows);
    }
    return groups * L;
}

// Output rows [j0, j1) (j0 a multiple of 4), 4 weight rows per pass, the rows of X 4 at a time
// (then 2, then 1): each decoded super-block serves as many rows of X as the registers allow.
// As v4_rows (above), the share is read as 4 runs of whole rows, one per weight row of a
// pass: with g = (j1 - j0) / 4, pass i takes rows j0 + r g + i, r = 0..3, so each of the 4 streams
// one long run of memory, which the hardware prefetchers follow. Groups of 4 neighbouring rows
// (with no prefetch of their own) take up to twice as long from DRAM
// (docs/measurements/source-comment-history.md). Each row's sums are its own (no lanes shared), so
// the output is the same either way. With 16 rows of X and more (8 in the ymm form), the rows of X
// ride in the lanes first (v4_k_lane_rows), and this loop takes only the m % 16 left.
template <class Dec, IntForm F>
void v4_k_rows(const TensorView& W, const XPrepared& xp, float* Y, int64_t j0, int64_t j1) {
    const int64_t n = W.ne(1), nsb = xp.x->k / QK_K;
    constexpr bool kZmm = F != IntForm::ymm;  // two weight rows to a zmm in dot_rows_k
    int64_t t0 = 0;  // the rows of X before t0 are done
#if RIDGE_MATMUL_V4_ZMM
    if constexpr (F != IntForm::ymm) t0 = v4_k_lane_rows<Dec, LanesZmm>(W, *xp.x, Y, j0, j1);
#endif
    if constexpr (F == IntForm::ymm) t0 = v4_k_lane_rows<Dec, LanesYmm>(W, *xp.x, Y, j0, j1);
    if (t0 == xp.x->m) return;
    {
        const int64_t g = (j1 - j0) / 4, m = xp.x->m;
        for (int64_t i = 0; i < g; i++) {
            const uint8_t* w[4];
            for (int r = 0; r < 4; r++) w[r] = W.row(j0 + r * g + i);
            int64_t t = t0;
            for (; t + 4 <= m; t += 4) {  // batched decode: each decoded block serves 4 rows of X
                const XRowK x[4] = {xp.row(t), xp.row(t + 1), xp.row(t + 2), xp.row(t + 3)};
                dot_rows_k<Dec, 4, 4, kZmm>(w, x, nsb, Y + t * n + j0 + i, n, g);
            }
            for (; t + 2 <= m; t += 2) {
                const XRowK x[2] = {xp.row(t), xp.row(t + 1)};
                dot_rows_k<Dec, 4, 2, kZmm>(w, x, nsb, Y + t * n + j0 + i, n, g);
            }
            if (t < m) {
                const XRowK x = xp.row(t);
                dot_rows_k<Dec, 4, 1, kZmm>(w, &x, nsb, Y + t * n + j0 + i, n, g);
            }
        }
        j0 += 4 * g;
    }
    // The 1-3 rows left, one by one.
    for_row_groups<4, 2>(j0, j1, xp.x->m - t0, n, Y + t0 * n, [&](int64_t j) { return W.row(j); },
                         [&]<int R, int M>(const uint8_t* const* w, int64_t i, float* y, int64_t ys) {
                             XRowK x[M];
                             for (int t = 0; t < M; t++) x[t] = xp.row(t0 + i + t);
                             dot_rows_k<Dec, R, M, kZmm>(w, x, nsb, y, ys);
                         });
}

// X's codes in lane order, shared by the job's calls (one per thread). The form says which lanes
// kernel takes 16 rows of X and more (zmm, where the build has it) or 8 and more (ymm); the fold
// for the rest is the ymm one either way.
template <class Dec>
RowJob v4_k_job(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form) {
    auto xp = std::make_shared<const XPrepared>(prepare(X));
    RowJob job;
    job.rows = W.ne(1);
    job.align = 4;
    job.row_cost = double(row_bytes(W.type, X.k));
#if RIDGE_MATMUL_V4_ZMM
    if (form != IntForm::ymm) {
        job.run = [&W, xp, Y](int64_t j0, int64_t j1) { v4_k_rows<Dec, IntForm::zmm_loads>(W, *xp, Y, j0, j1); };
        return job;
    }
#endif
    (void)form;
    job.run = [&W, xp, Y](int64_t j0, int64_t j1) { v4_k_rows<Dec, IntForm::ymm>(W, *xp, Y, j0, j1); };
    return job;
}
#endif  // RIDGE_MATMUL_V4K

}  // namespace

bool int_k_types(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }
bool int_k_simd_types(DType t) { return RIDGE_MATMUL_V4K && int_k_types(t); }

Cost matmul_int_k_scalar(const TensorView& W, const QuantizedRows& X, float* Y) {
    check_int_k(W, X, "matmul_int_k_scalar");
    const int64_t n = W.ne(1), nsb = X.k / QK_K;
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < X.m; i++) {
            double acc = 0.0;
            for (int64_t s = 0; s < nsb; s++) {
                ActBlock x[kSubBlocks];
                for (int j = 0; j < kSubBlocks; j++) x[j] = X.block(i, s * kSubBlocks + j);
                if (W.type == DType::Q4_K)
                    acc += dot_q4_K(reinterpret_cast<const block_q4_K*>(W.row(j))[s], x);
                else if (W.type == DType::Q5_K)
                    acc += dot_q4_K(reinterpret_cast<const block_q5_K*>(W.row(j))[s], x);
                else
                    acc += dot_q6_K(reinterpret_cast<const block_q6_K*>(W.row(j))[s], x);
            }
            Y[i * n + j] = float(acc);
        }
    return matmul_int_cost(W, X.m);
}

Cost matmul_v4_int_k(const TensorView& W, const QuantizedRows& X, float* Y) { return matmul_v4_int_k_as(W, X, Y, int_form()); }

Cost matmul_v4_int_k_as(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form) {
    const RowJob job = int_k_row_job(W, X, Y, form);
    run_row_jobs(&job, 1, double(X.m) * double(W.ne(1)) * double(X.k) >= kParallelMinWork);
    return matmul_int_cost(W, X.m);
}

RowJob int_k_row_job(const TensorView& W, const QuantizedRows& X, float* Y) { return int_k_row_job(W, X, Y, int_form()); }

RowJob int_k_row_job(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form) {
    check_int_k(W, X, "matmul_v4_int_k");
    if (!int_k_simd_types(W.type)) throw Error("matmul_v4_int_k: this build has no AVX2 + FMA + F16C");
#if RIDGE_MATMUL_V4K
    switch (W.type) {
        case DType::Q4_K: return v4_k_job<IntQ4_K<block_q4_K>>(W, X, Y, form);
        case DType::Q5_K: return v4_k_job<IntQ4_K<block_q5_K>>(W, X, Y, form);
        case DType::Q6_K: return v4_k_job<IntQ6_K>(W, X, Y, form);
        default: break;
    }
#else
    (void)form;
#endif
    return RowJob{};
}

}  // namespace ridge::cpu
