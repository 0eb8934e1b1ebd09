// Embedding, RMSNorm, RoPE, softmax, SwiGLU, residual add and the f16 conversion: hand-worked
// cases, then each engine version against its scalar twin on seeded random input (odd sizes).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cost.h"
#include "kernels/cpu/f16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"
#include "kernel_test_util.h"
#include "weights/error.h"

namespace ridge {
namespace {

using test::expect_close;
using test::random_floats;

// ---- f16 ------------------------------------------------------------------------------------

TEST(F16, KnownBitPatterns) {
    EXPECT_EQ(cpu::f32_to_f16(1.0f), 0x3C00);
    EXPECT_EQ(cpu::f32_to_f16(-2.0f), 0xC000);
    EXPECT_EQ(cpu::f32_to_f16(65504.0f), 0x7BFF);
    EXPECT_EQ(cpu::f32_to_f16(65520.0f), 0x7C00);  // rounds past the largest half -> inf
    EXPECT_EQ(cpu::f32_to_f16(0.1f), 0x2E66);
    EXPECT_EQ(cpu::f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
    EXPECT_EQ(cpu::f32_to_f16(std::ldexp(1.0f, -26)), 0x0000);  // below half of it -> 0
    EXPECT_EQ(cpu::f32_to_f16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
    EXPECT_EQ(cpu::f32_to_f16(INFINITY), 0x7C00);
    EXPECT_EQ(cpu::f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
    EXPECT_EQ(cpu::f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
    EXPECT_FLOAT_EQ(cpu::f16_to_f32(0x3555), 0.333251953125f);
    EXPECT_FLOAT_EQ(cpu::f16_to_f32(0x0001), std::ldexp(1.0f, -24));
    EXPECT_TRUE(std::isnan(cpu::f16_to_f32(0x7E00)));
}

TEST(F16, EveryHalfRoundTrips) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        const float f = cpu::f16_to_f32(uint16_t(h));
        if (std::isnan(f)) continue;
        ASSERT_EQ(cpu::f32_to_f16(f), h) << "half 0x" << std::hex << h;
    }
}

// The F16C rows (the f16 KV cache's store and loads) against the scalar conversion: every half one
// way; the other way every half's value, the ties halfway to the next half and the floats just
// either side of them, and seeded random floats from subnormal to past the largest half. Lengths
// 1 .. 17 and the whole set take the 8-lane loop and the scalar tail alike.
TEST(F16, SimdRowsMatchScalar) {
#if RIDGE_CPU_SIMD
    auto is_nan_half = [](uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; };
    std::vector<uint16_t> halves(0x10000);
    for (uint32_t h = 0; h < 0x10000; h++) halves[h] = uint16_t(h);
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(9), int64_t(17), int64_t(halves.size())}) {
        std::vector<float> got(static_cast<size_t>(n));
        cpu::simd::f16_to_f32_row(halves.data(), got.data(), n);
        for (int64_t i = 0; i < n; i++) {
            const float want = cpu::f16_to_f32(halves[size_t(i)]);
            if (std::isnan(want)) {
                ASSERT_TRUE(std::isnan(got[size_t(i)])) << "half 0x" << std::hex << halves[size_t(i)];
            } else {
                ASSERT_EQ(std::memcmp(&got[size_t(i)], &want, 4), 0) << "half 0x" << std::hex << halves[size_t(i)];
            }
        }
    }
    std::vector<float> floats = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65519.0f, 65520.0f, 1e10f, -1e-10f};
    for (uint32_t h = 0; h < 0x7c00; h++) {  // the non-negative finite halves, and their negatives
        const float f = cpu::f16_to_f32(uint16_t(h)), next = cpu::f16_to_f32(uint16_t(h + 1));
        const float tie = f + (next - f) / 2;  // exact: one more bit than the half has
        for (float x : {f, tie, std::nextafter(tie, 0.0f), std::nextafter(tie, INFINITY)}) {
            floats.push_back(x);
            floats.push_back(-x);
        }
    }
    const std::vector<float> random = random_floats(20001, 5);
    for (size_t i = 0; i < random.size(); i++) floats.push_back(random[i] * std::ldexp(1.0f, int(i % 48) - 28));
    for (int64_t n : {int64_t(1), int64_t(7), int64_t(9), int64_t(17), int64_t(floats.size())}) {
        std::vector<uint16_t> got(static_cast<size_t>(n));
        cpu::simd::f32_to_f16_row(floats.data(), got.data(), n);
        for (int64_t i = 0; i < n; i++) {
            const uint16_t want = cpu::f32_to_f16(floats[size_t(i)]);
            if (is_nan_half(want))
                ASSERT_TRUE(is_nan_half(got[size_t(i)])) << "float " << floats[size_t(i)];
            else
                ASSERT_EQ(got[size_t(i)], want) << "float " << floats[size_t(i)];
        }
    }
#else
    GTEST_SKIP() << "built without AVX2 + FMA + F16C";
#endif
}

// ---- embedding ------------------------------------------------------------------------------

TEST(Embed, HandWorkedF32Rows) {
    std::vector<float> table = {0, 1, 10, 11, 20, 21};  // 3 tokens, d = 2
    TensorView T{"tok", DType::F32, {2, 3}, reinterpret_cast<const uint8_t*>(table.data()), 24};
    const int32_t tokens[3] = {2, 0, 2};
    std::vector<float> out(6);
    const cpu::Cost c = cpu::embed(T, tokens, 3, out.data());
    EXPECT_EQ(out, (std::vector<float>{20, 21, 0, 1, 20, 21}));
    EXPECT_DOUBLE_EQ(c.bytes(), 3 * 8 + 3 * 4 + 3 * 2 * 4);
    EXPECT_DOUBLE_EQ(c.weight_bytes, 3 * 8);  // one table row per token
}

TEST(Embed, QuantizedTablesMatchScalar) {
    for (DType t : test::all_weight_types()) {
        const int64_t d = block_elems(t) == 256 ? 256 : 96;
        const test::OwnedWeight T = test::random_weight(t, 11, d, 99);
        std::vector<int32_t> tokens = {10, 0, 5, 5, 3};
        while (tokens.size() < 400) tokens.push_back(int32_t(tokens.size() % 11));  // OpenMP path too
        const int64_t m = int64_t(tokens.size());
        std::vector<float> ref(m * d), got(m * d);
        cpu::embed_v0_scalar(T.view, tokens.data(), m, ref.data());
        cpu::embed_v1_omp(T.view, tokens.data(), m, got.data());
        EXPECT_EQ(got, ref) << dtype_name(t);
        std::vector<float> row(d);  // row 5 as the weights/ decoder sees it
        dequantize_row(t, T.view.row(5), row.data(), d);
        for (int64_t c = 0; c < d; c++) ASSERT_EQ(got[2 * d + c], row[c]) << dtype_name(t);
    }
}

TEST(Embed, TokenOutsideVocabularyIsAnError) {
    std::vector<float> table(6);
    TensorView T{"tok", DType::F32, {2, 3}, reinterpret_cast<const uint8_t*>(table.data()), 24};
    const int32_t bad[2] = {1, 3};
    std::vector<float> out(4);
    EXPECT_THROW(cpu::embed(T, bad, 2, out.data()), Error);
    const int32_t neg[1] = {-1};
    EXPECT_THROW(cpu::embed_v0_scalar(T, neg, 1, out.data()), Error);
}

// ---- RMSNorm ------------------------------------------------------------------------------

TEST(RmsNorm, HandWorked) {
    // x = [3, 4]: mean square 12.5, rms 3.5355339; w = [1, 2] -> [0.8485281, 2.2627417].
    const float x[2] = {3, 4}, w[2] = {1, 2};
    float y0[2], y1[2];
    cpu::rmsnorm_v0_scalar(x, w, 1, 2, 0.0f, y0);
    cpu::rmsnorm_v1_omp(x, w, 1, 2, 0.0f, y1);
    for (const float* y : {y0, y1}) {
        EXPECT_NEAR(y[0], 0.84852814f, 1e-6);
        EXPECT_NEAR(y[1], 2.26274170f, 1e-6);
    }
    // eps matters for tiny inputs: x = [0, 0] stays 0, x = [1e-3] with eps 1e-6 -> 1e-3/sqrt(2e-6).
    const float small[1] = {1e-3f}, one[1] = {1.0f};
    float ys[1];
    cpu::rmsnorm(small, one, 1, 1, 1e-6f, ys);
    EXPECT_NEAR(ys[0], 1e-3 / std::sqrt(2e-6), 1e-5);
}

TEST(RmsNorm, MatchesScalarOnRandomRows) {
    for (int64_t d : {1, 7, 67, 576}) {
        const int64_t m = d == 576 ? 67 : 5;  // the last case is big enough for the OpenMP path
        const auto x = random_floats(size_t(m * d), 11 + uint32_t(d), -3, 3);
        const auto w = random_floats(size_t(d), 12 + uint32_t(d), 0.5, 1.5);
        std::vector<float> ref(x.size()), got(x.size());
        const cpu::Cost c0 = cpu::rmsnorm_v0_scalar(x.data(), w.data(), m, d, 1e-5f, ref.data());
        const cpu::Cost c1 = cpu::rmsnorm_v1_omp(x.data(), w.data(), m, d, 1e-5f, got.data());
        expect_close(got.data(), ref.data(), got.size(), 1e-6, 1e-5, "rmsnorm d=" + std::to_string(d));
        EXPECT_DOUBLE_EQ(c0.flops, 4.0 * m * d);
        EXPECT_DOUBLE_EQ(c1.bytes(), c0.bytes());
        std::vector<float> in_place = x;  // y may be x
        cpu::rmsnorm(in_place.data(), w.data(), m, d, 1e-5f, in_place.data());
        expect_close(in_place.data(), ref.data(), ref.size(), 1e-6, 1e-5, "rmsnorm in place");
    }
}

// ---- RoPE -----------------------------------------------------------------------------------

TEST(Rope, HandWorkedNormPairs) {
    // head_dim 4, base 10000, position 1: pair 0 turns by 1 rad, pair 1 by 10000^(-1/2) = 0.01 rad.
    cpu::RopeParams p{4, 4, 10000.0f, RopeStyle::Norm};
    const int32_t pos[1] = {1};
    for (auto fn : {cpu::rope_v0_scalar, cpu::rope_v1_omp}) {
        float x[4] = {1, 0, 1, 0};
        fn(x, pos, 1, 1, p);
        EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
        EXPECT_NEAR(x[1], std::sin(1.0), 1e-6);
        EXPECT_NEAR(x[2], std::cos(0.01), 1e-6);
        EXPECT_NEAR(x[3], std::sin(0.01), 1e-6);
        float y[4] = {0, 2, 0, 0};  // (0, 2) turned by 1 rad -> (-2 sin 1, 2 cos 1)
        fn(y, pos, 1, 1, p);
        EXPECT_NEAR(y[0], -2 * std::sin(1.0), 1e-6);
        EXPECT_NEAR(y[1], 2 * std::cos(1.0), 1e-6);
    }
}

TEST(Rope, HandWorkedNeoxPairs) {
    // Neox pairs (i, i + 2) for head_dim 4: (x0, x2) turns by 1 rad, (x1, x3) by 0.01 rad.
    cpu::RopeParams p{4, 4, 10000.0f, RopeStyle::Neox};
    const int32_t pos[1] = {1};
    for (auto fn : {cpu::rope_v0_scalar, cpu::rope_v1_omp}) {
        float x[4] = {1, 1, 0, 0};
        fn(x, pos, 1, 1, p);
        EXPECT_NEAR(x[0], std::cos(1.0), 1e-6);
        EXPECT_NEAR(x[2], std::sin(1.0), 1e-6);
        EXPECT_NEAR(x[1], std::cos(0.01), 1e-6);
        EXPECT_NEAR(x[3], std::sin(0.01), 1e-6);
    }
}

TEST(Rope, PositionZeroIsIdentityAndPartialRopeLeavesTheTail) {
    cpu::RopeParams p{8, 4, 10000.0f, RopeStyle::Norm};  // only the first 4 of 8 rotate
    const auto x0 = random_floats(16, 5);
    std::vector<float> x = x0;
    const int32_t pos[1] = {0};
    cpu::rope(x.data(), pos, 1, 2, p);
    EXPECT_EQ(x, x0);
    const int32_t pos7[1] = {7};
    cpu::rope(x.data(), pos7, 1, 2, p);
    for (int h = 0; h < 2; h++)
        for (int c = 4; c < 8; c++) EXPECT_EQ(x[h * 8 + c], x0[h * 8 + c]);
    EXPECT_NE(x[0], x0[0]);
}

TEST(Rope, FreqBaseAndAngle) {
    EXPECT_DOUBLE_EQ(cpu::rope_angle(3, 0, 64, 100000.0f), 3.0);
    EXPECT_NEAR(cpu::rope_angle(5, 16, 64, 100000.0f), 5.0 * std::pow(100000.0, -0.5), 1e-12);
}

TEST(Rope, MatchesScalarAndKeepsNorms) {
    for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox}) {
        for (int head_dim : {8, 64}) {
            cpu::RopeParams p{head_dim, head_dim, 100000.0f, style};
            const int n_heads = 3, m = 300;  // past kParallelMinWork for head_dim 64
            std::vector<int32_t> pos = {0, 1, 2, 17, 511, 4095, 8191};
            while (int(pos.size()) < m) pos.push_back(int32_t(pos.size() * 13));
            const auto x = random_floats(size_t(m * n_heads * head_dim), 21 + head_dim);
            std::vector<float> ref = x, got = x;
            cpu::rope_v0_scalar(ref.data(), pos.data(), m, n_heads, p);
            cpu::rope_v1_omp(got.data(), pos.data(), m, n_heads, p);
            expect_close(got.data(), ref.data(), got.size(), 1e-6, 1e-5, "rope");
            // A rotation keeps the length of every head.
            for (int r = 0; r < m * n_heads; r++) {
                double a = 0, b = 0;
                for (int c = 0; c < head_dim; c++) {
                    a += double(x[r * head_dim + c]) * x[r * head_dim + c];
                    b += double(got[r * head_dim + c]) * got[r * head_dim + c];
                }
                EXPECT_NEAR(a, b, 1e-5);
            }
        }
    }
}

