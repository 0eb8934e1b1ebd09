// Q8_0, ggml's 8-bit blocks of 32 elements (also the layout of the integer activations' blocks):
// the block layout and every decoder of it (scalar and device, RIDGE_HD; the SIMD float decoder of
// matmul v3; the integer decoder of matmul v4) and the reference quantizer, together, as in q4.h.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "weights/formats/floats.h"
#include "weights/formats/simd.h"
#include "weights/hd.h"

namespace ridge {

constexpr int QK8_0 = 32;  // elements per block

// Q8_0: 32 elements; y[j] = qs[j] * d.
struct block_q8_0 {
    uint16_t d;         // f16 scale
    int8_t qs[QK8_0];   // (32)
};
static_assert(sizeof(block_q8_0) == 34, "Q8_0 block is 34 bytes");

// ---- scalar decode, host and device ----------------------------------------------------------

// The element of code q in a block of scale d.
RIDGE_HD inline float q8_0_value(int8_t q, float d) { return float(q) * d; }

// y (32)
RIDGE_HD inline void dequant_block(const block_q8_0& b, float* y) {
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < QK8_0; j++) y[j] = q8_0_value(b.qs[j], d);
}

// The integer codes of a block in element order, as w[c] = d * code[c].
inline void int_codes(const block_q8_0& b, int32_t* code, float& d, float& mn) {
    for (int c = 0; c < 32; c++) code[c] = b.qs[c];
    d = fp16_to_fp32(b.d);
    mn = 0.0f;
}

// ---- reference quantizer -----------------------------------------------------------------------

// Q8_0: d = max|x| / 127, q = round-half-away(x / d).
inline void quantize_block(const float* x, block_q8_0& b) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; j++) b.qs[j] = int8_t(std::roundf(x[j] * id));
}

#if RIDGE_FORMAT_SIMD
// ---- SIMD float decoder (matmul v3; the contract is in floats.h) -------------------------------

struct DecQ8_0 {  // y[j] = d * qs[j]
    static constexpr int kBlk = 32;
    static constexpr bool kScaled = true, kUsesXsum = false;
    static void decode(const uint8_t* row, int64_t b, __m256* q, float& d, float&) {
        const block_q8_0& blk = reinterpret_cast<const block_q8_0*>(row)[b];
        for (int t = 0; t < 4; t++)
            q[t] = simd::i8_to_f32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.qs + 8 * t)));
        d = simd::f16(blk.d);
    }
};

// ---- integer decoder (matmul v4; the contract is in q4.h) ----------------------------------------

struct IntQ8_0 {
    static constexpr bool kUsesSum = false, kOffsetByCodeSum = false;
    static constexpr size_t kBlockBytes = sizeof(block_q8_0), kScaleOffset = offsetof(block_q8_0, d);
    static simd::Codes decode(const uint8_t* row, int64_t b) {
        const __m128i* q = reinterpret_cast<const __m128i*>(block_at<block_q8_0>(row, b).qs);
        return {_mm256_cvtepi8_epi16(_mm_loadu_si128(q)), _mm256_cvtepi8_epi16(_mm_loadu_si128(q + 1))};
    }
#if RIDGE_FORMAT_ZMM
    static __m512i decode_zmm(const uint8_t* row, int64_t b) {
        const auto* q = reinterpret_cast<const __m256i*>(block_at<block_q8_0>(row, b).qs);
        return _mm512_cvtepi8_epi16(_mm256_loadu_si256(q));
    }
#endif
};
#endif  // RIDGE_FORMAT_SIMD

}  // namespace ridge
