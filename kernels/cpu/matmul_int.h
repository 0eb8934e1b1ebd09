// Integer activations: the fast default for Q4_0, Q4_1 and Q8_0 weights.
// A matmul's input rows are quantized once per step to 16-bit integers in blocks of 32, the
// weight block size: x[c] ~ d * q[c] with d = max|x| / 32767, plus each block's exact f32 sum
// (Q4_1's minimum multiplies it). Each block's dot product with a weight block is then formed
// exactly in int32 (AVX2 madd_epi16, or AVX-VNNI dpwssd where the CPU has it) and scaled once:
//   Q4_0:  d_w * d_x * sum (n - 8) q          Q8_0:  d_w * d_x * sum w q
//   Q4_1:  d_w * d_x * sum n q + m_w * sum x
// Why 16 bits and not 8 as llama.cpp does: SmolLM2's activations have outliers that make 8-bit
// blocks coarse; against the f32 path 8 bits gave a mean KL divergence of 1.2e-2 over its
// 506-token golden prompt (top-1 93.7%), 16 bits rounds 256 times finer. The arithmetic
// still differs from the f32 path by the rounding of x (at most d_x / 2 per element); ridge's
// --exact selects the f32 path instead (see engine/model.h).
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/cost.h"
#include "weights/tensor.h"

namespace ridge::cpu {

struct ActBlock {
    float d;        // scale: x ~ d * q
    float sum;      // sum of the block's 32 original f32 values
    int16_t q[32];  // (32) codes in [-32767, 32767]
};
inline constexpr double kActBlockBytes = sizeof(ActBlock);  // 72 bytes per 32 activations

// m rows of k activations as ActBlocks, row-major: row i is blocks [i * k/32, (i+1) * k/32).
struct QuantizedRows {
    std::vector<ActBlock> blocks;
    int64_t m = 0, k = 0;
    const ActBlock* row(int64_t i) const { return blocks.data() + i * (k / 32); }
};

// X (m, k) f32 -> out (reusing its storage). k must be a multiple of 32.
// Cost: 3 FLOPs per element (max, scale, sum); reads 4*m*k bytes, writes m*k/32 blocks.
Cost quantize_rows(const float* X, int64_t m, int64_t k, QuantizedRows& out);
Cost quantize_rows_cost(int64_t m, int64_t k);

// The weight types with an integer kernel (Q4_0, Q4_1, Q8_0; v4 also needs AVX2).
bool int_types(DType t);
bool int_simd_types(DType t);

// Y (m, n) = X . W^T with X given as QuantizedRows (X.k == W's row length).
// Cost: FLOPs 2*m*n*k; weight bytes n*row_bytes; activations read m*k/32 blocks, written 4*m*n.
Cost matmul_int_cost(const TensorView& W, int64_t m);
// The scalar twin: each block's integer dot product in int64, scaled and summed in double.
Cost matmul_int_scalar(const TensorView& W, const QuantizedRows& X, float* Y);
// AVX2 (+VNNI): OpenMP static over groups of 4 weight rows; each group's rows are read once and
// serve every row of X (2 at a time, so each decoded weight block serves both).
Cost matmul_v4_int(const TensorView& W, const QuantizedRows& X, float* Y);

// K-quant weights on the same rows (matmul_int_k.cpp): Q4_K and Q6_K super-blocks of 256, each
// dotted with 8 ActBlocks exactly in int32 per ActBlock (Q6_K: per 16-element group), scaled once.
// Same contract and cost as above; k must be a multiple of 256. v4_int_k also needs AVX2.
bool int_k_types(DType t);
bool int_k_simd_types(DType t);
Cost matmul_int_k_scalar(const TensorView& W, const QuantizedRows& X, float* Y);
Cost matmul_v4_int_k(const TensorView& W, const QuantizedRows& X, float* Y);

}  // namespace ridge::cpu
