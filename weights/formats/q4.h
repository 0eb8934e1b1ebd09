// Q4_0 and Q4_1, ggml's 4-bit blocks of 32 elements: the block layouts, and every decoder of them
// (scalar and device, RIDGE_HD; the SIMD float decoders of matmul v3; the integer decoders of
// matmul v4, ymm and zmm) and the reference quantizers, together. Kernels own the loops; they
// call these. Each scalar decode performs the same float32 operations, in the same order, as
// gguf-py's dequantize.
//
// Bit-exactness: d*q is exact in float32 (an f16 scale times a code of a few bits needs at most 24
// bits of mantissa), so y = d*q + m rounds once, in the add, whether or not a compiler fuses the
// two into an FMA (GCC does in C++ wherever the target has FMA, across statements too; nvcc in
// device code unless built with -fmad=false). The same holds for every decoder of these formats.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "weights/formats/floats.h"
#include "weights/formats/simd.h"
#include "weights/hd.h"

namespace ridge {

constexpr int QK4_0 = 32, QK4_1 = 32;  // elements per block

// Q4_0: 32 elements; y[j] = d * (nibble_j - 8). qs[j] holds element j (low) and j+16 (high).
struct block_q4_0 {
    uint16_t d;             // f16 scale
    uint8_t qs[QK4_0 / 2];  // (16) nibbles
};
// Q4_1: 32 elements; y[j] = d * nibble_j + m.
struct block_q4_1 {
    uint16_t d;             // f16 scale
    uint16_t m;             // f16 minimum
    uint8_t qs[QK4_1 / 2];  // (16) nibbles, as Q4_0
};
static_assert(sizeof(block_q4_0) == 18, "Q4_0 block is 18 bytes");
static_assert(sizeof(block_q4_1) == 20, "Q4_1 block is 20 bytes");

// ---- scalar decode, host and device ----------------------------------------------------------
// One byte of codes holds element i (low nibble) and element i + 16 (high nibble). Every decode of
// these formats (dequant_block, the CUDA matrix's split layout, the CUDA matvec) goes through these.

RIDGE_HD inline void q4_0_pair(uint32_t byte, float d, float& lo, float& hi) {
    lo = d * float(int(byte & 0x0f) - 8);
    hi = d * float(int(byte >> 4) - 8);
}
RIDGE_HD inline void q4_1_pair(uint32_t byte, float d, float m, float& lo, float& hi) {
    const float tl = d * float(byte & 0x0f);
    const float th = d * float(byte >> 4);
    lo = tl + m;
    hi = th + m;
}
// Element e (0..31) of the block whose 16 bytes of codes are qs.
RIDGE_HD inline float q4_0_element(const uint8_t* qs, float d, int e) {
    float lo, hi;
    q4_0_pair(qs[e % 16], d, lo, hi);
    return e < 16 ? lo : hi;
}
RIDGE_HD inline float q4_1_element(const uint8_t* qs, float d, float m, int e) {
    float lo, hi;
    q4_1_pair(qs[e % 16], d, m, lo, hi);
    return e < 16 ? lo : hi;
}
// The 32 elements of the block with codes qs into y (32).
RIDGE_HD inline void q4_0_decode(const uint8_t* qs, float d, float* y) {
    for (int j = 0; j < 16; j++) q4_0_pair(qs[j], d, y[j], y[j + 16]);
}
RIDGE_HD inline void q4_1_decode(const uint8_t* qs, float d, float m, float* y) {
    for (int j = 0; j < 16; j++) q4_1_pair(qs[j], d, m, y[j], y[j + 16]);
}

// y (32)
RIDGE_HD inline void dequant_block(const block_q4_0& b, float* y) { q4_0_decode(b.qs, fp16_to_fp32(b.d), y); }
RIDGE_HD inline void dequant_block(const block_q4_1& b, float* y) {
    q4_1_decode(b.qs, fp16_to_fp32(b.d), fp16_to_fp32(b.m), y);
}

// The integer codes of a block in element order, as w[c] = d * code[c] (+ mn): the integer
// kernels' scalar twin.
inline void int_codes(const block_q4_0& b, int32_t* code, float& d, float& mn) {
    for (int c = 0; c < 16; c++) {
        code[c] = int32_t(b.qs[c] & 0x0f) - 8;
        code[c + 16] = int32_t(b.qs[c] >> 4) - 8;
    }
    d = fp16_to_fp32(b.d);
    mn = 0.0f;
}
inline void int_codes(const block_q4_1& b, int32_t* code, float& d, float& mn) {
    for (int c = 0; c < 16; c++) {
        code[c] = b.qs[c] & 0x0f;
        code[c + 16] = b.qs[c] >> 4;
    }
    d = fp16_to_fp32(b.d);
    mn = fp16_to_fp32(b.m);
}

// ---- reference quantizers: 32 floats x -> one block, rounding as ggml's reference does --------

// The signed value of largest magnitude (the first one on ties).
inline float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    return max;
}

