// Quantized block layouts of GGUF/ggml (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K), the
// scalar fp16 / bf16 conversions, and one decode function per block. Header-only and marked
// RIDGE_HD so that CUDA kernels can include it; CPU kernels and weights/quant.cpp use it as is.
// Every decode performs the same float32 operations, in the same order, as gguf-py's dequantize.
#pragma once
#include <cstdint>
#include <cstring>

#include "weights/hd.h"

// Bit-exactness note: y = d*q + m is written as two statements so that no compiler fuses it into
// an FMA on the host (GCC in ISO mode does not fuse; clang fuses only within one expression). nvcc
// fuses across statements in device code unless built with -fmad=false.

namespace ridge {

constexpr int QK4_0 = 32, QK4_1 = 32, QK5_0 = 32, QK5_1 = 32, QK8_0 = 32;  // elements per block
constexpr int QK_K = 256;        // elements per K-quant super-block
constexpr int K_SCALE_SIZE = 12; // bytes of packed 6-bit scales and mins in Q4_K / Q5_K

// ---------------------------------------------------------------------------------------------
// Block structs. `uint16_t` scale fields hold IEEE half-precision bits (use fp16_to_fp32).

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
// Q8_0: 32 elements; y[j] = qs[j] * d.
struct block_q8_0 {
    uint16_t d;         // f16 scale
    int8_t qs[QK8_0];   // (32)
};
// Q4_K: 256 elements in 8 sub-blocks of 32, each with a 6-bit scale sc and min mn;
// y = (d*sc) * q - (dmin*mn). Chunk c (64 elements) takes the low nibbles of qs[32c..32c+32)
// for sub-block 2c and the high nibbles for sub-block 2c+1.
struct block_q4_K {
    uint16_t d;                     // f16 super-block scale of the scales
    uint16_t dmin;                  // f16 super-block scale of the mins
    uint8_t scales[K_SCALE_SIZE];   // 8 scales + 8 mins, 6 bits each (see q4k_scale_min)
    uint8_t qs[QK_K / 2];           // (128) nibbles
};
// Q5_K: Q4_K plus a fifth bit: element l of sub-block j takes bit j of qh[l].
struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];           // (32) high bits
    uint8_t qs[QK_K / 2];           // (128) low nibbles, as Q4_K
};
// Q6_K: 256 elements in 16 sub-blocks of 16 with int8 scales; q = 6 bits - 32; y = (d*sc) * q.
// Half h (128 elements): element 32k + l (k = 0..3, l = 0..31) takes nibble (k >= 2) of
// ql[64h + 32(k&1) + l] and bits 2k..2k+1 of qh[32h + l].
struct block_q6_K {
    uint8_t ql[QK_K / 2];       // (128) low 4 bits
    uint8_t qh[QK_K / 4];       // (64) high 2 bits
    int8_t scales[QK_K / 16];   // (16) sub-block scales
    uint16_t d;                 // f16 super-block scale
};

static_assert(sizeof(block_q4_0) == 18, "Q4_0 block is 18 bytes");
static_assert(sizeof(block_q4_1) == 20, "Q4_1 block is 20 bytes");
static_assert(sizeof(block_q5_0) == 22, "Q5_0 block is 22 bytes");
static_assert(sizeof(block_q5_1) == 24, "Q5_1 block is 24 bytes");
static_assert(sizeof(block_q8_0) == 34, "Q8_0 block is 34 bytes");
static_assert(sizeof(block_q4_K) == 144, "Q4_K block is 144 bytes");
static_assert(sizeof(block_q5_K) == 176, "Q5_K block is 176 bytes");
static_assert(sizeof(block_q6_K) == 210, "Q6_K block is 210 bytes");

// ---------------------------------------------------------------------------------------------
// Scalar float conversions (exact; fp32 -> fp16 / bf16 round to nearest, ties to even).

RIDGE_HD inline uint32_t f32_bits(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
RIDGE_HD inline float f32_from_bits(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// IEEE half -> float, exact for every input (zeros, subnormals, inf, NaN payloads).
RIDGE_HD inline float fp16_to_fp32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (mant << 13));  // inf / NaN
    if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (mant << 13));
    if (mant == 0) return f32_from_bits(sign);  // +-0
    // Subnormal mant * 2^-24: shift the leading 1 up to bit 10, lowering the exponent each step.
    uint32_t e = 113;  // 127 - 14
    while ((mant & 0x400) == 0) {
        mant <<= 1;
        e--;
    }
    return f32_from_bits(sign | (e << 23) | ((mant & 0x3ff) << 13));
}

