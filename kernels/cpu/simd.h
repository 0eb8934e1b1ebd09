// The few AVX2 helpers the SIMD matmul kernels share (matmul.cpp, matmul_int.cpp,
// matmul_int_k.cpp). RIDGE_CPU_SIMD is 1 when the build targets AVX2 + FMA + F16C, and only then
// are the helpers defined.
#pragma once
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define RIDGE_CPU_SIMD 1
#else
#define RIDGE_CPU_SIMD 0
#endif

#if RIDGE_CPU_SIMD
namespace ridge::cpu::simd {

// IEEE half bits -> float, exact (the same value as weights/blocks.h fp16_to_fp32).
inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// The sum of the 8 lanes.
inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

// acc + 8 int32 lanes, each a[2l] b[2l] + a[2l+1] b[2l+1] of 16 signed 16-bit lanes (AVX-VNNI's
// dpwssd where the CPU has it, else madd + add). Exact while no lane passes 2^31: callers state
// their bound.
inline __m256i dot_add_i16(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

}  // namespace ridge::cpu::simd
#endif
