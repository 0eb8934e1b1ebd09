// A weight matrix as the CUDA kernels read it (Matrix), how it gets to the device (upload), and
// the decode of one element or one 32-element block, shared by host and device (RIDGE_HD): the
// tests run the same decode on the CPU against dequantize_row, so the device kernels start from
// math that is checked without a GPU. Plain C++: host code includes this header with g++.
//
// Layouts. Q4_0, Q4_1 and Q8_0 blocks (18, 20 and 34 bytes) are split at upload into separate
// arrays, so that a thread loads a block's 16 or 32 bytes of codes as aligned 16-byte vectors and a
// warp's loads of consecutive blocks are one coalesced stretch:
//   codes (n, k/32, 16 bytes) for Q4_0/Q4_1 (the block's qs as stored: byte i holds element i in its
//         low nibble and element i+16 in its high), (n, k/32, 32 bytes) for Q8_0;
//   d     (n, k/32) f16 scales;  mins (n, k/32) f16 minimums (Q4_1 only).
// The bytes are the same as the file's, only reordered: a step reads n * row_bytes(type, k) of
// weights either way. F32, F16, BF16, Q4_K and Q6_K rows stay as GGUF stores them.
#pragma once
#include <cstdint>
#include <string>

#include "kernels/cuda/runtime.h"
#include "weights/formats.h"
#include "weights/types.h"

namespace ridge {
struct TensorView;
}

namespace ridge::cuda {

struct Matrix {
    DType type = DType::F32;
    int64_t k = 0;  // elements per row (inputs)
    int64_t n = 0;  // rows (outputs)
    // Split layout (Q4_0, Q4_1, Q8_0):
    const uint8_t* codes = nullptr;  // (n, k/32, 16 or 32) bytes
    const uint16_t* d = nullptr;     // (n, k/32) f16
    const uint16_t* mins = nullptr;  // (n, k/32) f16, Q4_1 only
    // Row layout (every other type):
    const uint8_t* rows = nullptr;   // (n, row_bytes(type, k)) bytes
};

// Whether the CUDA kernels read weights of type t (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K).
bool supports(DType t);
// Whether t is stored in the split layout above.
RIDGE_HD inline bool is_split(DType t) { return t == DType::Q4_0 || t == DType::Q4_1 || t == DType::Q8_0; }
// Bytes of codes per 32-element block in the split layout (16 for Q4_0/Q4_1, 32 for Q8_0).
RIDGE_HD inline int split_code_bytes(DType t) { return t == DType::Q8_0 ? 32 : 16; }

// Where each array of the split layout starts in one buffer (codes, then d, then mins), each
// 256-byte aligned, and the buffer's size. For row-layout types: rows at 0, total = n * row bytes.
struct MatrixLayout {
    size_t codes = 0, d = 0, mins = 0, rows = 0;
    size_t total = 0;
};
MatrixLayout matrix_layout(DType t, int64_t n, int64_t k);

// The bytes of W (a 2-D weight of a supported type) in the layout above, into out (layout.total
// bytes), and the Matrix that reads them at `base` (a device address, or out itself on the host).
// ridge::Error names the tensor when its type is not supported or its rows are not whole blocks.
Matrix pack_matrix(const TensorView& W, uint8_t* out, const uint8_t* base);

// A weight matrix in device memory: its bytes (in the layout above) and the view kernels take.
struct DeviceMatrix {
    DeviceBuffer storage;
    Matrix view;
};
// Packs W on the host and copies it to the device (ridge::Error as pack_matrix, or on a CUDA failure).
DeviceMatrix upload_matrix(const TensorView& W);

// ---- decode, on host and device -------------------------------------------------------------
// The arithmetic is the formats' (weights/formats/); these find a block in either layout.

// Element c of row j, as f32 (dequantize_row's value, up to the contraction of d*q + m into one
// FMA that nvcc makes in device code).
RIDGE_HD inline float element(const Matrix& W, int64_t j, int64_t c) {
    const int64_t nb = W.k / 32;  // 32-element blocks per row
    const int64_t b = j * nb + c / 32;
    const int e = int(c % 32);
    switch (W.type) {
        case DType::F32: return reinterpret_cast<const float*>(W.rows)[j * W.k + c];
        case DType::F16: return fp16_to_fp32(reinterpret_cast<const uint16_t*>(W.rows)[j * W.k + c]);
        case DType::BF16: return bf16_to_fp32(reinterpret_cast<const uint16_t*>(W.rows)[j * W.k + c]);
        case DType::Q4_0: return q4_0_element(W.codes + b * 16, fp16_to_fp32(W.d[b]), e);
        case DType::Q4_1: return q4_1_element(W.codes + b * 16, fp16_to_fp32(W.d[b]), fp16_to_fp32(W.mins[b]), e);
        case DType::Q8_0: return q8_0_value(int8_t(W.codes[b * 32 + e]), fp16_to_fp32(W.d[b]));
        case DType::Q4_K:
            return q4_K_element(reinterpret_cast<const block_q4_K*>(W.rows)[j * (W.k / QK_K) + c / QK_K], int(c % QK_K));
        case DType::Q6_K:
            return q6_K_element(reinterpret_cast<const block_q6_K*>(W.rows)[j * (W.k / QK_K) + c / QK_K], int(c % QK_K));
        default: return 0.0f;  // not reachable: pack_matrix accepts only supported types
    }
}

// Elements 32s .. 32s+31 of row j (s < k/32; k a multiple of 32) into y (32), for every supported type: the unit of
// work of the matvec's lanes. Each element is element(W, j, 32s + i), computed with the block's
// scales loaded once.
RIDGE_HD inline void decode32(const Matrix& W, int64_t j, int64_t s, float* y) {
    const int64_t b = j * (W.k / 32) + s;
    switch (W.type) {
        case DType::Q4_0: return q4_0_decode(W.codes + b * 16, fp16_to_fp32(W.d[b]), y);
        case DType::Q4_1: return q4_1_decode(W.codes + b * 16, fp16_to_fp32(W.d[b]), fp16_to_fp32(W.mins[b]), y);
        case DType::Q8_0: {
            const float d = fp16_to_fp32(W.d[b]);
            for (int i = 0; i < 32; i++) y[i] = q8_0_value(int8_t(W.codes[b * 32 + i]), d);
            return;
        }
        case DType::Q4_K:
            return q4_K_sub_block(reinterpret_cast<const block_q4_K*>(W.rows)[j * (W.k / QK_K) + s / 8], int(s % 8), y);
        case DType::Q6_K:
            return q6_K_chunk(reinterpret_cast<const block_q6_K*>(W.rows)[j * (W.k / QK_K) + s / 8], int(s % 8), y);
        default:
            for (int i = 0; i < 32; i++) y[i] = element(W, j, 32 * s + i);
    }
}

}  // namespace ridge::cuda
