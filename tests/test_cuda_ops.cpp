// The GPU's element-wise and row-wise kernels (kernels/cuda/ops.h) against the CPU's scalar twins
// on seeded random data, odd sizes included, with every output poisoned first. Skipped, saying
// why, where there is no CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "cuda_test_util.h"
#include "kernel_test_util.h"
#include "kernels/cpu/ops.h"
#include "kernels/cuda/ops.h"

namespace ridge {
namespace {

using test::expect_close;
using test::from_device;
using test::random_floats;
using test::to_device;

TEST(CudaOps, EmbedMatchesScalarForEveryType) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q4_K,
                    DType::Q6_K}) {
        const int64_t d = block_elems(t) == 256 ? 512 : 96, n_vocab = 13;
        const test::OwnedWeight T = test::random_weight(t, n_vocab, d, 31 + uint32_t(t));
        const std::vector<int32_t> tokens = {12, 0, 5, 5, 3, 7, 1};
        const int64_t m = int64_t(tokens.size());
        std::vector<float> ref(size_t(m * d));
        const cpu::Cost c0 = cpu::embed_v0_scalar(T.view, tokens.data(), m, ref.data());
        const cuda::DeviceMatrix table = cuda::upload_matrix(T.view);
        const cuda::DeviceBuffer ids = to_device(tokens);
        cuda::DeviceBuffer out = test::poisoned_floats(ref.size());
        const cpu::Cost c1 = cuda::embed(s, table.view, ids.as<int32_t>(), m, out.as<float>());
        s.sync();
        const std::vector<float> got = from_device<float>(out, ref.size());
        expect_close(got.data(), ref.data(), ref.size(), 1e-6, 1e-6, std::string("embed ") + std::string(dtype_name(t)));
        test::expect_cost_eq(c1, c0, "embed");
    }
}

TEST(CudaOps, RmsNormMatchesScalar) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    for (int64_t d : {1, 7, 67, 576, 4096}) {
        const int64_t m = 5;
        const auto x = random_floats(size_t(m * d), 11 + uint32_t(d), -3, 3);
        const auto w = random_floats(size_t(d), 12 + uint32_t(d), 0.5, 1.5);
        std::vector<float> ref(x.size());
        const cpu::Cost c0 = cpu::rmsnorm_v0_scalar(x.data(), w.data(), m, d, 1e-5f, ref.data());
        cuda::DeviceBuffer dx = to_device(x), dw = to_device(w), dy = test::poisoned_floats(x.size());
        const cpu::Cost c1 = cuda::rmsnorm(s, dx.as<float>(), dw.as<float>(), m, d, 1e-5f, dy.as<float>());
        cuda::rmsnorm(s, dx.as<float>(), dw.as<float>(), m, d, 1e-5f, dx.as<float>());  // in place
        s.sync();
        expect_close(from_device<float>(dy, x.size()).data(), ref.data(), ref.size(), 1e-6, 1e-5, "rmsnorm");
        expect_close(from_device<float>(dx, x.size()).data(), ref.data(), ref.size(), 1e-6, 1e-5, "rmsnorm in place");
        test::expect_cost_eq(c1, c0, "rmsnorm");
    }
}

TEST(CudaOps, RopeMatchesScalarInBothStyles) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    for (RopeStyle style : {RopeStyle::Norm, RopeStyle::Neox})
        for (int head_dim : {8, 64, 72}) {
            const int n_heads = 9, rope_dim = head_dim == 72 ? 64 : head_dim;  // 72: a partial rotation
            const cpu::RopeParams p{head_dim, rope_dim, 100000.0f, style};
            const std::vector<int32_t> pos = {0, 1, 17, 511, 4000, 3};
            const int64_t m = int64_t(pos.size());
            const auto x = random_floats(size_t(m * n_heads * head_dim), 5 + uint32_t(head_dim), -2, 2);
            std::vector<float> ref = x;
            const cpu::Cost c0 = cpu::rope_v0_scalar(ref.data(), pos.data(), m, n_heads, p);
            cuda::DeviceBuffer dx = to_device(x), dp = to_device(pos);
            const cpu::Cost c1 = cuda::rope(s, dx.as<float>(), dp.as<int32_t>(), m, n_heads, p);
            s.sync();
            expect_close(from_device<float>(dx, x.size()).data(), ref.data(), ref.size(), 1e-5, 1e-5, "rope");
            test::expect_cost_eq(c1, c0, "rope");
        }
}

TEST(CudaOps, SwigluAndAddMatchScalar) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    for (int64_t n : {1, 31, 1536 * 3 + 5}) {
        const auto g = random_floats(size_t(n), 1 + uint32_t(n), -6, 6), u = random_floats(size_t(n), 2 + uint32_t(n));
        std::vector<float> ref(static_cast<size_t>(n));
        const cpu::Cost c0 = cpu::swiglu_v0_scalar(g.data(), u.data(), n, ref.data());
        cuda::DeviceBuffer dg = to_device(g), du = to_device(u), dout = test::poisoned_floats(size_t(n));
        const cpu::Cost c1 = cuda::swiglu(s, dg.as<float>(), du.as<float>(), n, dout.as<float>());
        s.sync();
        expect_close(from_device<float>(dout, size_t(n)).data(), ref.data(), ref.size(), 1e-6, 1e-5, "swiglu");
        test::expect_cost_eq(c1, c0, "swiglu");

        std::vector<float> sum = g;
        cpu::add_v0_scalar(sum.data(), u.data(), n);
        const cpu::Cost c2 = cuda::add(s, dg.as<float>(), du.as<float>(), n);
        s.sync();
        EXPECT_EQ(from_device<float>(dg, size_t(n)), sum);  // one f32 add each: exact
        test::expect_cost_eq(c2, cpu::add_cost(n), "add");
    }
}

TEST(CudaOps, AddBiasMatchesTheCpuBitForBit) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    for (auto [m, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 16}, {7, 1024 + 3}}) {
        const auto x = random_floats(size_t(m * n), 5 + uint32_t(n)), b = random_floats(size_t(n), 6 + uint32_t(n));
        std::vector<float> want = x;
        const cpu::Cost c0 = cpu::add_bias(want.data(), b.data(), m, n);
        cuda::DeviceBuffer dx = to_device(x), db = to_device(b);
        const cpu::Cost c1 = cuda::add_bias(s, dx.as<float>(), db.as<float>(), m, n);
        s.sync();
        EXPECT_EQ(from_device<float>(dx, size_t(m * n)), want) << m << " x " << n;  // one f32 add each
        test::expect_cost_eq(c1, c0, "add_bias");
    }
}

TEST(CudaOps, ArgmaxTakesTheLowestIndexOnTiesAndSkipsNaN) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream s;
    const int64_t n = 49152 + 7;
    std::vector<float> logits = random_floats(size_t(3 * n), 77, -10, 10);
    logits[size_t(1000)] = 50, logits[size_t(40000)] = 50;            // row 0: a tie, lowest wins
    logits[size_t(n + 5)] = std::numeric_limits<float>::quiet_NaN();  // row 1: NaN never wins
    logits[size_t(n + n - 1)] = 60;                                   // row 1: the last element
    logits[size_t(2 * n)] = 70;                                       // row 2: the first element
    cuda::DeviceBuffer dl = to_device(logits), ids(3 * sizeof(int32_t));
    cuda::argmax(s, dl.as<float>(), 3, n, ids.as<int32_t>());
    s.sync();
    EXPECT_EQ(from_device<int32_t>(ids, 3), (std::vector<int32_t>{1000, int32_t(n - 1), 0}));
}

}  // namespace
}  // namespace ridge
