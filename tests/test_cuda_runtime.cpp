// The CUDA runtime wrapper (kernels/cuda/runtime.h): a pass's copies are ordered with its kernels
// on the (non-blocking) stream, from and to pinned staging; the plain copies are ordered with
// everything. Skipped, saying why, without a GPU.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernels/cuda/ops.h"
#include "kernels/cuda/runtime.h"
#include "tests/cuda_test_util.h"

namespace ridge {
namespace {

TEST(CudaRuntime, AsyncCopiesAreOrderedWithTheStreamsKernels) {
    RIDGE_REQUIRE_GPU();
    constexpr int64_t n = 1 << 16;
    cuda::Stream s;
    cuda::PinnedBuffer in(2 * n * sizeof(float)), out(n * sizeof(float));
    float* x = in.as<float>();
    float* y = x + n;
    for (int64_t i = 0; i < n; i++) x[i] = float(i), y[i] = float(3 * i + 1);
    cuda::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
    // Upload, add, download, all queued before one wait: each must see the one before it.
    dx.upload_async(x, n * sizeof(float), s);
    dy.upload_async(y, n * sizeof(float), s);
    cuda::add(s, dx.as<float>(), dy.as<float>(), n);
    dx.download_async(out.data(), n * sizeof(float), s);
    s.sync();
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(out.as<float>()[i], float(4 * i + 1)) << i;
}

TEST(CudaRuntime, PlainCopiesWaitForTheStreams) {
    RIDGE_REQUIRE_GPU();
    constexpr int64_t n = 1 << 20;
    cuda::Stream s;
    std::vector<float> x(n, 1.0f), y(n, 2.0f), got(n);
    cuda::DeviceBuffer dx = test::to_device(x), dy = test::to_device(y);
    for (int r = 0; r < 8; r++) cuda::add(s, dx.as<float>(), dy.as<float>(), n);  // queued, not waited for
    dx.download(got.data(), n * sizeof(float));                                   // waits for them
    for (int64_t i = 0; i < n; i++) ASSERT_EQ(got[size_t(i)], 17.0f) << i;
}

TEST(CudaRuntime, PinnedBufferGrowsOnlyWhenAskedForMore) {
    RIDGE_REQUIRE_GPU();
    cuda::PinnedBuffer p;
    EXPECT_EQ(p.data(), nullptr);
    p.reserve(100);
    void* first = p.data();
    ASSERT_NE(first, nullptr);
    EXPECT_GE(p.size(), 100u);
    p.reserve(50);
    EXPECT_EQ(p.data(), first);
    p.reserve(1000);
    EXPECT_GE(p.size(), 1000u);
}

}  // namespace
}  // namespace ridge