// ---- softmax ----------------------------------------------------------------------------

TEST(Softmax, HandWorked) {
    for (auto fn : {cpu::softmax_v0_scalar, cpu::softmax_v1}) {
        float x[2] = {0.0f, std::log(2.0f)};  // e^0 : e^ln2 = 1 : 2
        fn(x, 2);
        EXPECT_NEAR(x[0], 1.0 / 3, 1e-7);
        EXPECT_NEAR(x[1], 2.0 / 3, 1e-7);
        float big[3] = {1000.0f, 1000.0f, 1000.0f - 1e9f};  // no overflow, tiny one underflows to 0
        fn(big, 3);
        EXPECT_FLOAT_EQ(big[0], 0.5f);
        EXPECT_FLOAT_EQ(big[2], 0.0f);
        float one[1] = {-7.0f};
        fn(one, 1);
        EXPECT_FLOAT_EQ(one[0], 1.0f);
    }
}

TEST(Softmax, MatchesScalarOnRandom) {
    for (int64_t n : {3, 31, 1000, 49152}) {
        const auto x = random_floats(size_t(n), 31 + uint32_t(n), -20, 20);
        std::vector<float> ref = x, got = x;
        cpu::softmax_v0_scalar(ref.data(), n);
        cpu::softmax(got.data(), n);
        expect_close(got.data(), ref.data(), size_t(n), 1e-9, 1e-5, "softmax n=" + std::to_string(n));
    }
}

