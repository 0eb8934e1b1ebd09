// matmul / matvec: every variant against the scalar reference (v0) for every weight type on
// seeded random input with odd sizes, plus hand-worked products and the cost formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/matmul.h"
#include "kernel_test_util.h"
#include "weights/error.h"

namespace ridge {
namespace {

using cpu::Cost;
using test::expect_close;

TEST(Matmul, HandWorkedF32) {
    // W (2 rows, k = 3) = [[1, 2, 3], [4, 5, 6]]; x = [1, 0, -1] -> y = [-2, -2]; x2 = [1, 1, 1] -> [6, 15].
    std::vector<float> w = {1, 2, 3, 4, 5, 6};
    TensorView W{"w", DType::F32, {3, 2}, reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4};
    std::vector<float> X = {1, 0, -1, 1, 1, 1};  // (m=2, k=3)
    for (const auto& v : cpu::matmul_variants()) {
        if (!v.supports(DType::F32)) continue;
        std::vector<float> Y(4, -99.0f);
        const Cost c = v.fn(W, X.data(), 2, Y.data());
        EXPECT_FLOAT_EQ(Y[0], -2.0f) << v.name;
        EXPECT_FLOAT_EQ(Y[1], -2.0f) << v.name;
        EXPECT_FLOAT_EQ(Y[2], 6.0f) << v.name;
        EXPECT_FLOAT_EQ(Y[3], 15.0f) << v.name;
        EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 2 * 3) << v.name;                 // 2*m*n*k
        EXPECT_DOUBLE_EQ(c.bytes(), 2 * 3 * 4 + 4.0 * 2 * 3 + 4.0 * 2 * 2) << v.name;  // W + X + Y
        EXPECT_DOUBLE_EQ(c.weight_bytes, 2 * 3 * 4) << v.name;
        EXPECT_DOUBLE_EQ(c.memory_bytes(), 2 * 3 * 4) << v.name;  // the weights; activations stay in cache
    }
}

TEST(Matmul, HandWorkedQ8_0ExactIntegers) {
    // Rows whose largest magnitude is 127 quantize to scale 1 exactly: row j element c = c*8 - 127 + j
    // for j in {0}; and row 1 = all 127. With x = ones(32): sum_c (8c - 127) = 8*496 - 127*32 = -96.
    const int64_t k = 32;
    std::vector<float> rows(2 * k);
    for (int c = 0; c < k; c++) {
        rows[c] = float(c * 8 - 127);
        rows[k + c] = 127.0f;
    }
    std::vector<uint8_t> q(2 * row_bytes(DType::Q8_0, k));
    quantize_row(DType::Q8_0, rows.data(), q.data(), k);
    quantize_row(DType::Q8_0, rows.data() + k, q.data() + row_bytes(DType::Q8_0, k), k);
    TensorView W{"q8", DType::Q8_0, {k, 2}, q.data(), q.size()};
    std::vector<float> x(k, 1.0f), y(2);
    for (const auto& v : cpu::matmul_variants()) {
        if (!v.supports(DType::Q8_0)) continue;
        v.fn(W, x.data(), 1, y.data());
        EXPECT_FLOAT_EQ(y[0], -96.0f) << v.name;
        EXPECT_FLOAT_EQ(y[1], 127.0f * 32) << v.name;
    }
    cpu::matvec(W, x.data(), y.data());
    EXPECT_FLOAT_EQ(y[0], -96.0f);
}

struct Case {
    int64_t m, n, k;
};

class MatmulAllTypes : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulAllTypes, VariantsMatchScalarReference) {
    const DType t = GetParam();
    const int64_t blk = block_elems(t);
    // Small odd cases run on one thread; the last of each list is past kParallelMinWork, so the
    // OpenMP paths run too.
    const std::vector<Case> cases = blk == 256 ? std::vector<Case>{{1, 5, 256}, {3, 17, 512}, {7, 9, 256}, {5, 31, 512}}
                                               : std::vector<Case>{{1, 7, 64}, {3, 13, 96}, {5, 33, 160}, {17, 3, 32},
                                                                   {9, 67, 96}, {1, 401, 96}};
    uint32_t seed = 1234;
    for (const Case& cs : cases) {
        const test::OwnedWeight W = test::random_weight(t, cs.n, cs.k, seed++);
        const std::vector<float> X = test::random_floats(size_t(cs.m * cs.k), seed++);
        std::vector<float> ref(size_t(cs.m * cs.n));
        const Cost ref_cost = cpu::matmul_v0_scalar(W.view, X.data(), cs.m, ref.data());
        const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(cs.m) +
                                  " n=" + std::to_string(cs.n) + " k=" + std::to_string(cs.k);
        for (const auto& v : cpu::matmul_variants()) {
            if (!v.supports(t)) continue;
            std::vector<float> got(ref.size(), -99.0f);
            const Cost c = v.fn(W.view, X.data(), cs.m, got.data());
            expect_close(got.data(), ref.data(), got.size(), 1e-4, 1e-4, v.name + " " + where);
            EXPECT_DOUBLE_EQ(c.flops, ref_cost.flops) << v.name;
            EXPECT_DOUBLE_EQ(c.bytes(), ref_cost.bytes()) << v.name;
        }
        std::vector<float> got(ref.size());
        cpu::matmul(W.view, X.data(), cs.m, got.data());
        expect_close(got.data(), ref.data(), got.size(), 1e-4, 1e-4, "matmul " + where);
        // Decode is the same product one row at a time.
        for (int64_t i = 0; i < cs.m; i++) {
            std::vector<float> y(static_cast<size_t>(cs.n));
            cpu::matvec(W.view, X.data() + i * cs.k, y.data());
            expect_close(y.data(), ref.data() + i * cs.n, y.size(), 1e-4, 1e-4, "matvec row " + where);
        }
        EXPECT_DOUBLE_EQ(ref_cost.flops, 2.0 * cs.m * cs.n * cs.k);
        EXPECT_DOUBLE_EQ(ref_cost.weight_bytes, double(cs.n) * row_bytes(t, cs.k));  // stored format
        EXPECT_DOUBLE_EQ(ref_cost.act_read, 4.0 * cs.m * cs.k);
        EXPECT_DOUBLE_EQ(ref_cost.act_written, 4.0 * cs.m * cs.n);
    }
}

