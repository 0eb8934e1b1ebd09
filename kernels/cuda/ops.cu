// The element-wise and row-wise kernels of ops.h: embedding, RMSNorm, rope, SwiGLU, residual add
// and argmax. Each is small and memory-bound; a row-wise kernel gives one thread block to a row
// and reduces across it with warp shuffles and one shared-memory step.
#include <cuda_runtime.h>

#include <cfloat>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/rope_math.h"
#include "weights/tensor.h"

namespace ridge::cuda {

namespace {

constexpr int kRowThreads = 256;  // threads per row-wise block (8 warps)
constexpr int kEltThreads = 256;  // threads per block of element-wise kernels

// Sum of v over a block of kRowThreads threads; every thread gets the total. Uses red (kRowThreads/32).
__device__ float block_sum(float v, float* red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = 0.0f;
    for (int w = 0; w < kRowThreads / 32; w++) t += red[w];  // same order in every thread
    __syncthreads();  // red may be reused by the caller
    return t;
}

// ---- embedding ---------------------------------------------------------------------------
// Launch: grid m, block kRowThreads; thread t writes elements t, t + kRowThreads, ... of row i.
__global__ void embed_kernel(Matrix table, const int32_t* __restrict__ tokens, float* __restrict__ out) {
    const int64_t i = blockIdx.x;
    const int32_t t = tokens[i];
    const bool valid = t >= 0 && t < table.n;
    for (int64_t c = threadIdx.x; c < table.k; c += kRowThreads)
        out[i * table.k + c] = valid ? element(table, t, c) : __int_as_float(0x7fc00000);
}

// ---- RMSNorm -------------------------------------------------------------------------------
// Launch: grid m, block kRowThreads. Sum of squares in f32 per thread, then block_sum.
__global__ void rmsnorm_kernel(const float* x, const float* __restrict__ w, int64_t d, float eps, float* y) {
    __shared__ float red[kRowThreads / 32];
    const float* xr = x + blockIdx.x * d;  // (d)
    float* yr = y + blockIdx.x * d;        // (d)
    float ss = 0.0f;
    for (int64_t c = threadIdx.x; c < d; c += kRowThreads) ss = fmaf(xr[c], xr[c], ss);
    const float inv_rms = 1.0f / sqrtf(block_sum(ss, red) / float(d) + eps);
    for (int64_t c = threadIdx.x; c < d; c += kRowThreads) yr[c] = w[c] * (xr[c] * inv_rms);
}

// ---- rope ----------------------------------------------------------------------------------
// Launch: one thread per (row, pair), covering m * rope_dim/2 threads; each rotates its pair in
// every head of the row (the angle computed once, in double as on the CPU).
__global__ void rope_kernel(float* x, const int32_t* __restrict__ pos, int64_t m, int n_heads, int head_dim,
                            int rope_dim, float freq_base, RopeStyle style) {
    const int n_pairs = rope_dim / 2;
    const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (t >= m * n_pairs) return;
    const int64_t r = t / n_pairs;
    const int i = int(t % n_pairs);
    const double angle = rope_angle(pos[r], i, rope_dim, freq_base);
    const float c = float(cos(angle)), sn = float(sin(angle));
    int ia, ib;
    rope_pair(style, i, rope_dim, &ia, &ib);
    for (int h = 0; h < n_heads; h++) {
        float* head = x + (r * n_heads + h) * head_dim;  // (head_dim)
        const float a = head[ia], b = head[ib];
        head[ia] = a * c - b * sn;
        head[ib] = a * sn + b * c;
    }
}

// ---- SwiGLU and add ---------------------------------------------------------------------------
// Launch: one thread per element.
__global__ void swiglu_kernel(const float* gate, const float* up, int64_t n, float* out) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= n) return;
    const float g = gate[c];
    out[c] = g / (1.0f + expf(-g)) * up[c];
}
__global__ void add_kernel(float* x, const float* y, int64_t n) {
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c < n) x[c] += y[c];
}

// Launch: one thread per element of x (m * n), grid-wide.
__global__ void add_bias_kernel(float* x, const float* b, int64_t total, int64_t n) {
    const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (e < total) x[e] += b[e % n];
}

