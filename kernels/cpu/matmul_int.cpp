// Integer activation kernels (see matmul_int.h): quantize_rows, the scalar twin and the AVX2 path.
#include "kernels/cpu/matmul_int.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cpu/simd.h"
#define RIDGE_MATMUL_V4 RIDGE_CPU_SIMD

#include "weights/blocks.h"
#include "weights/error.h"

namespace ridge::cpu {

namespace {

void check(const TensorView& W, const QuantizedRows& X, const char* who) {
    if (!int_types(W.type))
        throw Error(std::string(who) + ": weight '" + W.name + "' is " + std::string(dtype_name(W.type)) +
                    ", the integer kernels take Q4_0, Q4_1, Q8_0 only");
    if (W.shape.size() != 2 || W.ne(0) != X.k || X.k % 32 != 0)
        throw Error(std::string(who) + ": weight '" + W.name + "' of shape " + shape_str(W.shape) +
                    " does not take rows of " + std::to_string(X.k) + " activations");
}

// The integer codes of weight block b of a row, as w[c] = scale * code[c] (+ mn).
// Codes are returned in element order 0..31, with d the f16 scale and mn Q4_1's minimum.
void codes(DType t, const uint8_t* row, int64_t b, int32_t* code, float& d, float& mn) {
    mn = 0.0f;
    if (t == DType::Q8_0) {
        const block_q8_0& blk = reinterpret_cast<const block_q8_0*>(row)[b];
        for (int c = 0; c < 32; c++) code[c] = blk.qs[c];
        d = fp16_to_fp32(blk.d);
    } else if (t == DType::Q4_0) {
        const block_q4_0& blk = reinterpret_cast<const block_q4_0*>(row)[b];
        for (int c = 0; c < 16; c++) {
            code[c] = int32_t(blk.qs[c] & 0x0f) - 8;
            code[c + 16] = int32_t(blk.qs[c] >> 4) - 8;
        }
        d = fp16_to_fp32(blk.d);
    } else {  // Q4_1
        const block_q4_1& blk = reinterpret_cast<const block_q4_1*>(row)[b];
        for (int c = 0; c < 16; c++) {
            code[c] = blk.qs[c] & 0x0f;
            code[c + 16] = blk.qs[c] >> 4;
        }
        d = fp16_to_fp32(blk.d);
        mn = fp16_to_fp32(blk.m);
    }
}

#if RIDGE_MATMUL_V4
// ---- v4 building blocks ------------------------------------------------------------------------
// Integer dot products with simd::dot_add_i16: |a| <= 128, |b| <= 32767, so a lane grows by at most
// 2^23 per block.

// A weight block's 32 codes as two vectors of 16 int16 lanes: elements 0..15 and 16..31.
struct Codes {
    __m256i lo, hi;
};

// 16 bytes of nibbles -> codes (low nibbles are elements 0..15, high nibbles 16..31), minus kOff:
// the bytes widen to 16 bits first, so one AND and one shift split every byte at once.
template <int kOff>
inline Codes nibbles(const uint8_t* qs) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    Codes c{_mm256_and_si256(v, _mm256_set1_epi16(0x0f)), _mm256_srli_epi16(v, 4)};
    if constexpr (kOff != 0) {
        c.lo = _mm256_sub_epi16(c.lo, _mm256_set1_epi16(kOff));
        c.hi = _mm256_sub_epi16(c.hi, _mm256_set1_epi16(kOff));
    }
    return c;
}

// One decoder per weight type: block b -> its codes, its scale d and (Q4_1) minimum mn.
struct IntQ4_0 {
    static constexpr bool kUsesSum = false;
    static Codes decode(const uint8_t* row, int64_t b, float& d, float&) {
        const block_q4_0& blk = reinterpret_cast<const block_q4_0*>(row)[b];
        d = simd::f16(blk.d);
        return nibbles<8>(blk.qs);
    }
};
struct IntQ4_1 {
    static constexpr bool kUsesSum = true;
    static Codes decode(const uint8_t* row, int64_t b, float& d, float& mn) {
        const block_q4_1& blk = reinterpret_cast<const block_q4_1*>(row)[b];
        d = simd::f16(blk.d);
        mn = simd::f16(blk.m);
        return nibbles<0>(blk.qs);
    }
};
struct IntQ8_0 {
    static constexpr bool kUsesSum = false;
    static Codes decode(const uint8_t* row, int64_t b, float& d, float&) {
        const block_q8_0& blk = reinterpret_cast<const block_q8_0*>(row)[b];
        d = simd::f16(blk.d);
        const __m128i* q = reinterpret_cast<const __m128i*>(blk.qs);
        return {_mm256_cvtepi8_epi16(_mm_loadu_si128(q)), _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1))};
    }
};