// matmul_rows is row-exact: each row of Y is the same, bit for bit, whether it is computed alone,
// among 12 other rows, or in another order (what makes batched decode repeat a lone sequence's
// tokens). With f32 input and, where the type has an integer kernel, with 16-bit integer input.
TEST_P(MatmulAllTypes, RowsAreExactWhateverTheirNeighbours) {
    const DType t = GetParam();
    const int64_t k = block_elems(t) == 256 ? 512 : 160, n = 67, m = 13;
    const test::OwnedWeight W = test::random_weight(t, n, k, 77);
    const std::vector<float> X = test::random_floats(size_t(m * k), 78);
    std::vector<float> X_rev(X.size());  // the rows in reverse order
    for (int64_t i = 0; i < m; i++) std::copy_n(X.data() + i * k, k, X_rev.data() + (m - 1 - i) * k);
    for (bool integers : {false, true}) {
        if (integers && !cpu::has_int_kernel(t)) continue;
        auto run = [&](const float* x, int64_t rows) {
            cpu::QuantizedRows xq;
            if (integers) cpu::quantize_rows(x, rows, k, xq);
            std::vector<float> y(size_t(rows * n));
            cpu::matmul_rows(W.view, x, rows, integers ? &xq : nullptr, y.data());
            return y;
        };
        const std::vector<float> all = run(X.data(), m), rev = run(X_rev.data(), m);
        for (int64_t i = 0; i < m; i++) {
            const std::vector<float> one = run(X.data() + i * k, 1);
            const std::string where = std::string(dtype_name(t)) + (integers ? " int16" : " f32") + " row " +
                                      std::to_string(i);
            for (int64_t j = 0; j < n; j++) {
                ASSERT_EQ(all[size_t(i * n + j)], one[size_t(j)]) << where << " col " << j << " (13 rows vs alone)";
                ASSERT_EQ(rev[size_t((m - 1 - i) * n + j)], one[size_t(j)]) << where << " col " << j << " (reversed)";
            }
        }
    }
}

