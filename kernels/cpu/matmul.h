// Linear layers on the CPU: Y = X . W^T for a weight matrix W of any loadable type.
// The variants live side by side (design habit 5) and the tests loop over all of them:
//   v0_scalar  the reference twin: one thread, each row dequantized, dot products in double.
//   v1_rows    OpenMP over output rows; each thread dequantizes one weight row at a time into
//              its own buffer and dots it with all m input rows (so prefill reads W once).
//   v2_eigen   F32 weights only: an Eigen GEMM/GEMV over the mapped weights, no copy.
//   v3_simd    AVX2 + FMA + F16C (supports() is false without them): Q4_0, Q4_1, Q8_0, F16, BF16
//              (and F32) blocks decoded in registers straight into f32 FMAs, d applied once per block
//              (Q4_1: d * sum q x + m * sum x, the block sums of x precomputed per row of X).
//              Q4_0 / Q4_1 / Q8_0: OpenMP static over groups of 4 output rows, each x vector feeding
//              all 4; the X rows pass over the group 2 at a time (each decoded block serves both),
//              so W is read once. F32 / F16 / BF16 (no block scale): OpenMP over output rows, one
//              row streamed at a time (it stays in L1 for all m rows of X), 4 accumulators.
//              f32 throughout: only the summation order differs from v0.
//   v5_tiled   prefill: OpenMP over tiles of kTileRows weight rows, each dequantized once into an
//              f32 tile (v3's decoders where they apply) that Eigen's GEMM multiplies by all m rows
//              of X. Any loadable type; f32 arithmetic as v0.
//   v6_packed  prefill as a hand-written GEMM (matmul_packed.cpp): X packed once into panels of 6
//              rows, OpenMP over panels of 16 weight rows (32 with AVX-512), each dequantized once
//              and packed, and a 6 x 16 (6 x 32) register tile of f32 FMAs. Any loadable type; each
//              element one FMA chain over k in order, whatever m is.
// matmul() picks the variant: below tiled_min_rows(type) rows of X (22, or 40 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0
// given integer input, 112 where their kernel has its AVX-512 form) it takes matmul_rows (the
// row-exact kernels: v4_int / v4_int_k given X as 16-bit integers (matmul_int.h), else v3 where
// the CPU has it, else v1); from there on it takes matmul_tiled (v6, or v2 for F32 weights, used
// in place).
// Decode (m = 1) is the same call (matvec). v5 stays as the Eigen baseline v6 is measured against
// (bench_matmul runs both).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cpu/cost.h"
#include "kernels/cpu/matmul_int.h"
#include "weights/tensor.h"

