// Dequantization (and, for the simple formats, quantization) of weight rows, one plain scalar
// reference per block format. The block layouts and decoders themselves are in weights/formats/.
#pragma once
#include <cstdint>

#include "weights/types.h"

namespace ridge {

// dst[0..n) = the n elements of type t at src. n must be a multiple of block_elems(t).
// Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; ridge::Error otherwise.
void dequantize_row(DType t, const void* src, float* dst, int64_t n);

// Writes row_bytes(t, n) bytes at dst encoding src[0..n), rounding as the reference (gguf-py /
// ggml) does. Supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1; ridge::Error otherwise.
void quantize_row(DType t, const float* src, void* dst, int64_t n);

bool can_dequantize(DType t);
bool can_quantize(DType t);

}  // namespace ridge