// R weight rows times M rows of quantized x: y[i * y_stride + r] = w[r] . x_i.
// Per block: the integer dot product (8 lanes), scaled by d_w * d_x into an f32 accumulator.
template <class Dec, int R, int M>
inline void dot_rows(const uint8_t* const* w, const ActBlock* const* x, int64_t nb, float* y, int64_t y_stride) {
    __m256 acc[R][M];
    float macc[R][M];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) acc[r][i] = _mm256_setzero_ps(), macc[r][i] = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        Codes xq[M];
        for (int i = 0; i < M; i++) {
            const __m256i* q = reinterpret_cast<const __m256i*>(x[i][b].q);
            xq[i] = {_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1)};
        }
        for (int r = 0; r < R; r++) {
            float d, mn = 0.0f;
            const Codes wq = Dec::decode(w[r], b, d, mn);
            for (int i = 0; i < M; i++) {
                const __m256i lo = simd::dot_add_i16(_mm256_setzero_si256(), wq.lo, xq[i].lo);
                const __m256i p = simd::dot_add_i16(lo, wq.hi, xq[i].hi);
                acc[r][i] = _mm256_fmadd_ps(_mm256_set1_ps(d * x[i][b].d), _mm256_cvtepi32_ps(p), acc[r][i]);
                // std::fma: the same rounding in every instantiation (decode = prefill, bit for bit).
                if constexpr (Dec::kUsesSum) macc[r][i] = std::fma(mn, x[i][b].sum, macc[r][i]);
            }
        }
    }
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) y[i * y_stride + r] = simd::hsum8(acc[r][i]) + macc[r][i];
}

// kRows weight rows per pass: 4 (each x block serves 4 rows) for several rows of X; 1 for decode,
// where one weight stream per thread is what the hardware prefetcher follows best (SmolLM2 decode,
// 3 alternating runs each: Q8_0 64-72 t/s against 62-65 with 4 rows, Q4_1 83-90 against 71-90).
template <class Dec, int kRows>
void matmul_v4_typed(const TensorView& W, const QuantizedRows& X, float* Y) {
    constexpr int kXRows = 2;
    const int64_t k = X.k, n = W.ne(1), m = X.m, nb = k / 32;
    const int64_t groups = (n + kRows - 1) / kRows;
    const double work = double(m) * double(n) * double(k);  // multiply-adds
#pragma omp parallel for schedule(static) if (work >= kParallelMinWork)
    for (int64_t g = 0; g < groups; g++) {
        const int64_t j0 = g * kRows;
        const int64_t rows = std::min<int64_t>(kRows, n - j0);
        const uint8_t* w[kRows];
        for (int64_t r = 0; r < rows; r++) w[r] = W.row(j0 + r);
        for (int64_t i = 0; i < m; i += kXRows) {
            const int64_t xr = std::min<int64_t>(kXRows, m - i);
            const ActBlock* x[kXRows] = {X.row(i), X.row(i + xr - 1)};
            float* y = Y + i * n + j0;
            if (rows == kRows && xr == kXRows) {
                dot_rows<Dec, kRows, kXRows>(w, x, nb, y, n);
            } else if (rows == kRows) {
                dot_rows<Dec, kRows, 1>(w, x, nb, y, n);  // the last odd X row
            } else {
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t ii = 0; ii < xr; ii++) dot_rows<Dec, 1, 1>(w + r, x + ii, nb, y + ii * n + r, n);
            }
        }
    }
}
#endif  // RIDGE_MATMUL_V4

}  // namespace

