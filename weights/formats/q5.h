// Q5_0 and Q5_1, ggml's 5-bit blocks of 32 elements: Q4's nibbles plus a fifth bit per element.
// The block layouts and every decoder of them (scalar, RIDGE_HD; the integer decoders of matmul
// v4) and the reference quantizers, together, as in q4.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "weights/formats/floats.h"
#include "weights/formats/q4.h"
#include "weights/formats/simd.h"
#include "weights/hd.h"

namespace ridge {

constexpr int QK5_0 = 32, QK5_1 = 32;  // elements per block

// Q5_0: 32 elements; 5-bit q = nibble | (bit j of qh) << 4; y[j] = d * (q - 16).
struct block_q5_0 {
    uint16_t d;             // f16 scale
    uint8_t qh[4];          // 32 high bits, little-endian u32: bit j belongs to element j
    uint8_t qs[QK5_0 / 2];  // (16) low nibbles, as Q4_0
};
// Q5_1: 32 elements; y[j] = d * q + m with q as Q5_0.
struct block_q5_1 {
    uint16_t d;             // f16 scale
    uint16_t m;             // f16 minimum
    uint8_t qh[4];          // high bits, as Q5_0
    uint8_t qs[QK5_1 / 2];  // (16) low nibbles
};
static_assert(sizeof(block_q5_0) == 22, "Q5_0 block is 22 bytes");
static_assert(sizeof(block_q5_1) == 24, "Q5_1 block is 24 bytes");

// ---- scalar decode ---------------------------------------------------------------------------

// y (32)
RIDGE_HD inline void dequant_block(const block_q5_0& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < QK5_0 / 2; j++) {
        const int q0 = int((b.qs[j] & 0x0f) | (((qh >> j) & 1) << 4)) - 16;
        const int q1 = int((b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16;
        y[j] = d * float(q0);
        y[j + QK5_0 / 2] = d * float(q1);
    }
}

// y (32)
RIDGE_HD inline void dequant_block(const block_q5_1& b, float* y) {
    const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
    const uint32_t qh = load_u32_le(b.qh);
    for (int j = 0; j < QK5_1 / 2; j++) {
        const uint32_t q0 = (b.qs[j] & 0x0f) | (((qh >> j) & 1) << 4);
        const uint32_t q1 = (b.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
        const float lo = d * float(q0);
        const float hi = d * float(q1);
        y[j] = lo + m;
        y[j + QK5_1 / 2] = hi + m;
    }
}

// The integer codes of a block in element order, as w[c] = d * code[c] (+ mn): a nibble and bit c
// of qh (as bit 4) per element c, less 16 for Q5_0.
template <class Block>
inline void int_codes_q5(const Block& b, int32_t offset, int32_t* code, float& d) {
    const uint32_t h = load_u32_le(b.qh);
    for (int c = 0; c < 16; c++) {
        code[c] = int32_t((b.qs[c] & 0x0f) | ((h >> c) & 1) << 4) - offset;
        code[c + 16] = int32_t((b.qs[c] >> 4) | ((h >> (c + 16)) & 1) << 4) - offset;
    }
    d = fp16_to_fp32(b.d);
}
inline void int_codes(const block_q5_0& b, int32_t* code, float& d, float& mn) {
    int_codes_q5(b, 16, code, d);
    mn = 0.0f;
}
inline void int_codes(const block_q5_1& b, int32_t* code, float& d, float& mn) {
    int_codes_q5(b, 0, code, d);
    mn = fp16_to_fp32(b.m);
}

// ---- reference quantizers (helpers in q4.h) ----------------------------------------------------

// Q5_0: d = max / -16, q = trunc(x/d + 16.5) in [0, 31]; bit 4 of q goes to qh.
inline void quantize_block(const float* x, block_q5_0& b) {
    const float d = signed_absmax(x, QK5_0) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; j++) {
        const float s0 = x[j] * id, s1 = x[j + QK5_0 / 2] * id;
        const int q0 = clamp_code(s0 + 16.5f, 31), q1 = clamp_code(s1 + 16.5f, 31);
        b.qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= uint32_t(q0 >> 4) << j;
        qh |= uint32_t(q1 >> 4) << (j + QK5_0 / 2);
    }
    for (int k = 0; k < 4; k++) b.qh[k] = uint8_t(qh >> (8 * k));
}

// Q5_1: d = (max - min) / 31, m = min, q = trunc((x - min)/d + 0.5) in [0, 31].
inline void quantize_block(const float* x, block_q5_1& b) {
    const auto [mn, d, id] = min_scale(x, 31.0f);
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; j++) {
        const float s0 = (x[j] - mn) * id, s1 = (x[j + QK5_1 / 2] - mn) * id;
        const int q0 = clamp_code(s0 + 0.5f, 31), q1 = clamp_code(s1 + 0.5f, 31);
        b.qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= uint32_t(q0 >> 4) << j;
        qh |= uint32_t(q1 >> 4) << (j + QK5_1 / 2);
    }
    for (int k = 0; k < 4; k++) b.qh[k] = uint8_t(qh >> (8 * k));
}

#if RIDGE_FORMAT_SIMD
// ---- integer decoders (matmul v4; the contract is in q4.h) ---------------------------------------

// Q5's 32 high bits (element c's is bit c of qh, little-endian) as 16 or 0 in the lanes of nibbles'
// two vectors: each half's 16 bits broadcast to every lane, lane c keeps bit c (a mask of it and
// a compare), and 16 where it was set. 10 instructions, against nibbles' 3.
inline simd::Codes high_bits(const uint8_t* qh) {
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384,
                                          int16_t(-32768));
    auto half = [&bit](const uint8_t* two) {
        uint16_t h;
        std::memcpy(&h, two, sizeof(h));
        const __m256i set = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(int16_t(h)), bit), bit);
        return _mm256_and_si256(set, _mm256_set1_epi16(16));
    };
    return {half(qh), half(qh + 2)};
}

