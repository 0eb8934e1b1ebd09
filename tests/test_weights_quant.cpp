// Tests for weights/formats/ and weights/quant.h: hand-worked blocks, exhaustive fp16 round
// trips, fp16 rounding against the CPU's F16C instruction, and bit-for-bit agreement with the
// gguf-py goldens in tests/data/quant (made by tools/gen_quant_goldens.py; format documented there).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "weights/formats.h"
#include "weights/error.h"
#include "weights/quant.h"
#include "test_paths.h"

using namespace ridge;

namespace {

struct Golden {
    DType type;
    uint32_t n_rows = 0, n_per_row = 0;
    std::vector<float> input;   // (n_rows, n_per_row), empty for K-quants
    std::vector<uint8_t> bytes; // (n_rows, row_bytes)
    std::vector<float> deq;     // (n_rows, n_per_row)
};

Golden load_golden(const std::string& name) {
    const std::string path = std::string(RIDGE_TESTS_DIR) + "/data/quant/" + name + ".bin";
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)), {});
    Golden g;
    if (f.size() < 20 || std::memcmp(f.data(), "RQG1", 4) != 0) {
        ADD_FAILURE() << path << ": bad golden header";
        return g;
    }
    uint32_t h[4];
    std::memcpy(h, f.data() + 4, 16);
    g.type = DType(h[0]);
    g.n_rows = h[1];
    g.n_per_row = h[2];
    const size_t n = size_t(g.n_rows) * g.n_per_row;
    const size_t nq = g.n_rows * row_bytes(g.type, g.n_per_row);
    const size_t expected = 20 + (h[3] ? 4 * n : 0) + nq + 4 * n;
    if (f.size() != expected) {
        ADD_FAILURE() << path << ": size " << f.size() << ", expected " << expected;
        return g;
    }
    size_t p = 20;
    if (h[3]) {
        g.input.resize(n);
        std::memcpy(g.input.data(), f.data() + p, 4 * n);
        p += 4 * n;
    }
    g.bytes.assign(f.begin() + long(p), f.begin() + long(p + nq));
    p += nq;
    g.deq.resize(n);
    std::memcpy(g.deq.data(), f.data() + p, 4 * n);
    return g;
}

uint32_t bits(float f) { return f32_bits(f); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Hand-worked blocks

TEST(QuantHand, Q4_1BlockDecode) {
    // d = 0.5 (f16 0x3800), m = -1 (f16 0xBC00); element j = nibble j, element j+16 = 15 - j.
    block_q4_1 b{};
    b.d = 0x3800;
    b.m = 0xBC00;
    for (int j = 0; j < 16; j++) b.qs[j] = uint8_t(j | ((15 - j) << 4));
    float y[32];
    dequantize_row(DType::Q4_1, &b, y, 32);
    for (int j = 0; j < 16; j++) {
        EXPECT_EQ(y[j], 0.5f * j - 1.0f) << j;
        EXPECT_EQ(y[j + 16], 0.5f * (15 - j) - 1.0f) << j;
    }
    EXPECT_EQ(y[0], -1.0f);
    EXPECT_EQ(y[16], 6.5f);
}

TEST(QuantHand, Q4_1BlockEncode) {
    // x = -1 + 0.5 * (j mod 16): min -1, max 6.5, d = 7.5 / 15 = 0.5, q = trunc((x + 1) * 2 + 0.5) = j mod 16.
    float x[32];
    for (int j = 0; j < 32; j++) x[j] = -1.0f + 0.5f * float(j % 16);
    block_q4_1 b{};
    quantize_row(DType::Q4_1, x, &b, 32);
    EXPECT_EQ(b.d, 0x3800);
    EXPECT_EQ(b.m, 0xBC00);
    for (int j = 0; j < 16; j++) EXPECT_EQ(b.qs[j], uint8_t(j | (j << 4))) << j;
}

TEST(QuantHand, Q8_0RoundsHalfAwayFromZero) {
    // max |x| = 127, so d = 1 and q = round(x): 63.5 -> 64, -0.5 -> -1, 2.5 -> 3, 0.49 -> 0.
    float x[32] = {127.0f, -127.0f, 63.5f, -0.5f, 0.49f, 2.5f};
    block_q8_0 b{};
    quantize_row(DType::Q8_0, x, &b, 32);
    EXPECT_EQ(b.d, 0x3C00);  // 1.0
    const int8_t want[6] = {127, -127, 64, -1, 0, 3};
    for (int j = 0; j < 6; j++) EXPECT_EQ(b.qs[j], want[j]) << j;
    for (int j = 6; j < 32; j++) EXPECT_EQ(b.qs[j], 0) << j;
}

TEST(QuantHand, Q4_0AndQ5_0Layout) {
    // Q4_0 with d = 1: element j = low nibble of qs[j] - 8, element j+16 = high nibble - 8.
    block_q4_0 b4{};
    b4.d = 0x3C00;
    b4.qs[0] = 0xF0;  // elements 0 -> -8, 16 -> 7
    float y[32];
    dequant_block(b4, y);
    EXPECT_EQ(y[0], -8.0f);
    EXPECT_EQ(y[16], 7.0f);
    EXPECT_EQ(y[1], -8.0f);
    // Q5_0 with d = 2: bit j of qh (little-endian u32) is bit 4 of element j.
    block_q5_0 b5{};
    b5.d = 0x4000;
    b5.qh[2] = 0x01;  // bit 16: element 16
    b5.qs[0] = 0x3F;  // element 0 low nibble 15, element 16 low nibble 3
    dequant_block(b5, y);
    EXPECT_EQ(y[0], 2.0f * (15 - 16));
    EXPECT_EQ(y[16], 2.0f * ((3 | 16) - 16));
    EXPECT_EQ(y[1], 2.0f * -16);
}

TEST(QuantHand, UnsupportedTypesAndSizes) {
    float x[256] = {};
    uint8_t buf[1024];
    EXPECT_THROW(quantize_row(DType::Q2_K, x, buf, 256), Error);
    EXPECT_THROW(quantize_row(DType::Q4_K, x, buf, 255), Error);
    EXPECT_THROW(dequantize_row(DType::Q2_K, buf, x, 256), Error);
    EXPECT_THROW(dequantize_row(DType::Q4_0, buf, x, 33), Error);
    EXPECT_TRUE(can_dequantize(DType::Q6_K));
    EXPECT_TRUE(can_quantize(DType::Q6_K));
    EXPECT_FALSE(can_quantize(DType::Q2_K));
}

// ---------------------------------------------------------------------------------------------
// fp16 / bf16 conversions

TEST(QuantFloat, Fp16RoundTripsEveryHalf) {
    for (uint32_t h = 0; h < 65536; h++) {
        const float f = fp16_to_fp32(uint16_t(h));
        const bool nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (nan) {
            EXPECT_TRUE(std::isnan(f)) << h;
            EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
        } else {
            EXPECT_EQ(fp32_to_fp16(f), uint16_t(h)) << h;
        }
    }
    EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
    EXPECT_EQ(fp16_to_fp32(0x7bff), 65504.0f);
    EXPECT_EQ(fp16_to_fp32(0xc000), -2.0f);
}

TEST(QuantFloat, Fp16RoundingTiesAndLimits) {
    EXPECT_EQ(fp32_to_fp16(65519.99f), 0x7bff);
    EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7c00);  // tie between 65504 and 65536: to even (inf)
    EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie between 0 and 2^-24: to even (0)
    EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
    EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie, 1.0 is even
    EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie, rounds up to even
    EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
}

