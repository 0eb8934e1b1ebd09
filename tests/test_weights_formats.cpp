// Tests for weights/formats/: every decoder of a format (the scalar element and block decodes that
// host and device share, the integer codes of the integer kernels' scalar twin, and, where the
// build has them, the SIMD float and integer decoders of kernels/cpu) gives the elements of the
// format's dequant_block, bit for bit, on random blocks with random (finite) scales.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "weights/formats.h"

namespace ridge {
namespace {

// A block of random bytes whose f16 fields (given by offset) hold finite halves of moderate size.
template <class Block>
Block random_block(std::mt19937& rng, std::initializer_list<size_t> f16_fields) {
    Block b;
    auto* bytes = reinterpret_cast<uint8_t*>(&b);
    for (size_t i = 0; i < sizeof(Block); i++) bytes[i] = uint8_t(rng());
    std::uniform_real_distribution<float> scale(-2.0f, 2.0f);
    for (size_t off : f16_fields) {
        const uint16_t h = fp32_to_fp16(scale(rng));
        std::memcpy(bytes + off, &h, 2);
    }
    return b;
}

// The 32 elements of a block from its integer codes (int_codes): d * code, then + mn, as the
// formats' scalar decode forms them.
template <class Block>
std::vector<float> from_int_codes(const Block& b) {
    int32_t code[32];
    float d, mn;
    int_codes(b, code, d, mn);
    std::vector<float> y(32);
    for (int c = 0; c < 32; c++) {
        const float t = d * float(code[c]);
        y[size_t(c)] = mn == 0.0f ? t : t + mn;
    }
    return y;
}

template <class Block>
std::vector<float> dequant(const Block& b, int n) {
    std::vector<float> y(static_cast<size_t>(n));
    dequant_block(b, y.data());
    return y;
}

#if RIDGE_FORMAT_SIMD
// The elements a v3 float decoder gives for block 0 of a one-block row: d * q (+ mn), lane by lane.
template <class Dec>
std::vector<float> from_float_decoder(const void* block) {
    __m256 q[Dec::kBlk / 8];
    float d = 1.0f, mn = 0.0f;
    Dec::decode(static_cast<const uint8_t*>(block), 0, q, d, mn);
    std::vector<float> y(Dec::kBlk);
    for (int v = 0; v < Dec::kBlk / 8; v++) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, q[v]);
        for (int l = 0; l < 8; l++) {
            if (!Dec::kScaled) {
                y[size_t(8 * v + l)] = lanes[l];
                continue;
            }
            const float t = d * lanes[l];
            y[size_t(8 * v + l)] = Dec::kUsesXsum ? t + mn : t;
        }
    }
    return y;
}

// The 32 codes a v4 integer decoder gives for block 0 of a one-block row (ymm, and zmm where the
// build has it), with the offset the kernel takes off afterwards (kOffsetByCodeSum) taken off here.
template <class Int>
std::vector<int32_t> ymm_codes(const void* block) {
    const simd::Codes c = Int::decode(static_cast<const uint8_t*>(block), 0);
    alignas(32) int16_t lo[16], hi[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lo), c.lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(hi), c.hi);
    int offset = 0;
    if constexpr (Int::kOffsetByCodeSum) offset = Int::kCodeOffset;
    std::vector<int32_t> out(32);
    for (int i = 0; i < 16; i++) out[size_t(i)] = lo[i] - offset, out[size_t(i + 16)] = hi[i] - offset;
    return out;
}
#if RIDGE_FORMAT_ZMM
template <class Int>
std::vector<int32_t> zmm_codes(const void* block) {
    alignas(64) int16_t v[32];
    _mm512_store_si512(v, Int::decode_zmm(static_cast<const uint8_t*>(block), 0));
    return std::vector<int32_t>(v, v + 32);
}
#endif
#endif

template <class Block>
std::vector<int32_t> scalar_codes(const Block& b) {
    int32_t code[32];
    float d, mn;
    int_codes(b, code, d, mn);
    return std::vector<int32_t>(code, code + 32);
}

constexpr int kBlocks = 200;