// Q5's codes, nibbles and high bits together (0..31).
inline simd::Codes five_bits(const uint8_t* qs, const uint8_t* qh) {
    const simd::Codes n = nibbles(qs), h = high_bits(qh);
    return {_mm256_or_si256(n.lo, h.lo), _mm256_or_si256(n.hi, h.hi)};
}

// Q5_0's codes are 5 bits n minus 16 and Q5_1's are n (its minimum as Q4_1's): the ymm decoder
// gives n, and dot4 takes 16 * (the sum of X's codes) off Q5_0's as it takes Q4_0's 8 (a lane then
// holds at most 16 * 31 * 32767 + 8 * 32 * 32767 < 2^25 in magnitude). The zmm decoder takes the
// nibbles as Q4_1's does and qh as a mask of 32 lanes: one masked add of 16 (or, for Q5_0, one
// masked subtract where the bit is clear: n + 16 h - 16), where the ymm one takes 15 instructions
// (and 2 more to join its halves into a zmm).
template <class Block, int kOffset>
struct IntQ5 {
    static constexpr bool kUsesSum = kOffset == 0, kOffsetByCodeSum = kOffset != 0;
    static constexpr int kCodeOffset = kOffset;
    static constexpr size_t kBlockBytes = sizeof(Block), kScaleOffset = offsetof(Block, d);
    static simd::Codes decode(const uint8_t* row, int64_t b) {
        const Block& blk = block_at<Block>(row, b);
        return five_bits(blk.qs, blk.qh);
    }
#if RIDGE_FORMAT_ZMM
    static __m512i decode_zmm(const uint8_t* row, int64_t b) {
        const Block& blk = block_at<Block>(row, b);
        uint32_t h;  // bit c: element c's high bit, and the mask of lane c
        std::memcpy(&h, blk.qh, sizeof(h));
        const __m512i n = nibbles_zmm<0>(blk.qs), sixteen = _mm512_set1_epi16(16);
        if constexpr (kOffset == 0) return _mm512_mask_add_epi16(n, __mmask32(h), n, sixteen);  // n + 16 where set
        return _mm512_mask_sub_epi16(n, __mmask32(~h), n, sixteen);                            // n - 16 where clear
    }
#endif
};
using IntQ5_0 = IntQ5<block_q5_0, 16>;
using IntQ5_1 = IntQ5<block_q5_1, 0>;
static_assert(offsetof(block_q5_1, m) == offsetof(block_q5_1, d) + 2);
#endif  // RIDGE_FORMAT_SIMD

}  // namespace ridge