namespace ridge::cpu {

// Contract: W (n, k) @ X (m, k) -> Y (m, n), i.e. Y[i][j] = sum_c X[i][c] * W[j][c].
//   W: TensorView of GGUF shape {k, n} (n rows of k elements) of any type dequantize_row knows;
//      k a multiple of the type's block size. X: (m, k) f32 row-major. Y: (m, n) f32, not aliasing X.
// Cost: FLOPs 2*m*n*k; weight bytes n*row_bytes(W.type, k); activations read 4*m*k, written 4*m*n.
Cost matmul(const TensorView& W, const float* X, int64_t m, float* Y);

// The same with X also given quantized to 16-bit integers (Xq, or nullptr): weights with an integer
// kernel (has_int_kernel) take Xq through matmul_v4_int / v4_int_k below kTiledMinRows rows, all others X.
Cost matmul(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y);
// The cost of that call: matmul_int_cost when Xq is used, matmul_cost otherwise.
Cost matmul_cost(const TensorView& W, int64_t m, bool int_input);

// The two halves of matmul(), for callers that choose per run of rows (forward() does, so that a
// batch of sequences computes each one as it would be computed alone):
//   matmul_rows: row-exact. Each row of Y comes from its own row of X by the same operations,
//     whatever m is and whichever rows are beside it, bit for bit (tested). v4_int / v4_int_k with
//     Xq where the type has an integer kernel, else v3 (F32, F16, BF16 row by row; Q4_0, Q4_1,
//     Q8_0 blocks), else v1. For decode rows and short prompts.
//   matmul_tiled: v6 (v2 for F32 weights), for m >= kTiledMinRows rows of one prompt. v6 rounds each
//     row the same whatever m is; v2's Eigen GEMM does not (its blocking follows the sizes), so a
//     prompt chunk is always cut the same way to repeat.
Cost matmul_rows(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y);
Cost matmul_tiled(const TensorView& W, const float* X, int64_t m, float* Y);

// matmul_rows for several weights that read the same X (q, k and v; gate and up): Y_o = X . W_o^T.
// The outputs that take the integer or v3 kernels have their rows split among the threads of one
// OpenMP region (row_jobs.h: one team start instead of one per weight); any other (v1) runs alone.
// Each Y_o is what matmul_rows gives alone, bit for bit (tested); costs[o] is its cost.
struct MatmulOutput {
    const TensorView* w;
    float* y;  // (m, w->ne(1))
};
void matmul_rows_fused(const MatmulOutput* outs, int n_outs, const float* X, int64_t m, const QuantizedRows* Xq,
                       Cost* costs);

// Decode form (m = 1): W (n, k) @ x (k) -> y (n). Same contract and cost with m = 1.
inline Cost matvec(const TensorView& W, const float* x, float* y) { return matmul(W, x, 1, y); }

// The cost formula alone (what matmul returns), for planning and tests.
inline Cost matmul_cost(const TensorView& W, int64_t m) { return ridge::matmul_cost(W.type, W.ne(0), W.ne(1), m); }

Cost matmul_v0_scalar(const TensorView& W, const float* X, int64_t m, float* Y);
Cost matmul_v1_rows(const TensorView& W, const float* X, int64_t m, float* Y);
Cost matmul_v2_eigen(const TensorView& W, const float* X, int64_t m, float* Y);  // F32 W only
Cost matmul_v3_simd(const TensorView& W, const float* X, int64_t m, float* Y);   // see above
RowJob v3_row_job(const TensorView& W, const float* X, int64_t m, float* Y);     // v3 as a row job
Cost matmul_v5_tiled(const TensorView& W, const float* X, int64_t m, float* Y);  // see above
Cost matmul_v6_packed(const TensorView& W, const float* X, int64_t m, float* Y); // see above

// Helpers the variants share. check_weight: W's dims, or a one-line ridge::Error naming `who` when
// W is not a 2-D tensor whose rows are whole blocks. dequantize_rows: rows [j0, j0 + rows) of W as
// f32 into out (rows, k), through the v3 decoders where they apply.
struct Dims {
    int64_t k;  // row length (inputs)
    int64_t n;  // rows (outputs)
};
Dims check_weight(const TensorView& W, const char* who);
void dequantize_rows(const TensorView& W, int64_t j0, int64_t rows, int64_t k, float* out);

// Weight rows per v5 tile, and the rows of X from which matmul() takes the tiled path: below it
// the row-exact kernels are faster (SmolLM2 prefill of p tokens, 2 threads, the two ways
// alternating; the ratios are in docs/measurements/source-comment-history.md):
//   kTiledMinRows, for the f32 row kernels (v3: F16, BF16, F32, and every type under --exact) and
//   the K-quants: F16's row-exact path is faster up to 20 rows, slower from 24.
//   kTiledMinRowsInt, for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 on 16-bit integer input (4 weight rows in
//   lanes): faster up to 40 rows (about even at 48 for Q4_1); Q5_1 (its high bits cost the kernel
//   more) crosses nearer 36, and is left at 40 with the others.
//   kTiledMinRowsIntZmm, the same where the integer kernel has its AVX-512 form (int_zmm_kernel(),
//   8 weight rows in zmm lanes), against v6's zmm tile, on a Zen 5: Q4_1 crosses between 96 and
//   128 rows, Q8_0 past 192.
inline constexpr int64_t kTileRows = 32;
inline constexpr int64_t kTiledMinRows = 22;
inline constexpr int64_t kTiledMinRowsInt = 40;
inline constexpr int64_t kTiledMinRowsIntZmm = 112;
// The threshold for a weight type, with X given in integers where it has a kernel for them
// (integers) or in f32 (the exact path).
int64_t tiled_min_rows(DType t, bool integers = true);

// Whether this build has an integer kernel for the type (v4_int or v4_int_k), and whether
// matmul() given X in integers uses them for this weight type and m rows.
bool has_int_kernel(DType t);
bool takes_int_input(DType t, int64_t m);

struct MatmulVariant {
    std::string name;
    Cost (*fn)(const TensorView& W, const float* X, int64_t m, float* Y);
    bool (*supports)(DType t);
};
// Every variant, v0 (the reference) first.
const std::vector<MatmulVariant>& matmul_variants();

}  // namespace ridge::cpu
