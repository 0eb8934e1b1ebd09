// Whether this ridge can use an NVIDIA GPU, and device memory for the KV cache. The model itself
// reaches the GPU through Engine (engine/engine.h, RunOptions::device) and its CUDA backend
// (backend_cuda.cpp). A build without nvcc compiles all of this to clear errors ("this ridge was
// built without CUDA"), so callers need no #if.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace ridge::gpu {

// Whether this build has the CUDA kernels, and whether a device can be used now (with the reason
// when not, in one line).
bool built();
bool available();
std::string unavailable_reason();
// Device memory of `bytes`, freed with the last copy of the pointer; ridge::Error without CUDA.
std::shared_ptr<uint8_t> device_alloc(size_t bytes);

}  // namespace ridge::gpu