#if defined(__F16C__)
TEST(QuantFloat, Fp16MatchesF16CHardware) {
    std::mt19937 rng(7);
    for (int i = 0; i < 2000000; i++) {
        uint32_t u = rng();
        float f = f32_from_bits(u);
        if (std::isnan(f)) continue;
        uint16_t hw = uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
        ASSERT_EQ(fp32_to_fp16(f), hw) << std::hex << u;
    }
    // Dense sweep over the half-precision range, including subnormals.
    for (uint32_t u = 0x33000000u - 64; u < 0x47800000u; u += 97) {
        float f = f32_from_bits(u);
        ASSERT_EQ(fp32_to_fp16(f), uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT))) << std::hex << u;
    }
}
#endif

TEST(QuantFloat, Bf16) {
    EXPECT_EQ(fp32_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(bf16_to_fp32(0x3f80), 1.0f);
    EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x3f808000u)), 0x3f80);  // tie, to even
    EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x3f818000u)), 0x3f82);  // tie, to even (up)
    EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x7f7fffffu)), 0x7f80);  // max float rounds to inf
    EXPECT_EQ(fp32_to_bf16(f32_from_bits(0x7f800001u)), 0x7fc0);  // NaN made quiet
}

// ---------------------------------------------------------------------------------------------
// gguf-py goldens, bit for bit

class QuantGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantGolden, DequantizeMatches) {
    Golden g = load_golden(GetParam());
    ASSERT_GT(g.n_rows, 0u);
    ASSERT_TRUE(can_dequantize(g.type));
    const size_t rb = row_bytes(g.type, g.n_per_row);
    std::vector<float> y(g.n_per_row);
    for (uint32_t r = 0; r < g.n_rows; r++) {
        dequantize_row(g.type, g.bytes.data() + r * rb, y.data(), g.n_per_row);
        for (uint32_t i = 0; i < g.n_per_row; i++)
            ASSERT_EQ(bits(y[i]), bits(g.deq[r * g.n_per_row + i]))
                << GetParam() << " row " << r << " element " << i << ": " << y[i] << " vs " << g.deq[r * g.n_per_row + i];
    }
}

// gguf-py quantizes only the simple formats; the K-quant goldens are random blocks (dequant only).
class QuantizeGolden : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantizeGolden, QuantizeMatches) {
    Golden g = load_golden(GetParam());
    ASSERT_FALSE(g.input.empty()) << GetParam() << ": golden file has no float input";
    ASSERT_TRUE(can_quantize(g.type));
    const size_t rb = row_bytes(g.type, g.n_per_row);
    std::vector<uint8_t> q(rb);
    for (uint32_t r = 0; r < g.n_rows; r++) {
        quantize_row(g.type, g.input.data() + size_t(r) * g.n_per_row, q.data(), g.n_per_row);
        for (size_t b = 0; b < rb; b++)
            ASSERT_EQ(int(q[b]), int(g.bytes[r * rb + b]))
                << GetParam() << " row " << r << " byte " << b << " (block " << b / block_bytes(g.type) << ")";
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, QuantGolden,
                         ::testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K", "Q5_K",
                                           "Q6_K"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });
INSTANTIATE_TEST_SUITE_P(SimpleTypes, QuantizeGolden,
                         ::testing::Values("F16", "BF16", "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1"),
                         [](const ::testing::TestParamInfo<const char*>& i) { return std::string(i.param); });
