// Checked CUDA calls, for .cu files only: RIDGE_CUDA_CHECK(call) runs the call and throws
// ridge::Error "file:line: call: cudaErrorX (description)" when it fails; RIDGE_CUDA_CHECK_LAUNCH()
// after every kernel launch catches a bad launch configuration at once (errors inside the kernel
// surface at the next synchronizing call, which is checked too).
#pragma once
#include <cuda_runtime.h>

#include <string>

#include "kernels/cuda/runtime.h"
#include "weights/error.h"

namespace ridge::cuda {

inline void check(cudaError_t e, const char* what, const char* file, int line) {
    if (e == cudaSuccess) return;
    throw Error(std::string(file) + ":" + std::to_string(line) + ": " + what + ": " + cudaGetErrorName(e) + " (" +
                cudaGetErrorString(e) + ")");
}

inline cudaStream_t stream_of(const Stream& s) { return static_cast<cudaStream_t>(s.handle()); }

// Blocks of `threads` that cover n items.
inline unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace ridge::cuda

#define RIDGE_CUDA_CHECK(call) ::ridge::cuda::check((call), #call, __FILE__, __LINE__)
#define RIDGE_CUDA_CHECK_LAUNCH() ::ridge::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
