// Decode matvec on the GPU (matmul.h: matvec), the matmul cost, the dispatcher matmul() and the
// list of variants. The tiled prefill variants v1..v4 are in matmul_tiled.cu.
#include <cuda_runtime.h>

#include <climits>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/matmul.h"
#include "weights/tensor.h"

namespace ridge::cuda {

Cost matmul_cost(const Matrix& W, int64_t m) {
    return ridge::matmul_cost(W.type, W.k, W.n, m);
}

namespace {

constexpr int kWarpsPerBlock = 4;  // rows per thread block: one warp per output row

// Sum of v over the 32 lanes of a warp; every lane gets the total.
__device__ inline float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// The two f16 halves of a 32-bit word, as floats.
__device__ inline float2 halves(uint32_t u) {
    return make_float2(fp16_to_fp32(uint16_t(u & 0xffff)), fp16_to_fp32(uint16_t(u >> 16)));
}
__device__ inline float2 bhalves(uint32_t u) { return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u)); }

// Block s (32 elements) of row j into w (32), with 16-byte loads: the codes of Q4_0/Q4_1 (one
// load), Q8_0 (two), F16/BF16 (four) and F32 (eight). K-quants decode through matrix.h's decode32.
template <DType T>
__device__ inline void load_block(const Matrix& W, int64_t j, int64_t s, float* w) {
    const int64_t nb = W.k / 32;
    const int64_t b = j * nb + s;  // block index in the split arrays
    if constexpr (T == DType::Q4_0 || T == DType::Q4_1) {
        const uint4 c = __ldg(reinterpret_cast<const uint4*>(W.codes) + b);  // 16 bytes: 32 nibbles
        const float d = fp16_to_fp32(__ldg(W.d + b));
        float m = 0.0f;
        if constexpr (T == DType::Q4_1) m = fp16_to_fp32(__ldg(W.mins + b));
        const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint32_t byte = (words[i / 4] >> (8 * (i % 4))) & 0xff;
            if constexpr (T == DType::Q4_0) q4_0_pair(byte, d, w[i], w[i + 16]);
            else q4_1_pair(byte, d, m, w[i], w[i + 16]);
        }
    } else if constexpr (T == DType::Q8_0) {
        const uint4* p = reinterpret_cast<const uint4*>(W.codes) + 2 * b;
        const uint4 c0 = __ldg(p), c1 = __ldg(p + 1);
        const uint32_t words[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
        const float d = fp16_to_fp32(__ldg(W.d + b));
#pragma unroll
        for (int i = 0; i < 32; i++) w[i] = q8_0_value(int8_t((words[i / 4] >> (8 * (i % 4))) & 0xff), d);
    } else if constexpr (T == DType::F16 || T == DType::BF16) {
        const uint4* p = reinterpret_cast<const uint4*>(W.rows) + (j * W.k + 32 * s) / 8;
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const uint4 c = __ldg(p + q);
            const uint32_t words[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
            for (int t = 0; t < 4; t++) {
                const float2 f = T == DType::F16 ? halves(words[t]) : bhalves(words[t]);
                w[8 * q + 2 * t] = f.x;
                w[8 * q + 2 * t + 1] = f.y;
            }
        }
    } else if constexpr (T == DType::F32) {
        const float4* p = reinterpret_cast<const float4*>(W.rows) + (j * W.k + 32 * s) / 4;
#pragma unroll
        for (int q = 0; q < 8; q++) {
            const float4 c = __ldg(p + q);
            w[4 * q] = c.x, w[4 * q + 1] = c.y, w[4 * q + 2] = c.z, w[4 * q + 3] = c.w;
        }
    } else {
        decode32(W, j, s, w);
    }
}

// Contract: Y[i][j] = sum_c X[i][c] * W[j][c] for i < M, j < W.n, with W.k a multiple of 32.
// Launch: grid ceil(n / kWarpsPerBlock), block 32 * kWarpsPerBlock; warp w of block b owns row
//   j = b * kWarpsPerBlock + w. Lane l takes the row's 32-element blocks l, l + 32, ... : a warp's
//   loads of one step are consecutive blocks (512 contiguous bytes of Q4 codes), decoded in
//   registers and multiplied with each of the M rows of X (16-byte loads, cached: all warps read
//   the same X). The lanes' partial sums meet in a shuffle sum.
// Preconditions: X and W's arrays 16-byte aligned (cudaMalloc'd, k % 32 == 0).
// Cost: matmul_cost(W, M); W is read once whatever M is.
template <DType T, int M>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
matvec_blocks(Matrix W, const float* __restrict__ X, float* __restrict__ Y) {
    const int lane = threadIdx.x % 32;
    const int64_t j = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (j >= W.n) return;
    const int64_t nb = W.k / 32;
    float acc[M];
#pragma unroll
    for (int r = 0; r < M; r++) acc[r] = 0.0f;
#pragma unroll 2
    for (int64_t s = lane; s < nb; s += 32) {
        float w[32];  // (32) decoded weights of block s
        load_block<T>(W, j, s, w);
#pragma unroll
        for (int r = 0; r < M; r++) {
            const float4* x4 = reinterpret_cast<const float4*>(X + r * W.k + 32 * s);
            float a = 0.0f;
#pragma unroll
            for (int q = 0; q < 8; q++) {
                const float4 x = __ldg(x4 + q);
                a = fmaf(w[4 * q], x.x, a);
                a = fmaf(w[4 * q + 1], x.y, a);
                a = fmaf(w[4 * q + 2], x.z, a);
                a = fmaf(w[4 * q + 3], x.w, a);
            }
            acc[r] += a;
        }
    }
#pragma unroll
    for (int r = 0; r < M; r++) {
        const float total = warp_sum(acc[r]);
        if (lane == 0) Y[r * W.n + j] = total;
    }
}

