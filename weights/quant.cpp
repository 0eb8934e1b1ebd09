// Plain scalar dequantization (all formats in blocks.h plus F32/F16/BF16) and quantization of the
// simple formats, rounding exactly as gguf-py / ggml's reference quantizers do (float32 math, the
// same operation order). These are the references the fast kernels are tested against.
#include "weights/quant.h"

#include <cmath>
#include <cstring>
#include <string>

#include "weights/blocks.h"
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

// ---- quantizers: one block of 32 floats x -> one block --------------------------------------

// Q8_0: d = max|x| / 127, q = round-half-away(x / d).
void quantize_block_q8_0(const float* x, block_q8_0& b) {
    float amax = 0.0f;
    for (int j = 0; j < QK8_0; j++) amax = std::fmax(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < QK8_0; j++) b.qs[j] = int8_t(std::roundf(x[j] * id));
}

// The signed value of largest magnitude (the first one on ties).
float signed_absmax(const float* x, int n) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++)
        if (amax < std::fabs(x[j])) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    return max;
}

int clamp_int(float v, int hi) {  // truncation toward zero, then clamped to [0, hi]
    int q = int(v);
    return q < 0 ? 0 : (q > hi ? hi : q);
}

// Q4_0: d = max / -8 (max: signed value of largest magnitude), q = trunc(x/d + 8.5) in [0, 15].
void quantize_block_q4_0(const float* x, block_q4_0& b) {
    const float d = signed_absmax(x, QK4_0) / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    for (int j = 0; j < QK4_0 / 2; j++) {
        const float s0 = x[j] * id, s1 = x[j + QK4_0 / 2] * id;
        const int q0 = clamp_int(s0 + 8.5f, 15), q1 = clamp_int(s1 + 8.5f, 15);
        b.qs[j] = uint8_t(q0 | (q1 << 4));
    }
}

// Q4_1: d = (max - min) / 15, m = min, q = trunc((x - min)/d + 0.5) in [0, 15].
void quantize_block_q4_1(const float* x, block_q4_1& b) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK4_1; j++) {
        mn = std::fmin(mn, x[j]);
        mx = std::fmax(mx, x[j]);
    }
    const float d = (mx - mn) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(mn);
    for (int j = 0; j < QK4_1 / 2; j++) {
        const float s0 = (x[j] - mn) * id, s1 = (x[j + QK4_1 / 2] - mn) * id;
        const int q0 = clamp_int(s0 + 0.5f, 15), q1 = clamp_int(s1 + 0.5f, 15);
        b.qs[j] = uint8_t(q0 | (q1 << 4));
    }
}

// Q5_0: d = max / -16, q = trunc(x/d + 16.5) in [0, 31]; bit 4 of q goes to qh.
void quantize_block_q5_0(const float* x, block_q5_0& b) {
    const float d = signed_absmax(x, QK5_0) / -16.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_0 / 2; j++) {
        const float s0 = x[j] * id, s1 = x[j + QK5_0 / 2] * id;
        const int q0 = clamp_int(s0 + 16.5f, 31), q1 = clamp_int(s1 + 16.5f, 31);
        b.qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= uint32_t(q0 >> 4) << j;
        qh |= uint32_t(q1 >> 4) << (j + QK5_0 / 2);
    }
    for (int k = 0; k < 4; k++) b.qh[k] = uint8_t(qh >> (8 * k));
}

// Q5_1: d = (max - min) / 31, m = min, q = trunc((x - min)/d + 0.5) in [0, 31].
void quantize_block_q5_1(const float* x, block_q5_1& b) {
    float mn = x[0], mx = x[0];
    for (int j = 1; j < QK5_1; j++) {
        mn = std::fmin(mn, x[j]);
        mx = std::fmax(mx, x[j]);
    }
    const float d = (mx - mn) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    b.d = fp32_to_fp16(d);
    b.m = fp32_to_fp16(mn);
    uint32_t qh = 0;
    for (int j = 0; j < QK5_1 / 2; j++) {
        const float s0 = (x[j] - mn) * id, s1 = (x[j + QK5_1 / 2] - mn) * id;
        const int q0 = clamp_int(s0 + 0.5f, 31), q1 = clamp_int(s1 + 0.5f, 31);
        b.qs[j] = uint8_t((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= uint32_t(q0 >> 4) << j;
        qh |= uint32_t(q1 >> 4) << (j + QK5_1 / 2);
    }
    for (int k = 0; k < 4; k++) b.qh[k] = uint8_t(qh >> (8 * k));
}

template <class Block>
void quant_blocks(const float* src, void* dst, int64_t n, int qk, void (*fn)(const float*, Block&)) {
    Block* b = static_cast<Block*>(dst);
    for (int64_t i = 0; i < n / qk; i++) fn(src + i * qk, b[i]);
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
        case DType::Q4_0: quant_blocks<block_q4_0>(src, dst, n, QK4_0, quantize_block_q4_0); return;
        case DType::Q4_1: quant_blocks<block_q4_1>(src, dst, n, QK4_1, quantize_block_q4_1); return;
        case DType::Q5_0: quant_blocks<block_q5_0>(src, dst, n, QK5_0, quantize_block_q5_0); return;
        case DType::Q5_1: quant_blocks<block_q5_1>(src, dst, n, QK5_1, quantize_block_q5_1); return;
        case DType::Q8_0: quant_blocks<block_q8_0>(src, dst, n, QK8_0, quantize_block_q8_0); return;
        default: break;
    }
    throw Error("quantize_row: type " + std::string(dtype_name(t)) + " is not supported");
}

}  // namespace ridge