// ---- argmax --------------------------------------------------------------------------------
// (value, index) with the larger value winning, the lower index on ties, NaN never.
__device__ inline bool better(float v, int32_t i, float bv, int32_t bi) {
    if (isnan(v)) return false;
    if (isnan(bv)) return true;
    return v > bv || (v == bv && i < bi);
}
// Launch: grid m, block kRowThreads; each thread scans a strided share of the row, then the
// warps and the block combine their candidates.
__global__ void argmax_kernel(const float* __restrict__ logits, int64_t n, int32_t* ids) {
    __shared__ float best_v[kRowThreads / 32];
    __shared__ int32_t best_i[kRowThreads / 32];
    const float* row = logits + blockIdx.x * n;
    float bv = __int_as_float(0x7fc00000);  // NaN: anything beats it
    int32_t bi = INT32_MAX;
    for (int64_t c = threadIdx.x; c < n; c += kRowThreads)
        if (better(row[c], int32_t(c), bv, bi)) bv = row[c], bi = int32_t(c);
    for (int o = 16; o > 0; o >>= 1) {
        const float v = __shfl_xor_sync(0xffffffffu, bv, o);
        const int32_t i = __shfl_xor_sync(0xffffffffu, bi, o);
        if (better(v, i, bv, bi)) bv = v, bi = i;
    }
    if (threadIdx.x % 32 == 0) best_v[threadIdx.x / 32] = bv, best_i[threadIdx.x / 32] = bi;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < kRowThreads / 32; w++)
            if (better(best_v[w], best_i[w], bv, bi)) bv = best_v[w], bi = best_i[w];
        ids[blockIdx.x] = bi == INT32_MAX ? 0 : bi;  // a row of NaN: 0, as the CPU's scan gives
    }
}


void check_rows(int64_t m, const char* who) {
    if (m < 0 || m > INT32_MAX) throw Error(std::string("cuda::") + who + ": " + std::to_string(m) + " rows");
}

}  // namespace

Cost embed(const Stream& s, const Matrix& table, const int32_t* tokens, int64_t m, float* out) {
    check_rows(m, "embed");
    if (m > 0) {
        embed_kernel<<<unsigned(m), kRowThreads, 0, stream_of(s)>>>(table, tokens, out);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return embed_cost(table.type, table.k, m);
}

Cost rmsnorm(const Stream& s, const float* x, const float* w, int64_t m, int64_t d, float eps, float* y) {
    check_rows(m, "rmsnorm");
    if (m > 0) {
        rmsnorm_kernel<<<unsigned(m), kRowThreads, 0, stream_of(s)>>>(x, w, d, eps, y);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return ridge::rmsnorm_cost(m, d);
}

Cost rope(const Stream& s, float* x, const int32_t* pos, int64_t m, int n_heads, const RopeParams& p) {
    if (p.rope_dim <= 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim)
        throw Error("cuda::rope: rope_dim " + std::to_string(p.rope_dim) + " must be even, positive and <= head_dim " +
                    std::to_string(p.head_dim));
    const int64_t threads = m * (p.rope_dim / 2);
    if (threads > 0) {
        rope_kernel<<<blocks_for(threads, kEltThreads), kEltThreads, 0, stream_of(s)>>>(
            x, pos, m, n_heads, p.head_dim, p.rope_dim, p.freq_base, p.style);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return ridge::rope_cost(m, n_heads, p);
}

Cost swiglu(const Stream& s, const float* gate, const float* up, int64_t n, float* out) {
    if (n > 0) {
        swiglu_kernel<<<blocks_for(n, kEltThreads), kEltThreads, 0, stream_of(s)>>>(gate, up, n, out);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return ridge::swiglu_cost(n);
}

Cost add(const Stream& s, float* x, const float* y, int64_t n) {
    if (n > 0) {
        add_kernel<<<blocks_for(n, kEltThreads), kEltThreads, 0, stream_of(s)>>>(x, y, n);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return ridge::add_cost(n);
}

Cost add_bias(const Stream& s, float* x, const float* b, int64_t m, int64_t n) {
    if (m > 0 && n > 0) {
        add_bias_kernel<<<blocks_for(m * n, kEltThreads), kEltThreads, 0, stream_of(s)>>>(x, b, m * n, n);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return ridge::add_bias_cost(m, n);
}

Cost argmax_cost(int64_t m, int64_t n) {
    Cost c;
    c.flops = double(m) * double(n);
    c.act_read = 4.0 * double(m) * double(n);
    c.act_written = 4.0 * double(m);
    return c;
}

Cost argmax(const Stream& s, const float* logits, int64_t m, int64_t n, int32_t* ids) {
    check_rows(m, "argmax");
    if (n < 1 || n > INT32_MAX) throw Error("cuda::argmax: " + std::to_string(n) + " logits per row");
    if (m > 0) {
        argmax_kernel<<<unsigned(m), kRowThreads, 0, stream_of(s)>>>(logits, n, ids);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return argmax_cost(m, n);
}

}  // namespace ridge::cuda
