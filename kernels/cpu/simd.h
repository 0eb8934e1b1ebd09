// The few helpers the SIMD kernels share (matmul.cpp, matmul_packed.cpp, attention.cpp): AVX2
// ones, and a register-tile vector that is a zmm where the build has AVX-512. RIDGE_CPU_SIMD is 1
// when the build targets AVX2 + FMA + F16C, and only then are the helpers defined. The weight formats' decoders share the lower ones
// (weights/formats/simd.h: f16, dot_add_i16), which this namespace takes in.
#pragma once
#include <cstdint>

#include "weights/formats/simd.h"
#define RIDGE_CPU_SIMD RIDGE_FORMAT_SIMD

#if RIDGE_CPU_SIMD
namespace ridge::cpu::simd {

using ridge::simd::dot_add_i16;
using ridge::simd::f16;

// n halves -> floats, 8 at a time: exact, the value of cpu::f16_to_f32 (f16.h) for every half.
inline void f16_to_f32_row(const uint16_t* src, float* dst, int64_t n) {
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        _mm256_storeu_ps(dst + c, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + c))));
    for (; c < n; c++) dst[c] = _cvtsh_ss(src[c]);
}

// n floats -> halves, 8 at a time, rounded to nearest even: the bits of cpu::f32_to_f16 (f16.h)
// for every float but NaN, which stays a NaN (its payload may differ).
inline void f32_to_f16_row(const float* src, uint16_t* dst, int64_t n) {
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    int64_t c = 0;
    for (; c + 8 <= n; c += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + c), _mm256_cvtps_ph(_mm256_loadu_ps(src + c), kRound));
    for (; c < n; c++) dst[c] = _cvtss_sh(src[c], kRound);
}

// The sum of the 4 lanes.
inline float hsum4(__m128 s) {
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// The sum of the 8 lanes.
inline float hsum8(__m256 v) { return hsum4(_mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1))); }

// e^x in each of 8 lanes, within a few units in the last place of std::exp for x in
// [-87.3, 88.3]; 0 below (where e^x is at most a subnormal), e^88.3 above (finite).
// x = n ln2 + r with |r| <= ln2/2 (ln2 split in two so n ln2 is exact), e^r by its Taylor series to
// r^7 (truncation below 1e-8 relative), times 2^n built in the exponent bits. Each lane depends on
// its own x only.
inline __m256 exp8(__m256 x) {
    const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040);
    for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f}) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(c));
    const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(two_n)));
}

// The register tiles' vectors (the prefill GEMM in matmul_packed.cpp, attention's in
// attention.cpp): 16 floats (zmm) where the build has AVX-512, else 8 (ymm). A tile's arithmetic is
// the same either way (each output lane one FMA chain), only twice as many lanes per FMA.
#if defined(__AVX512F__)
struct Vec {
    using T = __m512;
    static constexpr int kLanes = 16;
    static T zero() { return _mm512_setzero_ps(); }
    static T load(const float* p) { return _mm512_loadu_ps(p); }
    static T broadcast(const float* p) { return _mm512_set1_ps(*p); }
    static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
    static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
};
#else
struct Vec {
    using T = __m256;
    static constexpr int kLanes = 8;
    static T zero() { return _mm256_setzero_ps(); }
    static T load(const float* p) { return _mm256_loadu_ps(p); }
    static T broadcast(const float* p) { return _mm256_broadcast_ss(p); }
    static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
    static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
};
#endif

}  // namespace ridge::cpu::simd
#endif
