// Decode matvec on the GPU (matmul.h: matvec), the matmul cost, the dispatcher matmul() and the
// list of variants. The tiled prefill variants v1..v4 are in matmul_tiled.cu.
#include <cuda_runtime.h>

#include <climits>
#include <string>
#include <type_traits>

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

// The bytes of one 32-element block as a lane loads them, 16 at a time: the codes of Q4_0/Q4_1
// (c[0]) or Q8_0 (c[0..1]) with the f16 scale d (and Q4_1's minimum m), F16/BF16 (c[0..3]) or F32
// (c[0..7]). K-quants load nothing here: they decode through matrix.h's decode32.
struct RawBlock {
    uint4 c[8];
    uint16_t d, m;
};

// Block s of row j's bytes into r (its loads issued; nothing waits for them yet).
template <DType T>
__device__ inline void load_raw(const Matrix& W, int64_t j, int64_t s, RawBlock& r) {
    const int64_t b = j * (W.k / 32) + s;  // block index in the split arrays
    if constexpr (T == DType::Q4_0 || T == DType::Q4_1) {
        r.c[0] = __ldg(reinterpret_cast<const uint4*>(W.codes) + b);  // 16 bytes: 32 nibbles
        r.d = __ldg(W.d + b);
        if constexpr (T == DType::Q4_1) r.m = __ldg(W.mins + b);
    } else if constexpr (T == DType::Q8_0) {
        const uint4* p = reinterpret_cast<const uint4*>(W.codes) + 2 * b;
        r.c[0] = __ldg(p), r.c[1] = __ldg(p + 1);
        r.d = __ldg(W.d + b);
    } else if constexpr (T == DType::F16 || T == DType::BF16) {
        const uint4* p = reinterpret_cast<const uint4*>(W.rows) + (j * W.k + 32 * s) / 8;
#pragma unroll
        for (int q = 0; q < 4; q++) r.c[q] = __ldg(p + q);
    } else if constexpr (T == DType::F32) {
        const uint4* p = reinterpret_cast<const uint4*>(W.rows) + (j * W.k + 32 * s) / 4;
#pragma unroll
        for (int q = 0; q < 8; q++) r.c[q] = __ldg(p + q);
    }
}

// The 32 weights of block s of row j from its bytes r (load_raw's) into w (32), by the formats'
// decode (weights/formats/).
template <DType T>
__device__ inline void decode_raw(const Matrix& W, int64_t j, int64_t s, const RawBlock& r, float* w) {
    if constexpr (T == DType::Q4_0 || T == DType::Q4_1) {
        const float d = fp16_to_fp32(r.d);
        const float m = T == DType::Q4_1 ? fp16_to_fp32(r.m) : 0.0f;
        const uint32_t words[4] = {r.c[0].x, r.c[0].y, r.c[0].z, r.c[0].w};
#pragma unroll
        for (int i = 0; i < 16; i++) {
            const uint32_t byte = (words[i / 4] >> (8 * (i % 4))) & 0xff;
            if constexpr (T == DType::Q4_0) q4_0_pair(byte, d, w[i], w[i + 16]);
            else q4_1_pair(byte, d, m, w[i], w[i + 16]);
        }
    } else if constexpr (T == DType::Q8_0) {
        const uint32_t words[8] = {r.c[0].x, r.c[0].y, r.c[0].z, r.c[0].w, r.c[1].x, r.c[1].y, r.c[1].z, r.c[1].w};
        const float d = fp16_to_fp32(r.d);
#pragma unroll
        for (int i = 0; i < 32; i++) w[i] = q8_0_value(int8_t((words[i / 4] >> (8 * (i % 4))) & 0xff), d);
    } else if constexpr (T == DType::F16 || T == DType::BF16) {
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const uint32_t words[4] = {r.c[q].x, r.c[q].y, r.c[q].z, r.c[q].w};
#pragma unroll
            for (int t = 0; t < 4; t++) {
                const float2 f = T == DType::F16 ? halves(words[t]) : bhalves(words[t]);
                w[8 * q + 2 * t] = f.x;
                w[8 * q + 2 * t + 1] = f.y;
            }
        }
    } else if constexpr (T == DType::F32) {
#pragma unroll
        for (int q = 0; q < 8; q++) {
            w[4 * q] = __uint_as_float(r.c[q].x), w[4 * q + 1] = __uint_as_float(r.c[q].y);
            w[4 * q + 2] = __uint_as_float(r.c[q].z), w[4 * q + 3] = __uint_as_float(r.c[q].w);
        }
    } else {
        decode32(W, j, s, w);
    }
}

