// The GPU's ceilings, measured (ridge probe --device cuda): device-memory read bandwidth, the
// f32 FMA rate of the CUDA cores, ridge's own matmul variants on a large BF16 problem, and cuBLAS
// on the same problem as the reference (loaded at run time; absent cuBLAS is reported, not fatal).
// Every time is taken with CUDA events around a warmed-up kernel, the median of repetitions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weights/types.h"

namespace ridge::cuda {

struct Timing {
    double median_s = 0;  // seconds per repetition (median)
    double spread = 0;    // (max - min) / median over the repetitions
};

// Reads `bytes` of device memory (16-byte loads, every byte once, a grid that fills the device)
// `reps` times, after a warm-up; bytes / median time is the read bandwidth. The buffer is filled
// with a pattern first (never zeros) and its sum kept, so the reads cannot be skipped.
Timing time_read(size_t bytes, int reps);

// Independent FMA chains on every CUDA core: `flops` per repetition, all in registers.
Timing time_fma(double* flops, int reps);

// One matmul variant (by its name in matmul_variants()) on X (m, k) f32 and W (n, k) BF16 with
// random values; FLOPs 2 m n k per repetition.
Timing time_matmul(const std::string& variant, int64_t m, int64_t n, int64_t k, int reps);

// The decode matvec (matmul.h: matvec) on `rows` rows of X and W (n, k) of `type` (random values,
// quantized to the type on the host); bytes per repetition: W once, in its stored format.
Timing time_matvec(DType type, int64_t n, int64_t k, int rows, int reps, double* weight_bytes,
                   const std::string& variant = "matvec");

// Decode attention (attention.h: variant "v1_split" or "v3_wide", with the device's cap) of one
// row over n_keys keys in an F16 cache: n_heads query heads of head_dim over n_kv_heads key/value
// heads (random values); bytes per repetition: every key and value once. ridge::Error for another
// variant name.
Timing time_decode_attention(int n_keys, int n_heads, int n_kv_heads, int head_dim, int reps, double* kv_bytes,
                             const std::string& variant = "v3_wide");

// cuBLAS's BF16 GEMM (bf16 inputs, f32 accumulate and output) on the same shape, loaded with
// dlopen ($RIDGE_CUBLAS first, then libcublas.so.13, .12, .so); `why` is then the library's path or
// name, or, with false returned, the reason cuBLAS cannot be loaded or failed.
bool time_cublas_bf16(int64_t m, int64_t n, int64_t k, int reps, Timing* t, std::string* why);

}  // namespace ridge::cuda