// float -> IEEE half, round to nearest even; overflow gives inf; NaN stays a (quiet) NaN.
RIDGE_HD inline uint16_t fp32_to_fp16(float f) {
    const uint32_t x = f32_bits(f);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000);
    const uint32_t ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return uint16_t(sign | 0x7e00 | ((ax >> 13) & 0x3ff));  // NaN
    if (ax >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // >= 65520 rounds to inf
    if (ax >= 0x38800000u) {                                 // normal half (>= 2^-14)
        uint32_t h = (ax >> 13) - (112u << 10);
        const uint32_t rem = ax & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;
        return uint16_t(sign | h);
    }
    if (ax <= 0x33000000u) return sign;  // <= 2^-25 rounds to zero (2^-25 is a tie, to even 0)
    // Subnormal half: value / 2^-24 = mant >> (126 - e), rounded to nearest even.
    const uint32_t e = ax >> 23;
    const uint32_t mant = (ax & 0x7fffff) | 0x800000;
    const uint32_t shift = 126 - e;  // 14..24
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q++;
    return uint16_t(sign | q);
}

RIDGE_HD inline float bf16_to_fp32(uint16_t h) { return f32_from_bits(uint32_t(h) << 16); }

// float -> bfloat16, round to nearest even; NaN forced quiet (as ggml_compute_fp32_to_bf16).
RIDGE_HD inline uint16_t fp32_to_bf16(float f) {
    const uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 64);
    return uint16_t((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

// ---------------------------------------------------------------------------------------------
// Per-block decode: y receives the block's elements in order.

// y (32)
RIDGE_HD inline void dequant_block(const block_q4_0& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        y[j] = d * float(int(b.qs[j] & 0x0f) - 8);
        y[j + QK4_0 / 2] = d * float(int(b.qs[j] >> 4) - 8);
    }
}

// y (32)
RIDGE_HD inline void dequant_block(const block_q4_1& b, float* y) {
    const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
    for (int j = 0; j < QK4_1 / 2; j++) {
        const float lo = d * float(b.qs[j] & 0x0f);
        const float hi = d * float(b.qs[j] >> 4);
        y[j] = lo + m;
        y[j + QK4_1 / 2] = hi + m;
    }
}

RIDGE_HD inline uint32_t load_u32_le(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

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

// y (32)
RIDGE_HD inline void dequant_block(const block_q8_0& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < QK8_0; j++) y[j] = float(b.qs[j]) * d;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block. Bytes 0-3 hold the low
// 6 bits of scales 0-3 (top 2 bits: high bits of scale j+4), bytes 4-7 the same for mins,
// bytes 8-11 the low nibbles of scales 4-7 (low half) and mins 4-7 (high half).
RIDGE_HD inline void q4k_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = uint8_t((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *mn = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// y (256)
RIDGE_HD inline void dequant_block(const block_q4_K& b, float* y) {
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int j = 0; j < QK_K / 32; j++) {  // sub-block j: elements 32j..32j+32
        uint8_t sc, mn;
        q4k_scale_min(j, b.scales, &sc, &mn);
        const float dj = d * float(sc), mj = dmin * float(mn);
        const uint8_t* q = b.qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++) {
            const float t = dj * float((q[l] >> shift) & 0x0f);
            y[32 * j + l] = t - mj;
        }
    }
}

// y (256)
RIDGE_HD inline void dequant_block(const block_q5_K& b, float* y) {
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, mn;
        q4k_scale_min(j, b.scales, &sc, &mn);
        const float dj = d * float(sc), mj = dmin * float(mn);
        const uint8_t* q = b.qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++) {
            const uint32_t v = ((q[l] >> shift) & 0x0f) | (((b.qh[l] >> j) & 1) << 4);
            const float t = dj * float(v);
            y[32 * j + l] = t - mj;
        }
    }
}

// y (256)
RIDGE_HD inline void dequant_block(const block_q6_K& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    for (int e = 0; e < QK_K; e++) {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t lo = (b.ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
        const uint8_t hi = (b.qh[32 * h + l] >> (2 * k)) & 0x03;
        const int q = int(lo | (hi << 4)) - 32;
        const float ds = d * float(b.scales[e / 16]);
        y[e] = ds * float(q);
    }
}

}  // namespace ridge