// The minimum of a block's 32 floats, and the scale d = (max - min) / levels with its inverse id
// (0 where d is 0): Q4_1's and Q5_1's quantizers.
struct MinScale {
    float mn, d, id;
};
inline MinScale min_scale(const float* x, float levels) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < 32; j++) {
        mn = std::fmin(mn, x[j]);
        mx = std::fmax(mx, x[j]);
    }
    const float d = (mx - mn) / levels;
    return {mn, d, d != 0.0f ? 1.0f / d : 0.0f};
}

// Truncation toward zero, then clamped to [0, hi].
inline int clamp_code(float v, int hi) {
    int q = int(v);
    return q < 0 ? 0 : (q > hi ? hi : q);
}

// Q4_0: d = max / -8 (max: signed value of largest magnitude), q = trunc(x/d + 8.5) in [0, 15].
inline void quantize_block(const float* x, block_q4_0& b) {
    const float d = signed_absmax(x, QK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        const float s0 = x[j] * id, s1 = x[j + QK4_0 / 2] * id;
        const int q0 = clamp_code(s0 + 8.5f, 15), q1 = clamp_code(s1 + 8.5f, 15);
        b.qs[j] = uint8_t(q0 | (q1 << 4));
    }
}

// Q4_1: d = (max - min) / 15, m = min, q = trunc((x - min)/d + 0.5) in [0, 15].
inline void quantize_block(const float* x, block_q4_1& b) {
    const auto [mn, d, id] = min_scale(x, 15.0f);
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(mn);
    for (int j = 0; j < QK4_1 / 2; j++) {
        const float s0 = (x[j] - mn) * id, s1 = (x[j + QK4_1 / 2] - mn) * id;
        const int q0 = clamp_code(s0 + 0.5f, 15), q1 = clamp_code(s1 + 0.5f, 15);
        b.qs[j] = uint8_t(q0 | (q1 << 4));
    }
}

#if RIDGE_FORMAT_SIMD
// ---- SIMD float decoders (matmul v3; the contract is in floats.h) ------------------------------

struct DecQ4_0 {  // y[j] = d * (nibble_j - 8); qs[j]: element j (low), j + 16 (high)
    static constexpr int kBlk = 32;
    static constexpr bool kScaled = true, kUsesXsum = false;
    static void decode(const uint8_t* row, int64_t b, __m256* q, float& d, float&) {
        const block_q4_0& blk = reinterpret_cast<const block_q4_0*>(row)[b];
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
        const __m128i m4 = _mm_set1_epi8(0x0f), e8 = _mm_set1_epi8(8);
        const __m128i lo = _mm_sub_epi8(_mm_and_si128(v, m4), e8);                     // elems 0..15
        const __m128i hi = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(v, 4), m4), e8);  // 16..31
        q[0] = simd::i8_to_f32(lo);
        q[1] = simd::i8_to_f32(_mm_srli_si128(lo, 8));
        q[2] = simd::i8_to_f32(hi);
        q[3] = simd::i8_to_f32(_mm_srli_si128(hi, 8));
        d = simd::f16(blk.d);
    }
};

struct DecQ4_1 {  // y[j] = d * nibble_j + m  ->  d * (q . x) + m * sum(x)
    static constexpr int kBlk = 32;
    static constexpr bool kScaled = true, kUsesXsum = true;
    static void decode(const uint8_t* row, int64_t b, __m256* q, float& d, float& mn) {
        const block_q4_1& blk = reinterpret_cast<const block_q4_1*>(row)[b];
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.qs));
        const __m128i m4 = _mm_set1_epi8(0x0f);
        const __m128i lo = _mm_and_si128(v, m4);
        const __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
        q[0] = simd::u8_to_f32(lo);
        q[1] = simd::u8_to_f32(_mm_srli_si128(lo, 8));
        q[2] = simd::u8_to_f32(hi);
        q[3] = simd::u8_to_f32(_mm_srli_si128(hi, 8));
        d = simd::f16(blk.d);
        mn = simd::f16(blk.m);
    }
};

