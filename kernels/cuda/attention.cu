// attention.h on CUDA: kv_store (a block per stored row), attention_v1_split (flash-decoding: a
// partial per (row, KV head, head group, split of keys), then a combine kernel) and
// attention_v2_flash (a prefill chunk in query x key tiles through shared memory, online softmax,
// causal mask). Host wrappers check every precondition they can see before queueing anything.
#include "kernels/cuda/attention.h"

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/cuda/check.cuh"
#include "weights/error.h"

namespace ridge::cuda {

namespace {

// Scores are kept in base 2 (q is pre-scaled by log2(e) / sqrt(head_dim)): e^(s - max) = 2^(s' - max').
constexpr double kLog2e = 1.4426950408889634;
constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------------
// Device helpers

// One KV element as f32 (f16 converted exactly), through the read-only cache.
__device__ __forceinline__ float kv_load(const float* p) { return __ldg(p); }
__device__ __forceinline__ float kv_load(const __half* p) { return __half2float(__ldg(p)); }
// Eight consecutive KV elements p[0..7] as f32 in 16-byte loads (one for f16, two for f32).
// Precondition: p is 16-byte aligned.
__device__ __forceinline__ void kv_load8(const float* p, float (&x)[8]) {
    const float4 a = __ldg(reinterpret_cast<const float4*>(p)), b = __ldg(reinterpret_cast<const float4*>(p) + 1);
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}
__device__ __forceinline__ void kv_load8(const __half* p, float (&x)[8]) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int t = 0; t < 4; t++) {
        const float2 f = __half22float2(h[t]);
        x[2 * t] = f.x, x[2 * t + 1] = f.y;
    }
}
// x stored as a KV element (f16: round to nearest even, __float2half_rn).
__device__ __forceinline__ void kv_put(float* p, float x) { *p = x; }
__device__ __forceinline__ void kv_put(__half* p, float x) { *p = __float2half_rn(x); }

// Weight of a softmax partial with max m once the combined max is M: 2^(m - M); 0 for an empty
// partial (m = -inf), also when M is -inf too (no NaN from -inf - -inf).
__device__ __forceinline__ float rescale(float m, float M) { return m == -INFINITY ? 0.0f : exp2f(m - M); }

