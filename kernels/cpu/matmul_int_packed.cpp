// v7_int_packed (see matmul.h): prefill as a GEMM on 16-bit integer activations, for the weight
// types with an integer kernel, where the build has AVX-512 (RIDGE_FORMAT_ZMM).
//
// v6 multiplies f32 by f32 at 16 multiply-adds an instruction. Here X is quantized to int16 blocks
// of 32 (quantize_rows, the same codes the row kernels take) and W's codes widened to int16, so one
// vpdpwssd (madd + add without VNNI) takes 32 multiply-adds, exact in int32. A block's sum is then
// scaled once, in f32, the arithmetic of the scalar twin (matmul_int_scalar):
//   acc += float(sum_c code_w[c] q_x[c]) * (s_w * d_x)      per group of the block (one, or Q6_K's two of 16)
//   acc += o_w * sum_x                                        Q4_1, Q5_1 (o = mn), Q4_K, Q5_K (o = -dmin m_j)
// The int32 sums are exact: |code_w| <= 128 and |q_x| <= 32767, so a block's 32 products stay
// below 2^28 in magnitude.
//
//   X is packed once per call into panels of kXr = 6 rows: per block, its 16 code pairs (two int16
//   as one int32) row by row, then the rows' d and sum. OpenMP hands out W's panels of kWr = 32
//   rows; each is decoded once (the row kernels' SIMD decoders, then 16 x 16 transposes in
//   registers) into pairs laid out 32 rows wide, with its scales and offsets, and multiplied by
//   every X panel with a 6 x 32 register tile: per pair, two vectors of 16 weight rows, six
//   broadcast pairs of X, twelve vpdpwssd into twelve int32 sums, which after a group take one
//   conversion, a multiply and an FMA each into the f32 tile (24 of the 32 registers with the
//   sums). Twelve independent sums, not the eight of a 4-row tile, keep both ports busy through
//   vpdpwssd's latency: 1.15-1.2x on the Xeon (docs/measurements/). k is taken
//   kSliceBlocks blocks at a time so that a slice of the decoded panel stays in L1 while the X
//   panels pass over it; the f32 tiles wait in memory between slices (a stored f32 reloaded is the
//   same value, so a slice boundary changes no rounding).
//
// Every output element takes the same operations in the same order (blocks in order, the integer
// sums exact), whatever m is and whichever panel or tile position its row and column fall in: a
// row of Y does not depend on the other rows of X.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cost.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"
#include "weights/error.h"
#include "weights/formats.h"
#include "weights/quant.h"