bool int_types(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0; }
bool int_simd_types(DType t) { return RIDGE_MATMUL_V4 && int_types(t); }

Cost quantize_rows_cost(int64_t m, int64_t k) {
    Cost c;
    c.flops = 3.0 * double(m) * double(k);
    c.act_read = 4.0 * double(m) * double(k);
    c.act_written = double(m) * double(k / 32) * kActBlockBytes;
    return c;
}

Cost quantize_rows(const float* X, int64_t m, int64_t k, QuantizedRows& out) {
    if (k % 32 != 0) throw Error("quantize_rows: row length " + std::to_string(k) + " is not a multiple of 32");
    out.m = m, out.k = k;
    const int64_t nb = k / 32;
    if (int64_t(out.blocks.size()) < m * nb) out.blocks.resize(size_t(m * nb));
#pragma omp parallel for schedule(static) if (double(m) * double(k) >= 4 * kParallelMinWork)
    for (int64_t i = 0; i < m * nb; i++) {
        const float* x = X + i * 32;
        float amax = 0.0f, sum = 0.0f;
        for (int c = 0; c < 32; c++) amax = std::max(amax, std::fabs(x[c])), sum += x[c];
        const float d = amax / 32767.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        ActBlock& blk = out.blocks[size_t(i)];
        blk.d = d;
        blk.sum = sum;
        for (int c = 0; c < 32; c++) blk.q[c] = int16_t(std::nearbyint(x[c] * id));
    }
    return quantize_rows_cost(m, k);
}

Cost matmul_int_cost(const TensorView& W, int64_t m) {
    const double k = double(W.ne(0)), n = double(W.ne(1));
    Cost c;
    c.flops = 2.0 * double(m) * n * k;
    c.weight_bytes = n * double(row_bytes(W.type, W.ne(0)));
    c.act_read = double(m) * (k / 32) * kActBlockBytes;
    c.act_written = 4.0 * double(m) * n;
    return c;
}

Cost matmul_int_scalar(const TensorView& W, const QuantizedRows& X, float* Y) {
    check(W, X, "matmul_int_scalar");
    const int64_t n = W.ne(1), nb = X.k / 32;
    int32_t code[32];
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < X.m; i++) {
            double acc = 0.0;
            for (int64_t b = 0; b < nb; b++) {
                float d, mn;
                codes(W.type, W.row(j), b, code, d, mn);
                const ActBlock& x = X.row(i)[b];
                int64_t isum = 0;
                for (int c = 0; c < 32; c++) isum += int64_t(code[c]) * int64_t(x.q[c]);
                acc += double(d) * double(x.d) * double(isum) + double(mn) * double(x.sum);
            }
            Y[i * n + j] = float(acc);
        }
    return matmul_int_cost(W, X.m);
}

Cost matmul_v4_int(const TensorView& W, const QuantizedRows& X, float* Y) {
    check(W, X, "matmul_v4_int");
    if (!int_simd_types(W.type)) throw Error("matmul_v4_int: this build has no AVX2 + FMA + F16C");
#if RIDGE_MATMUL_V4
    switch (W.type) {
        case DType::Q4_0: X.m == 1 ? matmul_v4_typed<IntQ4_0, 1>(W, X, Y) : matmul_v4_typed<IntQ4_0, 4>(W, X, Y); break;
        case DType::Q4_1: X.m == 1 ? matmul_v4_typed<IntQ4_1, 1>(W, X, Y) : matmul_v4_typed<IntQ4_1, 4>(W, X, Y); break;
        case DType::Q8_0: X.m == 1 ? matmul_v4_typed<IntQ8_0, 1>(W, X, Y) : matmul_v4_typed<IntQ8_0, 4>(W, X, Y); break;
        default: break;
    }
#endif
    return matmul_int_cost(W, X.m);
}

}  // namespace ridge::cpu