// Many rows of f32 input through the row kernels (matmul_rows; the F16 / BF16 / F32 rows in the
// lanes from 16 rows of X, 8 in an AVX2 build): each row of batches of up to 69 rows, in order and
// shuffled, memcmp-equal to the same row alone, with row lengths whose blocks of 8 do not fill the
// 4 accumulators (200: 25 blocks) and one with a scalar tail (k = 77, row by row).
TEST(Matmul, ElementTypesManyRowsInAnyOrderAreTheSameAsAlone) {
    uint32_t seed = 501;
    for (DType t : {DType::F32, DType::F16, DType::BF16})
        for (const Case& cs : {Case{8, 9, 64}, Case{16, 5, 200}, Case{17, 33, 160}, Case{37, 7, 200}, Case{69, 6, 96},
                               Case{20, 3, 77}}) {
            const test::OwnedWeight W = test::random_weight(t, cs.n, cs.k, seed++);
            std::vector<float> X = test::random_floats(size_t(cs.m * cs.k), seed++);
            std::fill_n(X.begin() + 3 * cs.k, cs.k, 0.0f);  // a row of zeros: the signed zeros
            std::vector<int64_t> order(static_cast<size_t>(cs.m));
            for (int64_t i = 0; i < cs.m; i++) order[size_t(i)] = (i * 29 + 7) % cs.m;
            std::vector<float> X_shuffled(X.size());
            for (int64_t i = 0; i < cs.m; i++) std::copy_n(X.data() + order[size_t(i)] * cs.k, cs.k, X_shuffled.data() + i * cs.k);
            auto run = [&](const float* x, int64_t rows) {
                std::vector<float> y(size_t(rows * cs.n), -99.0f);
                cpu::matmul_rows(W.view, x, rows, nullptr, y.data());
                return y;
            };
            const std::vector<float> batch = run(X.data(), cs.m), shuffled = run(X_shuffled.data(), cs.m);
            for (int64_t i = 0; i < cs.m; i++) {
                const std::vector<float> alone = run(X.data() + order[size_t(i)] * cs.k, 1);
                const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(cs.m) + " k=" +
                                          std::to_string(cs.k) + " row " + std::to_string(order[size_t(i)]);
                const size_t bytes = sizeof(float) * size_t(cs.n);
                ASSERT_EQ(std::memcmp(alone.data(), batch.data() + order[size_t(i)] * cs.n, bytes), 0) << where << " (in the batch)";
                ASSERT_EQ(std::memcmp(alone.data(), shuffled.data() + i * cs.n, bytes), 0) << where << " (shuffled)";
            }
        }
}

// matmul() keeps F16 and BF16 on the row-exact kernel below their tiled threshold (128 rows where
// that kernel has its zmm lanes, else 22, as F32): there a row is bit for bit what it is alone.
TEST(Matmul, ElementTypesRowExactBelowTheirTiledThreshold) {
    for (DType t : {DType::F16, DType::BF16, DType::F32}) {
        const int64_t threshold = cpu::tiled_min_rows(t);
        const bool lanes = cpu::int_zmm_kernel() && t != DType::F32;
        EXPECT_EQ(threshold, lanes ? cpu::kTiledMinRowsFloatZmm : cpu::kTiledMinRows) << dtype_name(t);
        const int64_t n = 5, k = 96, m = threshold - 1;
        const test::OwnedWeight W = test::random_weight(t, n, k, 611);
        const std::vector<float> X = test::random_floats(size_t(m * k), 612);
        std::vector<float> all(size_t(m * n)), one(static_cast<size_t>(n));
        cpu::matmul(W.view, X.data(), m, all.data());
        for (int64_t i = 0; i < m; i += 7) {
            cpu::matmul(W.view, X.data() + i * k, 1, one.data());
            ASSERT_EQ(std::memcmp(one.data(), all.data() + i * n, sizeof(float) * size_t(n)), 0) << dtype_name(t) << " row " << i;
        }
    }
}