namespace ridge::cpu {

#if RIDGE_FORMAT_ZMM
namespace {

constexpr int kXr = 6;               // rows of X per panel (register tile height)
constexpr int kWr = 32;              // weight rows per panel (two zmm of int32 lanes)
constexpr int kPairs = 16;           // int16 pairs per block of 32
constexpr int64_t kSliceBlocks = 8;  // blocks of k per slice: 8 * 16 * 32 * 4 = 16 KiB of codes

// One decoded panel of W: kWr rows' blocks as pairs, codes[(b * kPairs + p) * kWr + j] the int16
// pair p (elements 2p, 2p + 1) of row j's block b; scale[(b * G + g) * kWr + j] the f32 scale of
// group g of that block (G = 1, or 2 for Q6_K's groups of 16); offset[b * kWr + j] the term times
// the block's sum of x (types with a minimum). Rows past the weight's end hold zeros.
struct WPanel {
    std::vector<int32_t, CacheLineAllocator<int32_t>> codes;
    std::vector<float, CacheLineAllocator<float>> scale, offset;
};

// One packed panel of X: codes[(b * kPairs + p) * kXr + r], d[b * kXr + r], sum[b * kXr + r].
struct XPanels {
    std::vector<int32_t, CacheLineAllocator<int32_t>> codes;
    std::vector<float, CacheLineAllocator<float>> d, sum;
};

// 16 vectors of 16 int32 (rows) -> their transpose, in place: r[j] lane i = the old r[i] lane j.
// Unpacks of 32- and 64-bit lanes, then two rounds of 128-bit lane shuffles.
inline void transpose16(__m512i* r) {
    __m512i a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {  // b[4i + c], 128-bit lane L: element 4L + c of rows 4i..4i+3
        b[4 * i] = _mm512_unpacklo_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 1] = _mm512_unpackhi_epi64(a[4 * i], a[4 * i + 2]);
        b[4 * i + 2] = _mm512_unpacklo_epi64(a[4 * i + 1], a[4 * i + 3]);
        b[4 * i + 3] = _mm512_unpackhi_epi64(a[4 * i + 1], a[4 * i + 3]);
    }
    for (int c = 0; c < 4; c++) {
        const __m512i e0 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0x44), e1 = _mm512_shuffle_i32x4(b[c], b[4 + c], 0xee);
        const __m512i e2 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0x44), e3 = _mm512_shuffle_i32x4(b[8 + c], b[12 + c], 0xee);
        r[c] = _mm512_shuffle_i32x4(e0, e2, 0x88);
        r[4 + c] = _mm512_shuffle_i32x4(e0, e2, 0xdd);
        r[8 + c] = _mm512_shuffle_i32x4(e1, e3, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(e1, e3, 0xdd);
    }
}

// The types' layouts: groups of a block with a scale each, whether there is an offset, and
// decode: rows [j0, j0 + rows) of W (rows <= 16) into columns [col, col + 16) of the panel p (nb
// blocks each), 16 rows' pairs of a block transposed at once; rows past `rows` are left as they are.
template <class Int>
struct Plain {  // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: codes from the zmm decoder, d (and mn) from the block
    static constexpr int kGroups = 1;
    static constexpr bool kOffset = Int::kUsesSum;
    static void decode(const TensorView& W, int64_t j0, int64_t rows, int64_t nb, int col, WPanel& p) {
        for (int64_t b = 0; b < nb; b++) {
            __m512i v[16];
            for (int64_t j = 0; j < 16; j++) v[j] = j < rows ? Int::decode_zmm(W.row(j0 + j), b) : _mm512_setzero_si512();
            transpose16(v);
            int32_t* out = p.codes.data() + b * kPairs * kWr + col;
            for (int t = 0; t < kPairs; t++) _mm512_store_si512(out + t * kWr, v[t]);
        }
        for (int64_t j = 0; j < rows; j++) {
            const uint8_t* row = W.row(j0 + j);
            for (int64_t b = 0; b < nb; b++) {
                uint16_t h[2];
                std::memcpy(h, row + b * Int::kBlockBytes + Int::kScaleOffset, kOffset ? 4 : 2);
                p.scale[b * kWr + col + j] = simd::f16(h[0]);
                if constexpr (kOffset) p.offset[b * kWr + col + j] = simd::f16(h[1]);
            }
        }
    }
};

