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
#include "weights/blocks.h"
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

// Element c of row j, as f32 (dequantize_row's value, up to the contraction of d*q + m into one
// FMA that nvcc makes in device code).
RIDGE_HD inline float element(const Matrix& W, int64_t j, int64_t c) {
    const int64_t nb = W.k / 32;  // 32-element blocks per row
    switch (W.type) {
        case DType::F32: return reinterpret_cast<const float*>(W.rows)[j * W.k + c];
        case DType::F16: return fp16_to_fp32(reinterpret_cast<const uint16_t*>(W.rows)[j * W.k + c]);
        case DType::BF16: return bf16_to_fp32(reinterpret_cast<const uint16_t*>(W.rows)[j * W.k + c]);
        case DType::Q4_0:
        case DType::Q4_1: {
            const int64_t b = j * nb + c / 32;
            const int e = int(c % 32);
            const uint8_t byte = W.codes[b * 16 + (e % 16)];
            const int q = e < 16 ? (byte & 0x0f) : (byte >> 4);
            const float d = fp16_to_fp32(W.d[b]);
            if (W.type == DType::Q4_0) return d * float(q - 8);
            const float t = d * float(q);
            return t + fp16_to_fp32(W.mins[b]);
        }
        case DType::Q8_0: {
            const int64_t b = j * nb + c / 32;
            return float(int8_t(W.codes[b * 32 + c % 32])) * fp16_to_fp32(W.d[b]);
        }
        case DType::Q4_K: {
            const block_q4_K& blk = reinterpret_cast<const block_q4_K*>(W.rows)[j * (W.k / QK_K) + c / QK_K];
            const int e = int(c % QK_K), s = e / 32, l = e % 32;  // sub-block s, element l
            uint8_t sc, mn;
            q4k_scale_min(s, blk.scales, &sc, &mn);
            const float dj = fp16_to_fp32(blk.d) * float(sc), mj = fp16_to_fp32(blk.dmin) * float(mn);
            const float t = dj * float((blk.qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 0x0f);
            return t - mj;
        }
        case DType::Q6_K: {
            const block_q6_K& blk = reinterpret_cast<const block_q6_K*>(W.rows)[j * (W.k / QK_K) + c / QK_K];
            const int e = int(c % QK_K), h = e / 128, q4 = (e % 128) / 32, l = e % 32;
            const uint8_t lo = (blk.ql[64 * h + 32 * (q4 & 1) + l] >> (4 * (q4 >> 1))) & 0x0f;
            const uint8_t hi = (blk.qh[32 * h + l] >> (2 * q4)) & 0x03;
            const float ds = fp16_to_fp32(blk.d) * float(blk.scales[e / 16]);
            return ds * float(int(lo | (hi << 4)) - 32);
        }
        default: return 0.0f;  // not reachable: pack_matrix accepts only supported types
    }
}

// Elements 32s .. 32s+31 of row j (s < k/32; k a multiple of 32) into y (32), for every supported type: the unit of
// work of the matvec's lanes. Each element is element(W, j, 32s + i), computed with the block's
// scales loaded once.
RIDGE_HD inline void decode32(const Matrix& W, int64_t j, int64_t s, float* y) {
    const int64_t nb = W.k / 32;
    switch (W.type) {
        case DType::Q4_0:
        case DType::Q4_1: {
            const int64_t b = j * nb + s;
            const uint8_t* q = W.codes + b * 16;
            const float d = fp16_to_fp32(W.d[b]);
            const float m = W.type == DType::Q4_1 ? fp16_to_fp32(W.mins[b]) : 0.0f;
            for (int i = 0; i < 16; i++) {
                if (W.type == DType::Q4_0) {
                    y[i] = d * float((q[i] & 0x0f) - 8);
                    y[i + 16] = d * float((q[i] >> 4) - 8);
                } else {
                    const float lo = d * float(q[i] & 0x0f), hi = d * float(q[i] >> 4);
                    y[i] = lo + m;
                    y[i + 16] = hi + m;
                }
            }
            return;
        }
        case DType::Q8_0: {
            const int64_t b = j * nb + s;
            const float d = fp16_to_fp32(W.d[b]);
            for (int i = 0; i < 32; i++) y[i] = float(int8_t(W.codes[b * 32 + i])) * d;
            return;
        }
        case DType::Q4_K: {
            const block_q4_K& blk = reinterpret_cast<const block_q4_K*>(W.rows)[j * (W.k / QK_K) + s / 8];
            const int sub = int(s % 8);
            uint8_t sc, mn;
            q4k_scale_min(sub, blk.scales, &sc, &mn);
            const float dj = fp16_to_fp32(blk.d) * float(sc), mj = fp16_to_fp32(blk.dmin) * float(mn);
            const uint8_t* q = blk.qs + 32 * (sub / 2);
            const int shift = 4 * (sub % 2);
            for (int l = 0; l < 32; l++) {
                const float t = dj * float((q[l] >> shift) & 0x0f);
                y[l] = t - mj;
            }
            return;
        }
        case DType::Q6_K: {
            const block_q6_K& blk = reinterpret_cast<const block_q6_K*>(W.rows)[j * (W.k / QK_K) + s / 8];
            const int e0 = int(s % 8) * 32, h = e0 / 128, q4 = (e0 % 128) / 32;
            const float d = fp16_to_fp32(blk.d);
            const float ds0 = d * float(blk.scales[e0 / 16]), ds1 = d * float(blk.scales[e0 / 16 + 1]);
            for (int l = 0; l < 32; l++) {
                const uint8_t lo = (blk.ql[64 * h + 32 * (q4 & 1) + l] >> (4 * (q4 >> 1))) & 0x0f;
                const uint8_t hi = (blk.qh[32 * h + l] >> (2 * q4)) & 0x03;
                y[l] = (l < 16 ? ds0 : ds1) * float(int(lo | (hi << 4)) - 32);
            }
            return;
        }
        default:
            for (int i = 0; i < 32; i++) y[i] = element(W, j, 32 * s + i);
    }
}

}  // namespace ridge::cuda