TEST(Formats, Q4EveryDecoderGivesTheBlocksElements) {
    std::mt19937 rng(40);
    for (int n = 0; n < kBlocks; n++) {
        const auto b0 = random_block<block_q4_0>(rng, {offsetof(block_q4_0, d)});
        const auto b1 = random_block<block_q4_1>(rng, {offsetof(block_q4_1, d), offsetof(block_q4_1, m)});
        const std::vector<float> y0 = dequant(b0, 32), y1 = dequant(b1, 32);
        const float d0 = fp16_to_fp32(b0.d), d1 = fp16_to_fp32(b1.d), m1 = fp16_to_fp32(b1.m);
        std::vector<float> split0(32), split1(32);
        q4_0_decode(b0.qs, d0, split0.data());
        q4_1_decode(b1.qs, d1, m1, split1.data());
        EXPECT_EQ(split0, y0);
        EXPECT_EQ(split1, y1);
        for (int e = 0; e < 32; e++) {
            EXPECT_EQ(q4_0_element(b0.qs, d0, e), y0[size_t(e)]);
            EXPECT_EQ(q4_1_element(b1.qs, d1, m1, e), y1[size_t(e)]);
        }
        EXPECT_EQ(from_int_codes(b0), y0);
        EXPECT_EQ(from_int_codes(b1), y1);
#if RIDGE_FORMAT_SIMD
        EXPECT_EQ(from_float_decoder<DecQ4_0>(&b0), y0);
        EXPECT_EQ(from_float_decoder<DecQ4_1>(&b1), y1);
        EXPECT_EQ(ymm_codes<IntQ4_0>(&b0), scalar_codes(b0));
        EXPECT_EQ(ymm_codes<IntQ4_1>(&b1), scalar_codes(b1));
#if RIDGE_FORMAT_ZMM
        EXPECT_EQ(zmm_codes<IntQ4_0>(&b0), scalar_codes(b0));
        EXPECT_EQ(zmm_codes<IntQ4_1>(&b1), scalar_codes(b1));
#endif
#endif
    }
}

TEST(Formats, Q5EveryDecoderGivesTheBlocksElements) {
    std::mt19937 rng(50);
    for (int n = 0; n < kBlocks; n++) {
        const auto b0 = random_block<block_q5_0>(rng, {offsetof(block_q5_0, d)});
        const auto b1 = random_block<block_q5_1>(rng, {offsetof(block_q5_1, d), offsetof(block_q5_1, m)});
        EXPECT_EQ(from_int_codes(b0), dequant(b0, 32));
        EXPECT_EQ(from_int_codes(b1), dequant(b1, 32));
#if RIDGE_FORMAT_SIMD
        EXPECT_EQ(ymm_codes<IntQ5_0>(&b0), scalar_codes(b0));
        EXPECT_EQ(ymm_codes<IntQ5_1>(&b1), scalar_codes(b1));
#if RIDGE_FORMAT_ZMM
        EXPECT_EQ(zmm_codes<IntQ5_0>(&b0), scalar_codes(b0));
        EXPECT_EQ(zmm_codes<IntQ5_1>(&b1), scalar_codes(b1));
#endif
#endif
    }
}

TEST(Formats, Q8EveryDecoderGivesTheBlocksElements) {
    std::mt19937 rng(80);
    for (int n = 0; n < kBlocks; n++) {
        const auto b = random_block<block_q8_0>(rng, {offsetof(block_q8_0, d)});
        const std::vector<float> y = dequant(b, 32);
        for (int e = 0; e < 32; e++) EXPECT_EQ(q8_0_value(b.qs[e], fp16_to_fp32(b.d)), y[size_t(e)]);
        EXPECT_EQ(from_int_codes(b), y);
#if RIDGE_FORMAT_SIMD
        EXPECT_EQ(from_float_decoder<DecQ8_0>(&b), y);
        EXPECT_EQ(ymm_codes<IntQ8_0>(&b), scalar_codes(b));
#if RIDGE_FORMAT_ZMM
        EXPECT_EQ(zmm_codes<IntQ8_0>(&b), scalar_codes(b));
#endif
#endif
    }
}