// Block s (32 elements) of row j into w (32): its loads, then its decode.
template <DType T>
__device__ inline void load_block(const Matrix& W, int64_t j, int64_t s, float* w) {
    RawBlock r;
    load_raw<T>(W, j, s, r);
    decode_raw<T>(W, j, s, r, w);
}

// acc[r] += the dot product of block s's 32 weights w with row r of X, for the M rows (16-byte
// loads of X, cached: all warps read the same X). Each row's sum over the block in the same order.
template <int M>
__device__ inline void dot_block(const float* w, const float* __restrict__ X, int64_t k, int64_t s, float* acc) {
#pragma unroll
    for (int r = 0; r < M; r++) {
        const float4* x4 = reinterpret_cast<const float4*>(X + r * k + 32 * s);
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
        dot_block<M>(w, X, W.k, s, acc);
    }
#pragma unroll
    for (int r = 0; r < M; r++) {
        const float total = warp_sum(acc[r]);
        if (lane == 0) Y[r * W.n + j] = total;
    }
}

// Changed from matvec_blocks (v2_inflight): each lane issues the loads of kInflight blocks before
// it decodes any (a BF16 lane has 128 bytes in flight, not 64), so that more of the memory
// system's latency is covered by loads already on their way. The arithmetic is matvec_blocks',
// block by block in the same order: the outputs are the same bit for bit.
// Launch, preconditions and cost: as matvec_blocks.
constexpr int kInflight = 2;

// One warp's row j of W against the M rows of X into Y[r * y_stride + j] (the v2 loop; the fused
// kernel below runs it for rows of several matrices).
template <DType T, int M>
__device__ inline void matvec_row_v2(const Matrix& W, int64_t j, const float* __restrict__ X, float* __restrict__ Y,
                                     int64_t y_stride) {
    const int lane = threadIdx.x % 32;
    const int64_t nb = W.k / 32;
    float acc[M];
#pragma unroll
    for (int r = 0; r < M; r++) acc[r] = 0.0f;
    for (int64_t s0 = lane; s0 < nb; s0 += 32 * kInflight) {
        RawBlock raw[kInflight];
#pragma unroll
        for (int u = 0; u < kInflight; u++)
            if (s0 + 32 * u < nb) load_raw<T>(W, j, s0 + 32 * u, raw[u]);
#pragma unroll
        for (int u = 0; u < kInflight; u++) {
            const int64_t s = s0 + 32 * u;
            if (s >= nb) break;
            float w[32];
            decode_raw<T>(W, j, s, raw[u], w);
            dot_block<M>(w, X, W.k, s, acc);
        }
    }
#pragma unroll
    for (int r = 0; r < M; r++) {
        const float total = warp_sum(acc[r]);
        if (lane == 0) Y[r * y_stride + j] = total;
    }
}

template <DType T, int M>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
matvec_v2_blocks(Matrix W, const float* __restrict__ X, float* __restrict__ Y) {
    const int64_t j = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (j >= W.n) return;
    matvec_row_v2<T, M>(W, j, X, Y, W.n);
}

// Several matrices of one type and row length that read the same X (q, k, v; gate, up) in one
// launch: warp g of the grid takes row g - start[o] of output o, where start[o] <= g < start[o + 1].
// Each output row is what matvec_v2_blocks gives it alone, bit for bit.
struct FusedOutputs {
    Matrix W[kMatvecMaxOutputs];
    float* Y[kMatvecMaxOutputs];
    int64_t start[kMatvecMaxOutputs + 1];
    int n;
};

