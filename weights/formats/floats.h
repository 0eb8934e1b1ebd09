// The float formats, F32, F16 and BF16: the exact scalar conversions every block format also uses
// for its f16 scales (RIDGE_HD: host and device code both compile them), and the SIMD float
// decoders of kernels/cpu's v3 matmul (a row's elements 8 at a time, as floats).
#pragma once
#include <cstdint>
#include <cstring>

#include "weights/formats/simd.h"
#include "weights/hd.h"

namespace ridge {

// ---- scalar conversions (exact; fp32 -> fp16 / bf16 round to nearest, ties to even) ---------

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

// The little-endian 32-bit word at p (Q5's high bits).
RIDGE_HD inline uint32_t load_u32_le(const uint8_t* p) {
    return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

#if RIDGE_FORMAT_SIMD
// ---- SIMD float decoders (kernels/cpu matmul v3) ---------------------------------------------
// A v3 decoder turns block b of a row (kBlk elements) into kBlk / 8 vectors q of 8 floats plus a
// scale d (and, Q4_1, a minimum mn), so that w[c] = d * q[c] (+ mn); kScaled says whether there is
// a scale, kUsesXsum whether the caller must add mn * sum(x) per block. The float formats have no
// scale: a "block" is 8 elements, and elem(row, c) decodes one element of a row's tail.

struct DecF16 {  // 8 halves -> 8 floats
    static constexpr int kBlk = 8;
    static constexpr bool kScaled = false, kUsesXsum = false;
    static void decode(const uint8_t* row, int64_t b, __m256* q, float&, float&) {
        q[0] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row) + b));
    }
    static float elem(const uint8_t* row, int64_t c) {
        return simd::f16(reinterpret_cast<const uint16_t*>(row)[c]);
    }
};

struct DecBF16 {  // 8 bfloat16 -> 8 floats: the 16 bits are the top half of an f32
    static constexpr int kBlk = 8;
    static constexpr bool kScaled = false, kUsesXsum = false;
    static void decode(const uint8_t* row, int64_t b, __m256* q, float&, float&) {
        const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row) + b);
        q[0] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    static float elem(const uint8_t* row, int64_t c) {
        const uint32_t bits = uint32_t(reinterpret_cast<const uint16_t*>(row)[c]) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        return f;
    }
};

struct DecF32 {
    static constexpr int kBlk = 8;
    static constexpr bool kScaled = false, kUsesXsum = false;
    static void decode(const uint8_t* row, int64_t b, __m256* q, float&, float&) {
        q[0] = _mm256_loadu_ps(reinterpret_cast<const float*>(row) + 8 * b);
    }
    static float elem(const uint8_t* row, int64_t c) { return reinterpret_cast<const float*>(row)[c]; }
};
#endif

}  // namespace ridge
