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
//              row streamed at a time (it stays in L1 for all m rows of X), 4 accumulators; from 16
//              rows of X (8 on AVX2) the rows of X in the lanes, each weight row decoded once, each
//              row's result bit for bit the one-row loop's.
//              f32 throughout: only the summation order differs from v0.
//   v5_tiled   prefill: OpenMP over tiles of kTileRows weight rows, each dequantized once into an
//              f32 tile (v3's decoders where they apply) that Eigen's GEMM multiplies by all m rows
//              of X. Any loadable type; f32 arithmetic as v0.
//   v6_packed  prefill as a hand-written GEMM (matmul_packed.cpp): X packed once into panels of 6
//              rows, OpenMP over panels of 16 weight rows (32 with AVX-512), each dequantized once
//              and packed, and a 6 x 16 (6 x 32) register tile of f32 FMAs. Any loadable type; each
//              element one FMA chain over k in order, whatever m is.
//   v7_int_packed  prefill on 16-bit integer activations (matmul_int_packed.cpp, below with the
//              integer kernels): the types with an integer kernel, where the build has AVX-512.
// matmul() picks the variant: below tiled_min_rows(type) rows of X (22, or 40 for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0
// given integer input; 112 for them and 32 for the K-quants where the integer kernels have their
// AVX-512 forms) it takes matmul_rows (the
// row-exact kernels: v4_int / v4_int_k given X as 16-bit integers (below), else v3 where
// the CPU has it, else v1); from there on it takes matmul_tiled (v7_int_packed given X as 16-bit
// integers where the build has it, else v6, or v2 for F32 weights, used in place).
// Decode (m = 1) is the same call (matvec). v5 stays as the Eigen baseline v6 is measured against
// (bench_matmul runs both).
//
// Integer activations: the fast default for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weights (and the
// K-quants).
// A matmul's input rows are quantized once per step to 16-bit integers in blocks of 32, the
// weight block size: x[c] ~ d * q[c] with d = max|x| / 32767, plus each block's exact f32 sum
// (Q4_1's minimum multiplies it). Each block's dot product with a weight block is then formed
// exactly in int32 (AVX2 madd_epi16, or AVX-VNNI dpwssd where the CPU has it) and scaled once:
//   Q4_0:  d_w * d_x * sum (n - 8) q          Q8_0:  d_w * d_x * sum w q
//          (the AVX2 kernel forms sum n q - 8 sum q, the same integer)
//   Q4_1:  d_w * d_x * sum n q + m_w * sum x
// Why 16 bits and not 8 as llama.cpp does: SmolLM2's activations have outliers that make 8-bit
// blocks coarse; against the f32 path 8 bits gave a mean KL divergence of 1.2e-2 over its
// 506-token golden prompt (top-1 93.7%), 16 bits rounds 256 times finer. The arithmetic
// still differs from the f32 path by the rounding of x (at most d_x / 2 per element); ridge's
// --exact selects the f32 path instead (engine/engine.h).
//
// Splitting the output rows of one or several matmuls among the threads of one OpenMP region.
// A decode step's matmuls are one row of X against each weight: the threads split the weight's
// rows. q, k and v read the same X, as do gate and up; run as one job list they share one region
// (one team start and one join instead of three), and the small ones (SmolLM2's k and v, 192 rows
// each) are split with the rest instead of alone.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <string>
#include <vector>

#include "kernels/cpu/cost.h"
#include "weights/tensor.h"

