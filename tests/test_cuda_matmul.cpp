// kernels/cuda matmul variants (matmul_variants(): the tiled v1..v4 of matmul_tiled.cu, and matvec
// where m fits) against cpu::matmul_v0_scalar on seeded random weights of every CUDA type and odd
// shapes; a hand-worked product; the errors thrown before a launch; and matmul_cost against the
// CPU's formula (host only, no GPU needed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matrix.h"
#include "weights/error.h"
#include "weights/quant.h"

namespace ridge {
namespace {

using cpu::Cost;
using test::expect_close;
using test::expect_cost_eq;
using test::from_device;
using test::OwnedWeight;
using test::poisoned_floats;
using test::random_floats;
using test::random_weight;
using test::to_device;

const std::vector<DType>& cuda_types() {
    static const std::vector<DType> t = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                         DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K};
    return t;
}

// Row lengths per type: whole blocks, and for the float types also lengths no tile divides.
std::vector<int64_t> lengths_for(DType t) {
    if (t == DType::Q4_K || t == DType::Q6_K) return {256, 512};
    if (block_elems(t) == 1) return {7, 45, 32, 96, 256, 576};
    return {32, 96, 256, 576};
}
const int64_t kRows[] = {1, 3, 17, 64, 130};  // m: rows of X (tokens)
const int64_t kCols[] = {1, 33, 97, 256};     // n: rows of W (outputs)
constexpr size_t kGuard = 64;                 // floats past Y that must stay poisoned

// Whether |got - ref| <= atol + rtol*|ref| everywhere (expect_close then reports the misses).
bool all_close(const std::vector<float>& got, const std::vector<float>& ref, double atol, double rtol) {
    for (size_t i = 0; i < ref.size(); i++)
        if (!(std::fabs(double(got[i]) - double(ref[i])) <= atol + rtol * std::fabs(double(ref[i])))) return false;
    return true;
}

float max_abs(const std::vector<float>& v) {
    float a = 0.0f;
    for (float x : v) a = std::max(a, std::fabs(x));
    return a;
}

// The largest |W[j][c]| of a weight, dequantized on the CPU.
float max_abs_weight(const TensorView& W) {
    std::vector<float> row(size_t(W.ne(0)));
    float a = 0.0f;
    for (int64_t j = 0; j < W.ne(1); j++) {
        dequantize_row(W.type, W.row(j), row.data(), W.ne(0));
        a = std::max(a, max_abs(row));
    }
    return a;
}

// One variant on one case: runs it into a poisoned Y (plus a poisoned guard), then checks Y
// against ref and the guard untouched. Returns whether it passed (failures are reported).
bool check_variant(const cuda::MatmulVariant& v, const cuda::Stream& s, const cuda::DeviceMatrix& dW,
                   const TensorView& W, const cuda::DeviceBuffer& dX, int64_t m, const std::vector<float>& ref,
                   float x_max, float w_max, const std::string& what) {
    const int64_t n = W.ne(1), k = W.ne(0);
    const size_t count = size_t(m * n);
    cuda::DeviceBuffer dY = poisoned_floats(count + kGuard);
    const Cost c = v.fn(s, dW.view, dX.as<float>(), m, dY.as<float>());
    s.sync();
    std::vector<float> all = from_device<float>(dY, count + kGuard);
    const std::vector<float> Y(all.begin(), all.begin() + ptrdiff_t(count));
    bool ok = true;

    const double scale = std::sqrt(double(k)) * double(x_max) * double(w_max);  // typical |Y| bound
    double atol, rtol;
    if (v.exact_f32) {  // f32 products, sums in another order than the reference's double
        atol = 1e-4 * scale;
        rtol = 1e-4;
    } else {            // bf16 operands: each product off by up to 2^-8 relative
        atol = scale * std::ldexp(1.0, -8);
        rtol = std::ldexp(1.0, -8);
        if (count >= 256) {  // ||Y - ref|| / ||ref||, where ||ref|| is a sum over enough elements
            double num = 0.0, den = 0.0;
            for (size_t i = 0; i < count; i++) {
                num += (double(Y[i]) - double(ref[i])) * (double(Y[i]) - double(ref[i]));
                den += double(ref[i]) * double(ref[i]);
            }
            const double rel = den > 0.0 ? std::sqrt(num / den) : std::sqrt(num);
            if (!(rel < 1e-2)) {
                ADD_FAILURE() << what << ": relative error ||Y - ref|| / ||ref|| = " << rel << ", want < 0.01";
                ok = false;
            }
        }
    }
    if (!all_close(Y, ref, atol, rtol)) {
        expect_close(Y.data(), ref.data(), count, atol, rtol, what);
        ok = false;
    }
    uint32_t poison;
    std::memset(&poison, 0xff, sizeof poison);
    for (size_t i = count; i < count + kGuard; i++) {
        uint32_t bits;
        std::memcpy(&bits, &all[i], sizeof bits);
        if (bits != poison) {
            ADD_FAILURE() << what << ": wrote past Y, at element " << i << " of " << count;
            ok = false;
            break;
        }
    }
    const Cost want = cpu::matmul_cost(W, m);
    if (c.flops != want.flops || c.weight_bytes != want.weight_bytes || c.act_read != want.act_read ||
        c.act_written != want.act_written) {
        expect_cost_eq(c, want, what + ": cost");
        ok = false;
    }
    return ok;
}

class CudaMatmulTypes : public ::testing::TestWithParam<DType> {};

// Every variant, every shape of the matrix above, one weight type per test. A variant that fails
// one case is reported once and skipped for the rest, so one bug does not print hundreds of lines.
TEST_P(CudaMatmulTypes, EveryVariantMatchesScalarReference) {
    RIDGE_REQUIRE_GPU();
    const DType type = GetParam();
    const std::string type_name(dtype_name(type));
    cuda::Stream s;
    std::vector<std::string> failed;
    int runs = 0;
    uint32_t seed = 7000 + 97 * uint32_t(type);
    for (int64_t k : lengths_for(type)) {
        for (int64_t n : kCols) {
            const OwnedWeight w = random_weight(type, n, k, seed++);
            const cuda::DeviceMatrix dW = cuda::upload_matrix(w.view);
            const float w_max = max_abs_weight(w.view);
            for (int64_t m : kRows) {
                const std::vector<float> X = random_floats(size_t(m * k), seed++);
                std::vector<float> ref(size_t(m * n));
                cpu::matmul_v0_scalar(w.view, X.data(), m, ref.data());
                const cuda::DeviceBuffer dX = to_device(X);
                for (const cuda::MatmulVariant& v : cuda::matmul_variants()) {
                    if (m > v.max_rows) continue;  // matvec beyond its rows: its own test covers it
                    if (std::find(failed.begin(), failed.end(), v.name) != failed.end()) continue;
                    const std::string what = v.name + " " + type_name + " m=" + std::to_string(m) +
                                             " n=" + std::to_string(n) + " k=" + std::to_string(k);
                    runs++;
                    if (!check_variant(v, s, dW, w.view, dX, m, ref, max_abs(X), w_max, what)) {
                        failed.push_back(v.name);
                        ADD_FAILURE() << v.name << " " << type_name << ": first failure at " << what
                                      << "; its later cases are skipped";
                    }
                }
            }
        }
    }
    EXPECT_GT(runs, 0);
}

std::string type_test_name(const ::testing::TestParamInfo<DType>& info) { return std::string(dtype_name(info.param)); }
INSTANTIATE_TEST_SUITE_P(AllCudaTypes, CudaMatmulTypes, ::testing::ValuesIn(cuda_types()), type_test_name);

TEST(CudaMatmul, HandWorkedF32) {
    RIDGE_REQUIRE_GPU();
    // W (n = 2 rows, k = 3) = [[1, 2, 3], [4, 5, 6]]; X (m = 2) = [[1, 0, -1], [0.5, 0.5, 0.5]]
    //   -> Y = [[-2, -2], [3, 7.5]]: every value and product exact in f32 and in bf16.
    std::vector<float> w = {1, 2, 3, 4, 5, 6};
    TensorView W{"w", DType::F32, {3, 2}, reinterpret_cast<const uint8_t*>(w.data()), w.size() * 4};
    const cuda::DeviceMatrix dW = cuda::upload_matrix(W);
    const cuda::DeviceBuffer dX = to_device(std::vector<float>{1, 0, -1, 0.5f, 0.5f, 0.5f});
    cuda::Stream s;
    for (const cuda::MatmulVariant& v : cuda::matmul_variants()) {
        cuda::DeviceBuffer dY = poisoned_floats(4);
        const Cost c = v.fn(s, dW.view, dX.as<float>(), 2, dY.as<float>());
        s.sync();
        const std::vector<float> Y = from_device<float>(dY, 4);
        EXPECT_EQ(Y[0], -2.0f) << v.name;
        EXPECT_EQ(Y[1], -2.0f) << v.name;
        EXPECT_EQ(Y[2], 3.0f) << v.name;
        EXPECT_EQ(Y[3], 7.5f) << v.name;
        EXPECT_DOUBLE_EQ(c.flops, 2.0 * 2 * 2 * 3) << v.name;  // 2*m*n*k
    }
}

TEST(CudaMatmul, BadCallsThrowBeforeLaunching) {
    RIDGE_REQUIRE_GPU();
    const OwnedWeight w = random_weight(DType::Q4_0, 4, 64, 11);
    const cuda::DeviceMatrix dW = cuda::upload_matrix(w.view);
    const cuda::DeviceBuffer dX = to_device(random_floats(64 * 2, 12));
    cuda::DeviceBuffer dY = poisoned_floats(8);
    cuda::Stream s;
    using Fn = Cost (*)(const cuda::Stream&, const cuda::Matrix&, const float*, int64_t, float*);
    const Fn tiled[] = {cuda::matmul_v1_naive, cuda::matmul_v2_smem, cuda::matmul_v3_regblock, cuda::matmul_v4_mma};
    cuda::Matrix q5 = dW.view;
    q5.type = DType::Q5_0;  // a type the CUDA kernels do not read
    cuda::Matrix ragged = dW.view;
    ragged.k = 48;  // not whole 32-element blocks
    for (Fn fn : tiled) {
        EXPECT_THROW(fn(s, dW.view, dX.as<float>(), 0, dY.as<float>()), Error);
        EXPECT_THROW(fn(s, dW.view, dX.as<float>(), -3, dY.as<float>()), Error);
        EXPECT_THROW(fn(s, q5, dX.as<float>(), 2, dY.as<float>()), Error);
        EXPECT_THROW(fn(s, ragged, dX.as<float>(), 2, dY.as<float>()), Error);
        EXPECT_THROW(fn(s, dW.view, nullptr, 2, dY.as<float>()), Error);
    }
    try {
        cuda::matmul_v3_regblock(s, dW.view, dX.as<float>(), 0, dY.as<float>());
        ADD_FAILURE() << "matmul_v3_regblock took m = 0";
    } catch (const Error& e) {  // the message names the variant and the value
        EXPECT_NE(std::string(e.what()).find("matmul_v3_regblock"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("m = 0"), std::string::npos) << e.what();
    }
    s.sync();  // nothing was launched, nothing failed
    const std::vector<float> Y = from_device<float>(dY, 8);
    for (float y : Y) EXPECT_TRUE(std::isnan(y)) << "a rejected call wrote Y";
}

// No GPU needed: the cost reads only the Matrix's type and sizes (packed here on the host).
TEST(CudaMatmul, CostIsTheCpuFormula) {
    for (DType t : cuda_types()) {
        const OwnedWeight w = random_weight(t, 5, 256, 21);
        std::vector<uint8_t> bytes(cuda::matrix_layout(t, 5, 256).total);
        const cuda::Matrix M = cuda::pack_matrix(w.view, bytes.data(), bytes.data());
        for (int64_t m : {1, 7, 130})
            expect_cost_eq(cuda::matmul_cost(M, m), cpu::matmul_cost(w.view, m),
                           std::string(dtype_name(t)) + " m=" + std::to_string(m));
    }
}

}  // namespace
}  // namespace ridge
