// Rows of any weight type: the dispatch on DType to the block decoders and reference quantizers of
// weights/formats/ (the scalar references the fast kernels are tested against). Adding a format is
// its header in weights/formats/ plus its cases here and in weights/types.h.
//   dequantize_row: dst[0..n) = the n elements of type t at src. n must be a multiple of
//     block_elems(t). F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K; ridge::Error
//     for any other type or n.
//   quantize_row: writes row_bytes(t, n) bytes at dst encoding src[0..n), rounding as the reference
//     (gguf-py / ggml) does. F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K (the
//     K-quants as llama-quantize without an importance matrix); ridge::Error otherwise.
// Header-only, as the formats it dispatches to: each function is a switch over their inline decoders.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

#include "weights/error.h"
#include "weights/formats.h"
#include "weights/types.h"

namespace ridge {

namespace quant_detail {

inline void check_n(DType t, int64_t n, const char* what) {
    if (n < 0 || n % block_elems(t) != 0)
        throw Error(std::string(what) + ": " + std::to_string(n) + " elements is not a multiple of the " +
                    std::string(dtype_name(t)) + " block size " + std::to_string(block_elems(t)));
}

template <class Block>
inline void dequant_blocks(const void* src, float* dst, int64_t n, int qk) {
    const Block* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / qk; i++) dequant_block(b[i], dst + i * qk);
}

template <class Block>
inline void quant_blocks(const float* src, void* dst, int64_t n, int qk) {
    Block* b = static_cast<Block*>(dst);
    for (int64_t i = 0; i < n / qk; i++) quantize_block(src + i * qk, b[i]);
}

}  // namespace quant_detail

inline bool can_dequantize(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0:
        case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K:
        case DType::Q6_K:
            return true;
        default:
            return false;
    }
}

// Every type that can be read can be written.
inline bool can_quantize(DType t) { return can_dequantize(t); }

inline void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
    quant_detail::check_n(t, n, "dequantize_row");
    switch (t) {
        case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
        case DType::F16: {
            const uint16_t* h = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; i++) dst[i] = fp16_to_fp32(h[i]);
            return;
        }
        case DType::BF16: {
            const uint16_t* h = static_cast<const uint16_t*>(src);
            for (int64_t i = 0; i < n; i++) dst[i] = bf16_to_fp32(h[i]);
            return;
        }
        case DType::Q4_0: quant_detail::dequant_blocks<block_q4_0>(src, dst, n, QK4_0); return;
        case DType::Q4_1: quant_detail::dequant_blocks<block_q4_1>(src, dst, n, QK4_1); return;
        case DType::Q5_0: quant_detail::dequant_blocks<block_q5_0>(src, dst, n, QK5_0); return;
        case DType::Q5_1: quant_detail::dequant_blocks<block_q5_1>(src, dst, n, QK5_1); return;
        case DType::Q8_0: quant_detail::dequant_blocks<block_q8_0>(src, dst, n, QK8_0); return;
        case DType::Q4_K: quant_detail::dequant_blocks<block_q4_K>(src, dst, n, QK_K); return;
        case DType::Q5_K: quant_detail::dequant_blocks<block_q5_K>(src, dst, n, QK_K); return;
        case DType::Q6_K: quant_detail::dequant_blocks<block_q6_K>(src, dst, n, QK_K); return;
        default: break;
    }
    throw Error("dequantize_row: type " + std::string(dtype_name(t)) + " is not supported");
}

inline void quantize_row(DType t, const float* src, void* dst, int64_t n) {
    quant_detail::check_n(t, n, "quantize_row");
    switch (t) {
        case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
        case DType::F16: {
            uint16_t* h = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; i++) h[i] = fp32_to_fp16(src[i]);
            return;
        }
        case DType::BF16: {
            uint16_t* h = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; i++) h[i] = fp32_to_bf16(src[i]);
            return;
        }
        case DType::Q4_0: quant_detail::quant_blocks<block_q4_0>(src, dst, n, QK4_0); return;
        case DType::Q4_1: quant_detail::quant_blocks<block_q4_1>(src, dst, n, QK4_1); return;
        case DType::Q5_0: quant_detail::quant_blocks<block_q5_0>(src, dst, n, QK5_0); return;
        case DType::Q5_1: quant_detail::quant_blocks<block_q5_1>(src, dst, n, QK5_1); return;
        case DType::Q8_0: quant_detail::quant_blocks<block_q8_0>(src, dst, n, QK8_0); return;
        case DType::Q4_K: quant_detail::quant_blocks<block_q4_K>(src, dst, n, QK_K); return;
        case DType::Q5_K: quant_detail::quant_blocks<block_q5_K>(src, dst, n, QK_K); return;
        case DType::Q6_K: quant_detail::quant_blocks<block_q6_K>(src, dst, n, QK_K); return;
        default: break;
    }
    throw Error("quantize_row: type " + std::string(dtype_name(t)) + " is not supported");
}

}  // namespace ridge
