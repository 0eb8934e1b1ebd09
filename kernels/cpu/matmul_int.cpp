// Integer activation kernels (see matmul_int.h): quantize_rows, the scalar twin and the AVX2 path.
#include "kernels/cpu/matmul_int.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>

#include "kernels/cpu/simd.h"
#define RIDGE_MATMUL_V4 RIDGE_CPU_SIMD

#include "kernels/cpu/row_groups.h"
#include "kernels/cpu/row_jobs.h"
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
// 2^23 per block, and a block's whole sum stays below 2^28.

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

// The 2-byte (f16) or 4-byte (f16 pair) fields of up to 4 blocks, at p, p + stride, ...: 0 past n.
// Built in registers: stores to memory read back as one vector would stall store forwarding.
template <class T>
inline T field(const uint8_t* p, size_t stride, int j, int n) {
    T v = 0;
    if (j < n) std::memcpy(&v, p + size_t(j) * stride, sizeof(T));
    return v;
}
inline __m128 f16_lanes(const uint8_t* p, size_t stride, int n) {
    const __m128i h = _mm_setr_epi16(short(field<uint16_t>(p, stride, 0, n)), short(field<uint16_t>(p, stride, 1, n)),
                                     short(field<uint16_t>(p, stride, 2, n)), short(field<uint16_t>(p, stride, 3, n)),
                                     0, 0, 0, 0);
    return _mm_cvtph_ps(h);
}
// Two adjacent f16 fields (a at p, b at p + 2) of up to 4 blocks -> a and b as 4 lanes each.
inline void f16_pair_lanes(const uint8_t* p, size_t stride, int n, __m128& a, __m128& b) {
    const __m256 ab = _mm256_cvtph_ps(_mm_setr_epi32(int(field<uint32_t>(p, stride, 0, n)), int(field<uint32_t>(p, stride, 1, n)),
                                                     int(field<uint32_t>(p, stride, 2, n)), int(field<uint32_t>(p, stride, 3, n))));
    const __m128 lo = _mm256_castps256_ps128(ab), hi = _mm256_extractf128_ps(ab, 1);  // a0 b0 a1 b1 | a2 b2 a3 b3
    a = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0));
    b = _mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1));
}

// One decoder per weight type: block b of a row -> its codes; scales(row, b, n) -> the f16 scale d
// (and Q4_1's minimum mn) of blocks b..b+n-1 as 4 lanes, 0 past n.
struct IntQ4_0 {
    static constexpr bool kUsesSum = false;
    static constexpr size_t kBlockBytes = sizeof(block_q4_0);
    static Codes decode(const uint8_t* row, int64_t b) { return nibbles<8>(reinterpret_cast<const block_q4_0*>(row)[b].qs); }
    static void scales(const uint8_t* row, int64_t b, int n, __m128& d, __m128&) {
        d = f16_lanes(row + b * sizeof(block_q4_0) + offsetof(block_q4_0, d), sizeof(block_q4_0), n);
    }
};
struct IntQ4_1 {
    static constexpr bool kUsesSum = true;
    static constexpr size_t kBlockBytes = sizeof(block_q4_1);
    static Codes decode(const uint8_t* row, int64_t b) { return nibbles<0>(reinterpret_cast<const block_q4_1*>(row)[b].qs); }
    static void scales(const uint8_t* row, int64_t b, int n, __m128& d, __m128& mn) {
        static_assert(offsetof(block_q4_1, m) == offsetof(block_q4_1, d) + 2);
        f16_pair_lanes(row + b * sizeof(block_q4_1) + offsetof(block_q4_1, d), sizeof(block_q4_1), n, d, mn);
    }
};
struct IntQ8_0 {
    static constexpr bool kUsesSum = false;
    static constexpr size_t kBlockBytes = sizeof(block_q8_0);
    static Codes decode(const uint8_t* row, int64_t b) {
        const __m128i* q = reinterpret_cast<const __m128i*>(reinterpret_cast<const block_q8_0*>(row)[b].qs);
        return {_mm256_cvtepi8_epi16(_mm_loadu_si128(q)), _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1))};
    }
    static void scales(const uint8_t* row, int64_t b, int n, __m128& d, __m128&) {
        d = f16_lanes(row + b * sizeof(block_q8_0) + offsetof(block_q8_0, d), sizeof(block_q8_0), n);
    }
};

// 4 blocks' int32 lanes p0..p3 -> one vector whose lanes j and j + 4 together hold block j's sum.
inline __m256i fold4(const __m256i* p) {
    const __m256i t0 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
    const __m256i t1 = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(t0, t1), _mm256_unpackhi_epi64(t0, t1));
}

// 4 floats from p, 0 past n.
inline __m128 load_lanes(const float* p, int n) {
    if (n == 4) return _mm_loadu_ps(p);
    return _mm_setr_ps(p[0], n > 1 ? p[1] : 0.0f, n > 2 ? p[2] : 0.0f, 0.0f);
}

// One row of X as the kernels read it.
struct XRow {
    const int16_t* q;  // (k) codes
    const float* d;    // (k/32) block scales
    const float* sum;  // (k/32) block sums
};

// Blocks b..b+n-1 (n <= 4) of R weight rows against M rows of X, added to the accumulators: each
// block's integer dot product, folded 4 blocks to a vector, converted once and scaled by
// d_w * d_x lane by lane; Q4_1's mn * sum_x goes to a 4-lane accumulator of its own. Every
// (weight row, X row) pair takes the same operations in the same order whatever R and M are.
// Each weight row's stream is prefetched this many bytes ahead of the block being decoded: about
// 5% faster SmolLM2 decode than the hardware prefetcher alone (1024 against 0, 512 and 2048-4096,
// alternating runs), the most on the Q8_0 output head.
constexpr size_t kPrefetchBytes = 1024;

