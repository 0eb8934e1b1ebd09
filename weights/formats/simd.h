// The instruction-set switches and the few vector steps the format decoders share (q4.h, q5.h,
// q8.h, k_quants.h, floats.h). RIDGE_FORMAT_SIMD is 1 when the build targets AVX2 + FMA + F16C
// (and this is not a CUDA compile), and only then are the SIMD decoders defined; RIDGE_FORMAT_ZMM
// is 1 where the build also has the AVX-512 and GFNI instructions of the zmm integer decoders.
// kernels/cpu/simd.h builds on this header.
#pragma once
#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__CUDACC__)
#include <immintrin.h>
#define RIDGE_FORMAT_SIMD 1
#else
#define RIDGE_FORMAT_SIMD 0
#endif
#if RIDGE_FORMAT_SIMD && defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && \
    defined(__AVX512DQ__) && defined(__GFNI__)
#define RIDGE_FORMAT_ZMM 1
#else
#define RIDGE_FORMAT_ZMM 0
#endif

namespace ridge {

// Block b of a row of blocks, as its format's struct.
template <class Block>
inline const Block& block_at(const uint8_t* row, int64_t b) {
    return reinterpret_cast<const Block*>(row)[b];
}

}  // namespace ridge

#if RIDGE_FORMAT_SIMD
namespace ridge::simd {

// IEEE half bits -> float, exact (the same value as fp16_to_fp32 in floats.h).
inline float f16(uint16_t h) { return _cvtsh_ss(h); }

// 8 signed / unsigned bytes (the low 8 of v) -> 8 floats.
inline __m256 i8_to_f32(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
inline __m256 u8_to_f32(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)); }

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
#if RIDGE_FORMAT_ZMM
// The same on 16 int32 lanes (AVX-512 VNNI's dpwssd, else madd + add).
inline __m512i dot_add_i16(__m512i acc, __m512i a, __m512i b) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}
#endif

// A 32-element block's integer codes as two vectors of 16 int16 lanes: elements 0..15 and 16..31
// (what the integer decoders of q4.h, q5.h and q8.h return).
struct Codes {
    __m256i lo, hi;
};

}  // namespace ridge::simd
#endif
