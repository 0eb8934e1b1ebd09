// Helpers for the GPU tests (tests/test_cuda_*.cpp): skip with the reason when this machine has
// no CUDA device, move vectors to and from device buffers, compare a kernel's cost with the CPU's.
#pragma once
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/cost.h"
#include "kernels/cuda/runtime.h"

namespace ridge::test {

// At the top of every GPU test: skips it, saying why, when there is no usable device.
#define RIDGE_REQUIRE_GPU()                                                            \
    do {                                                                               \
        if (::ridge::cuda::device_count() == 0)                                        \
            GTEST_SKIP() << "GPU test skipped: " << ::ridge::cuda::no_device_reason(); \
    } while (0)

template <class T>
cuda::DeviceBuffer to_device(const std::vector<T>& v) {
    cuda::DeviceBuffer b(v.size() * sizeof(T));
    b.upload(v.data(), v.size() * sizeof(T));
    return b;
}
template <class T>
std::vector<T> from_device(const cuda::DeviceBuffer& b, size_t n) {
    std::vector<T> v(n);
    b.download(v.data(), n * sizeof(T));
    return v;
}
// A device buffer of n floats, every byte 0xff (NaN): an element the kernel failed to write shows.
inline cuda::DeviceBuffer poisoned_floats(size_t n) {
    cuda::DeviceBuffer b(n * sizeof(float));
    b.fill_bytes(0xff);
    return b;
}

// The GPU kernels return the CPU's cost formulas: every field equal.
inline void expect_cost_eq(const cpu::Cost& got, const cpu::Cost& want, const std::string& what) {
    EXPECT_DOUBLE_EQ(got.flops, want.flops) << what;
    EXPECT_DOUBLE_EQ(got.weight_bytes, want.weight_bytes) << what;
    EXPECT_DOUBLE_EQ(got.act_read, want.act_read) << what;
    EXPECT_DOUBLE_EQ(got.act_written, want.act_written) << what;
    EXPECT_DOUBLE_EQ(got.kv_read, want.kv_read) << what;
    EXPECT_DOUBLE_EQ(got.kv_written, want.kv_written) << what;
}
inline void expect_cost_eq(const cpu::AttentionCost& got, const cpu::AttentionCost& want, const std::string& what) {
    expect_cost_eq(got.scores, want.scores, what + " scores");
    expect_cost_eq(got.mix, want.mix, what + " mix");
}

}  // namespace ridge::test
