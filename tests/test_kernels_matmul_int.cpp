// Integer activations (kernels/cpu/matmul.h): the quantizer by hand, the scalar twin on exact
// integers and within the rounding bound of the f32 reference, v4 against its twin for odd sizes,
// one row of X against the same row in a batch, and matmul()'s choice of path.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/matmul.h"
#include "kernel_test_util.h"
#include "weights/error.h"

namespace ridge {
namespace {

using cpu::QuantizedRows;

const DType kIntTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0};

TEST(QuantizeRows, HandWorkedBlocks) {
    // Block 0: integers with max |x| = 32767 -> d = 1, q = x. Block 1: all zeros -> d = 0, q = 0,
    // sum 0. Block 2: x = 0.5 everywhere -> d = 0.5/32767, q = 32767.
    std::vector<float> x(96);
    for (int c = 0; c < 32; c++) x[c] = float(c * 4 - 64);  // -64 .. 60
    x[7] = -32767.0f;
    for (int c = 64; c < 96; c++) x[c] = 0.5f;
    QuantizedRows q;
    const cpu::Cost cost = cpu::quantize_rows(x.data(), 1, 96, q);
    ASSERT_EQ(q.m, 1);
    ASSERT_EQ(q.k, 96);
    const cpu::ActBlock b[3] = {q.block(0, 0), q.block(0, 1), q.block(0, 2)};
    EXPECT_FLOAT_EQ(b[0].d, 1.0f);
    float sum0 = 0;
    for (int c = 0; c < 32; c++) {
        EXPECT_EQ(b[0].q[c], int(x[c])) << c;
        sum0 += x[c];
    }
    EXPECT_FLOAT_EQ(b[0].sum, sum0);
    EXPECT_EQ(b[1].d, 0.0f);
    EXPECT_EQ(b[1].sum, 0.0f);
    for (int c = 0; c < 32; c++) EXPECT_EQ(b[1].q[c], 0);
    EXPECT_FLOAT_EQ(b[2].d, 0.5f / 32767.0f);
    EXPECT_FLOAT_EQ(b[2].sum, 16.0f);
    for (int c = 0; c < 32; c++) EXPECT_EQ(b[2].q[c], 32767);
    EXPECT_DOUBLE_EQ(cost.act_read, 4.0 * 96);
    EXPECT_DOUBLE_EQ(cost.act_written, 3.0 * 72);
}

TEST(QuantizeRows, RoundingErrorIsAtMostHalfAStep) {
    const int64_t m = 3, k = 160;
    const std::vector<float> x = test::random_floats(size_t(m * k), 7, -3.0f, 3.0f);
    QuantizedRows q;
    cpu::quantize_rows(x.data(), m, k, q);
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < k; c++) {
            const cpu::ActBlock b = q.block(i, c / 32);
            // Half a step, plus the f32 rounding of x / d (a few units in the last place of 32767).
            EXPECT_LE(std::fabs(b.d * b.q[c % 32] - x[size_t(i * k + c)]), 0.51f * b.d);
            EXPECT_LE(std::abs(int(b.q[c % 32])), 32767);
        }
}

