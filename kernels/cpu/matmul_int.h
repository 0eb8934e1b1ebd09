// Integer activations: the fast default for Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 weights (and the
// K-quants, matmul_int_k.cpp).
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
// --exact selects the f32 path instead (see engine/model.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#include "kernels/cpu/cost.h"
#include "kernels/cpu/row_jobs.h"
#include "weights/tensor.h"

namespace ridge::cpu {

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

// K-quant weights on the same rows (matmul_int_k.cpp): Q4_K, Q5_K and Q6_K super-blocks of 256, each
// dotted with 8 ActBlocks exactly in int32 per ActBlock (Q6_K: per 16-element group), scaled once.
// Same contract and cost as above; k must be a multiple of 256. v4_int_k also needs AVX2.
bool int_k_types(DType t);
bool int_k_simd_types(DType t);
Cost matmul_int_k_scalar(const TensorView& W, const QuantizedRows& X, float* Y);
Cost matmul_v4_int_k(const TensorView& W, const QuantizedRows& X, float* Y);

// The same two kernels as row jobs (row_jobs.h), so that several weights reading one X run in one
// OpenMP region (matmul_rows_fused in matmul.h): W, X and Y must outlive the job. Checks as above.
RowJob int_row_job(const TensorView& W, const QuantizedRows& X, float* Y);    // Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
RowJob int_row_job(const TensorView& W, const QuantizedRows& X, float* Y, IntForm form);
RowJob int_k_row_job(const TensorView& W, const QuantizedRows& X, float* Y);  // Q4_K, Q5_K, Q6_K

}  // namespace ridge::cpu
