// Helpers for the GPU tests (tests/test_cuda_*.cpp): skip with the reason when this machine has
// no CUDA device, and move vectors to and from device buffers.
#pragma once
#include <gtest/gtest.h>

#include <vector>

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

}  // namespace ridge::test
