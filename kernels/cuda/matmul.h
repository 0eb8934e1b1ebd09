// Linear layers on the GPU: Y = X . W^T for a weight Matrix (matrix.h) of any type the CUDA
// kernels read. The variants live side by side, numbered, and the tests loop over all of them:
//   matvec        decode (m up to kMatvecMaxRows): one warp per output row, each lane decoding
//                 32-element blocks in registers (16-byte loads of codes in the split layout) into
//                 f32 FMAs with every row of X, then a warp-shuffle sum. Reads W once.
//   matvec_v2_inflight  matvec with the loads of two blocks per lane issued before either is
//                 decoded (more bytes in flight); the same outputs bit for bit.
//   matvec_fused  matvec_v2 over up to kMatvecMaxOutputs matrices that read the same X (q, k and v;
//                 gate and up) in one launch, each output as matvec_v2 gives it alone.
//   v1_naive      one thread per output element, W decoded element by element: the baseline, each
//                 weight read m times from memory or cache (intensity ~ 1/2 FLOP per weight byte read).
//   v2_smem       shared-memory tiles of X and of W (decoded once per tile), each thread one output:
//                 a T x T tile is loaded once and used T times (intensity ~ T/2).
//   v3_regblock   v2 plus a register block per thread (several outputs each, more FLOPs per
//                 shared-memory load).
//   v4_mma        tensor cores (mma.sync, bf16 operands, f32 accumulators): W and X rounded to bf16
//                 when staged into shared memory.
// matmul() picks: matvec below kMatvecMaxRows + 1 rows, else the engine's default tiled variant.
// Costs are the CPU's (cpu::matmul_cost): the counters count the same bytes on either device.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/types.h"
#include "kernels/cuda/matrix.h"
#include "kernels/cuda/runtime.h"

namespace ridge::cuda {


// Contract (every variant): W (n, k) @ X (m, k) -> Y (m, n), Y[i][j] = sum_c X[i][c] * W[j][c].
//   W: a Matrix on the device; X: (m, k) f32, Y: (m, n) f32, device pointers, not aliasing.
// Cost: FLOPs 2*m*n*k; weight bytes n*row_bytes(W.type, k); activations read 4*m*k, written 4*m*n.
Cost matmul_cost(const Matrix& W, int64_t m);

inline constexpr int64_t kMatvecMaxRows = 8;
Cost matvec(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);  // m <= kMatvecMaxRows
Cost matvec_v2_inflight(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);
inline constexpr int kMatvecMaxOutputs = 3;
struct MatvecOut {
    Matrix W;
    float* Y;  // (m, W.n)
};
// Y_o = X . W_o^T for each output, costs[o] its cost; one launch where every W_o has the same type
// and row length (whole 32-element blocks), else one matvec_v2_inflight each.
void matvec_fused(const Stream& s, const MatvecOut* outs, int n_outs, const float* X, int64_t m, Cost* costs);
Cost matmul_v1_naive(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);
Cost matmul_v2_smem(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);
Cost matmul_v3_regblock(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);
Cost matmul_v4_mma(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);
Cost matmul(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);

struct MatmulVariant {
    std::string name;
    Cost (*fn)(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y);
    int64_t max_rows;  // the most rows of X it takes (matvec: kMatvecMaxRows), else INT64_MAX
    bool exact_f32;    // f32 products (false: v4's bf16 operands)
};
const std::vector<MatmulVariant>& matmul_variants();

}  // namespace ridge::cuda
