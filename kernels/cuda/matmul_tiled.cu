// The prefill matmul variants of matmul.h, side by side: Y = X . W^T for a weight Matrix of any
// type the CUDA kernels read, from one thread per output (v1) through shared-memory tiles (v2) and
// register blocks (v3) to tensor cores (v4). Each step reuses every weight loaded from memory for
// more rows of X. matvec, matmul_cost, matmul() and the variant list live in matvec.cu.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/matrix.h"
#include "weights/error.h"
#include "weights/types.h"

namespace ridge::cuda {

namespace {

// ---- shared by the variants ----------------------------------------------------------------

constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y (the tiles along m)

// The checks every variant makes before launching: a ridge::Error naming the variant and the
// values involved when m < 1, the type is not one the kernels read, the rows are not whole blocks,
// a pointer is missing, or m needs more tiles than a grid has along y.
void check_call(const char* who, const Matrix& W, const float* X, int64_t m, const float* Y, int64_t rows_per_block) {
    const std::string w = who;
    if (m < 1) throw Error(w + ": m = " + std::to_string(m) + " rows of X, expected at least 1");
    if (!supports(W.type))
        throw Error(w + ": " + std::string(dtype_name(W.type)) +
                    " weights are not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)");
    if (W.n < 1 || W.k < 1 || W.k % block_elems(W.type) != 0)
        throw Error(w + ": W is " + std::to_string(W.n) + " rows of " + std::to_string(W.k) + " " +
                    std::string(dtype_name(W.type)) + " elements, expected k a positive multiple of " +
                    std::to_string(block_elems(W.type)));
    const bool has_w = is_split(W.type) ? W.codes && W.d && (W.type != DType::Q4_1 || W.mins) : W.rows != nullptr;
    if (!has_w || !X || !Y) throw Error(w + ": null device pointer (W, X or Y)");
    if ((m + rows_per_block - 1) / rows_per_block > kMaxGridY)
        throw Error(w + ": m = " + std::to_string(m) + " rows of X need more than " + std::to_string(kMaxGridY) +
                    " blocks of " + std::to_string(rows_per_block) + " rows");
}

// X[i][c] of X (m, k), 0 outside it: the zero padding of every X tile.
__device__ __forceinline__ float x_or_zero(const float* __restrict__ X, int m, int64_t k, int64_t i, int64_t c) {
    return (i < m && c < k) ? X[i * k + c] : 0.0f;
}
// W[j][c] decoded to f32 (matrix.h's element), 0 outside W: the zero padding of every W tile.
__device__ __forceinline__ float w_or_zero(const Matrix& W, int64_t j, int64_t c) {
    return (j < W.n && c < W.k) ? element(W, j, c) : 0.0f;
}

// ---- v1_naive: one thread per output ---------------------------------------------------------
//
// Contract: Y[i][j] = sum_c X[i][c] * W[j][c], X (m, k) f32, W (n, k) any supported type,
//   Y (m, n) f32; f32 FMAs in order of c.
// Launch: block (kV1Cols, kV1Rows) = (32, 8) threads, grid (ceil(n / 32), ceil(m / 8)); thread
//   (x, y) of block (bx, by) computes Y[8 by + y][32 bx + x]. A warp holds 32 consecutive outputs
//   of one row of Y: its X loads are one broadcast, its W loads 32 different rows (k apart).
// Preconditions: k a multiple of the type's block size; X, Y device pointers, not aliasing.
// Cost: matmul_cost: FLOPs 2*m*n*k; bytes n*row_bytes(W) + 4*m*k + 4*m*n. Traffic from L2 is
//   far larger: every W element is loaded and decoded m times and every X element n times, so
//   each 2 FLOPs load one weight and one f32 (intensity ~ 1/4 FLOP per byte for F32 weights).
constexpr int kV1Cols = 32, kV1Rows = 8;

__global__ void __launch_bounds__(kV1Cols * kV1Rows)
matmul_v1_kernel(const Matrix W, const float* __restrict__ X, int m, float* __restrict__ Y) {
    const int64_t j = int64_t(blockIdx.x) * kV1Cols + threadIdx.x;  // output column = row of W
    const int64_t i = int64_t(blockIdx.y) * kV1Rows + threadIdx.y;  // output row = row of X
    if (i >= m || j >= W.n) return;
    const float* x = X + i * W.k;  // (k) row i of X
    float acc = 0.0f;
    for (int64_t c = 0; c < W.k; c++) acc = fmaf(x[c], element(W, j, c), acc);
    Y[i * W.n + j] = acc;
}

// ---- v2_smem: shared-memory tiles, one output per thread --------------------------------------
//
// Changed from v1: a block computes a T x T tile of Y (T = kV2Tile = 32) and walks k in steps of
//   T. Per step its 1024 threads load a T x T tile of X and a T x T tile of W (each thread one
//   element of each, decoded once by element()) into shared memory, and every element loaded is
//   then used T times (by the T threads of a row or column of the tile).
// Contract: as v1 (f32 FMAs in order of c; padding adds exact zeros).
// Launch: block (T, T) = (32, 32) threads, grid (ceil(n / T), ceil(m / T)); thread (x, y) of block
//   (bx, by) computes Y[T by + y][T bx + x]. Edges: tiles zero-padded past m, n and k.
//   Shared memory: Xs and Ws (T, T + 1) f32 each, 8448 bytes; the +1 makes the column reads
//   Ws[x][kk] of a warp (x = lane) hit 32 different banks. Xs[y][kk] is a broadcast.
// Preconditions: as v1.
// Cost: matmul_cost. From L2: W read ceil(m / T) times, X ceil(n / T) times. A step loads 2 T^2
//   elements for 2 T^3 FLOPs: T FLOPs per element loaded where v1 had 1 (T/2 FLOP per byte for
//   2-byte operands, the design's "T/2"; T/4 for f32).
constexpr int kV2Tile = 32;

__global__ void __launch_bounds__(kV2Tile * kV2Tile)
matmul_v2_kernel(const Matrix W, const float* __restrict__ X, int m, float* __restrict__ Y) {
    __shared__ float Xs[kV2Tile][kV2Tile + 1];  // (T rows of X, T of k) + 1 pad
    __shared__ float Ws[kV2Tile][kV2Tile + 1];  // (T rows of W, T of k) + 1 pad, decoded
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t i0 = int64_t(blockIdx.y) * kV2Tile;  // first row of X (and of Y) of the tile
    const int64_t j0 = int64_t(blockIdx.x) * kV2Tile;  // first row of W (column of Y)
    float acc = 0.0f;
    for (int64_t k0 = 0; k0 < W.k; k0 += kV2Tile) {
        // A warp (fixed ty) loads 32 consecutive elements of one row of X and one row of W.
        Xs[ty][tx] = x_or_zero(X, m, W.k, i0 + ty, k0 + tx);
        Ws[ty][tx] = w_or_zero(W, j0 + ty, k0 + tx);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kV2Tile; kk++) acc = fmaf(Xs[ty][kk], Ws[tx][kk], acc);
        __syncthreads();  // before the next step overwrites the tiles
    }
    const int64_t i = i0 + ty, j = j0 + tx;
    if (i < m && j < W.n) Y[i * W.n + j] = acc;
}

// ---- v3_regblock: shared-memory tiles and a register block per thread -------------------------
//
// Changed from v2: a block tile of BM x BN = 64 x 64 outputs over 256 threads, each computing a
//   4 x 4 register block (rows ty + 16 a, columns tx + 16 b, a, b = 0..3). Per step of BK = 32 of
//   k, a thread reads 4 float4 of Xs and 4 float4 of Ws (4 values of k for 4 rows each) and does
//   4 x 4 x 4 = 64 FMAs with them: 2 FMAs per shared-memory float loaded instead of v2's 1/2.
// Contract: as v1 (f32 FMAs in order of c).
// Launch: block 256 threads (tx = t % 16, ty = t / 16), grid (ceil(n / 64), ceil(m / 64)); block
//   (bx, by) computes Y[64 by .. 64 by + 63][64 bx .. 64 bx + 63]. Edges zero-padded as v2.
//   Shared memory: Xs and Ws (64, BK + 4) f32 each, 18432 bytes. Rows of 36 floats stay 16-byte
//   aligned for float4 and put rows r, r + 1, ..., r + 7 on 8 different 4-bank groups, so the
//   float4 reads of each quarter warp (8 rows tx) are conflict-free; the row-wise stores of the
//   loads (a warp = 32 consecutive k of one row) are too.
// Preconditions: as v1.
// Cost: matmul_cost. From L2: W read ceil(m / 64) times, X ceil(n / 64) times: a step loads
//   (64 + 64) x 32 elements for 2 x 64 x 64 x 32 FLOPs, 64 FLOPs per element loaded.
constexpr int kV3BM = 64, kV3BN = 64, kV3BK = 32;
constexpr int kV3Threads = 256;
constexpr int kV3Ld = kV3BK + 4;  // floats per row of Xs and Ws
constexpr int kV3Reg = 4;         // outputs per thread along m and along n
static_assert(kV3BM == 16 * kV3Reg && kV3BN == 16 * kV3Reg && kV3Threads == 16 * 16, "v3 thread grid is 16 x 16");
static_assert((kV3BM * kV3BK) % kV3Threads == 0 && (kV3BN * kV3BK) % kV3Threads == 0, "v3 tile loads divide evenly");

__global__ void __launch_bounds__(kV3Threads)
matmul_v3_kernel(const Matrix W, const float* __restrict__ X, int m, float* __restrict__ Y) {
    __shared__ __align__(16) float Xs[kV3BM * kV3Ld];  // (BM rows of X, BK of k) + 4 pad
    __shared__ __align__(16) float Ws[kV3BN * kV3Ld];  // (BN rows of W, BK of k) + 4 pad, decoded
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int64_t i0 = int64_t(blockIdx.y) * kV3BM;
    const int64_t j0 = int64_t(blockIdx.x) * kV3BN;
    float acc[kV3Reg][kV3Reg] = {};  // (rows ty + 16 a, columns tx + 16 b)
    for (int64_t k0 = 0; k0 < W.k; k0 += kV3BK) {
        // Element e = tid + 256 p of a tile is (row e / BK, column e % BK): a warp loads one row's
        // 32 consecutive k (coalesced; W's decode shares its block scale across the warp).
#pragma unroll
        for (int p = 0; p < kV3BM * kV3BK / kV3Threads; p++) {
            const int e = tid + p * kV3Threads, r = e / kV3BK, c = e % kV3BK;
            Xs[r * kV3Ld + c] = x_or_zero(X, m, W.k, i0 + r, k0 + c);
        }
        for (int p = 0; p < kV3BN * kV3BK / kV3Threads; p++) {
            const int e = tid + p * kV3Threads, r = e / kV3BK, c = e % kV3BK;
            Ws[r * kV3Ld + c] = w_or_zero(W, j0 + r, k0 + c);
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kV3BK; kk += 4) {
            float4 a[kV3Reg], b[kV3Reg];  // k = kk .. kk + 3 of this thread's 4 rows of X and of W
#pragma unroll
            for (int r = 0; r < kV3Reg; r++) a[r] = *reinterpret_cast<const float4*>(&Xs[(ty + 16 * r) * kV3Ld + kk]);
#pragma unroll
            for (int r = 0; r < kV3Reg; r++) b[r] = *reinterpret_cast<const float4*>(&Ws[(tx + 16 * r) * kV3Ld + kk]);
#pragma unroll
            for (int u = 0; u < kV3Reg; u++) {
#pragma unroll
                for (int v = 0; v < kV3Reg; v++) {
                    float s = acc[u][v];
                    s = fmaf(a[u].x, b[v].x, s);
                    s = fmaf(a[u].y, b[v].y, s);
                    s = fmaf(a[u].z, b[v].z, s);
                    s = fmaf(a[u].w, b[v].w, s);
                    acc[u][v] = s;
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int u = 0; u < kV3Reg; u++) {
        const int64_t i = i0 + ty + 16 * u;
#pragma unroll
        for (int v = 0; v < kV3Reg; v++) {
            const int64_t j = j0 + tx + 16 * v;
            if (i < m && j < W.n) Y[i * W.n + j] = acc[u][v];
        }
    }
}

// ---- v4_mma: tensor cores ---------------------------------------------------------------------
//
// Changed from v3: the products run on tensor cores, mma.sync m16n8k16 with bf16 operands and f32
//   accumulators. X and the decoded W are rounded to bf16 (round to nearest even) as they are
//   staged into shared memory; fragments are read from there with 32-bit shared loads.
// Contract: Y[i][j] = sum_c bf16(X[i][c]) * bf16(W[j][c]), products exact, sums in f32 (the
//   order within one mma is the hardware's). Relative error ~2^-8 per product.
// Launch: block 128 threads = 4 warps, grid (ceil(n / 64), ceil(m / 64)); block (bx, by) computes
//   Y[64 by ..][64 bx ..], warp w the 32 x 32 quarter (rows 32 (w / 2), columns 32 (w % 2)) as
//   2 x 4 tiles of 16 x 8, over k in steps of BK = 32 (two k16 steps). Edges zero-padded.
//   Shared memory: As and Bs (64, BK + 8) bf16 each, 10240 bytes, as 32-bit words of two bf16
//   (element 2w in the low half). A row is 20 words, so the fragment loads of a warp (rows g,
//   words t: bank 20 g + t mod 32) hit 32 different banks.
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"),
//   g = lane / 4, t = lane % 4, each .b32 register two bf16 with the lower column in the low half:
//   A (16 x 16, row-major; rows = rows of X, columns = k): a[0] = A[g][2t, 2t+1],
//     a[1] = A[g+8][2t, 2t+1], a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9].
//   B (16 x 8, "col": B[c][j] = W[j][c], so W's rows as stored are B's columns):
//     b[0] = B[2t, 2t+1][g] = W[g][2t, 2t+1], b[1] = W[g][2t+8, 2t+9].
//   C/D (16 x 8 f32): d[0], d[1] = D[g][2t, 2t+1], d[2], d[3] = D[g+8][2t, 2t+1].
// Preconditions: as v1; compute capability 8.0 or newer (the build targets sm_90).
// Cost: matmul_cost. From L2 as v3 (64 x 64 tiles); shared memory holds half the bytes of v3's.
constexpr int kV4BM = 64, kV4BN = 64, kV4BK = 32;
constexpr int kV4Threads = 128;
constexpr int kV4LdWords = (kV4BK + 8) / 2;  // 32-bit words per row of As and Bs (20)
static_assert((kV4BM * kV4BK / 2) % kV4Threads == 0 && (kV4BN * kV4BK / 2) % kV4Threads == 0,
              "v4 tile loads divide evenly");

// Two floats as bf16 (round to nearest even) in one word: lo in bits 0..15, hi in bits 16..31.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    const uint32_t l = __bfloat16_as_ushort(__float2bfloat16_rn(lo));
    const uint32_t h = __bfloat16_as_ushort(__float2bfloat16_rn(hi));
    return l | (h << 16);
}

// d (16 x 8 f32 fragment) += a (16 x 16 bf16) . b (16 x 8 bf16), one warp, layouts as above.
__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "matmul_v4_mma needs mma.sync with bf16 operands: compute capability 8.0 or newer"
#endif
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__global__ void __launch_bounds__(kV4Threads)
matmul_v4_kernel(const Matrix W, const float* __restrict__ X, int m, float* __restrict__ Y) {
    __shared__ uint32_t As[kV4BM * kV4LdWords];  // (BM rows of X, BK / 2 + 4 words) bf16 pairs
    __shared__ uint32_t Bs[kV4BN * kV4LdWords];  // (BN rows of W, BK / 2 + 4 words) bf16 pairs
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;          // groupID, threadID_in_group
    const int wm = 32 * (warp / 2), wn = 32 * (warp % 2);  // this warp's quarter of the block tile
    const int64_t i0 = int64_t(blockIdx.y) * kV4BM;
    const int64_t j0 = int64_t(blockIdx.x) * kV4BN;
    float acc[2][4][4] = {};  // (16-row tile mt, 8-column tile nt, fragment d0..d3)
    for (int64_t k0 = 0; k0 < W.k; k0 += kV4BK) {
        // Pair e = tid + 128 p is (row e / 16, columns 2 (e % 16) and +1): a half warp loads one
        // row's 32 consecutive k.
#pragma unroll
        for (int p = 0; p < kV4BM * kV4BK / 2 / kV4Threads; p++) {
            const int e = tid + p * kV4Threads, r = e / (kV4BK / 2), w = e % (kV4BK / 2);
            const int64_t c = k0 + 2 * w;
            As[r * kV4LdWords + w] = pack_bf16x2(x_or_zero(X, m, W.k, i0 + r, c), x_or_zero(X, m, W.k, i0 + r, c + 1));
        }
        for (int p = 0; p < kV4BN * kV4BK / 2 / kV4Threads; p++) {
            const int e = tid + p * kV4Threads, r = e / (kV4BK / 2), w = e % (kV4BK / 2);
            const int64_t c = k0 + 2 * w;
            Bs[r * kV4LdWords + w] = pack_bf16x2(w_or_zero(W, j0 + r, c), w_or_zero(W, j0 + r, c + 1));
        }
        __syncthreads();
#pragma unroll
        for (int ks = 0; ks < kV4BK / 16; ks++) {
            const int cw = 8 * ks + t;  // word of columns 16 ks + 2t, 2t+1 (+4 words: columns +8)
            uint32_t a[2][4], b[4][2];
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
                const int r = wm + 16 * mt + g;
                a[mt][0] = As[r * kV4LdWords + cw];
                a[mt][1] = As[(r + 8) * kV4LdWords + cw];
                a[mt][2] = As[r * kV4LdWords + cw + 4];
                a[mt][3] = As[(r + 8) * kV4LdWords + cw + 4];
            }
#pragma unroll
            for (int nt = 0; nt < 4; nt++) {
                const int r = wn + 8 * nt + g;
                b[nt][0] = Bs[r * kV4LdWords + cw];
                b[nt][1] = Bs[r * kV4LdWords + cw + 4];
            }
#pragma unroll
            for (int mt = 0; mt < 2; mt++) {
#pragma unroll
                for (int nt = 0; nt < 4; nt++) mma_bf16_m16n8k16(acc[mt][nt], a[mt], b[nt]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int mt = 0; mt < 2; mt++) {
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const int64_t i = i0 + wm + 16 * mt + g;  // d0, d1 in row i; d2, d3 in row i + 8
            const int64_t j = j0 + wn + 8 * nt + 2 * t;  // d0, d2 in column j; d1, d3 in j + 1
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int64_t ii = i + 8 * h;
                if (ii >= m) continue;
                if (j < W.n) Y[ii * W.n + j] = acc[mt][nt][2 * h];
                if (j + 1 < W.n) Y[ii * W.n + j + 1] = acc[mt][nt][2 * h + 1];
            }
        }
    }
}

}  // namespace

Cost matmul_v1_naive(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    check_call("cuda::matmul_v1_naive", W, X, m, Y, kV1Rows);
    const dim3 grid(blocks_for(W.n, kV1Cols), blocks_for(m, kV1Rows)), block(kV1Cols, kV1Rows);
    matmul_v1_kernel<<<grid, block, 0, stream_of(s)>>>(W, X, int(m), Y);
    RIDGE_CUDA_CHECK_LAUNCH();
    return matmul_cost(W, m);
}

Cost matmul_v2_smem(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    check_call("cuda::matmul_v2_smem", W, X, m, Y, kV2Tile);
    const dim3 grid(blocks_for(W.n, kV2Tile), blocks_for(m, kV2Tile)), block(kV2Tile, kV2Tile);
    matmul_v2_kernel<<<grid, block, 0, stream_of(s)>>>(W, X, int(m), Y);
    RIDGE_CUDA_CHECK_LAUNCH();
    return matmul_cost(W, m);
}

Cost matmul_v3_regblock(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    check_call("cuda::matmul_v3_regblock", W, X, m, Y, kV3BM);
    const dim3 grid(blocks_for(W.n, kV3BN), blocks_for(m, kV3BM)), block(kV3Threads);
    matmul_v3_kernel<<<grid, block, 0, stream_of(s)>>>(W, X, int(m), Y);
    RIDGE_CUDA_CHECK_LAUNCH();
    return matmul_cost(W, m);
}

Cost matmul_v4_mma(const Stream& s, const Matrix& W, const float* X, int64_t m, float* Y) {
    check_call("cuda::matmul_v4_mma", W, X, m, Y, kV4BM);
    const dim3 grid(blocks_for(W.n, kV4BN), blocks_for(m, kV4BM)), block(kV4Threads);
    matmul_v4_kernel<<<grid, block, 0, stream_of(s)>>>(W, X, int(m), Y);
    RIDGE_CUDA_CHECK_LAUNCH();
    return matmul_cost(W, m);
}

}  // namespace ridge::cuda
