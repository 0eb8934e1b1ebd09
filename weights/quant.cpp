// Plain scalar dequantization and quantization of whole rows: the dispatch on DType to the block
// decoders and reference quantizers of weights/formats/. These are the references the fast kernels
// are tested against.
#include "weights/quant.h"

#include <cmath>
#include <cstring>
#include <string>

#include "weights/formats.h"
#include "weights/error.h"

namespace ridge {

namespace {

void check_n(DType t, int64_t n, const char* what) {
    if (n < 0 || n % block_elems(t) != 0)
        throw Error(std::string(what) + ": " + std::to_string(n) + " elements is not a multiple of the " +
                    std::string(dtype_name(t)) + " block size " + std::to_string(block_elems(t)));
}

template <class Block>
void dequant_blocks(const void* src, float* dst, int64_t n, int qk) {
    const Block* b = static_cast<const Block*>(src);
    for (int64_t i = 0; i < n / qk; i++) dequant_block(b[i], dst + i * qk);
}

template <class Block>
void quant_blocks(const float* src, void* dst, int64_t n, int qk) {
    Block* b = static_cast<Block*>(dst);
    for (int64_t i = 0; i < n / qk; i++) quantize_block(src + i * qk, b[i]);
}

}  // namespace

bool can_dequantize(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0:
        case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::Q4_K: case DType::Q5_K:
        case DType::Q6_K:
            return true;
        default:
            return false;
    }
}

bool can_quantize(DType t) {
    switch (t) {
        case DType::F32: case DType::F16: case DType::BF16: case DType::Q8_0: case DType::Q4_0:
        case DType::Q4_1: case DType::Q5_0: case DType::Q5_1:
            return true;
        default:
            return false;
    }
}

void dequantize_row(DType t, const void* src, float* dst, int64_t n) {
    check_n(t, n, "dequantize_row");
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
        case DType::Q4_0: dequant_blocks<block_q4_0>(src, dst, n, QK4_0); return;
        case DType::Q4_1: dequant_blocks<block_q4_1>(src, dst, n, QK4_1); return;
        case DType::Q5_0: dequant_blocks<block_q5_0>(src, dst, n, QK5_0); return;
        case DType::Q5_1: dequant_blocks<block_q5_1>(src, dst, n, QK5_1); return;
        case DType::Q8_0: dequant_blocks<block_q8_0>(src, dst, n, QK8_0); return;
        case DType::Q4_K: dequant_blocks<block_q4_K>(src, dst, n, QK_K); return;
        case DType::Q5_K: dequant_blocks<block_q5_K>(src, dst, n, QK_K); return;
        case DType::Q6_K: dequant_blocks<block_q6_K>(src, dst, n, QK_K); return;
        default: break;
    }
    throw Error("dequantize_row: type " + std::string(dtype_name(t)) + " is not supported");
}

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
    check_n(t, n, "quantize_row");
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
        case DType::Q4_0: quant_blocks<block_q4_0>(src, dst, n, QK4_0); return;
        case DType::Q4_1: quant_blocks<block_q4_1>(src, dst, n, QK4_1); return;
        case DType::Q5_0: quant_blocks<block_q5_0>(src, dst, n, QK5_0); return;
        case DType::Q5_1: quant_blocks<block_q5_1>(src, dst, n, QK5_1); return;
        case DType::Q8_0: quant_blocks<block_q8_0>(src, dst, n, QK8_0); return;
        default: break;
    }
    throw Error("quantize_row: type " + std::string(dtype_name(t)) + " is not supported");
}

}  // namespace ridge
