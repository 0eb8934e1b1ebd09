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
#include "weights/blocks.h"
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

// ---- scalar twin: codes in element order, as dequant_block in weights/blocks.h ----------------

// Q4_K (or Q5_K) super-block `blk` against its 8 ActBlocks x[0..8): the exact integer sums in
// int64, scaled and summed in double.
template <class Block>
double dot_q4_K(const Block& blk, const ActBlock* x) {  // x: (8) blocks
    const double d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    double acc = 0.0;
    for (int j = 0; j < kSubBlocks; j++) {  // sub-block j: elements 32j..32j+32 = ActBlock j
        uint8_t sc, mn;
        q4k_scale_min(j, blk.scales, &sc, &mn);
        const uint8_t* q = blk.qs + 32 * (j / 2);  // low nibbles for even j, high for odd
        const int shift = 4 * (j % 2);
        int64_t isum = 0;
        for (int l = 0; l < 32; l++) {
            int code = (q[l] >> shift) & 0x0f;
            if constexpr (std::is_same_v<Block, block_q5_K>) code |= ((blk.qh[l] >> j) & 1) << 4;
            isum += int64_t(code) * int64_t(x[j].q[l]);
        }
        acc += d * double(sc) * double(x[j].d) * double(isum) - dmin * double(mn) * double(x[j].sum);
    }
    return acc;
}

// Q6_K super-block against its 8 ActBlocks: 16 groups of 16 elements, each with an int8 scale.
double dot_q6_K(const block_q6_K& blk, const ActBlock* x) {  // x: (8) blocks
    const double d = fp16_to_fp32(blk.d);
    double acc = 0.0;
    for (int g = 0; g < QK_K / 16; g++) {  // group g: elements 16g..16g+16, half of ActBlock g/2
        int64_t isum = 0;
        for (int t = 0; t < 16; t++) {
            const int e = 16 * g + t;
            const int h = e / 128, k = (e % 128) / 32, l = e % 32;
            const int lo = (blk.ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
            const int hi = (blk.qh[32 * h + l] >> (2 * k)) & 0x03;
            isum += int64_t((lo | (hi << 4)) - 32) * int64_t(x[g / 2].q[e % 32]);
        }
        acc += d * double(blk.scales[g]) * double(x[g / 2].d) * double(isum);
    }
    return acc;
}

#if RIDGE_MATMUL_V4K
// ---- v4_int_k building blocks --------------------------------------------------------------------
// Lane order. Unpacking 32 bytes (elements 0..31) against zero gives int16 vectors holding
// elements [0..7 | 16..23] and [8..15 | 24..31]; madd then leaves elements 0..15 in int32 lanes
// 0-3 and 16..31 in lanes 4-7 (Q6_K's two groups of an ActBlock, each with its own scale).
// X is rearranged once per call to the same order, so no weight byte crosses a 128-bit lane.

// Integer dot products with simd::dot_add_i16: |a| <= 32, |b| <= 32767, so a lane of one ActBlock
// (4 products) stays below 2^22.


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

// The int32 lanes of one ActBlock: weight codes (a, b) in lane order times x's 32 codes at xq.
inline __m256i block_dot(__m256i a, __m256i b, const int16_t* xq) {
    const __m256i* x = reinterpret_cast<const __m256i*>(xq);
    return simd::dot_add_i16(simd::dot_add_i16(_mm256_setzero_si256(), a, _mm256_loadu_si256(x)), b, _mm256_loadu_si256(x + 1));
}

// One decoder per type: super-block s of a row, added to acc[i] for the M rows of X (lane sums
// are y's contributions; the caller adds the 8 lanes at the end). Q5_K is Q4_K with a fifth bit
// per code: chunk c's low nibbles (sub-block 2c) take bit 2c of their element's qh byte, its high
// nibbles bit 2c + 1, moved to bit 4 by a shift of qh (shifted 2 further each chunk) and a mask.
template <class BlockType>
struct IntQ4_K {
    using Block = BlockType;
    static constexpr bool kFive = std::is_same_v<Block, block_q5_K>;
    template <int M>
    static void add(const Block& blk, const XRow* x, int64_t s, __m256* acc) {
        // The 12 packed bytes -> 8 scales and 8 mins, one byte each (llama.cpp's unpacking of
        // q4k_scale_min): u[0..1] scales 0..7, u[2..3] mins 0..7.
        uint32_t u[4];
        std::memcpy(u, blk.scales, 12);
        constexpr uint32_t kLow6 = 0x3f3f3f3f, kLow4 = 0x0f0f0f0f, kLow2 = 0x03030303;
        u[3] = ((u[2] >> 4) & kLow4) | (((u[1] >> 6) & kLow2) << 4);
        const uint32_t mins_lo = u[1] & kLow6;
        u[1] = (u[2] & kLow4) | (((u[0] >> 6) & kLow2) << 4);
        u[2] = mins_lo;
        u[0] &= kLow6;
        const __m128i packed = _mm_set_epi32(int(u[3]), int(u[2]), int(u[1]), int(u[0]));
        const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(simd::f16(blk.d)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(packed)));
        const __m256 mn = _mm256_mul_ps(_mm256_set1_ps(simd::f16(blk.dmin)),
                                        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(packed, 8))));
        alignas(32) float scale[M][kSubBlocks];  // d * sc_j * d_x,j, broadcast from memory (no shuffle)
        for (int i = 0; i < M; i++) {
            _mm256_store_ps(scale[i], _mm256_mul_ps(sc, _mm256_loadu_ps(x[i].d + s * kSubBlocks)));
            acc[i] = _mm256_fnmadd_ps(mn, _mm256_loadu_ps(x[i].sum + s * kSubBlocks), acc[i]);  // - dmin m_j sum_j
        }
        const __m256i m4 = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
        [[maybe_unused]] __m256i qh;  // Q5_K: the high bits of chunk c in bits 0 and 1 of each byte
        if constexpr (kFive) qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh));
        for (int c = 0; c < 4; c++) {  // 32 bytes: sub-block 2c in the low nibbles, 2c+1 in the high
            const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            if constexpr (kFive) {
                const __m256i b4 = _mm256_set1_epi8(0x10);
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(qh, 4), b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(qh, 3), b4));
                qh = _mm256_srli_epi16(qh, 2);
            }
            const __m256i la = _mm256_unpacklo_epi8(lo, zero), lb = _mm256_unpackhi_epi8(lo, zero);
            const __m256i ha = _mm256_unpacklo_epi8(hi, zero), hb = _mm256_unpackhi_epi8(hi, zero);
            for (int i = 0; i < M; i++) {
                const int16_t* xq = x[i].q + (s * kSubBlocks + 2 * c) * 32;
                const __m256 p0 = _mm256_cvtepi32_ps(block_dot(la, lb, xq));
                const __m256 p1 = _mm256_cvtepi32_ps(block_dot(ha, hb, xq + 32));
                acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[i][2 * c]), p0, acc[i]);
                acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[i][2 * c + 1]), p1, acc[i]);
            }
        }
    }
};

