// Linear-layer kernels (see matmul.h): the scalar reference, the OpenMP row-parallel version that
// dequantizes one weight row at a time, the Eigen path for f32 weights, and the AVX2 path that
// decodes quantized blocks in registers straight into FMAs.
#include "kernels/cpu/matmul.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <Eigen/Dense>

#include "kernels/cpu/row_groups.h"
#include "kernels/cpu/simd.h"
#define RIDGE_MATMUL_V3 RIDGE_CPU_SIMD

#include "weights/formats.h"
#include "weights/error.h"
#include "weights/quant.h"

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
        job.run = [&W, k, n, X, m, Y](int64_t j0, int64_t j1) { gemv_elements<Dec>(W, k, n, X, m, Y, j0, j1); };
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
    if (!integers || !int_simd_types(t)) return kTiledMinRows;
    return int_zmm_kernel() ? kTiledMinRowsIntZmm : kTiledMinRowsInt;
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

Cost matmul_tiled(const TensorView& W, const float* X, int64_t m, float* Y) {
    if (W.type == DType::F32) return matmul_v2_eigen(W, X, m, Y);
    if (!can_dequantize(W.type))
        throw Error("matmul: weight '" + W.name + "' has type " + std::string(dtype_name(W.type)) +
                    ", which ridge cannot multiply");
    return matmul_v6_packed(W, X, m, Y);
}

Cost matmul(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y) {
    return m < tiled_min_rows(W.type, Xq != nullptr) ? matmul_rows(W, X, m, Xq, Y) : matmul_tiled(W, X, m, Y);
}

Cost matmul(const TensorView& W, const float* X, int64_t m, float* Y) { return matmul(W, X, m, nullptr, Y); }

Cost matmul_cost(const TensorView& W, int64_t m, bool int_input) {
    return int_input && takes_int_input(W.type, m) ? matmul_int_cost(W, m) : matmul_cost(W, m);
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