// The AVX2 quantizer against its scalar twin: the same scales and codes (max |x| and the rounding
// of x / d do not depend on order), sums equal up to the f32 order of addition.
TEST(QuantizeRows, MatchesScalarTwin) {
    for (int64_t k : {32, 96, 576, 1536}) {
        const int64_t m = 3;
        std::vector<float> x = test::random_floats(size_t(m * k), uint32_t(k), -5.0f, 5.0f);
        for (int64_t c = 0; c < 32; c++) x[size_t(k + c)] = 0.0f;  // an all-zero block
        x[5] = 1e-30f, x[6] = -3.5e4f;                            // a tiny value and a large one
        QuantizedRows fast, twin;
        cpu::quantize_rows(x.data(), m, k, fast);
        cpu::quantize_rows_scalar(x.data(), m, k, twin);
        ASSERT_EQ(fast.m, m);
        ASSERT_EQ(fast.k, k);
        for (int64_t i = 0; i < m; i++)
            for (int64_t b = 0; b < k / 32; b++) {
                const cpu::ActBlock f = fast.block(i, b), t = twin.block(i, b);
                EXPECT_EQ(f.d, t.d) << "k " << k << " row " << i << " block " << b;
                double abs_sum = 0;  // each order's rounding is at most 31 ulps of the running sums
                for (int c = 0; c < 32; c++) abs_sum += std::fabs(x[size_t(i * k + b * 32 + c)]);
                EXPECT_NEAR(f.sum, t.sum, 2 * 32 * 0x1p-24 * abs_sum) << "k " << k << " row " << i << " block " << b;
                for (int c = 0; c < 32; c++) ASSERT_EQ(f.q[c], t.q[c]) << "k " << k << " row " << i << " block " << b;
            }
    }
}

TEST(QuantizeRows, RejectsRowLengthNotMultipleOf32) {
    std::vector<float> x(40);
    QuantizedRows q;
    EXPECT_THROW(cpu::quantize_rows(x.data(), 1, 40, q), Error);
    EXPECT_THROW(cpu::quantize_rows_scalar(x.data(), 1, 40, q), Error);
}

TEST(MatmulInt, HandWorkedQ8_0ExactIntegers) {
    // Integer weights with max 127 (Q8_0 scale 1) and integer x with max 32767 (activation scale
    // 1): every product is exact. Row 0 = 8c - 127, row 1 = 127; x = 32767 at c = 0, else 1.
    const int64_t k = 32;
    std::vector<float> rows(2 * k), x(k, 1.0f);
    x[0] = 32767.0f;
    for (int c = 0; c < k; c++) rows[c] = float(c * 8 - 127), rows[k + c] = 127.0f;
    std::vector<uint8_t> w(2 * row_bytes(DType::Q8_0, k));
    quantize_row(DType::Q8_0, rows.data(), w.data(), k);
    quantize_row(DType::Q8_0, rows.data() + k, w.data() + row_bytes(DType::Q8_0, k), k);
    const TensorView W{"q8", DType::Q8_0, {k, 2}, w.data(), w.size()};
    QuantizedRows q;
    cpu::quantize_rows(x.data(), 1, k, q);
    // y0 = 32767 * (-127) + sum_{c>=1} (8c - 127) = -4161409 + (8 * 496 - 127 * 31) = -4161378
    // y1 = 32767 * 127 + 31 * 127 = 4165346
    for (auto fn : {cpu::matmul_int_scalar, cpu::matmul_v4_int}) {
        std::vector<float> y(2, -1.0f);
        fn(W, q, y.data());
        EXPECT_FLOAT_EQ(y[0], -4161378.0f);
        EXPECT_FLOAT_EQ(y[1], 4165346.0f);
    }
}

// The scalar twin against the f32 reference: the only difference is x rounded to integers, at most
// d_x / 2 per element, so |y - ref| <= sum_c |w_c| * d_x(c) / 2 (plus f32 summation slack).
TEST(MatmulInt, ScalarTwinWithinRoundingBoundOfF32Reference) {
    uint32_t seed = 77;
    for (DType t : kIntTypes) {
        const int64_t m = 3, n = 11, k = 96;
        const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
        const std::vector<float> X = test::random_floats(size_t(m * k), seed++);
        std::vector<float> ref(size_t(m * n)), got(size_t(m * n));
        cpu::matmul_v0_scalar(W.view, X.data(), m, ref.data());
        QuantizedRows q;
        cpu::quantize_rows(X.data(), m, k, q);
        cpu::matmul_int_scalar(W.view, q, got.data());
        std::vector<float> w(static_cast<size_t>(k));
        for (int64_t j = 0; j < n; j++) {
            dequantize_row(t, W.view.row(j), w.data(), k);
            for (int64_t i = 0; i < m; i++) {
                double bound = 0;
                for (int64_t c = 0; c < k; c++) bound += std::fabs(w[size_t(c)]) * q.block(i, c / 32).d / 2;
                const double err = std::fabs(double(got[size_t(i * n + j)]) - double(ref[size_t(i * n + j)]));
                EXPECT_LE(err, bound * 1.001 + 1e-5) << dtype_name(t) << " row " << j << " x " << i;
            }
        }
    }
}

