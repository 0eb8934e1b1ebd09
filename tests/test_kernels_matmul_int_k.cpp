// Integer activations for K-quant weights (kernels/cpu/matmul.cpp): Q4_K and Q6_K against
// the dequantized reference on exact integers, the scalar twin within the rounding bound of the f32
// reference, v4_int_k against its twin for odd sizes, a batch's rows (the rows of X in the lanes)
// the same as alone bit for bit, and bad inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernel_test_util.h"
#include "weights/formats.h"
#include "weights/error.h"

namespace ridge {
namespace {

using cpu::QuantizedRows;

const DType kIntKTypes[] = {DType::Q4_K, DType::Q5_K, DType::Q6_K};

// Row r of W split as w = code - mn per element: code = d*sc*q (the part that meets the rounded
// x), mn = Q4_K's or Q5_K's dmin*m of the element's sub-block (0 for Q6_K). Checked against dequantize_row.
void split_row(const TensorView& W, int64_t r, std::vector<float>& code, std::vector<float>& mn) {
    const int64_t k = W.ne(0);
    code.assign(size_t(k), 0.0f);
    mn.assign(size_t(k), 0.0f);
    dequantize_row(W.type, W.row(r), code.data(), k);
    if (W.type != DType::Q4_K && W.type != DType::Q5_K) return;
    const size_t bb = block_bytes(W.type);  // Q5_K's d, dmin and scales lie as Q4_K's
    for (int64_t c = 0; c < k; c++) {
        const block_q4_K& b = *reinterpret_cast<const block_q4_K*>(W.row(r) + size_t(c / QK_K) * bb);
        uint8_t sc, m;
        q4k_scale_min(int(c % QK_K) / 32, b.scales, &sc, &m);
        mn[size_t(c)] = fp16_to_fp32(b.dmin) * float(m);
        code[size_t(c)] += mn[size_t(c)];
    }
}

// n rows of K-quant blocks filled from a fixed byte pattern, f16 scale fields set to `d`.
test::OwnedWeight pattern_weight(DType t, int64_t n, int64_t k, float d) {
    test::OwnedWeight w = test::random_weight(t, n, k, 1);
    for (size_t i = 0; i < w.bytes.size(); i++) w.bytes[i] = uint8_t(i * 37 + (i >> 7) * 11 + 5);
    const size_t bb = block_bytes(t);
    for (size_t off = 0; off < w.bytes.size(); off += bb) {
        if (t == DType::Q6_K) {
            test::put_f16(&w.bytes[off + bb - 2], d);
        } else {
            test::put_f16(&w.bytes[off], d);      // d
            test::put_f16(&w.bytes[off + 2], d);  // dmin
        }
    }
    return w;
}

TEST(MatmulIntK, Q4_KScalesAndMinsUnpackAsReference) {
    // Scales and mins >= 16 in sub-blocks 4..7 use the packed top bits; d = dmin = 1, nibbles 0..15.
    std::vector<uint8_t> bytes(sizeof(block_q4_K));
    block_q4_K& b = *reinterpret_cast<block_q4_K*>(bytes.data());
    const uint8_t sc[8] = {5, 12, 19, 26, 33, 40, 47, 63}, mn[8] = {60, 54, 48, 42, 36, 30, 24, 18};
    for (int j = 0; j < 4; j++) {
        b.scales[j] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
        b.scales[j + 4] = uint8_t((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
        b.scales[j + 8] = uint8_t((sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4));
    }
    b.d = b.dmin = 0x3c00;  // 1.0
    for (int l = 0; l < QK_K / 2; l++) b.qs[l] = uint8_t((l * 7) & 0x0f) | uint8_t(((l * 5 + 3) & 0x0f) << 4);
    const TensorView W{"q4k", DType::Q4_K, {QK_K, 1}, bytes.data(), bytes.size()};
    // x: integers in [-20, 20], one element 32767 per block so that d_x = 1 and q = x exactly.
    std::vector<float> x(QK_K);
    for (int c = 0; c < QK_K; c++) x[size_t(c)] = c % 32 == 9 ? 32767.0f : float((c * 13) % 41 - 20);
    std::vector<float> w(QK_K);
    dequantize_row(DType::Q4_K, bytes.data(), w.data(), QK_K);
    double want = 0;
    for (int c = 0; c < QK_K; c++) want += double(w[size_t(c)]) * double(x[size_t(c)]);
    // Sub-block 7 is the high nibbles of qs[96..128): w = 63 * q - 18.
    EXPECT_EQ(w[7 * 32 + 1], float(63 * ((97 * 5 + 3) & 0x0f) - 18));
    QuantizedRows q;
    cpu::quantize_rows(x.data(), 1, QK_K, q);
    float y = 0;
    cpu::matmul_int_k_scalar(W, q, &y);
    EXPECT_EQ(y, float(want));
    if (cpu::int_k_simd_types(DType::Q4_K)) {
        cpu::matmul_v4_int_k(W, q, &y);
        EXPECT_NEAR(y, want, 1e-6 * std::fabs(want));
    }
}

// Exact integers: d = dmin = 1 and every ActBlock of x holding 32767, so q = x and both kernels
// compute sum w x of the dequantized weights (the scalar twin exactly, v4 up to f32 rounding).
TEST(MatmulIntK, ExactIntegersMatchDequantizedReference) {
    for (DType t : kIntKTypes) {
        const int64_t m = 3, n = 5, k = 512;
        const test::OwnedWeight W = pattern_weight(t, n, k, 1.0f);
        std::vector<float> X(size_t(m * k));
        for (int64_t c = 0; c < m * k; c++) X[size_t(c)] = c % 32 == (c / 32) % 32 ? 32767.0f : float((c * 13) % 41 - 20);
        QuantizedRows q;
        cpu::quantize_rows(X.data(), m, k, q);
        std::vector<float> got(size_t(m * n)), simd(size_t(m * n));
        cpu::matmul_int_k_scalar(W.view, q, got.data());
        const bool has_simd = cpu::int_k_simd_types(t);
        if (has_simd) cpu::matmul_v4_int_k(W.view, q, simd.data());
        std::vector<float> w(static_cast<size_t>(k));
        for (int64_t j = 0; j < n; j++) {
            dequantize_row(t, W.view.row(j), w.data(), k);
            for (int64_t i = 0; i < m; i++) {
                double want = 0;
                for (int64_t c = 0; c < k; c++) want += double(w[size_t(c)]) * double(X[size_t(i * k + c)]);
                const size_t at = size_t(i * n + j);
                EXPECT_EQ(got[at], float(want)) << dtype_name(t) << " row " << j << " x " << i;
                if (has_simd) {
                    EXPECT_NEAR(simd[at], want, 1e-6 * std::fabs(want)) << dtype_name(t) << " row " << j;
                }
            }
        }
    }
}

// The scalar twin against the f32 reference: the only difference is x rounded to integers, at most
// d_x / 2 per element, so |y - ref| <= sum_c |w_c| * d_x(c) / 2. For Q4_K the min term meets the
// exact block sum of x, so only the code part d*sc*q (= w + dmin*m) counts.
TEST(MatmulIntK, ScalarTwinWithinRoundingBoundOfF32Reference) {
    uint32_t seed = 91;
    for (DType t : kIntKTypes) {
        const int64_t m = 3, n = 11, k = 512;
        const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
        const std::vector<float> X = test::random_floats(size_t(m * k), seed++);
        std::vector<float> ref(size_t(m * n)), got(size_t(m * n));
        cpu::matmul_v0_scalar(W.view, X.data(), m, ref.data());
        QuantizedRows q;
        cpu::quantize_rows(X.data(), m, k, q);
        cpu::matmul_int_k_scalar(W.view, q, got.data());
        std::vector<float> code, mn;
        for (int64_t j = 0; j < n; j++) {
            split_row(W.view, j, code, mn);
            for (int64_t i = 0; i < m; i++) {
                double bound = 0;
                for (int64_t c = 0; c < k; c++) bound += std::fabs(code[size_t(c)]) * q.block(i, c / 32).d / 2;
                const double err = std::fabs(double(got[size_t(i * n + j)]) - double(ref[size_t(i * n + j)]));
                EXPECT_LE(err, bound * 1.001 + 1e-5) << dtype_name(t) << " row " << j << " x " << i;
                EXPECT_GT(bound, 0.0);
            }
        }
    }
}

// got against the twin's ref (m x n): the tolerance scales with the magnitude of the terms,
// sum |code x| + |mn x|, since only the f32 rounding of the scales and of the sums differs.
void expect_within_magnitude(const TensorView& W, const std::vector<float>& X, int64_t m, const std::vector<float>& got,
                             const std::vector<float>& ref, const std::string& where) {
    const int64_t n = W.ne(1), k = W.ne(0);
    std::vector<float> code, mn;
    int misses = 0;
    for (int64_t j = 0; j < n; j++) {
        split_row(W, j, code, mn);
        for (int64_t i = 0; i < m; i++) {
            double mag = 0;
            for (int64_t c = 0; c < k; c++)
                mag += (std::fabs(code[size_t(c)]) + std::fabs(mn[size_t(c)])) * std::fabs(X[size_t(i * k + c)]);
            const size_t at = size_t(i * n + j);
            const double err = std::fabs(double(got[at]) - double(ref[at]));
            if (!(err <= 1e-6 * mag) && ++misses <= 5)
                ADD_FAILURE() << where << ": y[" << i << "][" << j << "] got " << got[at] << " want " << ref[at]
                              << " (magnitude " << mag << ")";
        }
    }
    EXPECT_EQ(misses, 0) << where;
}

class MatmulIntKTypes : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulIntKTypes, V4MatchesScalarTwin) {
    const DType t = GetParam();
    if (!cpu::int_k_simd_types(t)) GTEST_SKIP() << "no AVX2 in this build";
    // Odd row counts (the 1-row tail of the 4-row groups), odd X rows (the 1-row tail of the X
    // pairs); the larger cases are past kParallelMinWork, so OpenMP runs them.
    uint32_t seed = 2024;
    for (int64_t n : {1, 3, 5, 7, 13, 33, 401})
        for (int64_t m : {1, 2, 3, 5, 17})  // 17: the rows of X in lanes (16 or 2 x 8), then one
            for (int64_t k : {256, 512, 768}) {
                const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
                const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
                QuantizedRows q;
                cpu::quantize_rows(X.data(), m, k, q);
                std::vector<float> ref(size_t(m * n)), got(ref.size(), -99.0f);
                const cpu::Cost rc = cpu::matmul_int_k_scalar(W.view, q, ref.data());
                const cpu::Cost gc = cpu::matmul_v4_int_k(W.view, q, got.data());
                const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(m) +
                                          " n=" + std::to_string(n) + " k=" + std::to_string(k);
                // Same integer products; only the f32 rounding of the scales and of the sums differs.
                expect_within_magnitude(W.view, X, m, got, ref, "v4 " + where);
                EXPECT_DOUBLE_EQ(gc.flops, 2.0 * double(m * n * k));
                EXPECT_DOUBLE_EQ(gc.bytes(), rc.bytes());
                EXPECT_DOUBLE_EQ(gc.act_read, double(m) * double(k / 32) * cpu::kActBlockBytes);
                EXPECT_DOUBLE_EQ(gc.weight_bytes, double(n) * row_bytes(t, k));
            }
}

// One row of X gives, bit for bit, what the same row gives among others (4 rows of X at a time,
// then 2, then the odd last one alone; a thread's share in 4 runs of weight rows and the 1-3 rows
// left one by one): each output is its own sums in the same order. With one thread and with two.
TEST_P(MatmulIntKTypes, OneRowOfXIsTheSameAsInABatch) {
    const DType t = GetParam();
    if (!cpu::int_k_simd_types(t)) GTEST_SKIP() << "no AVX2 in this build";
    const int64_t k = 512;
    uint32_t seed = 99;
    for (int64_t m : {3, 7, 16})
        for (int64_t n : {4, 7, 66, 401}) {
            const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
            const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
            test::expect_rows_alone_as_in_batch(W.view, X, m, k, cpu::matmul_v4_int_k);
        }
}

// Batches of 8 to 69 rows of X (the rows of X in the lanes of zmm registers 16 at a time, or of
// ymm ones 8 at a time, the m % 16 left by the fold), in order and shuffled, on both lane forms:
// every row's outputs are memcmp-equal to the same row alone (the fold, one row of X), an all-zero
// row's signed zeros included.
TEST_P(MatmulIntKTypes, ManyRowsOfXInAnyOrderAreTheSameAsAlone) {
    const DType t = GetParam();
    if (!cpu::int_k_simd_types(t)) GTEST_SKIP() << "no AVX2 in this build";
    uint32_t seed = 4242;
    for (int64_t k : {256, 768})
        for (int64_t n : {3, 5, 67})
            for (int64_t m : {8, 15, 16, 17, 33, 64, 69}) {
                const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
                const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
                for (const cpu::IntForm form : {cpu::int_form(), cpu::IntForm::ymm})
                    test::expect_any_order_as_alone(W.view, X, m, k, form, cpu::matmul_v4_int_k_as);
            }
}

// The integer GEMM of prompt chunks (v7_int_packed) against the twin, within the same tolerance as
// v4: short last panels of 6 rows of X and of 32 (and 16) weight rows, one to nine super-blocks
// (slices of one super-block); the larger cases are past kParallelMinWork, so OpenMP runs them.
TEST_P(MatmulIntKTypes, V7MatchesScalarTwin) {
    const DType t = GetParam();
    if (!cpu::v7_types(t)) GTEST_SKIP() << "no AVX-512 in this build";
    uint32_t seed = 3030;
    for (int64_t n : {1, 13, 32, 33, 401})
        for (int64_t m : {1, 3, 4, 17, 130})
            for (int64_t k : {256, 768, 2304}) {
                if (m * n * k > 40'000'000) continue;  // the twin is slow
                const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
                const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
                QuantizedRows q;
                cpu::quantize_rows(X.data(), m, k, q);
                std::vector<float> ref(size_t(m * n)), got(ref.size(), -99.0f), via(ref.size(), -99.0f);
                const cpu::Cost rc = cpu::matmul_int_k_scalar(W.view, q, ref.data());
                const cpu::Cost gc = cpu::matmul_v7_int_packed(W.view, q, got.data());
                const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(m) +
                                          " n=" + std::to_string(n) + " k=" + std::to_string(k);
                expect_within_magnitude(W.view, X, m, got, ref, "v7 " + where);
                EXPECT_DOUBLE_EQ(gc.flops, 2.0 * double(m * n * k));
                EXPECT_DOUBLE_EQ(gc.bytes(), rc.bytes());
                cpu::matmul_tiled(W.view, X.data(), m, &q, via.data());
                EXPECT_EQ(via, got) << where;
            }
}

// Each row of Y from v7 is memcmp-equal to the same row alone, in order and shuffled.
TEST_P(MatmulIntKTypes, V7RowsInAnyOrderAreTheSameAsAlone) {
    const DType t = GetParam();
    if (!cpu::v7_types(t)) GTEST_SKIP() << "no AVX-512 in this build";
    uint32_t seed = 5353;
    for (int64_t k : {256, 768})
        for (int64_t n : {3, 33, 67})
            for (int64_t m : {1, 4, 5, 17, 69, 130}) {
                const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
                const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
                test::expect_any_order_as_alone(W.view, X, m, k, cpu::int_form(), test::v7_int_packed_as);
            }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulIntKTypes, ::testing::ValuesIn(kIntKTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(MatmulIntK, TypesWithAKernel) {
    EXPECT_TRUE(cpu::int_k_types(DType::Q4_K));
    EXPECT_TRUE(cpu::int_k_types(DType::Q5_K));
    EXPECT_TRUE(cpu::int_k_types(DType::Q6_K));
    for (DType t : {DType::F32, DType::F16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q8_0}) {
        EXPECT_FALSE(cpu::int_k_types(t)) << dtype_name(t);
        EXPECT_FALSE(cpu::int_k_simd_types(t)) << dtype_name(t);
    }
}

TEST(MatmulIntK, RejectsMismatchedInputs) {
    const test::OwnedWeight W = test::random_weight(DType::Q4_K, 4, 256, 1);
    const test::OwnedWeight Q = test::random_weight(DType::Q4_0, 4, 256, 1);
    const std::vector<float> X = test::random_floats(512, 2);
    std::vector<float> y(8);
    QuantizedRows q;
    cpu::quantize_rows(X.data(), 1, 512, q);  // k = 512, the weight wants 256
    using Fn = cpu::Cost (*)(const TensorView&, const QuantizedRows&, float*);
    for (Fn fn : {Fn(cpu::matmul_int_k_scalar), Fn(cpu::matmul_v4_int_k), Fn(cpu::matmul_v7_int_packed)}) {
        if (fn == Fn(cpu::matmul_v7_int_packed) && !cpu::v7_types(DType::Q4_K)) continue;
        EXPECT_THROW(fn(W.view, q, y.data()), Error);
        cpu::quantize_rows(X.data(), 1, 256, q);
        if (fn != Fn(cpu::matmul_v7_int_packed)) {
            EXPECT_THROW(fn(Q.view, q, y.data()), Error);  // Q4_0 is matmul_int's
        }
        // k = 288: a multiple of 32 (ActBlocks) but not of 256 (super-blocks).
        cpu::quantize_rows(X.data(), 1, 288, q);
        const TensorView bad{"bad", DType::Q4_K, {288, 1}, W.bytes.data(), W.bytes.size()};
        EXPECT_THROW(fn(bad, q, y.data()), Error);
        cpu::quantize_rows(X.data(), 1, 512, q);
    }
}

}  // namespace
}  // namespace ridge