TEST(Formats, KQuantsEveryDecoderGivesTheBlocksElements) {
    std::mt19937 rng(256);
    for (int n = 0; n < kBlocks; n++) {
        const auto b4 = random_block<block_q4_K>(rng, {offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)});
        const auto b6 = random_block<block_q6_K>(rng, {offsetof(block_q6_K, d)});
        const std::vector<float> y4 = dequant(b4, QK_K), y6 = dequant(b6, QK_K);
        for (int e = 0; e < QK_K; e++) {
            EXPECT_EQ(q4_K_element(b4, e), y4[size_t(e)]) << e;
            EXPECT_EQ(q6_K_element(b6, e), y6[size_t(e)]) << e;
        }
        for (int s = 0; s < QK_K / 32; s++) {
            float c4[32], c6[32];
            q4_K_sub_block(b4, s, c4);
            q6_K_chunk(b6, s, c6);
            EXPECT_EQ(std::vector<float>(c4, c4 + 32), std::vector<float>(y4.begin() + 32 * s, y4.begin() + 32 * s + 32));
            EXPECT_EQ(std::vector<float>(c6, c6 + 32), std::vector<float>(y6.begin() + 32 * s, y6.begin() + 32 * s + 32));
        }
    }
}

// The K-quant scalar twins against the decoded elements: with activation blocks of codes q and
// scale 1, dot_q4_K is sum_e w_e q_e (up to the f32 rounding of dequant_block's d*sc*q - dmin*mn,
// which the twin does in double).
struct Act {
    int16_t q[32];
    float d, sum;
};

TEST(Formats, KQuantScalarTwinsDotTheDecodedElements) {
    std::mt19937 rng(7);
    for (int n = 0; n < 50; n++) {
        const auto b4 = random_block<block_q4_K>(rng, {offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)});
        const auto b6 = random_block<block_q6_K>(rng, {offsetof(block_q6_K, d)});
        Act x[QK_K / 32];
        for (auto& a : x) {
            a.d = 1.0f;
            a.sum = 0.0f;
            for (auto& q : a.q) q = int16_t(int(rng() % 255) - 127), a.sum += float(q);
        }
        const std::vector<float> y4 = dequant(b4, QK_K), y6 = dequant(b6, QK_K);
        double ref4 = 0.0, ref6 = 0.0, mag4 = 0.0, mag6 = 0.0;  // mag: sum of |terms|, the error's scale
        for (int e = 0; e < QK_K; e++) {
            const double q = x[e / 32].q[e % 32];
            ref4 += double(y4[size_t(e)]) * q, mag4 += std::fabs(double(y4[size_t(e)]) * q);
            ref6 += double(y6[size_t(e)]) * q, mag6 += std::fabs(double(y6[size_t(e)]) * q);
        }
        EXPECT_NEAR(dot_q4_K(b4, x), ref4, 1e-6 * mag4);
        EXPECT_NEAR(dot_q6_K(b6, x), ref6, 1e-6 * mag6);
    }
}

TEST(Formats, FloatDecodersGiveTheStoredValues) {
    std::mt19937 rng(16);
    std::vector<uint16_t> h(64), bf(64);
    std::vector<float> f(64);
    for (int i = 0; i < 64; i++) {
        h[size_t(i)] = fp32_to_fp16(float(int(rng() % 2001) - 1000) / 37.0f);
        bf[size_t(i)] = fp32_to_bf16(float(int(rng() % 2001) - 1000) / 37.0f);
        f[size_t(i)] = float(int(rng() % 2001) - 1000) / 37.0f;
    }
#if RIDGE_FORMAT_SIMD
    for (int b = 0; b < 8; b++) {
        const std::vector<float> yh = from_float_decoder<DecF16>(h.data() + 8 * b);
        const std::vector<float> yb = from_float_decoder<DecBF16>(bf.data() + 8 * b);
        const std::vector<float> yf = from_float_decoder<DecF32>(f.data() + 8 * b);
        for (int l = 0; l < 8; l++) {
            EXPECT_EQ(yh[size_t(l)], fp16_to_fp32(h[size_t(8 * b + l)]));
            EXPECT_EQ(yb[size_t(l)], bf16_to_fp32(bf[size_t(8 * b + l)]));
            EXPECT_EQ(yf[size_t(l)], f[size_t(8 * b + l)]);
        }
    }
    for (int c = 0; c < 64; c++) {
        EXPECT_EQ(DecF16::elem(reinterpret_cast<const uint8_t*>(h.data()), c), fp16_to_fp32(h[size_t(c)]));
        EXPECT_EQ(DecBF16::elem(reinterpret_cast<const uint8_t*>(bf.data()), c), bf16_to_fp32(bf[size_t(c)]));
    }
#else
    GTEST_SKIP() << "this build has no SIMD float decoders (AVX2 + FMA + F16C)";
#endif
}

}  // namespace
}  // namespace ridge