class MatmulIntTypes : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulIntTypes, V4MatchesScalarTwin) {
    const DType t = GetParam();
    if (!cpu::int_simd_types(t)) GTEST_SKIP() << "no AVX2 in this build";
    struct Case {
        int64_t m, n, k;
    };
    // Row counts that leave a short last group of the 4- and 8-row groups (padded), odd X rows (the 1-row
    // tail of the X pairs), rows of 1 to 48 blocks; the last cases are past kParallelMinWork, so
    // OpenMP runs them.
    const Case cases[] = {{1, 1, 32},  {1, 7, 64},   {2, 5, 96},   {3, 13, 32},  {5, 33, 160},
                          {2, 3, 128}, {4, 9, 256}, {1, 401, 96}, {7, 67, 576}, {1, 70, 1536},
                          {17, 9, 160}, {37, 67, 576}};  // the rows of X in lanes (16 on zmm, 8 on ymm) and the rest
    uint32_t seed = 4321;
    for (const Case& cs : cases) {
        const test::OwnedWeight W = test::random_weight(t, cs.n, cs.k, seed++);
        const std::vector<float> X = test::random_floats(size_t(cs.m * cs.k), seed++, -4.0f, 4.0f);
        QuantizedRows q;
        cpu::quantize_rows(X.data(), cs.m, cs.k, q);
        std::vector<float> ref(size_t(cs.m * cs.n)), got(ref.size(), -99.0f), via(ref.size(), -99.0f);
        const cpu::Cost rc = cpu::matmul_int_scalar(W.view, q, ref.data());
        const cpu::Cost gc = cpu::matmul_v4_int(W.view, q, got.data());
        const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(cs.m) +
                                  " n=" + std::to_string(cs.n) + " k=" + std::to_string(cs.k);
        // Same integer products; only the f32 order of the per-block sums differs.
        test::expect_close(got.data(), ref.data(), got.size(), 1e-4, 1e-5, "v4 " + where);
        // The AVX2 form, which matmul_v4_int is where the build has no AVX-512 (4 rows a step).
        std::vector<float> ymm(ref.size(), -99.0f);
        const cpu::Cost yc = cpu::matmul_v4_int_as(W.view, q, ymm.data(), cpu::IntForm::ymm);
        test::expect_close(ymm.data(), ref.data(), ymm.size(), 1e-4, 1e-5, "v4 ymm " + where);
        EXPECT_DOUBLE_EQ(yc.bytes(), rc.bytes());
        // The two AVX-512 forms (8 rows a step): the scales by loads or by one gather, the same
        // arithmetic, so the same outputs bit for bit; matmul_v4_int is one of them (or ymm).
        std::vector<float> loads(ref.size(), -99.0f), gather(ref.size(), -99.0f);
        cpu::matmul_v4_int_as(W.view, q, loads.data(), cpu::IntForm::zmm_loads);
        cpu::matmul_v4_int_as(W.view, q, gather.data(), cpu::IntForm::zmm_gather);
        test::expect_close(gather.data(), ref.data(), gather.size(), 1e-4, 1e-5, "v4 zmm gather " + where);
        EXPECT_EQ(loads, gather) << where;
        EXPECT_EQ(got, cpu::int_zmm_kernel() ? gather : ymm) << where;
        if (!cpu::int_zmm_kernel()) {
            EXPECT_EQ(ymm, gather) << where;  // the zmm forms run as ymm
        }
        EXPECT_DOUBLE_EQ(gc.flops, 2.0 * cs.m * cs.n * cs.k);
        EXPECT_DOUBLE_EQ(gc.bytes(), rc.bytes());
        EXPECT_DOUBLE_EQ(gc.act_read, double(cs.m) * double(cs.k / 32) * cpu::kActBlockBytes);
        EXPECT_DOUBLE_EQ(gc.weight_bytes, double(cs.n) * row_bytes(t, cs.k));
        // matmul() with the integer rows takes this path.
        const cpu::Cost mc = cpu::matmul(W.view, X.data(), cs.m, &q, via.data());
        EXPECT_EQ(via, got) << where;
        EXPECT_DOUBLE_EQ(mc.act_read, gc.act_read);
        EXPECT_DOUBLE_EQ(cpu::matmul_cost(W.view, cs.m, true).act_read, gc.act_read);
    }
}

