// The element-wise and row-wise kernels of a Llama block on the GPU: embedding lookup, RMSNorm,
// rotary position embedding, SwiGLU, the residual add, and greedy argmax over logits. The same
// names, contracts and costs as kernels/cpu/ops.h (the costs are the CPU's own functions, so the
// counters count the same bytes on either device), with a Stream first and every pointer on the
// device. Plain C++ header; ops.cu holds the kernels.
#pragma once
#include <cstdint>

#include "kernels/types.h"
#include "kernels/cuda/matrix.h"
#include "kernels/cuda/runtime.h"

namespace ridge::cuda {


// out[i] = row tokens[i] of table, as f32. table: Matrix (n_vocab rows of d); tokens: (m) ids,
// which the caller has checked to lie in [0, n_vocab) (an id outside writes a row of NaN).
// out: (m, d). Cost: cpu::embed_cost.
Cost embed(const Stream& s, const Matrix& table, const int32_t* tokens, int64_t m, float* out);

// y[i][c] = x[i][c] / sqrt(mean_c(x[i][c]^2) + eps) * w[c]; x, y: (m, d), w: (d); y may equal x.
// Cost: ridge::rmsnorm_cost.
Cost rmsnorm(const Stream& s, const float* x, const float* w, int64_t m, int64_t d, float eps, float* y);

// Rotates every head of every row of x (m, n_heads * head_dim) in place by the angles of pos (m)
// (kernels/rope_math.h's rope_angle, in double; cos and sin rounded to f32 once, as the CPU's
// rope table). Cost: ridge::rope_cost.
Cost rope(const Stream& s, float* x, const int32_t* pos, int64_t m, int n_heads, const RopeParams& p);

// out[c] = silu(gate[c]) * up[c] for c < n; out may equal gate or up. Cost: ridge::swiglu_cost.
Cost swiglu(const Stream& s, const float* gate, const float* up, int64_t n, float* out);

// x[c] += y[c] for c < n. Cost: ridge::add_cost.
Cost add(const Stream& s, float* x, const float* y, int64_t n);

// x[i, c] += b[c] for each of m rows; x (m, n), b (n), both on the device. Bit for bit
// cpu::add_bias (one f32 add each). Cost: ridge::add_bias_cost.
Cost add_bias(const Stream& s, float* x, const float* b, int64_t m, int64_t n);

// ids[i] = the index of the largest of logits[i][0..n), the lowest index on ties (the CPU
// sampler's greedy rule); NaN never wins. logits: (m, n); ids: (m) int32.
// Cost: FLOPs n*m (one comparison each); activations read 4*m*n, written 4*m.
Cost argmax_cost(int64_t m, int64_t n);
Cost argmax(const Stream& s, const float* logits, int64_t m, int64_t n, int32_t* ids);

}  // namespace ridge::cuda