template <class Dec, int R, int M>
__attribute__((always_inline)) inline void dot_group(const uint8_t* const* w, const XRow* x, int64_t b, int n,
                                                     __m256 (&acc)[R][M], __m128 (&macc)[R][M]) {
    for (int r = 0; r < R; r++) {
        _mm_prefetch(reinterpret_cast<const char*>(w[r]) + b * Dec::kBlockBytes + kPrefetchBytes, _MM_HINT_T0);
        __m256i p[M][4];
        for (int j = 0; j < 4; j++) {
            if (j >= n) {
                for (int i = 0; i < M; i++) p[i][j] = _mm256_setzero_si256();
                continue;
            }
            const Codes wq = Dec::decode(w[r], b + j);
            for (int i = 0; i < M; i++) {
                const __m256i* q = reinterpret_cast<const __m256i*>(x[i].q + (b + j) * 32);
                p[i][j] = simd::dot_add_i16(simd::dot_add_i16(_mm256_setzero_si256(), wq.lo, _mm256_load_si256(q)),
                                            wq.hi, _mm256_load_si256(q + 1));
            }
        }
        __m128 d, mn = _mm_setzero_ps();
        Dec::scales(w[r], b, n, d, mn);
        for (int i = 0; i < M; i++) {
            const __m128 s = _mm_mul_ps(d, load_lanes(x[i].d + b, n));
            acc[r][i] = _mm256_fmadd_ps(_mm256_set_m128(s, s), _mm256_cvtepi32_ps(fold4(p[i])), acc[r][i]);
            if constexpr (Dec::kUsesSum) macc[r][i] = _mm_fmadd_ps(mn, load_lanes(x[i].sum + b, n), macc[r][i]);
        }
    }
}

// R weight rows times M rows of X: y[i * y_stride + r] = w[r] . x_i.
template <class Dec, int R, int M>
inline void dot_rows(const uint8_t* const* w, const XRow* x, int64_t nb, float* y, int64_t y_stride) {
    __m256 acc[R][M];
    __m128 macc[R][M];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) acc[r][i] = _mm256_setzero_ps(), macc[r][i] = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) dot_group<Dec, R, M>(w, x, b, 4, acc, macc);
    if (b < nb) dot_group<Dec, R, M>(w, x, b, int(nb - b), acc, macc);
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) y[i * y_stride + r] = simd::hsum8(acc[r][i]) + simd::hsum4(macc[r][i]);
}

// Output rows [j0, j1) (j0 a multiple of kRows), kRows weight rows per pass: 4 (each x block serves
// 4 rows) for several rows of X; 1 for decode, where one weight stream per thread is what the
// hardware prefetcher follows best (SmolLM2 decode, 3 alternating runs each: Q8_0 64-72 t/s against
// 62-65 with 4 rows, Q4_1 83-90 against 71-90).
template <class Dec, int kRows>
void v4_rows(const TensorView& W, const QuantizedRows& X, float* Y, int64_t j0, int64_t j1) {
    const int64_t n = W.ne(1), nb = X.k / 32;
    const size_t rb = row_bytes(W.type, X.k);
    for_row_groups<kRows, 2>(
        j0, j1, X.m, n, Y, [&](int64_t j) { return W.data + size_t(j) * rb; },
        [&]<int R, int M>(const uint8_t* const* w, int64_t i, float* y) {
            XRow x[M];
            for (int t = 0; t < M; t++) x[t] = XRow{X.codes(i + t), X.scales(i + t), X.sums(i + t)};
            dot_rows<Dec, R, M>(w, x, nb, y, n);
        });
}

template <class Dec>
RowJob v4_job(const TensorView& W, const QuantizedRows& X, float* Y) {
    RowJob job;
    job.rows = W.ne(1);
    job.row_cost = double(row_bytes(W.type, X.k));
    if (X.m == 1) {
        job.run = [&W, &X, Y](int64_t j0, int64_t j1) { v4_rows<Dec, 1>(W, X, Y, j0, j1); };
    } else {
        job.align = 4;
        job.run = [&W, &X, Y](int64_t j0, int64_t j1) { v4_rows<Dec, 4>(W, X, Y, j0, j1); };
    }
    return job;
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
                const ActBlock x = X.block(i, b);
                int64_t isum = 0;
                for (int c = 0; c < 32; c++) isum += int64_t(code[c]) * int64_t(x.q[c]);
                acc += double(d) * double(x.d) * double(isum) + double(mn) * double(x.sum);
            }
            Y[i * n + j] = float(acc);
        }
    return matmul_int_cost(W, X.m);
}

Cost matmul_v4_int(const TensorView& W, const QuantizedRows& X, float* Y) {
    const RowJob job = int_row_job(W, X, Y);
    run_row_jobs(&job, 1, double(X.m) * double(W.ne(1)) * double(X.k) >= kParallelMinWork);
    return matmul_int_cost(W, X.m);
}

RowJob int_row_job(const TensorView& W, const QuantizedRows& X, float* Y) {
    check(W, X, "matmul_v4_int");
    if (!int_simd_types(W.type)) throw Error("matmul_v4_int: this build has no AVX2 + FMA + F16C");
#if RIDGE_MATMUL_V4
    switch (W.type) {
        case DType::Q4_0: return v4_job<IntQ4_0>(W, X, Y);
        case DType::Q4_1: return v4_job<IntQ4_1>(W, X, Y);
        case DType::Q8_0: return v4_job<IntQ8_0>(W, X, Y);
        default: break;
    }
#endif
    return RowJob{};
}

}  // namespace ridge::cpu