// One row of X gives, bit for bit, what the same row gives among others (2 rows of X at a time,
// or the odd last one alone; a thread's share in 4 long runs of weight rows, one per lane, 8 on
// zmm, and a padded group of the rows left): each output takes the same operations in the same
// order wherever its rows fall. Row counts that leave no remainder and 1-3 rows after the runs (and
// on zmm 4 and 7 rows, all in the padded group), with one thread and with two (kParallelMinWork is
// passed from 57 rows of 576).
TEST_P(MatmulIntTypes, OneRowOfXIsTheSameAsInABatch) {
    const DType t = GetParam();
    if (!cpu::int_simd_types(t)) GTEST_SKIP() << "no AVX2 in this build";
    const int64_t k = 576, m = 3;
    uint32_t seed = 777;
    for (int64_t n : {4, 7, 64, 401, 2050, 2051}) {
        const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
        const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
        test::expect_rows_alone_as_in_batch(W.view, X, m, k, cpu::matmul_v4_int);
    }
}

// Batched decode's rows: from 16 rows of X on, the zmm forms take them 16 at a time in the lanes
// of a vector, the ymm form from 8 rows on 8 at a time (and the rows left as above). Every row of a batch of up to 69, in the batch's order
// and shuffled, has the same bits (memcmp, so -0 and +0 differ) as the same row alone; weight row
// counts that leave short passes of 4 and 8 rows, rows of 5 and 18 blocks, one thread and two.
TEST_P(MatmulIntTypes, ManyRowsOfXInAnyOrderAreTheSameAsAlone) {
    const DType t = GetParam();
    if (!cpu::int_simd_types(t)) GTEST_SKIP() << "no AVX2 in this build";
    uint32_t seed = 991;
    for (int64_t k : {160, 576})
        for (int64_t n : {5, 67, 403})
            for (int64_t m : {8, 15, 16, 17, 37, 64, 69}) {
                const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
                const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
                for (const cpu::IntForm form : {cpu::int_form(), cpu::IntForm::ymm})
                    test::expect_any_order_as_alone(W.view, X, m, k, form, cpu::matmul_v4_int_as);
            }
}

