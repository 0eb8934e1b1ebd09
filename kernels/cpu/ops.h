// The element-wise and row-wise kernels of a Llama block: embedding lookup, RMSNorm, rotary
// position embedding, softmax, SwiGLU and the residual add. Each has a plain scalar twin
// (`*_v0_scalar`, one thread, double accumulators where a sum is formed) beside the version the
// engine calls (`*_v1_omp`, OpenMP over rows); the tests compare the two. Each op's cost formula
// is also a function of its own (`*_cost`), so planners (ridge explain) use the kernels' numbers.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/cost.h"
#include "kernels/rope_math.h"
#include "weights/config.h"
#include "weights/tensor.h"

namespace ridge::cpu {

// ---- embedding lookup -------------------------------------------------------------------
// Contract: out[i] = dequantize(table row tokens[i]) for i < m.
//   table: GGUF shape {d, n_vocab} (n_vocab rows of d), any type dequantize_row knows.
//   tokens: (m) ids, each in [0, n_vocab) (ridge::Error otherwise). out: (m, d) f32.
// Cost: FLOPs 0; weight bytes m*row_bytes(table.type, d); activations read 4*m (ids), written 4*m*d.
inline Cost embed_cost(const TensorView& table, int64_t m) {  // the cost above, alone (for planning)
    return ridge::embed_cost(table.type, table.ne(0), m);
}
Cost embed_v0_scalar(const TensorView& table, const int32_t* tokens, int64_t m, float* out);
Cost embed_v1_omp(const TensorView& table, const int32_t* tokens, int64_t m, float* out);
inline Cost embed(const TensorView& table, const int32_t* tokens, int64_t m, float* out) {
    return embed_v1_omp(table, tokens, m, out);
}

// ---- RMSNorm ------------------------------------------------------------------------------
// Contract: y[i][c] = x[i][c] / sqrt(mean_c(x[i][c]^2) + eps) * w[c].
//   x: (m, d), w: (d), y: (m, d); y may equal x (in place).
// Cost: FLOPs 4*m*d (square-add, scale, weight); weight bytes 4*d; activations read 4*m*d, written 4*m*d.
using ridge::rmsnorm_cost;  // kernels/types.h
Cost rmsnorm_v0_scalar(const float* x, const float* w, int64_t m, int64_t d, float eps, float* y);
Cost rmsnorm_v1_omp(const float* x, const float* w, int64_t m, int64_t d, float eps, float* y);
inline Cost rmsnorm(const float* x, const float* w, int64_t m, int64_t d, float eps, float* y) {
    return rmsnorm_v1_omp(x, w, m, d, eps, y);
}

// ---- rotary position embedding ----------------------------------------------------------------
using ridge::RopeParams;  // kernels/types.h
// The angle of pair i at position pos: pos * freq_base^(-2i/rope_dim), computed in double
// (kernels/rope_math.h, shared with the CUDA kernels).
using ridge::rope_angle;
// Contract: for every row r, head h, pair i < rope_dim/2 with (a, b) the pair's elements:
//   (a, b) <- (a*cos t - b*sin t, a*sin t + b*cos t), t = rope_angle(pos[r], i, ...).
//   x: (m, n_heads * head_dim) in place; pos: (m) positions >= 0. Elements past rope_dim untouched.
// Cost: FLOPs 6*m*n_heads*rope_dim/2 (plus the angles); activations read 4*m*n_heads*head_dim + 4*m
//   (x, pos), written 4*m*n_heads*head_dim.
using ridge::rope_cost;  // kernels/types.h
Cost rope_v0_scalar(float* x, const int32_t* pos, int64_t m, int n_heads, const RopeParams& p);
Cost rope_v1_omp(float* x, const int32_t* pos, int64_t m, int n_heads, const RopeParams& p);
inline Cost rope(float* x, const int32_t* pos, int64_t m, int n_heads, const RopeParams& p) {
    return rope_v1_omp(x, pos, m, n_heads, p);
}
// The cos and sin of every angle of m rows (rope_angle of pos[r] and pair i, rounded to f32 once):
// a forward pass builds it once and every layer's q and k rotate by it, instead of recomputing
// rope_dim/2 sines and cosines per row, head and layer. rope_v1_omp is exactly build + rotate.
struct RopeTable {
    RopeParams p;
    int64_t m = 0;
    std::vector<float> cos_t, sin_t;  // (m, rope_dim/2)
};
void rope_table(const int32_t* pos, int64_t m, const RopeParams& p, RopeTable& t);
// Same contract and cost as rope_v1_omp for the table's rows and params.
Cost rope_with_table(float* x, const RopeTable& t, int n_heads);
inline Cost rope(float* x, const RopeTable& t, int n_heads) { return rope_with_table(x, t, n_heads); }

// ---- softmax ----------------------------------------------------------------------------
// Contract: x[c] <- exp(x[c] - max x) / sum_c exp(x[c] - max x), in place. x: (n), n >= 1.
// Cost: FLOPs 4*n (max, subtract+exp, sum, divide; exp counted as one); activations read 4*n, written 4*n.
using ridge::softmax_cost;  // kernels/types.h
Cost softmax_v0_scalar(float* x, int64_t n);
Cost softmax_v1(float* x, int64_t n);
inline Cost softmax(float* x, int64_t n) { return softmax_v1(x, n); }

// ---- SwiGLU -------------------------------------------------------------------------------
// Contract: out[c] = silu(gate[c]) * up[c], silu(g) = g / (1 + exp(-g)).
//   gate, up, out: (n) (the caller passes m * n_ff); out may equal gate or up.
// Cost: FLOPs 5*n (exp as one); activations read 8*n, written 4*n.
using ridge::swiglu_cost;  // kernels/types.h
Cost swiglu_v0_scalar(const float* gate, const float* up, int64_t n, float* out);
Cost swiglu_v1_omp(const float* gate, const float* up, int64_t n, float* out);
inline Cost swiglu(const float* gate, const float* up, int64_t n, float* out) {
    return swiglu_v1_omp(gate, up, n, out);
}

// ---- residual add -----------------------------------------------------------------------------
// Contract: x[c] += y[c]. x, y: (n) (the caller passes m * d).
// Cost: FLOPs n; activations read 8*n, written 4*n.
using ridge::add_cost;  // kernels/types.h
Cost add_v0_scalar(float* x, const float* y, int64_t n);
Cost add_v1_omp(float* x, const float* y, int64_t n);
inline Cost add(float* x, const float* y, int64_t n) { return add_v1_omp(x, y, n); }

// ---- bias add ---------------------------------------------------------------------------------
// Contract: x[i, c] += b[c] for each of m rows. x: (m, n), b: (n).
// Cost: ridge::add_bias_cost(m, n).
using ridge::add_bias_cost;  // kernels/types.h
Cost add_bias_v0_scalar(float* x, const float* b, int64_t m, int64_t n);
inline Cost add_bias(float* x, const float* b, int64_t m, int64_t n) { return add_bias_v0_scalar(x, b, m, n); }

}  // namespace ridge::cpu
