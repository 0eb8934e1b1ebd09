// IEEE 754 half <-> single conversion in plain scalar code (round to nearest even, subnormals,
// infinities and NaN kept), for the f16 KV cache. Header-only, no intrinsics, so the same math
// can later be shared with a device backend.
#pragma once
#include <cstdint>
#include <cstring>

namespace ridge::cpu {

inline float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    const uint32_t exp = (h >> 10) & 0x1fu;
    const uint32_t mant = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {                      // inf / NaN
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {                  // normal: rebias 15 -> 127
        bits = sign | ((exp + 112u) << 23) | (mant << 13);
    } else if (mant == 0) {                 // +-0
        bits = sign;
    } else {                                // subnormal: mant * 2^-24, exact in f32
        float f = float(mant) * (1.0f / 16777216.0f);
        std::memcpy(&bits, &f, 4);
        bits |= sign;
    }
    float out;
    std::memcpy(&out, &bits, 4);
    return out;
}

inline uint16_t f32_to_f16(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
    const uint32_t abs = x & 0x7fffffffu;
    if (abs >= 0x7f800000u)                                   // inf / NaN (NaN stays quiet NaN)
        return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds past 65504 -> inf
    if (abs < 0x38800000u) {                                  // below 2^-14: subnormal or zero
        // value * 2^24 rounded to nearest even gives the subnormal mantissa.
        float a;
        std::memcpy(&a, &abs, 4);
        const float scaled = a * 16777216.0f;  // exact (power of two)
        uint32_t m = uint32_t(scaled);
        const float frac = scaled - float(m);
        if (frac > 0.5f || (frac == 0.5f && (m & 1u))) m++;
        return uint16_t(sign | m);  // m == 0x400 carries into the smallest normal correctly
    }
    // Normal: drop 13 mantissa bits with round to nearest even; a carry bumps the exponent.
    const uint32_t rebased = abs - (112u << 23);
    const uint32_t lsb = (rebased >> 13) & 1u;
    return uint16_t(sign | ((rebased + 0x0fffu + lsb) >> 13));
}

}  // namespace ridge::cpu