// The integer GEMM of prompt chunks (v7_int_packed): the same integer products as the twin, each
// block scaled once in f32, so within the same tolerance as v4. Row counts that leave a short last
// panel of 6 rows of X, weight row counts that leave a short last panel of 32 (and of its two
// halves of 16), rows of 1 to 48 blocks (slices of 8 blocks and a short last one); the larger
// cases are past kParallelMinWork, so OpenMP runs them.
TEST_P(MatmulIntTypes, V7MatchesScalarTwin) {
    const DType t = GetParam();
    if (!cpu::v7_types(t)) GTEST_SKIP() << "no AVX-512 in this build";
    struct Case {
        int64_t m, n, k;
    };
    const Case cases[] = {{1, 1, 32},   {3, 13, 32},  {4, 16, 64},  {5, 33, 160},  {8, 32, 288},
                          {7, 67, 576}, {2, 17, 1536}, {37, 67, 576}, {130, 70, 96}, {113, 401, 256}};
    uint32_t seed = 5150;
    for (const Case& cs : cases) {
        const test::OwnedWeight W = test::random_weight(t, cs.n, cs.k, seed++);
        const std::vector<float> X = test::random_floats(size_t(cs.m * cs.k), seed++, -4.0f, 4.0f);
        QuantizedRows q;
        cpu::quantize_rows(X.data(), cs.m, cs.k, q);
        std::vector<float> ref(size_t(cs.m * cs.n)), got(ref.size(), -99.0f), via(ref.size(), -99.0f);
        const cpu::Cost rc = cpu::matmul_int_scalar(W.view, q, ref.data());
        const cpu::Cost gc = cpu::matmul_v7_int_packed(W.view, q, got.data());
        const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(cs.m) +
                                  " n=" + std::to_string(cs.n) + " k=" + std::to_string(cs.k);
        test::expect_close(got.data(), ref.data(), got.size(), 1e-4, 1e-5, "v7 " + where);
        EXPECT_DOUBLE_EQ(gc.flops, 2.0 * cs.m * cs.n * cs.k);
        EXPECT_DOUBLE_EQ(gc.bytes(), rc.bytes());
        // The f32 form quantizes X itself: the same outputs, and the quantizer's FLOPs besides.
        const cpu::Cost fc = cpu::matmul_v7_int_packed(W.view, X.data(), cs.m, via.data());
        EXPECT_EQ(via, got) << where;
        EXPECT_DOUBLE_EQ(fc.flops, gc.flops + cpu::quantize_rows_cost(cs.m, cs.k).flops);
        // matmul_tiled given the integer rows takes it.
        std::fill(via.begin(), via.end(), -99.0f);
        cpu::matmul_tiled(W.view, X.data(), cs.m, &q, via.data());
        EXPECT_EQ(via, got) << where;
    }
}