// ---- integer decoders (matmul v4) ----------------------------------------------------------------
// An integer decoder gives block b of a row as its 32 codes (two ymm of int16, or one zmm where the
// build has AVX-512), and the offset of its f16 scale d within the block (the minimum mn, where
// kUsesSum, follows it). kOffsetByCodeSum: the ymm codes lack an offset of kCodeOffset that the
// kernel takes off once per block as kCodeOffset * (the sum of X's codes).
// Integer dot products with simd::dot_add_i16: |a| <= 128, |b| <= 32767, so a lane grows by at most
// 2^23 per block, and a block's whole sum stays below 2^28.

// 16 bytes of nibbles -> 32 nibbles (the low ones are elements 0..15, the high ones 16..31): the
// bytes widen to 16 bits first, so one AND and one shift split every byte at once.
inline simd::Codes nibbles(const uint8_t* qs) {
    const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    return {_mm256_and_si256(v, _mm256_set1_epi16(0x0f)), _mm256_srli_epi16(v, 4)};
}

#if RIDGE_FORMAT_ZMM
// The same 32 codes in one zmm, in two instructions after the load: the 16 bytes twice (a ymm),
// each 8-byte lane mapped by a GF(2) bit matrix (gf2p8affine: output bit i of a byte is the parity
// of the byte ANDed with row i, XOR bit i of b) to the code of its low nibbles (lanes 0-1, elements
// 0-15) or of its high ones (lanes 2-3, elements 16-31), then widened to 16 bits. Rows are the
// matrix's bytes, row i in byte 7 - i.
//   Q4_1 (kOff 0):  code = nibble;     rows 0-3 pick bits 0-3 (or 4-7), rows 4-7 are zero.
//   Q4_0 (kOff 8):  code = nibble - 8 as an int8: bits 0-2 as they are, bits 3-7 all NOT bit 3
//                   (rows 3-7 pick bit 3 (or 7), b = 0xf8 flips them), then widened with sign.
template <int kOff>
inline __m512i nibbles_zmm(const uint8_t* qs) {
    static_assert(kOff == 0 || kOff == 8);
    const __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs)));
    if constexpr (kOff == 0) {
        constexpr long long lo = 0x0102040800000000, hi = 0x1020408000000000;
        return _mm512_cvtepu8_epi16(_mm256_gf2p8affine_epi64_epi8(v, _mm256_set_epi64x(hi, hi, lo, lo), 0));
    } else {
        constexpr long long lo = 0x0102040808080808, hi = 0x1020408080808080;
        return _mm512_cvtepi8_epi16(_mm256_gf2p8affine_epi64_epi8(v, _mm256_set_epi64x(hi, hi, lo, lo), 0xf8));
    }
}
#endif

// Q4_0's codes are its nibbles n minus 8. Its ymm decoder gives the nibbles themselves, and dot4
// takes 8 * (the sum of the X block's codes) off the integer dot product afterwards, once for all
// 4 rows: sum (n - 8) q = sum n q - 8 sum q, the same integer (a lane then holds at most
// 16 * 15 * 32767 + 4 * 32 * 32767 < 2^24 in magnitude). Subtracting 8 from every code instead
// costs two more instructions per weight row and block, which shows in the kernel's time and in
// decode's (docs/measurements/source-comment-history.md). The zmm decoder subtracts the 8 itself,
// at no cost (gf2p8affine, above).
struct IntQ4_0 {
    static constexpr bool kUsesSum = false, kOffsetByCodeSum = true;
    static constexpr int kCodeOffset = 8;
    static constexpr size_t kBlockBytes = sizeof(block_q4_0), kScaleOffset = offsetof(block_q4_0, d);
    static simd::Codes decode(const uint8_t* row, int64_t b) { return nibbles(block_at<block_q4_0>(row, b).qs); }
#if RIDGE_FORMAT_ZMM
    static __m512i decode_zmm(const uint8_t* row, int64_t b) { return nibbles_zmm<8>(block_at<block_q4_0>(row, b).qs); }
#endif
};
struct IntQ4_1 {
    static constexpr bool kUsesSum = true, kOffsetByCodeSum = false;
    static constexpr size_t kBlockBytes = sizeof(block_q4_1), kScaleOffset = offsetof(block_q4_1, d);
    static_assert(offsetof(block_q4_1, m) == offsetof(block_q4_1, d) + 2);
    static simd::Codes decode(const uint8_t* row, int64_t b) { return nibbles(block_at<block_q4_1>(row, b).qs); }
#if RIDGE_FORMAT_ZMM
    static __m512i decode_zmm(const uint8_t* row, int64_t b) { return nibbles_zmm<0>(block_at<block_q4_1>(row, b).qs); }
#endif
};
#endif  // RIDGE_FORMAT_SIMD

}  // namespace ridge