struct IntQ6_K {
    using Block = block_q6_K;
    template <int M>
    static void add(const block_q6_K& blk, const XRow* x, int64_t s, __m256* acc) {
        const __m256 d = _mm256_set1_ps(simd::f16(blk.d));
        const __m256i m4 = _mm256_set1_epi8(0x0f), m2 = _mm256_set1_epi8(0x30), zero = _mm256_setzero_si256();
        const __m256i off = _mm256_set1_epi16(32);
        const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
        for (int h = 0; h < 2; h++) {  // half h: elements 128h..128h+128, ActBlocks 4h..4h+4, groups 8h..8h+8
            const __m256 sc = _mm256_mul_ps(
                d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales + 8 * h)))));
            __m256 scale[M];  // lane g: d * sc_g * d_x of the ActBlock holding group g
            for (int i = 0; i < M; i++) {
                const __m128 dx = _mm_loadu_ps(x[i].d + s * kSubBlocks + 4 * h);
                scale[i] = _mm256_mul_ps(sc, _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dx), dup));
            }
            const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h));
            const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.ql + 64 * h + 32));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk.qh + 32 * h));
            // ActBlock 4h + k takes nibble (k >= 2) of ql(k & 1) and bits 2k..2k+1 of qh, as bits 4-5.
            const __m256i u[4] = {
                _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2)),
                _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), m4), _mm256_and_si256(qh, m2)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), m4),
                                _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2)),
            };
            for (int k = 0; k < 4; k++) {
                const __m256i a = _mm256_sub_epi16(_mm256_unpacklo_epi8(u[k], zero), off);
                const __m256i b = _mm256_sub_epi16(_mm256_unpackhi_epi8(u[k], zero), off);
                // Lanes 0-3 hold group 2k of this half, lanes 4-7 group 2k+1.
                const __m256i g = _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1);
                for (int i = 0; i < M; i++) {
                    const int16_t* xq = x[i].q + (s * kSubBlocks + 4 * h + k) * 32;
                    const __m256 p = _mm256_cvtepi32_ps(block_dot(a, b, xq));
                    acc[i] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(scale[i], g), p, acc[i]);
                }
            }
        }
    }
};

// R weight rows times M rows of X: y[i * y_stride + r * y_lane] = w[r] . x_i.
template <class Dec, int R, int M>
void dot_rows(const uint8_t* const* w, const XRow* x, int64_t nsb, float* y, int64_t y_stride, int64_t y_lane = 1) {
    __m256 acc[R][M];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) acc[r][i] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; s++)
        for (int r = 0; r < R; r++) Dec::template add<M>(reinterpret_cast<const typename Dec::Block*>(w[r])[s], x, s, acc[r]);
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