// Contract: as matvec_blocks, for float types whose k is not a multiple of 32 (stories260K's 172
// wide FFN, say): lane l takes elements l, l + 32, ... one at a time through element().
// Launch: as matvec_blocks. Cost: matmul_cost(W, m).
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
matvec_elements(Matrix W, const float* __restrict__ X, int m, float* __restrict__ Y) {
    const int lane = threadIdx.x % 32;
    const int64_t j = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (j >= W.n) return;
    for (int r = 0; r < m; r++) {
        float a = 0.0f;
        for (int64_t c = lane; c < W.k; c += 32) a = fmaf(element(W, j, c), X[r * W.k + c], a);
        a = warp_sum(a);
        if (lane == 0) Y[r * W.n + j] = a;
    }
}

template <DType T>
void launch_blocks(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    const dim3 grid(blocks_for(W.n, kWarpsPerBlock)), block(32 * kWarpsPerBlock);
    cudaStream_t st = stream_of(s);
    switch (m) {  // the rows of X are a template argument: their accumulators stay in registers
        case 1: matvec_blocks<T, 1><<<grid, block, 0, st>>>(W, X, Y); break;
        case 2: matvec_blocks<T, 2><<<grid, block, 0, st>>>(W, X, Y); break;
        case 3: matvec_blocks<T, 3><<<grid, block, 0, st>>>(W, X, Y); break;
        case 4: matvec_blocks<T, 4><<<grid, block, 0, st>>>(W, X, Y); break;
        case 5: matvec_blocks<T, 5><<<grid, block, 0, st>>>(W, X, Y); break;
        case 6: matvec_blocks<T, 6><<<grid, block, 0, st>>>(W, X, Y); break;
        case 7: matvec_blocks<T, 7><<<grid, block, 0, st>>>(W, X, Y); break;
        case 8: matvec_blocks<T, 8><<<grid, block, 0, st>>>(W, X, Y); break;
        default: throw Error("cuda::matvec: " + std::to_string(m) + " rows, expected 1.." + std::to_string(kMatvecMaxRows));
    }
    RIDGE_CUDA_CHECK_LAUNCH();
}

}  // namespace

Cost matvec(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    if (m < 1 || m > kMatvecMaxRows)
        throw Error("cuda::matvec: " + std::to_string(m) + " rows of X, expected 1.." + std::to_string(kMatvecMaxRows));
    if (W.k % 32 != 0) {
        if (is_split(W.type) || W.type == DType::Q4_K || W.type == DType::Q6_K)
            throw Error("cuda::matvec: row length " + std::to_string(W.k) + " is not whole blocks");
        matvec_elements<<<blocks_for(W.n, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream_of(s)>>>(W, X, int(m), Y);
        RIDGE_CUDA_CHECK_LAUNCH();
        return matmul_cost(W, m);
    }
    switch (W.type) {  // one instantiation per weight type: the decode is resolved at compile time
        case DType::F32: launch_blocks<DType::F32>(s, W, X, m, Y); break;
        case DType::F16: launch_blocks<DType::F16>(s, W, X, m, Y); break;
        case DType::BF16: launch_blocks<DType::BF16>(s, W, X, m, Y); break;
        case DType::Q8_0: launch_blocks<DType::Q8_0>(s, W, X, m, Y); break;
        case DType::Q4_0: launch_blocks<DType::Q4_0>(s, W, X, m, Y); break;
        case DType::Q4_1: launch_blocks<DType::Q4_1>(s, W, X, m, Y); break;
        case DType::Q4_K: launch_blocks<DType::Q4_K>(s, W, X, m, Y); break;
        case DType::Q6_K: launch_blocks<DType::Q6_K>(s, W, X, m, Y); break;
        default: throw Error("cuda::matvec: " + std::string(dtype_name(W.type)) + " weights are not supported");
    }
    return matmul_cost(W, m);
}

Cost matmul(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    if (m <= kMatvecMaxRows) return matvec(s, W, X, m, Y);
    return matmul_v3_regblock(s, W, X, m, Y);  // the default tiled variant (f32 arithmetic)
}

const std::vector<MatmulVariant>& matmul_variants() {
    static const std::vector<MatmulVariant> v = {
        {"matvec", matvec, kMatvecMaxRows, true},
        {"v1_naive", matmul_v1_naive, INT64_MAX, true},
        {"v2_smem", matmul_v2_smem, INT64_MAX, true},
        {"v3_regblock", matmul_v3_regblock, INT64_MAX, true},
        {"v4_mma", matmul_v4_mma, INT64_MAX, false},
    };
    return v;
}

}  // namespace ridge::cuda
