// Integer activations for K-quant weights (see matmul_int.h): Q4_K, Q5_K and Q6_K super-blocks of
// 256 dotted with 8 ActBlocks of 32, each ActBlock's products exact in int32 and scaled once:
//   Q4_K:  sum_j  d*sc_j * d_x,j * sum q x  -  dmin*m_j * sum_x,j    (q nibbles in [0, 15])
//   Q5_K:  the same with q in [0, 31] (bit j of qh[l] is bit 4 of element l of sub-block j)
//   Q6_K:  sum_g  d*sc_g * d_x,g * sum q x                           (q in [-32, 31], g of 16)
// The scalar twin, and the AVX2 (+VNNI) path: X is first rearranged to the weight decoders' lane
// order, so that each 32 weight bytes become int16 codes with two unpacks and no lane crossing.
#include "kernels/cpu/matmul_int.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/simd.h"
#define RIDGE_MATMUL_V4K RIDGE_CPU_SIMD

#include "kernels/cpu/row_groups.h"
#include "kernels/cpu/row_jobs.h"
#include "weights/formats.h"
#include "weights/error.h"

namespace ridge::cpu {

namespace {

constexpr int kSubBlocks = QK_K / 32;  // ActBlocks per super-block (8)

void check(const TensorView& W, const QuantizedRows& X, const char* who) {
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
struct XRow {
    const int16_t* q;  // (k) codes, each ActBlock as elements 0-7, 16-23, 8-15, 24-31
    const float* d;    // (k/32) ActBlock scales
    const float* sum;  // (k/32) ActBlock sums
};

// X's codes rearranged to lane order; the scales and sums are read from X as they are.
struct XPrepared {
    std::vector<int16_t, CacheLineAllocator<int16_t>> q;  // (m, k)
    const QuantizedRows* x = nullptr;
    XRow row(int64_t i) const { return {q.data() + i * x->k, x->scales(i), x->sums(i)}; }
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

// R weight rows times M rows of X: y[i * y_stride + r * y_lane] = w[r] . x_i.
template <class Dec, int R, int M>
void dot_rows(const uint8_t* const* w, const XRow* x, int64_t nsb, float* y, int64_t y_stride, int64_t y_lane = 1) {
    __m256 acc[R][M];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) acc[r][i] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++)
        for (int r = 0; r < R; r++) Dec::template add<M, XRow>(reinterpret_cast<const typename Dec::Block*>(w[r])[s], x, s, acc[r]);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) y[i * y_stride + r * y_lane] = simd::hsum8(acc[r][i]);
}

// Output rows [j0, j1) (j0 a multiple of 4), 4 weight rows per pass, the rows of X 2 at a time.
// As matmul_int.cpp's v4_rows, the share is read as 4 runs of whole rows, one per weight row of a
// pass: with g = (j1 - j0) / 4, pass i takes rows j0 + r g + i, r = 0..3, so each of the 4 streams
// one long run of memory, which the hardware prefetchers follow. Groups of 4 neighbouring rows
// (with no prefetch of their own) take up to twice as long from DRAM
// (docs/measurements/source-comment-history.md). Each row's sums are its own (no lanes shared), so
// the output is the same either way.
template <class Dec>
void v4_k_rows(const TensorView& W, const XPrepared& xp, float* Y, int64_t j0, int64_t j1) {
    const int64_t n = W.ne(1), nsb = xp.x->k / QK_K;
    {
        const int64_t g = (j1 - j0) / 4, m = xp.x->m;
        for (int64_t i = 0; i < g; i++) {
            const uint8_t* w[4];
            for (int r = 0; r < 4; r++) w[r] = W.row(j0 + r * g + i);
            int64_t t = 0;
            for (; t + 2 <= m; t += 2) {
                const XRow x[2] = {xp.row(t), xp.row(t + 1)};
                dot_rows<Dec, 4, 2>(w, x, nsb, Y + t * n + j0 + i, n, g);
            }
            if (t < m) {
                const XRow x = xp.row(t);
                dot_rows<Dec, 4, 1>(w, &x, nsb, Y + t * n + j0 + i, n, g);
            }
        }
        j0 += 4 * g;
    }
    // The 1-3 rows left, one by one.
    for_row_groups<4, 2>(j0, j1, xp.x->m, n, Y, [&](int64_t j) { return W.row(j); },
                         [&]<int R, int M>(const uint8_t* const* w, int64_t i, float* y, int64_t ys) {
                             XRow x[M];
                             for (int t = 0; t < M; t++) x[t] = xp.row(i + t);
                             dot_rows<Dec, R, M>(w, x, nsb, y, ys);
                         });
}

// X's codes in lane order, shared by the job's calls (one per thread).
template <class Dec>
RowJob v4_k_job(const TensorView& W, const QuantizedRows& X, float* Y) {
    auto xp = std::make_shared<const XPrepared>(prepare(X));
    RowJob job;
    job.rows = W.ne(1);
    job.align = 4;
    job.row_cost = double(row_bytes(W.type, X.k));
    job.run = [&W, xp, Y](int64_t j0, int64_t j1) { v4_k_rows<Dec>(W, *xp, Y, j0, j1); };
    return job;
}
#endif  // RIDGE_MATMUL_V4K

}  // namespace

bool int_k_types(DType t) { return t == DType::Q4_K || t == DType::Q5_K || t == DType::Q6_K; }
bool int_k_simd_types(DType t) { return RIDGE_MATMUL_V4K && int_k_types(t); }

Cost matmul_int_k_scalar(const TensorView& W, const QuantizedRows& X, float* Y) {
    check(W, X, "matmul_int_k_scalar");
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

Cost matmul_v4_int_k(const TensorView& W, const QuantizedRows& X, float* Y) {
    const RowJob job = int_k_row_job(W, X, Y);
    run_row_jobs(&job, 1, double(X.m) * double(W.ne(1)) * double(X.k) >= kParallelMinWork);
    return matmul_int_cost(W, X.m);
}

RowJob int_k_row_job(const TensorView& W, const QuantizedRows& X, float* Y) {
    check(W, X, "matmul_v4_int_k");
    if (!int_k_simd_types(W.type)) throw Error("matmul_v4_int_k: this build has no AVX2 + FMA + F16C");
#if RIDGE_MATMUL_V4K
    switch (W.type) {
        case DType::Q4_K: return v4_k_job<IntQ4_K<block_q4_K>>(W, X, Y);
        case DType::Q5_K: return v4_k_job<IntQ4_K<block_q5_K>>(W, X, Y);
        case DType::Q6_K: return v4_k_job<IntQ6_K>(W, X, Y);
        default: break;
    }
#endif
    return RowJob{};
}

}  // namespace ridge::cpu