// The K-quants: a super-block's codes from the lanes kernels' decoder (k_quants.h, in lane order:
// elements 0-7, 16-23, 8-15, 24-31 of each block of 32), put back in element order.
template <class IntK>
struct KQuant {
    static constexpr int kGroups = IntK::kHasMin ? 1 : 2;  // Q4_K/Q5_K: one scale per 32; Q6_K: per 16
    static constexpr bool kOffset = IntK::kHasMin;
    static void decode(const TensorView& W, int64_t j0, int64_t rows, int64_t nb, int col, WPanel& p) {
        using Block = typename IntK::Block;
        alignas(64) int16_t codes[16][QK_K];
        alignas(64) float scale[16], mn[8];
        // Lane-order pair -> element-order pair within a block: pairs 4-7 hold elements 16-23
        // (element pairs 8-11), pairs 8-11 elements 8-15 (element pairs 4-7).
        constexpr int kElementPair[kPairs] = {0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};
        for (int64_t s = 0; s < nb / 8; s++) {
            for (int64_t j = 0; j < rows; j++) {
                IntK::decode(reinterpret_cast<const Block*>(W.row(j0 + j))[s], codes[j], scale, mn);
                for (int a = 0; a < 8; a++) {  // block a of the super-block
                    const int64_t b = 8 * s + a;
                    if constexpr (kOffset) {
                        p.scale[b * kWr + col + j] = scale[2 * a];  // both groups share it
                        p.offset[b * kWr + col + j] = -mn[a];
                    } else {
                        p.scale[(2 * b) * kWr + col + j] = scale[2 * a];
                        p.scale[(2 * b + 1) * kWr + col + j] = scale[2 * a + 1];
                    }
                }
            }
            for (int a = 0; a < 8; a++) {
                __m512i v[16];
                for (int64_t j = 0; j < 16; j++)
                    v[j] = j < rows ? _mm512_load_si512(codes[j] + 32 * a) : _mm512_setzero_si512();
                transpose16(v);
                int32_t* out = p.codes.data() + (8 * s + a) * kPairs * kWr + col;
                for (int t = 0; t < kPairs; t++) _mm512_store_si512(out + kElementPair[t] * kWr, v[t]);
            }
        }
    }
};

// The 6 x 32 tile over blocks [0, nb) of a slice: acc (kXr, kWr) f32, read first unless `first`.
// Cost: 2 * kXr * kWr * 32 * nb integer multiply-adds' FLOPs; reads the slice's panel (L1) and X's.
// xc, xd, xs and wc, ws, wo point at the slice's first block.
template <int G, bool kOffset>
void tile(const int32_t* xc, const float* xd, const float* xs, const int32_t* wc, const float* ws, const float* wo,
          int64_t nb, float* acc_mem, bool first) {
    constexpr int kPairsPerGroup = kPairs / G;
    __m512 acc[kXr][2];
    for (int r = 0; r < kXr; r++)
        for (int c = 0; c < 2; c++) acc[r][c] = first ? _mm512_setzero_ps() : _mm512_load_ps(acc_mem + r * kWr + 16 * c);
    for (int64_t b = 0; b < nb; b++) {
        for (int g = 0; g < G; g++) {
            __m512i isum[kXr][2];
            for (int r = 0; r < kXr; r++) isum[r][0] = isum[r][1] = _mm512_setzero_si512();
            // Unrolled, so that the compiler keeps the eight sums in place (a rolled loop copied
            // every one of them between registers on every pair).
#pragma GCC unroll 16
            for (int p = g * kPairsPerGroup; p < (g + 1) * kPairsPerGroup; p++) {
                const int32_t* w = wc + (b * kPairs + p) * kWr;
                const __m512i w0 = _mm512_load_si512(w), w1 = _mm512_load_si512(w + 16);
                for (int r = 0; r < kXr; r++) {
                    const __m512i x = _mm512_set1_epi32(xc[(b * kPairs + p) * kXr + r]);
                    isum[r][0] = simd::dot_add_i16(isum[r][0], x, w0);
                    isum[r][1] = simd::dot_add_i16(isum[r][1], x, w1);
                }
            }
            const __m512 s0 = _mm512_load_ps(ws + (b * G + g) * kWr), s1 = _mm512_load_ps(ws + (b * G + g) * kWr + 16);
            for (int r = 0; r < kXr; r++) {
                const __m512 dx = _mm512_set1_ps(xd[b * kXr + r]);
                acc[r][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][0]), _mm512_mul_ps(s0, dx), acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[r][1]), _mm512_mul_ps(s1, dx), acc[r][1]);
            }
        }
        if constexpr (kOffset) {
            const __m512 o0 = _mm512_load_ps(wo + b * kWr), o1 = _mm512_load_ps(wo + b * kWr + 16);
            for (int r = 0; r < kXr; r++) {
                const __m512 sx = _mm512_set1_ps(xs[b * kXr + r]);
                acc[r][0] = _mm512_fmadd_ps(o0, sx, acc[r][0]);
                acc[r][1] = _mm512_fmadd_ps(o1, sx, acc[r][1]);
            }
        }
    }
    for (int r = 0; r < kXr; r++)
        for (int c = 0; c < 2; c++) _mm512_store_ps(acc_mem + r * kWr + 16 * c, acc[r][c]);
}