template <DType T, int M>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
matvec_fused_blocks(FusedOutputs outs, const float* __restrict__ X) {
    const int64_t g = int64_t(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
    if (g >= outs.start[outs.n]) return;
    int o = 0;
    while (g >= outs.start[o + 1]) o++;
    matvec_row_v2<T, M>(outs.W[o], g - outs.start[o], X, outs.Y[o], outs.W[o].n);
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

// The rows of X are a template argument: their accumulators stay in registers. launch(M), M an
// std::integral_constant, queues the kernel instantiated for M rows.
template <DType T, class Launch>
void for_rows(int64_t m, const char* who, Launch&& launch) {
    switch (m) {
        case 1: launch(std::integral_constant<int, 1>{}); break;
        case 2: launch(std::integral_constant<int, 2>{}); break;
        case 3: launch(std::integral_constant<int, 3>{}); break;
        case 4: launch(std::integral_constant<int, 4>{}); break;
        case 5: launch(std::integral_constant<int, 5>{}); break;
        case 6: launch(std::integral_constant<int, 6>{}); break;
        case 7: launch(std::integral_constant<int, 7>{}); break;
        case 8: launch(std::integral_constant<int, 8>{}); break;
        default: throw Error(std::string(who) + ": " + std::to_string(m) + " rows, expected 1.." + std::to_string(kMatvecMaxRows));
    }
    RIDGE_CUDA_CHECK_LAUNCH();
}

template <DType T>
void launch_blocks(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    const dim3 grid(blocks_for(W.n, kWarpsPerBlock)), block(32 * kWarpsPerBlock);
    cudaStream_t st = stream_of(s);
    for_rows<T>(m, "cuda::matvec", [&](auto M) { matvec_blocks<T, decltype(M)::value><<<grid, block, 0, st>>>(W, X, Y); });
}

template <DType T>
void launch_v2(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    const dim3 grid(blocks_for(W.n, kWarpsPerBlock)), block(32 * kWarpsPerBlock);
    cudaStream_t st = stream_of(s);
    for_rows<T>(m, "cuda::matvec_v2_inflight", [&](auto M) { matvec_v2_blocks<T, decltype(M)::value><<<grid, block, 0, st>>>(W, X, Y); });
}

template <DType T>
void launch_fused(const Stream& s, const FusedOutputs& outs, const float* X, int64_t m) {
    const dim3 grid(blocks_for(outs.start[outs.n], kWarpsPerBlock)), block(32 * kWarpsPerBlock);
    cudaStream_t st = stream_of(s);
    for_rows<T>(m, "cuda::matvec_fused", [&](auto M) { matvec_fused_blocks<T, decltype(M)::value><<<grid, block, 0, st>>>(outs, X); });
}

// One launch per weight type: the decode is resolved at compile time.
template <template <DType> class L, class... A>
void by_type(DType t, const char* who, A&&... a) {
    switch (t) {
        case DType::F32: L<DType::F32>::run(a...); break;
        case DType::F16: L<DType::F16>::run(a...); break;
        case DType::BF16: L<DType::BF16>::run(a...); break;
        case DType::Q8_0: L<DType::Q8_0>::run(a...); break;
        case DType::Q4_0: L<DType::Q4_0>::run(a...); break;
        case DType::Q4_1: L<DType::Q4_1>::run(a...); break;
        case DType::Q4_K: L<DType::Q4_K>::run(a...); break;
        case DType::Q6_K: L<DType::Q6_K>::run(a...); break;
        default: throw Error(std::string(who) + ": " + std::string(dtype_name(t)) + " weights are not supported");
    }
}
template <DType T>
struct RunV1 {
    static void run(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) { launch_blocks<T>(s, W, X, m, Y); }
};
template <DType T>
struct RunV2 {
    static void run(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) { launch_v2<T>(s, W, X, m, Y); }
};
template <DType T>
struct RunFused {
    static void run(const Stream& s, const FusedOutputs& outs, const float* X, int64_t m) { launch_fused<T>(s, outs, X, m); }
};

// Rows of X in range, and what to do for row lengths that are not whole 32-element blocks: float
// types go to matvec_elements (true: done), block types are refused.
bool elements_instead(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y, const char* who) {
    if (m < 1 || m > kMatvecMaxRows)
        throw Error(std::string(who) + ": " + std::to_string(m) + " rows of X, expected 1.." + std::to_string(kMatvecMaxRows));
    if (W.k % 32 == 0) return false;
    if (is_split(W.type) || W.type == DType::Q4_K || W.type == DType::Q6_K)
        throw Error(std::string(who) + ": row length " + std::to_string(W.k) + " is not whole blocks");
    matvec_elements<<<blocks_for(W.n, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream_of(s)>>>(W, X, int(m), Y);
    RIDGE_CUDA_CHECK_LAUNCH();
    return true;
}

}  // namespace

Cost matvec(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    if (!elements_instead(s, W, X, m, Y, "cuda::matvec")) by_type<RunV1>(W.type, "cuda::matvec", s, W, X, m, Y);
    return matmul_cost(W, m);
}

Cost matvec_v2_inflight(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    if (!elements_instead(s, W, X, m, Y, "cuda::matvec_v2_inflight"))
        by_type<RunV2>(W.type, "cuda::matvec_v2_inflight", s, W, X, m, Y);
    return matmul_cost(W, m);
}

void matvec_fused(const Stream& s, const MatvecOut* outs, int n_outs, const float* X, int64_t m, Cost* costs) {
    if (n_outs < 1 || n_outs > kMatvecMaxOutputs)
        throw Error("cuda::matvec_fused: " + std::to_string(n_outs) + " outputs, expected 1.." +
                    std::to_string(kMatvecMaxOutputs));
    bool one_launch = outs[0].W.k % 32 == 0;
    for (int o = 1; o < n_outs; o++)
        one_launch = one_launch && outs[o].W.type == outs[0].W.type && outs[o].W.k == outs[0].W.k;
    if (!one_launch) {  // mixed types or row lengths that are not whole blocks: one launch each
        for (int o = 0; o < n_outs; o++) costs[o] = matvec_v2_inflight(s, outs[o].W, X, m, outs[o].Y);
        return;
    }
    if (m < 1 || m > kMatvecMaxRows)
        throw Error("cuda::matvec_fused: " + std::to_string(m) + " rows of X, expected 1.." + std::to_string(kMatvecMaxRows));
    FusedOutputs f{};
    f.n = n_outs;
    for (int o = 0; o < n_outs; o++) {
        f.W[o] = outs[o].W, f.Y[o] = outs[o].Y;
        f.start[o + 1] = f.start[o] + outs[o].W.n;
        costs[o] = matmul_cost(outs[o].W, m);
    }
    by_type<RunFused>(outs[0].W.type, "cuda::matvec_fused", s, f, X, m);
}

Cost matmul(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    if (m <= kMatvecMaxRows) return matvec(s, W, X, m, Y);
    return matmul_v3_regblock(s, W, X, m, Y);  // the default tiled variant (f32 arithmetic)
}

const std::vector<MatmulVariant>& matmul_variants() {
    static const std::vector<MatmulVariant> v = {
        {"matvec", matvec, kMatvecMaxRows, true},
        {"matvec_v2_inflight", matvec_v2_inflight, kMatvecMaxRows, true},
        {"v1_naive", matmul_v1_naive, INT64_MAX, true},
        {"v2_smem", matmul_v2_smem, INT64_MAX, true},
        {"v3_regblock", matmul_v3_regblock, INT64_MAX, true},
        {"v4_mma", matmul_v4_mma, INT64_MAX, false},
    };
    return v;
}

}  // namespace ridge::cuda