// Component k (0..3, a constant after unrolling) of a float4.
__device__ __forceinline__ float component(const float4& v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// ---------------------------------------------------------------------------------------------
// kv_store

constexpr int kStoreThreads = 128;

// Contract: for each row i with 0 <= slots[i] < n_slots: K[slots[i]] = k[i], V[slots[i]] = v[i] (as T).
//   k, v: (m, kv_dim) f32; slots: (m); K, V: (n_slots, kv_dim) T (float or __half).
// Launch: grid (m), block (kStoreThreads); the threads stride over kv_dim (coalesced). A slot
// outside the cache is skipped.
// Cost: FLOPs 0; read 8*m*kv_dim + 8*m bytes; written 2*m*kv_dim*sizeof(T) bytes.
template <class T>
__global__ void __launch_bounds__(kStoreThreads)
    kv_store_kernel(const float* __restrict__ k, const float* __restrict__ v, const int64_t* __restrict__ slots,
                    T* __restrict__ K, T* __restrict__ V, int64_t n_slots, int kv_dim) {
    const int64_t i = blockIdx.x;
    const int64_t slot = slots[i];
    if (slot < 0 || slot >= n_slots) return;
    const float* k_row = k + i * kv_dim;  // (kv_dim)
    const float* v_row = v + i * kv_dim;  // (kv_dim)
    T* k_dst = K + slot * kv_dim;         // (kv_dim)
    T* v_dst = V + slot * kv_dim;         // (kv_dim)
    for (int c = threadIdx.x; c < kv_dim; c += blockDim.x) {
        kv_put(k_dst + c, k_row[c]);
        kv_put(v_dst + c, v_row[c]);
    }
}

// ---------------------------------------------------------------------------------------------
// v1_split and v3_wide: decode rows, flash-decoding (one kernel body; v3 differs in where a lane's
// dims lie and how a row's keys are split, template and argument below)

constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = 32 * kDecodeWarps;
constexpr int kDecodeDims = 8;  // head dims a lane holds: lane `sub` of a key's LPK lanes has dims sub + LPK*t

struct DecodeArgs {
    const float* q;                 // (m, n_heads * head_dim) f32
    const AttentionRow* rows;  // (m) on the device
    const void* k;                  // (n_slots, kv_dim) keys, float or __half
    const void* v;                  // (n_slots, kv_dim) values
    float* partials;                // (m, n_heads, max_splits, head_dim + 2): max, sum, weighted values
    float* out;                     // (m, n_heads * head_dim) f32
    int kv_dim, block_size, n_heads, group, head_dim;
    int max_splits;                 // grid x: splits of the longest row
    int split_cap;                  // 0: splits of kSplitKeys keys (v1); else at most this many a row (v3)
    float q_scale;                  // log2(e) / sqrt(head_dim)
};

// Keys per split of a row of n_keys keys: kSplitKeys (split_cap 0, v1), else the row's keys over
// at most split_cap splits, a multiple of 32 and at least kMinSplitKeys (v3). Depends on the row
// alone, so a row's result is the same in any batch.
constexpr int kMinSplitKeys = 64;
__host__ __device__ inline int split_keys(int n_keys, int split_cap) {
    if (split_cap <= 0) return kSplitKeys;
    const int per = ((n_keys + split_cap - 1) / split_cap + 31) / 32 * 32;
    return per < kMinSplitKeys ? kMinSplitKeys : per;
}
__host__ __device__ inline int n_splits_of(int n_keys, int split_cap) {
    const int per = split_keys(n_keys, split_cap);
    return (n_keys + per - 1) / per;
}

// Contract: for row i = blockIdx.z, KV head g and query heads h0 .. h0+ng-1 of its group (blockIdx.y
// = g * n_chunks + chunk; h0 = g*group + chunk*G, ng = min(G, group - chunk*G)), keys j of split
// blockIdx.x (j in [S*split, min(n_keys, S*(split+1))), S = split_keys(n_keys, a.split_cap); a
// split past the row's keys exits):
//   s_j = q[i,h] . K[key j, g] * log2(e)/sqrt(head_dim), M = max_j s_j, l = sum_j 2^(s_j - M),
//   acc = sum_j 2^(s_j - M) V[key j, g].
// A row with one split writes out[i,h] = acc / l itself; else partials[i,h,split] = (M, l, acc).
// Launch: grid (max_splits, n_kv_heads * ceil(group / G), m), block (kDecodeThreads). The block's
// 4 warps each run 32/LPK key streams of LPK lanes; stream t takes keys j0 + t, j0 + t + 4*32/LPK,
// ... with its own online softmax for the ng heads; the streams merge by shuffles within each
// warp, the warps through shared memory (4*G*(2 + 256) floats, static). A lane holds 8 dims of a
// key: Wide false (v1), dims sub + LPK*t, one 2- or 4-byte load each (coalesced across the LPK
// lanes); Wide true (v3), dims 8*sub .. 8*sub+7 in 16-byte loads, which needs head_dim and kv_dim
// multiples of 8 and 16-byte aligned pools. Needs head_dim <= 8*LPK, T float or __half.
// Cost: FLOPs per key and query head 4*head_dim + 4 (as counted by ridge::attention_cost); bytes:
// each key and value of the split once for the ng heads (kv_dim/n_kv_heads elements each).
template <class T, int LPK, int G, bool Wide>
__global__ void __launch_bounds__(kDecodeThreads) attention_decode_kernel(const DecodeArgs a) {
    static_assert(32 % LPK == 0 && LPK * kDecodeDims <= kMaxHeadDim, "LPK lanes per key");
    constexpr int KPW = 32 / LPK;                // key streams per warp
    constexpr int kStreams = kDecodeWarps * KPW;  // key streams per block
    __shared__ float red[kDecodeWarps][G][2 + kMaxHeadDim];  // per warp and head: max, sum, (head_dim) acc

    const int split = blockIdx.x;
    const int n_chunks = (a.group + G - 1) / G;
    const int g = blockIdx.y / n_chunks, chunk = blockIdx.y % n_chunks;
    const int64_t i = blockIdx.z;
    const AttentionRow row = a.rows[i];
    const int per_split = split_keys(row.n_keys, a.split_cap);
    const int j_begin = split * per_split;
    if (j_begin >= row.n_keys) return;  // the row has fewer splits than the longest (the whole block)
    const int j_end = min(row.n_keys, j_begin + per_split);
    const int n_splits = (row.n_keys + per_split - 1) / per_split;
    const int h0 = g * a.group + chunk * G;  // first query head of this block
    const int ng = min(G, a.group - chunk * G);  // its query heads (block-uniform)
    const int hd = a.head_dim, q_dim = a.n_heads * hd;

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int kw = lane / LPK, sub = lane % LPK;  // key stream within the warp, lane within the key
    auto dim = [sub](int t) { return Wide ? kDecodeDims * sub + t : sub + LPK * t; };  // this lane's t-th dim

    float qr[G][kDecodeDims];  // this lane's dims of each head's query, pre-scaled; 0 past head_dim
#pragma unroll
    for (int hh = 0; hh < G; hh++)
#pragma unroll
        for (int t = 0; t < kDecodeDims; t++) {
            const int c = dim(t);
            qr[hh][t] = (hh < ng && c < hd) ? a.q[i * q_dim + int64_t(h0 + hh) * hd + c] * a.q_scale : 0.0f;
        }

    float mx[G], sum[G], acc[G][kDecodeDims];  // this stream's online softmax per head
#pragma unroll
    for (int hh = 0; hh < G; hh++) {
        mx[hh] = -INFINITY;
        sum[hh] = 0.0f;
#pragma unroll
        for (int t = 0; t < kDecodeDims; t++) acc[hh][t] = 0.0f;
    }

    const T* K = static_cast<const T*>(a.k) + g * hd;  // + slot * kv_dim: KV head g's part of a slot
    const T* V = static_cast<const T*>(a.v) + g * hd;
    // jw is warp-uniform, so every lane reaches the shuffles; a stream past the split's end idles.
    for (int jw = j_begin + warp * KPW; jw < j_end; jw += kStreams) {
        const int j = jw + kw;
        const bool valid = j < j_end;
        float kr[kDecodeDims], vr[kDecodeDims];  // (8) this lane's dims of key j and value j
        if (valid) {
            const int64_t slot = int64_t(row.block_table[j / a.block_size]) * a.block_size + j % a.block_size;
            const T* ks = K + slot * a.kv_dim;
            const T* vs = V + slot * a.kv_dim;
            if constexpr (Wide) {
                if (dim(0) < hd) {  // head_dim is a multiple of 8: the lane's 8 dims are all in or all out
                    kv_load8(ks + dim(0), kr);
                    kv_load8(vs + dim(0), vr);
                } else {
#pragma unroll
                    for (int t = 0; t < kDecodeDims; t++) kr[t] = vr[t] = 0.0f;
                }
            } else {
#pragma unroll
                for (int t = 0; t < kDecodeDims; t++) {
                    const int c = dim(t);
                    kr[t] = c < hd ? kv_load(ks + c) : 0.0f;
                    vr[t] = c < hd ? kv_load(vs + c) : 0.0f;
                }
            }
        } else {
#pragma unroll
            for (int t = 0; t < kDecodeDims; t++) kr[t] = vr[t] = 0.0f;
        }
#pragma unroll
        for (int hh = 0; hh < G; hh++) {
            if (hh >= ng) break;  // block-uniform
            float s = 0.0f;
#pragma unroll
            for (int t = 0; t < kDecodeDims; t++) s = fmaf(qr[hh][t], kr[t], s);
#pragma unroll
            for (int o = LPK / 2; o > 0; o /= 2) s += __shfl_xor_sync(kFullMask, s, o);  // within the key's lanes
            if (valid) {
                const float m_new = fmaxf(mx[hh], s);
                const float alpha = exp2f(mx[hh] - m_new);  // 0 on the stream's first key (mx = -inf)
                const float p = exp2f(s - m_new);
                sum[hh] = fmaf(sum[hh], alpha, p);
#pragma unroll
                for (int t = 0; t < kDecodeDims; t++) acc[hh][t] = fmaf(p, vr[t], acc[hh][t] * alpha);
                mx[hh] = m_new;
            }
        }
    }

    // Merge the warp's KPW streams (lanes with the same sub hold the same dims).
#pragma unroll
    for (int o = LPK; o < 32; o *= 2) {
#pragma unroll
        for (int hh = 0; hh < G; hh++) {
            if (hh >= ng) break;
            const float m_o = __shfl_xor_sync(kFullMask, mx[hh], o);
            const float s_o = __shfl_xor_sync(kFullMask, sum[hh], o);
            const float m_new = fmaxf(mx[hh], m_o);
            const float w = rescale(mx[hh], m_new), w_o = rescale(m_o, m_new);
            sum[hh] = sum[hh] * w + s_o * w_o;
#pragma unroll
            for (int t = 0; t < kDecodeDims; t++) {
                const float a_o = __shfl_xor_sync(kFullMask, acc[hh][t], o);
                acc[hh][t] = acc[hh][t] * w + a_o * w_o;
            }
            mx[hh] = m_new;
        }
    }
    if (kw == 0) {
#pragma unroll
        for (int hh = 0; hh < G; hh++) {
            if (hh >= ng) break;
            if (sub == 0) {
                red[warp][hh][0] = mx[hh];
                red[warp][hh][1] = sum[hh];
            }
#pragma unroll
            for (int t = 0; t < kDecodeDims; t++) {
                const int c = dim(t);
                if (c < hd) red[warp][hh][2 + c] = acc[hh][t];
            }
        }
    }
    __syncthreads();

    // Merge the warps, in order; one (head, dim) per thread.
    for (int e = threadIdx.x; e < ng * hd; e += kDecodeThreads) {
        const int hh = e / hd, c = e % hd;
        float M = -INFINITY;
        for (int w = 0; w < kDecodeWarps; w++) M = fmaxf(M, red[w][hh][0]);  // finite: the split has a key
        float l = 0.0f, o = 0.0f;
        for (int w = 0; w < kDecodeWarps; w++) {
            const float wt = rescale(red[w][hh][0], M);
            l += wt * red[w][hh][1];
            o += wt * red[w][hh][2 + c];
        }
        const int h = h0 + hh;
        if (n_splits == 1) {
            a.out[i * q_dim + int64_t(h) * hd + c] = o / l;
        } else {
            float* rec = a.partials + ((i * a.n_heads + h) * int64_t(a.max_splits) + split) * (hd + 2);
            if (c == 0) {
                rec[0] = M;
                rec[1] = l;
            }
            rec[2 + c] = o;
        }
    }
}

// Contract: for row i = blockIdx.y and query head h = blockIdx.x, when the row has n_splits > 1:
//   M = max_s M_s, out[i,h,c] = sum_s 2^(M_s - M) acc_s[c] / sum_s 2^(M_s - M) l_s, splits in order.
//   n_splits = n_splits_of(n_keys, split_cap); partials: (m, n_heads, max_splits, head_dim + 2)
//   from attention_decode_kernel; out as there.
// Launch: grid (n_heads, m), block (32 * ceil(head_dim / 32)) threads, thread c = dim c.
// Cost: per row and head 3*n_splits*head_dim FLOPs (not counted: the contract's cost is the
// attention's); reads n_splits*(head_dim + 2) floats.
__global__ void __launch_bounds__(kMaxHeadDim)
    attention_v1_combine_kernel(const AttentionRow* __restrict__ rows, const float* __restrict__ partials,
                                int n_heads, int head_dim, int max_splits, int split_cap, float* __restrict__ out) {
    const int h = blockIdx.x, c = threadIdx.x;
    const int64_t i = blockIdx.y;
    const int n_splits = n_splits_of(rows[i].n_keys, split_cap);
    if (n_splits == 1 || c >= head_dim) return;  // one split: the split kernel wrote the output
    const int rec_len = head_dim + 2;
    const float* rec = partials + (i * n_heads + h) * int64_t(max_splits) * rec_len;  // (max_splits, head_dim + 2)
    float M = -INFINITY;
    for (int sp = 0; sp < n_splits; sp++) M = fmaxf(M, rec[int64_t(sp) * rec_len]);
    float l = 0.0f, o = 0.0f;
    for (int sp = 0; sp < n_splits; sp++) {
        const float* r = rec + int64_t(sp) * rec_len;
        const float w = exp2f(r[0] - M);  // every split holds a key: r[0] is finite
        l += w * r[1];
        o += w * r[2 + c];
    }
    out[(i * n_heads + h) * int64_t(head_dim) + c] = o / l;
}

// ---------------------------------------------------------------------------------------------
// v2_flash: a prefill chunk

constexpr int kFlashThreads = 128;
constexpr int kFlashX = 16;                  // threads along keys (and O's dims): tx
constexpr int kFlashY = kFlashThreads / kFlashX;  // threads along query vectors: ty (8)
constexpr int kFlashTM = 4;                  // query vectors per thread
constexpr int kFlashTN = 4;                  // keys per thread and key tile
constexpr int kFlashBM = kFlashY * kFlashTM;  // query vectors per tile (32)
constexpr int kFlashBN = kFlashX * kFlashTN;  // keys per tile (64)
constexpr int kFlashPS = kFlashBN + 4;        // row stride of the P tile in shared memory

struct FlashArgs {
    const float* q;              // (m, n_heads * head_dim) f32
    const int32_t* block_table;  // (ceil(n_keys of the last row / block_size)) on the device
    const void* k;               // (n_slots, kv_dim) keys, float or __half
    const void* v;               // (n_slots, kv_dim) values
    float* out;                  // (m, n_heads * head_dim) f32
    int64_t m;                   // rows of the chunk
    int first_keys;              // keys row 0 sees; row r sees first_keys + r
    int kv_dim, block_size, n_heads, group, head_dim;
    int hd8;                     // head_dim rounded up to 8: the dims of the Q and K tiles (zeros past head_dim)
    int ld;                      // row stride of the Q, K and V tiles: hd8 + 4 floats (16-byte rows, 4 mod 8:
                                 // float4 reads of 8 different rows fall in 8 different bank quads)
    float q_scale;               // log2(e) / sqrt(head_dim)
};

// Shared memory of one v2_flash block: the Q, K and V tiles and the P tile, in bytes.
size_t flash_smem_bytes(int ld) {
    return (size_t(kFlashBM) + 2 * size_t(kFlashBN)) * size_t(ld) * 4 + size_t(kFlashBM) * kFlashPS * 4;
}

// Contract: query vectors v = r * group + hh (row r of the chunk, query head g*group + hh), KV head
// g = blockIdx.y, v in the tile v0 .. v0+31 (v0 = 32 * (gridDim.x - 1 - blockIdx.x): the tiles with
// the most keys start first). For each v, with n_r = first_keys + r keys:
//   s_j = q[r, g*group+hh] . K[key j, g] * log2(e)/sqrt(head_dim) for j < n_r;
//   out[r, g*group+hh] = sum_j 2^(s_j - max) V[key j, g] / sum_j 2^(s_j - max).
// Per key tile of 64 (j0 = 64 kt, kt < ceil(keys of the tile's last row / 64)): K and V tiles into
// shared memory (a warp per key, lanes over dims; zeros past head_dim and past the last key),
// S (32 x 64) = Q K^T with each thread's 4 x 4 scores from float4 reads, the mask j >= n_r -> -inf,
// the running max (shuffles over the 16 threads of a row), P = 2^(S - max) through shared memory,
// O (32 x head_dim) = O * 2^(old max - new max) + P V in registers (thread: 4 vectors x DV dims
// tx + 16 d). Key 0 is in tile 0 and every row sees it, so each running max is finite from tile 0
// on and no -inf - -inf arises.
// Launch: grid (ceil(m * group / 32), n_kv_heads), block (kFlashThreads = 16 x 8), dynamic shared
// memory flash_smem_bytes(ld); needs head_dim <= 16 * DV, T float or __half.
// Cost: FLOPs 4*head_dim + 4 per visible (row, head, key), as ridge::attention_cost counts them
// (the masked scores of the diagonal tiles are computed too, and not counted); bytes: a tile of
// query vectors reads the keys and values of KV head g that its last row sees, once, so the chunk
// reads them ceil(m * group / 32) times (the tiles after the first mostly from L2); q read and
// out written once.
template <class T, int DV>
__global__ void __launch_bounds__(kFlashThreads, DV <= 4 ? 4 : 1) attention_v2_flash_kernel(const FlashArgs a) {
    extern __shared__ float4 flash_smem[];  // float4: 16-byte aligned rows for the float4 reads
    float* Qs = reinterpret_cast<float*>(flash_smem);  // (32, ld) the tile's query vectors, pre-scaled
    float* Ks = Qs + kFlashBM * a.ld;                  // (64, ld) keys of the key tile
    float* Vs = Ks + kFlashBN * a.ld;                  // (64, ld) values of the key tile
    float* Ps = Vs + kFlashBN * a.ld;                  // (32, kFlashPS) 2^(s - max) of the key tile

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int tx = tid % kFlashX, ty = tid / kFlashX;  // a row's 16 threads are one half of a warp
    const int g = blockIdx.y;
    const int hd = a.head_dim, q_dim = a.n_heads * hd;
    const int64_t n_vec = a.m * a.group;
    const int64_t v0 = (int64_t(gridDim.x) - 1 - blockIdx.x) * kFlashBM;
    const int64_t r_end = (v0 + kFlashBM - 1) / a.group;
    const int64_t r_last = r_end < a.m - 1 ? r_end : a.m - 1;  // the tile's last row
    const int k_max = a.first_keys + int(r_last);                          // keys it sees
    const int n_kt = (k_max + kFlashBN - 1) / kFlashBN;
    const T* K = static_cast<const T*>(a.k) + g * hd;  // + slot * kv_dim: KV head g's part of a slot
    const T* V = static_cast<const T*>(a.v) + g * hd;

    for (int vv = warp; vv < kFlashBM; vv += kFlashThreads / 32) {
        const int64_t v = v0 + vv;
        float* dst = Qs + vv * a.ld;
        if (v < n_vec) {
            const int64_t r = v / a.group;
            const int hh = int(v % a.group);
            const float* src = a.q + r * q_dim + int64_t(g * a.group + hh) * hd;  // (head_dim)
            for (int c = lane; c < a.hd8; c += 32) dst[c] = c < hd ? src[c] * a.q_scale : 0.0f;
        } else {
            for (int c = lane; c < a.hd8; c += 32) dst[c] = 0.0f;
        }
    }

    int n_keys[kFlashTM];  // keys each of the thread's query vectors sees (past the chunk: harmless)
    float m_run[kFlashTM], l_run[kFlashTM], o[kFlashTM][DV];
#pragma unroll
    for (int r = 0; r < kFlashTM; r++) {
        n_keys[r] = a.first_keys + int((v0 + ty * kFlashTM + r) / a.group);
        m_run[r] = -INFINITY;
        l_run[r] = 0.0f;  // this thread's keys' share; the row's 16 threads add up at the end
#pragma unroll
        for (int d = 0; d < DV; d++) o[r][d] = 0.0f;
    }

    for (int kt = 0; kt < n_kt; kt++) {
        const int j0 = kt * kFlashBN;
        __syncthreads();  // the previous tile's K, V and P are used up; at kt = 0 the Q tile is in
        for (int kk = warp; kk < kFlashBN; kk += kFlashThreads / 32) {
            const int j = j0 + kk;
            float* kd = Ks + kk * a.ld;
            float* vd = Vs + kk * a.ld;
            if (j < k_max) {
                const int64_t slot = int64_t(a.block_table[j / a.block_size]) * a.block_size + j % a.block_size;
                const T* ks = K + slot * a.kv_dim;
                const T* vs = V + slot * a.kv_dim;
                for (int c = lane; c < a.hd8; c += 32) {
                    kd[c] = c < hd ? kv_load(ks + c) : 0.0f;
                    vd[c] = c < hd ? kv_load(vs + c) : 0.0f;
                }
            } else {  // past every row's keys: zeros (a masked score's weight is 0, and 0 * 0 is no NaN)
                for (int c = lane; c < a.hd8; c += 32) kd[c] = vd[c] = 0.0f;
            }
        }
        __syncthreads();

        float s[kFlashTM][kFlashTN];  // scores of vectors ty*4 + r and keys j0 + tx + 16 b
#pragma unroll
        for (int r = 0; r < kFlashTM; r++)
#pragma unroll
            for (int b = 0; b < kFlashTN; b++) s[r][b] = 0.0f;
#pragma unroll 1
        for (int c = 0; c < a.hd8; c += 4) {
            float4 qv[kFlashTM], kv[kFlashTN];
#pragma unroll
            for (int r = 0; r < kFlashTM; r++)
                qv[r] = *reinterpret_cast<const float4*>(Qs + (ty * kFlashTM + r) * a.ld + c);
#pragma unroll
            for (int b = 0; b < kFlashTN; b++)
                kv[b] = *reinterpret_cast<const float4*>(Ks + (tx + kFlashX * b) * a.ld + c);
#pragma unroll
            for (int r = 0; r < kFlashTM; r++)
#pragma unroll
                for (int b = 0; b < kFlashTN; b++) {
                    s[r][b] = fmaf(qv[r].x, kv[b].x, s[r][b]);
                    s[r][b] = fmaf(qv[r].y, kv[b].y, s[r][b]);
                    s[r][b] = fmaf(qv[r].z, kv[b].z, s[r][b]);
                    s[r][b] = fmaf(qv[r].w, kv[b].w, s[r][b]);
                }
        }

#pragma unroll
        for (int r = 0; r < kFlashTM; r++) {
            float mt = -INFINITY;
#pragma unroll
            for (int b = 0; b < kFlashTN; b++) {
                if (j0 + tx + kFlashX * b >= n_keys[r]) s[r][b] = -INFINITY;  // the causal mask
                mt = fmaxf(mt, s[r][b]);
            }
#pragma unroll
            for (int off = kFlashX / 2; off > 0; off /= 2) mt = fmaxf(mt, __shfl_xor_sync(kFullMask, mt, off));
            const float m_new = fmaxf(m_run[r], mt);     // finite (key 0, tile 0)
            const float alpha = exp2f(m_run[r] - m_new);  // 0 at tile 0
            float ps = 0.0f;
#pragma unroll
            for (int b = 0; b < kFlashTN; b++) {
                const float p = exp2f(s[r][b] - m_new);  // masked: 2^-inf = 0
                ps += p;
                Ps[(ty * kFlashTM + r) * kFlashPS + tx + kFlashX * b] = p;
            }
            l_run[r] = fmaf(l_run[r], alpha, ps);
#pragma unroll
            for (int d = 0; d < DV; d++) o[r][d] *= alpha;
            m_run[r] = m_new;
        }
        __syncthreads();

#pragma unroll 1
        for (int k4 = 0; k4 < kFlashBN; k4 += 4) {
            float4 p4[kFlashTM];
#pragma unroll
            for (int r = 0; r < kFlashTM; r++)
                p4[r] = *reinterpret_cast<const float4*>(Ps + (ty * kFlashTM + r) * kFlashPS + k4);
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                const float* v_row = Vs + (k4 + kk) * a.ld;  // (hd8) value k4 + kk
                float vv[DV];
#pragma unroll
                for (int d = 0; d < DV; d++) {
                    const int c = tx + kFlashX * d;
                    vv[d] = c < hd ? v_row[c] : 0.0f;
                }
#pragma unroll
                for (int r = 0; r < kFlashTM; r++) {
                    const float p = component(p4[r], kk);
#pragma unroll
                    for (int d = 0; d < DV; d++) o[r][d] = fmaf(p, vv[d], o[r][d]);
                }
            }
        }
    }

#pragma unroll
    for (int r = 0; r < kFlashTM; r++) {
        float l = l_run[r];
#pragma unroll
        for (int off = kFlashX / 2; off > 0; off /= 2) l += __shfl_xor_sync(kFullMask, l, off);
        const int64_t v = v0 + ty * kFlashTM + r;
        if (v < n_vec) {
            const float inv = 1.0f / l;
            const int64_t row = v / a.group;
            const int hh = int(v % a.group);
            float* dst = a.out + row * q_dim + int64_t(g * a.group + hh) * hd;  // (head_dim)
#pragma unroll
            for (int d = 0; d < DV; d++) {
                const int c = tx + kFlashX * d;
                if (c < hd) dst[c] = o[r][d] * inv;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Host side: checks and launches

size_t kv_elem_bytes(DType t, const char* who) {
    switch (t) {
        case DType::F32: return 4;
        case DType::F16: return 2;
        default:
            throw Error(std::string(who) + ": KV element type " + std::string(dtype_name(t)) + " is not F32 or F16");
    }
}

void check_shape(const KVLayer& kv, const AttentionShape& s, const char* who) {
    if (s.n_heads <= 0 || s.n_kv_heads <= 0 || s.head_dim <= 0 || s.n_heads % s.n_kv_heads != 0 ||
        s.n_kv_heads * s.head_dim != kv.kv_dim)
        throw Error(std::string(who) + ": n_heads " + std::to_string(s.n_heads) + ", n_kv_heads " +
                    std::to_string(s.n_kv_heads) + ", head_dim " + std::to_string(s.head_dim) +
                    " do not fit kv_dim " + std::to_string(kv.kv_dim));
    if (s.head_dim > kMaxHeadDim)
        throw Error(std::string(who) + ": head_dim " + std::to_string(s.head_dim) + " is above the " +
                    std::to_string(kMaxHeadDim) + " the CUDA kernels are built for");
    if (s.n_kv_heads > 65535)
        throw Error(std::string(who) + ": n_kv_heads " + std::to_string(s.n_kv_heads) +
                    " is above 65535 (a grid dimension)");
    if (kv.block_size <= 0 || kv.k == nullptr || kv.v == nullptr)
        throw Error(std::string(who) + ": the KV layer has block_size " + std::to_string(kv.block_size) +
                    (kv.k == nullptr || kv.v == nullptr ? " and no key or value pool" : ""));
}

// The host rows: m in [0, 65535], each with a block table and at least one key.
void check_rows(const AttentionRows& rows, const float* q, const float* out, bool need_device, const char* who) {
    if (rows.m < 0 || rows.m > 65535)
        throw Error(std::string(who) + ": " + std::to_string(rows.m) + " rows (0 .. 65535: a grid dimension)");
    if (rows.m == 0) return;
    if (rows.host == nullptr || (need_device && rows.device == nullptr) || q == nullptr || out == nullptr)
        throw Error(std::string(who) + ": null " +
                    (rows.host == nullptr ? "host rows" : q == nullptr ? "q" : out == nullptr ? "out" : "device rows") +
                    " for " + std::to_string(rows.m) + " rows");
    for (int64_t i = 0; i < rows.m; i++)
        if (rows.host[i].n_keys < 1 || rows.host[i].block_table == nullptr)
            throw Error(std::string(who) + ": row " + std::to_string(i) + " has " +
                        std::to_string(rows.host[i].n_keys) + " keys or no block table");
}

float q_scale(int head_dim) { return float(kLog2e / std::sqrt(double(head_dim))); }

int max_splits_of(const AttentionRow* rows_host, int64_t m, int split_cap) {
    int most = 0;
    for (int64_t i = 0; i < m; i++) most = std::max(most, n_splits_of(rows_host[i].n_keys, split_cap));
    return most;
}

// Lanes per key in v1_split: the fewest (at least 4) whose 8 dims each cover head_dim.
int lanes_per_key(int head_dim) { return head_dim <= 32 ? 4 : head_dim <= 64 ? 8 : head_dim <= 128 ? 16 : 32; }
// Query heads per v1_split block: the whole group when it is 1 or 2, else 4 (a group of 3 takes one
// block of 4 with a head idle; 8 takes two).
int heads_per_block(int group) { return group == 1 ? 1 : group == 2 ? 2 : 4; }

template <class T, int LPK, bool Wide>
void launch_decode_g(int G, dim3 grid, const DecodeArgs& a, cudaStream_t st) {
    switch (G) {
        case 1: attention_decode_kernel<T, LPK, 1, Wide><<<grid, kDecodeThreads, 0, st>>>(a); break;
        case 2: attention_decode_kernel<T, LPK, 2, Wide><<<grid, kDecodeThreads, 0, st>>>(a); break;
        default: attention_decode_kernel<T, LPK, 4, Wide><<<grid, kDecodeThreads, 0, st>>>(a); break;
    }
    RIDGE_CUDA_CHECK_LAUNCH();
}

template <class T, bool Wide>
void launch_decode(int lpk, int G, dim3 grid, const DecodeArgs& a, cudaStream_t st) {
    switch (lpk) {
        case 4: launch_decode_g<T, 4, Wide>(G, grid, a, st); break;
        case 8: launch_decode_g<T, 8, Wide>(G, grid, a, st); break;
        case 16: launch_decode_g<T, 16, Wide>(G, grid, a, st); break;
        default: launch_decode_g<T, 32, Wide>(G, grid, a, st); break;
    }
}

// v1_split (wide false, split_cap 0) and v3_wide (wide true, split_cap > 0): checks, the
// workspace, the split kernel and, when a row has several splits, the combine.
AttentionCost attention_decode(const Stream& stream, const float* q, const AttentionRows& rows, const KVLayer& kv,
                               const AttentionShape& s, float* out, DeviceBuffer& workspace, bool wide,
                               int split_cap, const char* who) {
    kv_elem_bytes(kv.type, who);
    check_shape(kv, s, who);
    check_rows(rows, q, out, /*need_device=*/true, who);
    double n_keys = 0;  // summed as the CPU sums them, so the costs agree to the bit
    for (int64_t i = 0; i < rows.m; i++) n_keys += rows.host[i].n_keys;
    const AttentionCost cost = ridge::attention_cost(rows.m, n_keys, kv.kv_dim, kv.type, s);
    if (rows.m == 0) return cost;

    const int max_splits = std::max(max_splits_of(rows.host, rows.m, split_cap), rows.launch_splits);
    const size_t ws = attention_split_workspace_bytes(rows.host, rows.m, s, rows.launch_splits, split_cap);
    if (workspace.size() < ws) {
        // Growing waits for the stream and allocates: neither may happen while the stream is being
        // captured into a graph, so the caller sizes the workspace before capture (an error here).
        cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
        RIDGE_CUDA_CHECK(cudaStreamIsCapturing(stream_of(stream), &capturing));
        if (capturing != cudaStreamCaptureStatusNone)
            throw Error(std::string(who) + ": the workspace of " + std::to_string(workspace.size()) + " bytes needs " +
                        std::to_string(ws) + " while a graph is being captured: size it before capture " +
                        "(attention_split_workspace_bytes)");
        stream.sync();  // work queued earlier may still use the old buffer
        workspace = DeviceBuffer(std::max(ws, workspace.size() + workspace.size() / 2));
    }
    const int group = s.n_heads / s.n_kv_heads, G = heads_per_block(group);
    const int n_chunks = (group + G - 1) / G;
    DecodeArgs a;
    a.q = q;
    a.rows = rows.device;
    a.k = kv.k;
    a.v = kv.v;
    a.partials = ws > 0 ? workspace.as<float>() : nullptr;
    a.out = out;
    a.kv_dim = kv.kv_dim;
    a.block_size = kv.block_size;
    a.n_heads = s.n_heads;
    a.group = group;
    a.head_dim = s.head_dim;
    a.max_splits = max_splits;
    a.split_cap = split_cap;
    a.q_scale = q_scale(s.head_dim);
    const dim3 grid(unsigned(max_splits), unsigned(s.n_kv_heads * n_chunks), unsigned(rows.m));
    const cudaStream_t st = stream_of(stream);
    const int lpk = lanes_per_key(s.head_dim);
    if (kv.type == DType::F32)
        wide ? launch_decode<float, true>(lpk, G, grid, a, st) : launch_decode<float, false>(lpk, G, grid, a, st);
    else
        wide ? launch_decode<__half, true>(lpk, G, grid, a, st) : launch_decode<__half, false>(lpk, G, grid, a, st);
    if (max_splits > 1) {
        const unsigned threads = unsigned((s.head_dim + 31) / 32 * 32);
        attention_v1_combine_kernel<<<dim3(unsigned(s.n_heads), unsigned(rows.m)), threads, 0, st>>>(
            rows.device, a.partials, s.n_heads, s.head_dim, max_splits, split_cap, out);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return cost;
}

template <class T, int DV>
void launch_v2_flash_dv(dim3 grid, size_t smem, const FlashArgs& a, cudaStream_t st) {
    RIDGE_CUDA_CHECK(cudaFuncSetAttribute(attention_v2_flash_kernel<T, DV>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    attention_v2_flash_kernel<T, DV><<<grid, kFlashThreads, smem, st>>>(a);
    RIDGE_CUDA_CHECK_LAUNCH();
}

template <class T>
void launch_v2_flash(int head_dim, dim3 grid, size_t smem, const FlashArgs& a, cudaStream_t st) {
    if (head_dim <= 64) return launch_v2_flash_dv<T, 4>(grid, smem, a, st);
    if (head_dim <= 128) return launch_v2_flash_dv<T, 8>(grid, smem, a, st);
    launch_v2_flash_dv<T, 16>(grid, smem, a, st);
}

}  // namespace

Cost kv_store(const Stream& stream, const KVLayer& kv, const float* k, const float* v,
                   const int64_t* slots, int64_t m) {
    const char* who = "cuda::kv_store";
    kv_elem_bytes(kv.type, who);  // ridge::Error for a type other than F32 or F16, before any launch
    if (m < 0 || m > 0x7fffffff || kv.kv_dim <= 0)
        throw Error(std::string(who) + ": " + std::to_string(m) + " rows of kv_dim " + std::to_string(kv.kv_dim));
    if (m > 0 && (k == nullptr || v == nullptr || slots == nullptr || kv.k == nullptr || kv.v == nullptr))
        throw Error(std::string(who) + ": a null pointer among k, v, slots and the KV pools for " +
                    std::to_string(m) + " rows");
    if (m > 0) {
        const cudaStream_t st = stream_of(stream);
        if (kv.type == DType::F32)
            kv_store_kernel<float><<<unsigned(m), kStoreThreads, 0, st>>>(
                k, v, slots, reinterpret_cast<float*>(kv.k), reinterpret_cast<float*>(kv.v), kv.n_slots, kv.kv_dim);
        else
            kv_store_kernel<__half><<<unsigned(m), kStoreThreads, 0, st>>>(
                k, v, slots, reinterpret_cast<__half*>(kv.k), reinterpret_cast<__half*>(kv.v), kv.n_slots, kv.kv_dim);
        RIDGE_CUDA_CHECK_LAUNCH();
    }
    return ridge::kv_store_cost(m, kv.kv_dim, kv.type);
}

size_t attention_split_workspace_bytes(const AttentionRow* rows_host, int64_t m, const AttentionShape& s,
                                       int launch_splits, int split_cap) {
    const int splits = std::max(max_splits_of(rows_host, m, split_cap), launch_splits);
    if (splits <= 1) return 0;
    return size_t(m) * size_t(s.n_heads) * size_t(splits) * size_t(s.head_dim + 2) * sizeof(float);
}

int attention_v3_split_cap(int sm_count, const AttentionShape& s) {
    const int group = s.n_kv_heads > 0 ? s.n_heads / s.n_kv_heads : 1;
    const int per_split = std::max(1, s.n_kv_heads * ((group + heads_per_block(group) - 1) / heads_per_block(group)));
    return std::clamp((2 * std::max(sm_count, 1) + per_split - 1) / per_split, 1, kMaxSplitCap);
}

bool attention_v3_fits(const KVLayer& kv, const AttentionShape& s) {
    return s.head_dim % 8 == 0 && kv.kv_dim % 8 == 0 && reinterpret_cast<uintptr_t>(kv.k) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(kv.v) % 16 == 0;
}

AttentionCost attention_v1_split(const Stream& stream, const float* q, const AttentionRows& rows,
                                      const KVLayer& kv, const AttentionShape& s, float* out,
                                      DeviceBuffer& workspace) {
    return attention_decode(stream, q, rows, kv, s, out, workspace, /*wide=*/false, /*split_cap=*/0,
                            "cuda::attention_v1_split");
}

AttentionCost attention_v3_wide(const Stream& stream, const float* q, const AttentionRows& rows,
                                const KVLayer& kv, const AttentionShape& s, float* out, DeviceBuffer& workspace) {
    const char* who = "cuda::attention_v3_wide";
    if (!attention_v3_fits(kv, s))
        throw Error(std::string(who) + ": head_dim " + std::to_string(s.head_dim) + " and kv_dim " +
                    std::to_string(kv.kv_dim) + " must be multiples of 8 and the pools 16-byte aligned " +
                    "(attention_v3_fits; attention_v1_split takes any)");
    int cap = rows.split_cap;
    if (cap <= 0) {
        int device = 0, sms = 0;
        RIDGE_CUDA_CHECK(cudaGetDevice(&device));
        RIDGE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
        cap = attention_v3_split_cap(sms, s);
    }
    if (cap > kMaxSplitCap)
        throw Error(std::string(who) + ": split_cap " + std::to_string(cap) + " is above " + std::to_string(kMaxSplitCap));
    return attention_decode(stream, q, rows, kv, s, out, workspace, /*wide=*/true, cap, who);
}

AttentionCost attention_v2_flash(const Stream& stream, const float* q, const AttentionRows& rows,
                                      const KVLayer& kv, const AttentionShape& s, float* out) {
    const char* who = "cuda::attention_v2_flash";
    kv_elem_bytes(kv.type, who);
    check_shape(kv, s, who);
    check_rows(rows, q, out, /*need_device=*/false, who);
    if (!rows_are_one_chunk(rows.host, rows.m))
        throw Error(std::string(who) + ": the " + std::to_string(rows.m) +
                    " rows are not consecutive positions of one sequence");
    const int group = s.n_heads / s.n_kv_heads;
    FlashArgs a;
    a.q = q;
    a.block_table = rows.host[0].block_table;
    a.k = kv.k;
    a.v = kv.v;
    a.out = out;
    a.m = rows.m;
    a.first_keys = rows.host[0].n_keys;
    a.kv_dim = kv.kv_dim;
    a.block_size = kv.block_size;
    a.n_heads = s.n_heads;
    a.group = group;
    a.head_dim = s.head_dim;
    a.hd8 = (s.head_dim + 7) / 8 * 8;
    a.ld = a.hd8 + 4;
    a.q_scale = q_scale(s.head_dim);
    const size_t smem = flash_smem_bytes(a.ld);
    const int64_t n_tiles = (rows.m * group + kFlashBM - 1) / kFlashBM;
    const dim3 grid(unsigned(n_tiles), unsigned(s.n_kv_heads));
    const cudaStream_t st = stream_of(stream);
    if (kv.type == DType::F32)
        launch_v2_flash<float>(s.head_dim, grid, smem, a, st);
    else
        launch_v2_flash<__half>(s.head_dim, grid, smem, a, st);
    return ridge::attention_blocked_cost(rows.m, rows.host[0].n_keys, kv.kv_dim, kv.type, s);
}

}  // namespace ridge::cuda