namespace ridge::cpu {

// -----------------------------------------------------------------------------------------------
// Row jobs

// One matmul's rows as a job: run(j0, j1) computes its output rows [j0, j1) on the calling thread,
// for any j0 that is a multiple of `align` (the kernel's rows per pass; j1 is one too, or rows).
// row_cost (> 0) weighs its rows against other jobs' (bytes per weight row), so that shares balance.
struct RowJob {
    int64_t rows = 0;
    int64_t align = 1;
    double row_cost = 1.0;
    std::function<void(int64_t j0, int64_t j1)> run;
};

// Runs every job's rows. With `parallel`, one OpenMP region whose threads take contiguous shares
// of equal cost of the jobs' rows laid end to end, each thread calling run() once for each job
// its share overlaps; otherwise run(0, rows) for each job in turn. Which thread computes a row
// does not change its result (every kernel computes each row by the same operations).
void run_row_jobs(const RowJob* jobs, int n_jobs, bool parallel);


// -----------------------------------------------------------------------------------------------
// Integer activations

// A vector allocator whose storage starts on a 64-byte boundary (a cache line), so that the
// kernels' 32-byte loads of codes never straddle two lines.
template <class T>
struct CacheLineAllocator {
    using value_type = T;
    CacheLineAllocator() = default;
    template <class U>
    CacheLineAllocator(const CacheLineAllocator<U>&) {}
    T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
    void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
    bool operator==(const CacheLineAllocator&) const { return true; }
};

// One quantized block of 32 activations: x[c] ~ d * q[c], and the sum of the 32 original values.
struct ActBlock {
    float d;
    float sum;
    const int16_t* q;  // (32) codes in [-32767, 32767]
};
using ridge::kActBlockBytes;  // 72 bytes per block (kernels/types.h)

// m rows of k activations in blocks of 32, as three arrays (codes, scales, sums) so that a kernel
// loads 16 codes, or the scales of 4 consecutive blocks, as one vector.
struct QuantizedRows {
    std::vector<int16_t, CacheLineAllocator<int16_t>> q;  // (m, k) codes
    std::vector<float> d;                                  // (m, k/32) block scales
    std::vector<float> sum;                                // (m, k/32) block sums
    int64_t m = 0, k = 0;
    // Room for m rows of k without reallocating.
    void reserve(int64_t rows, int64_t len);
    const int16_t* codes(int64_t i) const { return q.data() + i * k; }
    const float* scales(int64_t i) const { return d.data() + i * (k / 32); }
    const float* sums(int64_t i) const { return sum.data() + i * (k / 32); }
    ActBlock block(int64_t i, int64_t b) const { return {scales(i)[b], sums(i)[b], codes(i) + b * 32}; }
};

// X (m, k) f32 -> out (reusing its storage). k must be a multiple of 32.
// Cost: 3 FLOPs per element (max, scale, sum); reads 4*m*k bytes, writes m*k/32 blocks.
// quantize_rows is the AVX2 path (when built with it); quantize_rows_scalar its twin: the same
// scales and codes, and sums that differ only in the f32 order of addition.
Cost quantize_rows(const float* X, int64_t m, int64_t k, QuantizedRows& out);
Cost quantize_rows_scalar(const float* X, int64_t m, int64_t k, QuantizedRows& out);
using ridge::quantize_rows_cost;  // kernels/types.h

// The weight types with an integer kernel (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; v4 also needs AVX2).
bool int_types(DType t);
bool int_simd_types(DType t);

// Y (m, n) = X . W^T with X given as QuantizedRows (X.k == W's row length).
// Cost: FLOPs 2*m*n*k; weight bytes n*row_bytes; activations read m*k/32 blocks, written 4*m*n.
inline Cost matmul_int_cost(const TensorView& W, int64_t m) {
    return ridge::matmul_int_cost(W.type, W.ne(0), W.ne(1), m);
}
// The scalar twin: each block's integer dot product in int64, scaled and summed in double.
Cost matmul_int_scalar(const TensorView& W, const QuantizedRows& X, float* Y);
// AVX2 (+VNNI): OpenMP static over shares of weight rows, each share read as 4 long runs of rows
// (one per lane, which the hardware prefetchers follow), 4 rows (one of each run) at a time, read
// once for every row of X (2 X rows at a time). A step takes one block of each of the 4 rows: their
// 4 int32 vectors fold into one whose lanes are the rows, converted to f32 once and scaled by
// d_w * d_x with one FMA, so the per-block overhead (scales, conversion) is shared and no row has a
// tail of blocks or a horizontal sum of its own. Where the build has AVX-512 (F, BW, VL, DQ) and
// GFNI (int_zmm_kernel()), the same arithmetic runs on zmm registers 8 weight rows (8 runs) a step
// (a block's 32 codes in one register, the fold and scaling shared by 8 rows), the 8 rows' scales
// fetched by one gather where this CPU's gathers run at full speed.
// The forms, which int_form() picks for this machine and matmul_v4_int_as takes for tests and
// benchmarks (a zmm form runs as ymm where the build has no AVX-512): each gives the same outputs
// bit for bit as the others of its register width.
enum class IntForm {
    ymm,         // AVX2, 4 rows a step
    zmm_loads,   // AVX-512, 8 rows a step, scales by 8 loads and unpacks
    zmm_gather,  // the same, scales by one gather (not where Linux reports a GDS mitigation)
};
IntForm int_form();
bool int_zmm_kernel();
Cost matmul_v4_int(const TensorView& W, const QuantizedRows& X, float* Y);
Cost matmul_v4_int_as(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form);

// K-quant weights on the same rows: Q4_K, Q5_K and Q6_K super-blocks of 256, each
// dotted with 8 ActBlocks exactly in int32 per ActBlock (Q6_K: per 16-element group), scaled once.
// Same contract and cost as above; k must be a multiple of 256. v4_int_k also needs AVX2: 4 weight
// rows (4 runs) a step, 4 rows of X at a time, in ymm registers (in the zmm form two weight rows
// to a zmm, one in each half, the same lanes and values); from 16 rows of X on (8 in the ymm form)
// the rows of X in the lanes of zmm (ymm) registers instead, each weight row's super-blocks decoded
// once for all of them, a row's output bit for bit the same as alone, in either form. The form: zmm
// (either zmm form, where the build has AVX-512) or ymm.
bool int_k_types(DType t);
bool int_k_simd_types(DType t);
Cost matmul_int_k_scalar(const TensorView& W, const QuantizedRows& X, float* Y);
Cost matmul_v4_int_k(const TensorView& W, const QuantizedRows& X, float* Y);
Cost matmul_v4_int_k_as(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form);

// The same two kernels as row jobs (above), so that several weights reading one X run in one
// OpenMP region (matmul_rows_fused in matmul.h): W, X and Y must outlive the job. Checks as above.
RowJob int_row_job(const TensorView& W, const QuantizedRows& X, float* Y);    // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
RowJob int_row_job(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form);
RowJob int_k_row_job(const TensorView& W, const QuantizedRows& X, float* Y);  // Q4_K, Q5_K, Q6_K
RowJob int_k_row_job(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form);

// v7_int_packed (matmul_int_packed.cpp): prefill as a GEMM on these integer inputs, every type with
// an integer kernel, where the build has AVX-512 (v7_types; false elsewhere). Each block's integer
// dot product exact in int32 and scaled once in f32, as the scalar twin; each row of Y takes the
// same operations whatever m is and whichever rows are beside it. Same contract and cost as above.
// The f32 form quantizes X first (quantize_rows), for the variant list and the tiled path.
bool v7_types(DType t);
Cost matmul_v7_int_packed(const TensorView& W, const QuantizedRows& X, float* Y);
Cost matmul_v7_int_packed(const TensorView& W, const float* X, int64_t m, float* Y);


// -----------------------------------------------------------------------------------------------
// The linear layer

// Contract: W (n, k) @ X (m, k) -> Y (m, n), i.e. Y[i][j] = sum_c X[i][c] * W[j][c].
//   W: TensorView of GGUF shape {k, n} (n rows of k elements) of any type dequantize_row knows;
//      k a multiple of the type's block size. X: (m, k) f32 row-major. Y: (m, n) f32, not aliasing X.
// Cost: FLOPs 2*m*n*k; weight bytes n*row_bytes(W.type, k); activations read 4*m*k, written 4*m*n.
Cost matmul(const TensorView& W, const float* X, int64_t m, float* Y);

// The same with X also given quantized to 16-bit integers (Xq, or nullptr): weights with an integer
// kernel (has_int_kernel) take Xq through matmul_v4_int / v4_int_k below their tiled threshold and
// through v7_int_packed from it where the build has it (v7_types); all others take X.
Cost matmul(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y);
// The cost of that call: matmul_int_cost when Xq is used, matmul_cost otherwise.
Cost matmul_cost(const TensorView& W, int64_t m, bool int_input);

// The two halves of matmul(), for callers that choose per run of rows (forward() does, so that a
// batch of sequences computes each one as it would be computed alone):
//   matmul_rows: row-exact. Each row of Y comes from its own row of X by the same operations,
//     whatever m is and whichever rows are beside it, bit for bit (tested). v4_int / v4_int_k with
//     Xq where the type has an integer kernel, else v3 (F32, F16, BF16 row by row; Q4_0, Q4_1,
//     Q8_0 blocks), else v1. For decode rows and short prompts.
//   matmul_tiled: for m >= kTiledMinRows rows of one prompt, v7_int_packed given Xq where v7_types
//     has the weight's type, else v6 (v2 for F32 weights). v7 and v6 round each row the same
//     whatever m is; v2's Eigen GEMM does not (its blocking follows the sizes), so a prompt chunk is
//     always cut the same way to repeat.
Cost matmul_rows(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y);
Cost matmul_tiled(const TensorView& W, const float* X, int64_t m, const QuantizedRows* Xq, float* Y);
inline Cost matmul_tiled(const TensorView& W, const float* X, int64_t m, float* Y) { return matmul_tiled(W, X, m, nullptr, Y); }

// matmul_rows for several weights that read the same X (q, k and v; gate and up): Y_o = X . W_o^T.
// The outputs that take the integer or v3 kernels have their rows split among the threads of one
// OpenMP region (row jobs, above: one team start instead of one per weight); any other (v1) runs alone.
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
//   the K-quants in the ymm build: F16's row-exact path is faster up to 20 rows, slower from 24.
//   kTiledMinRowsInt, for Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 on 16-bit integer input (4 weight rows in
//   lanes): faster up to 40 rows (about even at 48 for Q4_1); Q5_1 (its high bits cost the kernel
//   more) crosses nearer 36, and is left at 40 with the others.
//   kTiledMinRowsIntZmm, the same where the integer kernel has its AVX-512 form (int_zmm_kernel(),
//   8 weight rows in zmm lanes): on a Zen 5 against v6's zmm tile, Q4_1 crossed between 96 and
//   128 rows, Q8_0 past 192. Against the integer GEMM (v7, which such a build has) one matmul of
//   SmolLM2's gate shape is about even at 48 rows, but whole prompts of 64 tokens still ran 1.27x
//   faster row by row (the row path fuses q, k, v and splits attention over KV blocks), so it
//   stays. kTiledMinRowsIntKZmm, the K-quants': a 1B Q4_K_M prompt of 32 tokens was 1.05x faster
//   tiled (v7) than row by row, of 96 tokens 1.5x (docs/measurements/, the Xeon model 167).
//   kTiledMinRowsFloatZmm, F16 and BF16 where their row kernel has its zmm lanes (from 16 rows of
//   X): on a Xeon (model 207) SmolLM2's row-exact prefill was ahead of v6 from 24 to 128 rows,
//   about even at 160-224 and behind from 256 (same file). F32 (v2 tiled) was not measured and
//   keeps kTiledMinRows.
inline constexpr int64_t kTileRows = 32;
inline constexpr int64_t kTiledMinRows = 22;
inline constexpr int64_t kTiledMinRowsInt = 40;
inline constexpr int64_t kTiledMinRowsIntZmm = 112;
inline constexpr int64_t kTiledMinRowsIntKZmm = 32;
inline constexpr int64_t kTiledMinRowsFloatZmm = 128;
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