// Rows [i0, i0 + kXr) of Xq into panel storage at codes / d / sum (nb blocks), rows past m as zeros.
void pack_x(const QuantizedRows& Xq, int64_t i0, int64_t nb, int32_t* codes, float* d, float* sum) {
    for (int r = 0; r < kXr; r++) {
        const int64_t i = i0 + r;
        for (int64_t b = 0; b < nb; b++) {
            const int32_t* pairs = i < Xq.m ? reinterpret_cast<const int32_t*>(Xq.codes(i) + b * 32) : nullptr;
            for (int t = 0; t < kPairs; t++) codes[(b * kPairs + t) * kXr + r] = pairs ? pairs[t] : 0;
            d[b * kXr + r] = pairs ? Xq.scales(i)[b] : 0.0f;
            sum[b * kXr + r] = pairs ? Xq.sums(i)[b] : 0.0f;
        }
    }
}

// Y (m, n) = Xq . W^T through the tile. Cost: matmul_int_cost (matmul.h); besides, each thread
// decodes its panels of W once and the threads pack X once (m * k codes).
template <class Layout>
void gemm(const TensorView& W, const QuantizedRows& Xq, float* Y) {
    constexpr int G = Layout::kGroups;
    constexpr bool kOffset = Layout::kOffset;
    const int64_t k = W.ne(0), n = W.ne(1), m = Xq.m, nb = k / 32;
    const int64_t x_panels = (m + kXr - 1) / kXr, w_panels = (n + kWr - 1) / kWr;
    // The packed X is shared by the threads; kept between calls (a prompt chunk's matmuls would
    // otherwise each map and fault in a few MB).
    static thread_local XPanels xp;
    const size_t panel_codes = size_t(nb * kPairs * kXr), panel_blocks = size_t(nb * kXr);
    if (xp.codes.size() < size_t(x_panels) * panel_codes) {
        xp.codes.resize(size_t(x_panels) * panel_codes);
        xp.d.resize(size_t(x_panels) * panel_blocks);
        xp.sum.resize(size_t(x_panels) * panel_blocks);
    }
    int32_t* xc = xp.codes.data();
    float *xd = xp.d.data(), *xs = xp.sum.data();
    const double work = double(m) * double(n) * double(k);
#pragma omp parallel if (work >= kParallelMinWork)
    {
#pragma omp for schedule(static)
        for (int64_t q = 0; q < x_panels; q++)
            pack_x(Xq, q * kXr, nb, xc + q * panel_codes, xd + q * panel_blocks, xs + q * panel_blocks);
        // (the implicit barrier: every X panel is packed before any tile reads it)
        WPanel wp;
        wp.codes.assign(size_t(nb * kPairs * kWr), 0);
        wp.scale.assign(size_t(nb * G * kWr), 0.0f);
        wp.offset.assign(kOffset ? size_t(nb * kWr) : 0, 0.0f);
        std::vector<float, CacheLineAllocator<float>> acc(size_t(x_panels * kXr * kWr));
#pragma omp for schedule(dynamic)
        for (int64_t q = 0; q < w_panels; q++) {
            const int64_t j0 = q * kWr, rows = std::min<int64_t>(kWr, n - j0);
            if (rows < kWr) {  // the last panel: rows past n must be zeros, not the previous panel's
                std::fill(wp.codes.begin(), wp.codes.end(), 0);
                std::fill(wp.scale.begin(), wp.scale.end(), 0.0f);
                std::fill(wp.offset.begin(), wp.offset.end(), 0.0f);
            }
            for (int half = 0; half < 2 && 16 * half < rows; half++)
                Layout::decode(W, j0 + 16 * half, std::min<int64_t>(16, rows - 16 * half), nb, 16 * half, wp);
            for (int64_t b0 = 0; b0 < nb; b0 += kSliceBlocks) {
                const int64_t bs = std::min<int64_t>(kSliceBlocks, nb - b0);
                for (int64_t p = 0; p < x_panels; p++)
                    tile<G, kOffset>(xc + p * panel_codes + b0 * kPairs * kXr, xd + p * panel_blocks + b0 * kXr,
                                     xs + p * panel_blocks + b0 * kXr, wp.codes.data() + b0 * kPairs * kWr,
                                     wp.scale.data() + b0 * G * kWr, kOffset ? wp.offset.data() + b0 * kWr : nullptr,
                                     bs, acc.data() + p * kXr * kWr, b0 == 0);
            }
            for (int64_t p = 0; p < x_panels; p++) {
                const int64_t i0 = p * kXr, x_rows = std::min<int64_t>(kXr, m - i0);
                for (int64_t r = 0; r < x_rows; r++) {
                    const float* a = acc.data() + (p * kXr + r) * kWr;
                    std::copy(a, a + rows, Y + (i0 + r) * n + j0);
                }
            }
        }
    }
}

}  // namespace
#endif  // RIDGE_FORMAT_ZMM

