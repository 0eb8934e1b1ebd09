// The GPU's decode matvec (kernels/cuda/matmul.h: matvec) against the CPU's scalar twin for every
// weight type the CUDA kernels read, 1 to kMatvecMaxRows rows of X, odd row counts and lengths,
// outputs poisoned first; and its cost against the CPU's. Skipped where there is no CUDA device
// (the cost test runs anyway: it needs none).
#include <gtest/gtest.h>

#include <cstring>

#include <cmath>
#include <vector>

#include "cuda_test_util.h"
#include "kernel_test_util.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cuda/matmul.h"
#include "weights/error.h"

namespace ridge {
namespace {

using test::from_device;
using test::random_floats;
using test::to_device;

TEST(CudaMatvec, CostIsTheCpuCost) {  // no GPU needed
    for (DType t : {DType::F32, DType::Q4_1, DType::Q6_K}) {
        const test::OwnedWeight w = test::random_weight(t, 3, 256, 1);
        cuda::Matrix m;
        m.type = t, m.k = 256, m.n = 3;
        for (int64_t rows : {1, 5, 300}) {
            const cpu::Cost a = cuda::matmul_cost(m, rows), b = cpu::matmul_cost(w.view, rows);
            EXPECT_DOUBLE_EQ(a.flops, b.flops);
            EXPECT_DOUBLE_EQ(a.weight_bytes, b.weight_bytes);
            EXPECT_DOUBLE_EQ(a.bytes(), b.bytes());
        }
    }
}

TEST(CudaMatvec, MatchesScalarForEveryTypeAndRowCount) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    uint32_t seed = 1000;
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K,
                    DType::Q6_K})
        for (int64_t k : {32, 576, 1536, 45, 172}) {
            if (k % block_elems(t) != 0) continue;          // K-quants: whole 256-element blocks
            if (k % 32 != 0 && block_elems(t) != 1) continue;
            for (int64_t n : {1, 7, 97}) {
                const test::OwnedWeight w = test::random_weight(t, n, k, seed++);
                const cuda::DeviceMatrix dw = cuda::upload_matrix(w.view);
                for (int64_t m : {int64_t(1), int64_t(2), int64_t(5), cuda::kMatvecMaxRows}) {
                    const auto x = random_floats(size_t(m * k), seed++, -2, 2);
                    std::vector<float> ref(size_t(m * n));
                    cpu::matmul_v0_scalar(w.view, x.data(), m, ref.data());
                    cuda::DeviceBuffer dx = to_device(x), dy = test::poisoned_floats(ref.size());
                    cuda::matvec(s, dw.view, dx.as<float>(), m, dy.as<float>());
                    s.sync();
                    const std::vector<float> got = from_device<float>(dy, ref.size());
                    test::expect_close(got.data(), ref.data(), ref.size(), 1e-4 * std::sqrt(double(k)), 1e-4,
                                       std::string("matvec ") + std::string(dtype_name(t)) + " k=" + std::to_string(k) +
                                           " n=" + std::to_string(n) + " m=" + std::to_string(m));
                }
            }
        }
}

// v2 issues its loads earlier but computes each block as matvec does: the same outputs bit for bit.
// The fused launch gives each output what v2 gives it alone, whatever its neighbours.
TEST(CudaMatvec, InflightAndFusedGiveMatvecsOutputsBitForBit) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    uint32_t seed = 3000;
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K,
                    DType::Q6_K}) {
        const int64_t k = 2048;  // 64 blocks: two passes of kInflight blocks per lane
        const int64_t ns[3] = {97, 16, 33};
        std::vector<test::OwnedWeight> w;
        std::vector<cuda::DeviceMatrix> dw;
        for (int64_t n : ns) w.push_back(test::random_weight(t, n, k, seed++));
        for (const auto& x : w) dw.push_back(cuda::upload_matrix(x.view));
        for (int64_t m : {int64_t(1), int64_t(3), cuda::kMatvecMaxRows}) {
            const auto x = random_floats(size_t(m * k), seed++, -2, 2);
            cuda::DeviceBuffer dx = to_device(x);
            std::vector<cuda::DeviceBuffer> y1, y2, yf;
            cuda::MatvecOut outs[3];
            for (int o = 0; o < 3; o++) {
                y1.push_back(test::poisoned_floats(size_t(m * ns[o])));
                y2.push_back(test::poisoned_floats(size_t(m * ns[o])));
                yf.push_back(test::poisoned_floats(size_t(m * ns[o])));
                cuda::matvec(s, dw[size_t(o)].view, dx.as<float>(), m, y1.back().as<float>());
                cuda::matvec_v2_inflight(s, dw[size_t(o)].view, dx.as<float>(), m, y2.back().as<float>());
                outs[o] = {dw[size_t(o)].view, yf.back().as<float>()};
            }
            Cost costs[3];
            cuda::matvec_fused(s, outs, 3, dx.as<float>(), m, costs);
            s.sync();
            for (int o = 0; o < 3; o++) {
                const size_t len = size_t(m * ns[o]);
                const auto a = from_device<float>(y1[size_t(o)], len), b = from_device<float>(y2[size_t(o)], len),
                           c = from_device<float>(yf[size_t(o)], len);
                EXPECT_EQ(std::memcmp(a.data(), b.data(), len * 4), 0) << dtype_name(t) << " m=" << m << " output " << o;
                EXPECT_EQ(std::memcmp(a.data(), c.data(), len * 4), 0) << dtype_name(t) << " m=" << m << " output " << o;
                EXPECT_DOUBLE_EQ(costs[o].flops, cuda::matmul_cost(dw[size_t(o)].view, m).flops);
            }
        }
    }
}

TEST(CudaMatvec, RejectsRowCountsOutsideItsRange) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    const test::OwnedWeight w = test::random_weight(DType::Q4_1, 4, 64, 3);
    const cuda::DeviceMatrix dw = cuda::upload_matrix(w.view);
    cuda::DeviceBuffer x(64 * 16 * sizeof(float)), y(4 * 16 * sizeof(float));
    EXPECT_THROW(cuda::matvec(s, dw.view, x.as<float>(), 0, y.as<float>()), Error);
    EXPECT_THROW(cuda::matvec(s, dw.view, x.as<float>(), cuda::kMatvecMaxRows + 1, y.as<float>()), Error);
}

}  // namespace
}  // namespace ridge