// ---- SwiGLU and add -------------------------------------------------------------------------

#if RIDGE_CPU_SIMD
// simd::exp8 (swiglu's and softmax's exponential) against std::exp in double over its whole range,
// every 1/64: at most 4 units in the last place; 0 below -87.3, finite at the top.
TEST(Exp8, WithinFourUlpOfExp) {
    double worst = 0;
    for (int i = -87 * 64; i <= 88 * 64; i += 8) {
        float x[8], e[8];
        for (int j = 0; j < 8; j++) x[j] = float(i + j) / 64.0f;
        _mm256_storeu_ps(e, cpu::simd::exp8(_mm256_loadu_ps(x)));
        for (int j = 0; j < 8; j++) {
            if (x[j] > 88.3f) continue;
            const double want = std::exp(double(x[j]));
            const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
            worst = std::max(worst, std::fabs(double(e[j]) - want) / ulp);
        }
    }
    EXPECT_LE(worst, 4.0);
    float x[8] = {-88.0f, -100.0f, -1e30f, -INFINITY, 88.3f, 100.0f, 1e30f, 0.0f}, e[8];
    _mm256_storeu_ps(e, cpu::simd::exp8(_mm256_loadu_ps(x)));
    for (int j = 0; j < 4; j++) EXPECT_EQ(e[j], 0.0f) << x[j];
    for (int j = 4; j < 7; j++) EXPECT_TRUE(std::isfinite(e[j]) && e[j] > 1e38f) << x[j];
    EXPECT_EQ(e[7], 1.0f);
}
#endif