// Each row of Y from v7 is memcmp-equal to the same row of X multiplied alone, in the batch's
// order and shuffled (an all-zero row's signed zeros included): it takes the same operations
// wherever its row falls among the panels of 6 rows of X.
TEST_P(MatmulIntTypes, V7RowsInAnyOrderAreTheSameAsAlone) {
    const DType t = GetParam();
    if (!cpu::v7_types(t)) GTEST_SKIP() << "no AVX-512 in this build";
    uint32_t seed = 6160;
    for (int64_t k : {160, 576})
        for (int64_t n : {5, 33, 67})
            for (int64_t m : {1, 3, 4, 5, 17, 69, 130}) {
                const test::OwnedWeight W = test::random_weight(t, n, k, seed++);
                const std::vector<float> X = test::random_floats(size_t(m * k), seed++, -4.0f, 4.0f);
                test::expect_any_order_as_alone(W.view, X, m, k, cpu::int_form(), test::v7_int_packed_as);
            }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulIntTypes, ::testing::ValuesIn(kIntTypes),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// matmul() given integer rows takes the integer kernel below the type's tiled threshold (22 for the
// K-quants, 40 for Q4_0/Q4_1/Q8_0; 32 and 112 where their kernels have their AVX-512 forms) and
// from it on v7 (where the build has it, on the same integer rows) or v6; given f32 rows, every
// type's threshold is 22.
TEST(MatmulInt, IntegerKernelsBelowTheirTiledThreshold) {
    for (DType t : {DType::Q4_K, DType::Q6_K, DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
        if (!cpu::has_int_kernel(t)) GTEST_SKIP() << "no AVX2 in this build";
        const bool k_quant = cpu::int_k_simd_types(t);
        const int64_t threshold = cpu::tiled_min_rows(t);
        const int64_t int_threshold = !cpu::int_zmm_kernel() ? cpu::kTiledMinRowsInt
                                      : k_quant                ? cpu::kTiledMinRowsIntKZmm
                                                               : cpu::kTiledMinRowsIntZmm;
        EXPECT_EQ(threshold, k_quant && !cpu::int_zmm_kernel() ? cpu::kTiledMinRows : int_threshold) << dtype_name(t);
        EXPECT_EQ(cpu::tiled_min_rows(t, /*integers=*/false), cpu::kTiledMinRows) << dtype_name(t);
        const int64_t n = 9, k = 512;
        const test::OwnedWeight W = test::random_weight(t, n, k, 21);
        for (int64_t m : {int64_t(1), int64_t(3), cpu::kTiledMinRows, threshold - 1, threshold}) {
            const std::vector<float> X = test::random_floats(size_t(m * k), 22);
            QuantizedRows q;
            cpu::quantize_rows(X.data(), m, k, q);
            std::vector<float> want(size_t(m * n)), got(size_t(m * n));
            EXPECT_EQ(cpu::takes_int_input(t, m), m < threshold);
            if (m >= threshold && cpu::v7_types(t))
                cpu::matmul_v7_int_packed(W.view, q, want.data());
            else if (m >= threshold)
                cpu::matmul_v6_packed(W.view, X.data(), m, want.data());
            else if (k_quant)
                cpu::matmul_v4_int_k(W.view, q, want.data());
            else
                cpu::matmul_v4_int(W.view, q, want.data());
            cpu::matmul(W.view, X.data(), m, &q, got.data());
            EXPECT_EQ(got, want) << dtype_name(t) << " m " << m;
        }
    }
}

TEST(MatmulInt, OtherTypesIgnoreTheIntegerRows) {
    // F16 has no integer kernel: matmul() with integer rows gives exactly the f32 result.
    const int64_t m = 2, n = 9, k = 64;
    const test::OwnedWeight W = test::random_weight(DType::F16, n, k, 5);
    const std::vector<float> X = test::random_floats(size_t(m * k), 6);
    QuantizedRows q;
    cpu::quantize_rows(X.data(), m, k, q);
    std::vector<float> a(size_t(m * n)), b(size_t(m * n));
    cpu::matmul(W.view, X.data(), m, a.data());
    const cpu::Cost c = cpu::matmul(W.view, X.data(), m, &q, b.data());
    EXPECT_EQ(a, b);
    EXPECT_DOUBLE_EQ(c.act_read, 4.0 * m * k);
    EXPECT_DOUBLE_EQ(cpu::matmul_cost(W.view, m, true).act_read, 4.0 * m * k);
}

TEST(MatmulInt, RejectsMismatchedInputs) {
    const test::OwnedWeight W = test::random_weight(DType::Q4_1, 4, 64, 1);
    const test::OwnedWeight F = test::random_weight(DType::F16, 4, 64, 1);
    const std::vector<float> X = test::random_floats(96, 2);
    QuantizedRows q;
    cpu::quantize_rows(X.data(), 1, 96, q);  // k = 96, the weight wants 64
    std::vector<float> y(4);
    EXPECT_THROW(cpu::matmul_int_scalar(W.view, q, y.data()), Error);
    EXPECT_THROW(cpu::matmul_v4_int(W.view, q, y.data()), Error);
    EXPECT_THROW(cpu::matmul_v7_int_packed(W.view, q, y.data()), Error);
    cpu::quantize_rows(X.data(), 1, 64, q);
    EXPECT_THROW(cpu::matmul_v4_int(F.view, q, y.data()), Error);  // no integer kernel for F16
    EXPECT_THROW(cpu::matmul_v7_int_packed(F.view, q, y.data()), Error);
    EXPECT_THROW(cpu::matmul_tiled(W.view, X.data(), 2, &q, y.data()), Error);  // q holds 1 row, not 2
    EXPECT_THROW(cpu::matmul(W.view, X.data(), 2, &q, y.data()), Error);  // q holds 1 row, not 2
}

}  // namespace
}  // namespace ridge