bool v7_types(DType t) {
#if RIDGE_FORMAT_ZMM
    return int_types(t) || int_k_types(t);
#else
    (void)t;
    return false;
#endif
}

Cost matmul_v7_int_packed(const TensorView& W, const QuantizedRows& Xq, float* Y) {
    if (!v7_types(W.type))
        throw Error("matmul_v7_int_packed: weight '" + W.name + "' is " + std::string(dtype_name(W.type)) +
                    ", which this build's integer GEMM does not take");
    const Dims d = check_weight(W, "matmul_v7_int_packed");
    if (Xq.k != d.k || d.k % (int_k_types(W.type) ? QK_K : 32) != 0)
        throw Error("matmul_v7_int_packed: weight '" + W.name + "' of shape " + shape_str(W.shape) +
                    " does not take rows of " + std::to_string(Xq.k) + " activations");
#if RIDGE_FORMAT_ZMM
    switch (W.type) {
        case DType::Q4_0: gemm<Plain<IntQ4_0>>(W, Xq, Y); break;
        case DType::Q4_1: gemm<Plain<IntQ4_1>>(W, Xq, Y); break;
        case DType::Q5_0: gemm<Plain<IntQ5_0>>(W, Xq, Y); break;
        case DType::Q5_1: gemm<Plain<IntQ5_1>>(W, Xq, Y); break;
        case DType::Q8_0: gemm<Plain<IntQ8_0>>(W, Xq, Y); break;
        case DType::Q4_K: gemm<KQuant<IntQ4_K<block_q4_K>>>(W, Xq, Y); break;
        case DType::Q5_K: gemm<KQuant<IntQ4_K<block_q5_K>>>(W, Xq, Y); break;
        default: gemm<KQuant<IntQ6_K>>(W, Xq, Y); break;  // v7_types admits no other
    }
#endif
    return matmul_int_cost(W, Xq.m);
}

Cost matmul_v7_int_packed(const TensorView& W, const float* X, int64_t m, float* Y) {
    static thread_local QuantizedRows q;
    const Cost qc = quantize_rows(X, m, W.ne(0), q);
    Cost c = matmul_v7_int_packed(W, q, Y);
    c.flops += qc.flops;
    return c;
}

}  // namespace ridge::cpu