TEST(Swiglu, HandWorked) {
    const float gate[3] = {0.0f, 1.0f, -1.0f}, up[3] = {5.0f, 2.0f, 1.0f};
    for (auto fn : {cpu::swiglu_v0_scalar, cpu::swiglu_v1_omp}) {
        float out[3];
        fn(gate, up, 3, out);
        EXPECT_FLOAT_EQ(out[0], 0.0f);
        EXPECT_NEAR(out[1], 2.0 / (1.0 + std::exp(-1.0)), 1e-6);   // 1.4621172
        EXPECT_NEAR(out[2], -1.0 / (1.0 + std::exp(1.0)), 1e-6);   // -0.2689414
    }
}

TEST(ParallelFor, EveryIndexOnceEitherWay) {
    for (bool parallel : {false, true})
        for (int64_t n : {0, 1, 2, 7, 1000}) {
            std::vector<int> hits(size_t(n), 0);
            cpu::parallel_for(n, parallel, [&](int64_t i) { hits[size_t(i)]++; });
            EXPECT_EQ(hits, std::vector<int>(size_t(n), 1)) << "n " << n << (parallel ? " parallel" : " serial");
        }
}

TEST(Swiglu, MatchesScalarOnRandom) {
    const int64_t n = 5 * 1537;
    const auto g = random_floats(size_t(n), 41, -10, 10), u = random_floats(size_t(n), 42, -3, 3);
    std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    cpu::swiglu_v0_scalar(g.data(), u.data(), n, ref.data());
    const cpu::Cost c = cpu::swiglu(g.data(), u.data(), n, got.data());
    expect_close(got.data(), ref.data(), size_t(n), 1e-6, 1e-5, "swiglu");
    EXPECT_DOUBLE_EQ(c.flops, 5.0 * n);
}

