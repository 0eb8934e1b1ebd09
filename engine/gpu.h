// The model on an NVIDIA GPU (--device cuda): to_gpu uploads every weight into the CUDA kernels'
// layouts and marks the Model so that forward() runs there (forward_gpu), with its KV cache in
// device memory (KVCache on_gpu). A build without nvcc compiles all of this to clear errors
// ("this ridge was built without CUDA"), so callers need no #if.
#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "engine/ceilings.h"
#include "engine/counters.h"
#include "engine/dump.h"
#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "engine/model.h"

namespace ridge {

namespace gpu {
// Whether this build has the CUDA kernels, and whether a device can be used now (with the reason
// when not, in one line).
bool built();
bool available();
std::string unavailable_reason();
// Device memory of `bytes`, freed with the last copy of the pointer; ridge::Error without CUDA.
std::shared_ptr<uint8_t> device_alloc(size_t bytes);
}  // namespace gpu

// The GPU's roofline (ridge probe --device cuda, kernels/cuda/probe.h): device-memory read
// bandwidth, the CUDA cores' FMA rate, ridge's best matmul variant and cuBLAS on one BF16 problem
// (4096^3; quick: 1024^3 and a smaller buffer). ridge::Error without a usable GPU.
Ceilings measure_gpu_ceilings(bool quick);

// Uploads model's weights to CUDA device `device` and sets model.gpu. graph: decode steps are
// captured once in a CUDA graph and replayed (kernels/cuda/graph.h), instead of launched kernel by
// kernel. ridge::Error (naming the tensor) for a weight type the CUDA kernels do not read, or when
// there is no usable device.
void to_gpu(Model& model, int device = 0, bool graph = true);

// forward() on the GPU: the same batch, the same ops in the same order, the same costs counted
// (the counters of the CPU's exact path: the GPU multiplies f32 activations), logits copied back
// into ws.logits. Called by forward() when model.gpu is set; the cache must be on_gpu.
void forward_gpu(const Model& model, KVCache& cache, const Batch& batch, Workspace& ws, Counters* counters,
                 Dumper* dump);

}  // namespace ridge