// v6_packed (the prefill GEMM) rounds a row the same whether it is alone, among 13 rows (two full
// 6-row panels and a partial one) or in another panel position.
TEST_P(MatmulAllTypes, PackedGemmRowsDoNotDependOnM) {
    const DType t = GetParam();
    const int64_t k = block_elems(t) == 256 ? 512 : 160, n = 37, m = 13;
    const test::OwnedWeight W = test::random_weight(t, n, k, 79);
    const std::vector<float> X = test::random_floats(size_t(m * k), 80);
    std::vector<float> X_rev(X.size());
    for (int64_t i = 0; i < m; i++) std::copy_n(X.data() + i * k, k, X_rev.data() + (m - 1 - i) * k);
    std::vector<float> all(size_t(m * n)), rev(all.size()), one(static_cast<size_t>(n));
    cpu::matmul_v6_packed(W.view, X.data(), m, all.data());
    cpu::matmul_v6_packed(W.view, X_rev.data(), m, rev.data());
    for (int64_t i = 0; i < m; i++) {
        cpu::matmul_v6_packed(W.view, X.data() + i * k, 1, one.data());
        for (int64_t j = 0; j < n; j++) {
            ASSERT_EQ(all[size_t(i * n + j)], one[size_t(j)]) << dtype_name(t) << " row " << i << " col " << j;
            ASSERT_EQ(rev[size_t((m - 1 - i) * n + j)], one[size_t(j)]) << dtype_name(t) << " row " << i << " (reversed)";
        }
    }
}

INSTANTIATE_TEST_SUITE_P(Types, MatmulAllTypes, ::testing::ValuesIn(test::all_weight_types()),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(Matmul, ElementTypesTakeRowLengthsNotMultipleOf8) {
    // F16 / F32 rows have no blocks: k = 37 and 5 leave a tail past the 8-lane SIMD loop (v3).
    uint32_t seed = 99;
    for (DType t : {DType::F32, DType::F16})
        for (const Case& cs : {Case{1, 9, 37}, Case{4, 11, 5}, Case{6, 90, 77}}) {
            const test::OwnedWeight W = test::random_weight(t, cs.n, cs.k, seed++);
            const std::vector<float> X = test::random_floats(size_t(cs.m * cs.k), seed++);
            std::vector<float> ref(size_t(cs.m * cs.n));
            cpu::matmul_v0_scalar(W.view, X.data(), cs.m, ref.data());
            const std::string where = std::string(dtype_name(t)) + " m=" + std::to_string(cs.m) +
                                      " n=" + std::to_string(cs.n) + " k=" + std::to_string(cs.k);
            for (const auto& v : cpu::matmul_variants()) {
                if (!v.supports(t)) continue;
                std::vector<float> got(ref.size(), -99.0f);
                v.fn(W.view, X.data(), cs.m, got.data());
                expect_close(got.data(), ref.data(), got.size(), 1e-4, 1e-4, v.name + " " + where);
            }
        }
}

TEST(Matmul, RejectsRowLengthNotMultipleOfBlock) {
    std::vector<uint8_t> bytes(1024);
    TensorView W{"bad", DType::Q4_0, {48, 2}, bytes.data(), bytes.size()};
    std::vector<float> x(48), y(2);
    EXPECT_THROW(cpu::matmul(W, x.data(), 1, y.data()), Error);
}

TEST(Matmul, EigenVariantRejectsQuantizedWeights) {
    const test::OwnedWeight W = test::random_weight(DType::Q4_1, 2, 32, 7);
    std::vector<float> x(32), y(2);
    EXPECT_THROW(cpu::matmul_v2_eigen(W.view, x.data(), 1, y.data()), Error);
}

}  // namespace
}  // namespace ridge