TEST(Add, HandWorkedAndRandom) {
    float x[3] = {1, 2, 3};
    const float y[3] = {10, -2, 0.5f};
    cpu::add(x, y, 3);
    EXPECT_EQ(std::vector<float>(x, x + 3), (std::vector<float>{11, 0, 3.5f}));
    // One row (a plain loop) and 140003 elements (parallel, in chunks of 1024 and a short last one).
    for (int64_t n : {int64_t(576), int64_t(140003)}) {
        auto a = random_floats(size_t(n), 51), b = random_floats(size_t(n), 52);
        std::vector<float> ref = a;
        cpu::add_v0_scalar(ref.data(), b.data(), n);
        cpu::add_v1_omp(a.data(), b.data(), n);
        EXPECT_EQ(a, ref) << n;
    }
}

TEST(AddBias, EachRowGetsTheBias) {
    float x[6] = {1, 2, 3, 4, 5, 6};  // 2 rows of 3
    const float b[3] = {0.5f, -1, 10};
    const cpu::Cost c = cpu::add_bias(x, b, 2, 3);
    EXPECT_EQ(std::vector<float>(x, x + 6), (std::vector<float>{1.5f, 1, 13, 4.5f, 4, 16}));
    EXPECT_DOUBLE_EQ(c.flops, 6);
    EXPECT_DOUBLE_EQ(c.weight_bytes, 12);
    EXPECT_DOUBLE_EQ(c.act_read, 24);
    EXPECT_DOUBLE_EQ(c.act_written, 24);
}

TEST(Swiglu, ParallelMatchesScalar) {
    const int64_t n = 40003;  // above the threshold of two threads, and not a whole number of vectors
    const auto g = random_floats(size_t(n), 43, -10, 10), u = random_floats(size_t(n), 44, -3, 3);
    std::vector<float> ref(static_cast<size_t>(n)), got(static_cast<size_t>(n));
    cpu::swiglu_v0_scalar(g.data(), u.data(), n, ref.data());
    cpu::swiglu_v1_omp(g.data(), u.data(), n, got.data());
    expect_close(got.data(), ref.data(), size_t(n), 1e-6, 1e-5, "swiglu, parallel");
}

}  // namespace
}  // namespace ridge
