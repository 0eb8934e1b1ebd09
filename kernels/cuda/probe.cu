// probe.h: the GPU's read bandwidth, f32 FMA rate, ridge's matmul and cuBLAS's on one problem,
// each timed with CUDA events (warm-up first, median of repetitions).
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/check.cuh"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/probe.h"
#include "kernels/cuda/attention.h"
#include "weights/formats.h"
#include "weights/quant.h"
#include "weights/tensor.h"

namespace ridge::cuda {

namespace {

// Times fn (which queues work on stream st) once to warm up, then reps times with events.
Timing time_events(cudaStream_t st, int reps, const std::function<void()>& fn) {
    cudaEvent_t a, b;
    RIDGE_CUDA_CHECK(cudaEventCreate(&a));
    RIDGE_CUDA_CHECK(cudaEventCreate(&b));
    fn();
    RIDGE_CUDA_CHECK(cudaStreamSynchronize(st));
    std::vector<double> s;
    for (int r = 0; r < std::max(reps, 1); r++) {
        RIDGE_CUDA_CHECK(cudaEventRecord(a, st));
        fn();
        RIDGE_CUDA_CHECK(cudaEventRecord(b, st));
        RIDGE_CUDA_CHECK(cudaEventSynchronize(b));
        float ms = 0;
        RIDGE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
        s.push_back(double(ms) * 1e-3);
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    std::sort(s.begin(), s.end());
    Timing t;
    t.median_s = s[s.size() / 2];
    t.spread = t.median_s > 0 ? (s.back() - s.front()) / t.median_s : 0;
    return t;
}

int sm_count() {
    int dev = 0, n = 0;
    RIDGE_CUDA_CHECK(cudaGetDevice(&dev));
    RIDGE_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    return n;
}

// Contract: reads n16 16-byte words of src once each (grid-stride, 4 loads in flight per thread)
// and folds them by XOR; writes to sink only when the fold equals `never`, which keeps the loads.
// Launch: any grid of 1-D blocks. Bytes: 16 * n16 read.
__global__ void read_kernel(const uint4* __restrict__ src, int64_t n16, uint32_t never, uint32_t* sink) {
    const int64_t stride = int64_t(gridDim.x) * blockDim.x;
    uint32_t acc = 0;
    int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n16; i += 4 * stride) {
        const uint4 v0 = __ldcs(src + i), v1 = __ldcs(src + i + stride), v2 = __ldcs(src + i + 2 * stride),
                    v3 = __ldcs(src + i + 3 * stride);
        acc ^= v0.x ^ v0.y ^ v0.z ^ v0.w ^ v1.x ^ v1.y ^ v1.z ^ v1.w ^ v2.x ^ v2.y ^ v2.z ^ v2.w ^ v3.x ^ v3.y ^
               v3.z ^ v3.w;
    }
    for (; i < n16; i += stride) {
        const uint4 v = __ldcs(src + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == never) sink[0] = acc;
}

// Contract: kChains independent FMA chains of kSteps each per thread, seeded from the thread
// index; the result reaches sink only when it equals `never`. FLOPs 2 * kChains * kSteps per thread.
constexpr int kChains = 8, kSteps = 4096;
__global__ void fma_kernel(float never, float* sink) {
    float a[kChains];
#pragma unroll
    for (int c = 0; c < kChains; c++) a[c] = float(threadIdx.x + c) * 1e-3f;
    const float b = 0.999f, d = 1e-4f;
    for (int s = 0; s < kSteps; s++)
#pragma unroll
        for (int c = 0; c < kChains; c++) a[c] = fmaf(a[c], b, d);
    float t = 0;
#pragma unroll
    for (int c = 0; c < kChains; c++) t += a[c];
    if (t == never) sink[0] = t;
}

__global__ void fill_kernel(uint32_t* p, int64_t n, uint32_t seed) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) p[i] = uint32_t(i) * 2654435761u + seed;
}

std::vector<uint16_t> random_bf16(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = fp32_to_bf16(dist(rng));
    return v;
}

}  // namespace

Timing time_read(size_t bytes, int reps) {
    const int64_t n16 = int64_t(bytes / 16);
    DeviceBuffer buf(size_t(n16) * 16), sink(sizeof(uint32_t));
    Stream s;
    const int64_t words = n16 * 4;
    fill_kernel<<<blocks_for(words, 256), 256, 0, stream_of(s)>>>(buf.as<uint32_t>(), words, 12345u);
    RIDGE_CUDA_CHECK_LAUNCH();
    const unsigned grid = unsigned(sm_count()) * 8;
    return time_events(stream_of(s), reps, [&] {
        read_kernel<<<grid, 512, 0, stream_of(s)>>>(buf.as<uint4>(), n16, 0x9e3779b9u, sink.as<uint32_t>());
        RIDGE_CUDA_CHECK_LAUNCH();
    });
}

Timing time_fma(double* flops, int reps) {
    DeviceBuffer sink(sizeof(float));
    Stream s;
    const unsigned grid = unsigned(sm_count()) * 16, threads = 256;
    *flops = 2.0 * kChains * kSteps * double(grid) * threads;
    return time_events(stream_of(s), reps, [&] {
        fma_kernel<<<grid, threads, 0, stream_of(s)>>>(-12345.0f, sink.as<float>());
        RIDGE_CUDA_CHECK_LAUNCH();
    });
}

Timing time_matmul(const std::string& variant, int64_t m, int64_t n, int64_t k, int reps) {
    const MatmulVariant* v = nullptr;
    for (const MatmulVariant& x : matmul_variants())
        if (x.name == variant) v = &x;
    if (!v) throw Error("probe: no matmul variant '" + variant + "'");
    const std::vector<uint16_t> w = random_bf16(size_t(n * k), 1);
    TensorView view;
    view.name = "probe_w";
    view.type = DType::BF16;
    view.shape = {k, n};
    view.data = reinterpret_cast<const uint8_t*>(w.data());
    view.nbytes = w.size() * 2;
    const DeviceMatrix W = upload_matrix(view);
    std::vector<float> x(size_t(m * k));
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& e : x) e = dist(rng);
    DeviceBuffer X(x.size() * 4), Y(size_t(m * n) * 4);
    X.upload(x.data(), x.size() * 4);
    Stream s;
    return time_events(stream_of(s), reps, [&] { v->fn(s, W.view, X.as<float>(), m, Y.as<float>()); });
}

Timing time_matvec(DType type, int64_t n, int64_t k, int rows, int reps, double* weight_bytes,
                   const std::string& variant) {
    if (!supports(type)) throw Error("probe: the CUDA kernels do not read " + std::string(dtype_name(type)));
    const MatmulVariant* v = nullptr;
    for (const MatmulVariant& x : matmul_variants())
        if (x.name == variant && x.max_rows == kMatvecMaxRows) v = &x;
    if (v == nullptr) throw Error("probe: no matvec variant named '" + variant + "'");
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    const size_t row_b = row_bytes(type, k);
    std::vector<uint8_t> w(size_t(n) * row_b);
    std::vector<float> row(static_cast<size_t>(k));
    for (int64_t j = 0; j < n; j++) {  // random values, quantized as a model file holds them
        for (float& e : row) e = dist(rng);
        quantize_row(type, row.data(), w.data() + size_t(j) * row_b, k);
    }
    TensorView view;
    view.name = "probe_matvec";
    view.type = type;
    view.shape = {k, n};
    view.data = w.data();
    view.nbytes = w.size();
    const DeviceMatrix W = upload_matrix(view);
    std::vector<float> x(size_t(rows * k));
    for (float& e : x) e = dist(rng);
    DeviceBuffer X(x.size() * 4), Y(size_t(rows * n) * 4);
    X.upload(x.data(), x.size() * 4);
    *weight_bytes = double(w.size());
    Stream s;
    return time_events(stream_of(s), reps, [&] { v->fn(s, W.view, X.as<float>(), rows, Y.as<float>()); });
}

Timing time_decode_attention(int n_keys, int n_heads, int n_kv_heads, int head_dim, int reps, double* kv_bytes,
                             const std::string& variant) {
    if (variant != "v1_split" && variant != "v3_wide")
        throw Error("time_decode_attention: unknown variant '" + variant + "' (v1_split, v3_wide)");
    const bool v3 = variant == "v3_wide";
    const int kv_dim = n_kv_heads * head_dim, block = 16;
    const int n_blocks = (n_keys + block - 1) / block;
    const int64_t slots = int64_t(n_blocks) * block;
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<uint16_t> kv_host(size_t(slots * kv_dim));
    for (auto& h : kv_host) h = fp32_to_fp16(dist(rng));
    DeviceBuffer k(kv_host.size() * 2), v(kv_host.size() * 2);
    k.upload(kv_host.data(), kv_host.size() * 2);
    v.upload(kv_host.data(), kv_host.size() * 2);
    std::vector<int32_t> table(static_cast<size_t>(n_blocks));
    for (int b = 0; b < n_blocks; b++) table[size_t(b)] = b;
    DeviceBuffer table_d(table.size() * 4);
    table_d.upload(table.data(), table.size() * 4);
    const AttentionRow row_host{table_d.as<int32_t>(), n_keys};  // block table: a device pointer
    DeviceBuffer row_d(sizeof(AttentionRow));
    row_d.upload(&row_host, sizeof row_host);
    std::vector<float> q(size_t(n_heads * head_dim));
    for (float& e : q) e = dist(rng);
    DeviceBuffer q_d(q.size() * 4), out(q.size() * 4);
    q_d.upload(q.data(), q.size() * 4);
    const KVLayer kv{DType::F16, k.as<uint8_t>(), v.as<uint8_t>(), slots, kv_dim, block};
    const AttentionShape shape{n_heads, n_kv_heads, head_dim};
    const int cap = attention_v3_split_cap(device_info().sm_count, shape);
    const AttentionRows rows{row_d.as<AttentionRow>(), &row_host, 1, 0, cap};
    DeviceBuffer workspace(attention_split_workspace_bytes(&row_host, 1, shape, 0, v3 ? cap : 0));
    *kv_bytes = 2.0 * double(n_keys) * kv_dim * 2;
    Stream s;
    return time_events(stream_of(s), reps, [&] {
        if (v3)
            attention_v3_wide(s, q_d.as<float>(), rows, kv, shape, out.as<float>(), workspace);
        else
            attention_v1_split(s, q_d.as<float>(), rows, kv, shape, out.as<float>(), workspace);
    });
}

bool time_cublas_bf16(int64_t m, int64_t n, int64_t k, int reps, Timing* t, std::string* why) {
    // Loaded once and never closed: unloading cuBLAS before the process ends is known to crash at exit.
    // $RIDGE_CUBLAS (a path, as the GPU bundle's run.sh finds it) first, then the loader's search.
    static std::string path;
    static void* lib = [] {
        std::vector<std::string> names;
        if (const char* env = std::getenv("RIDGE_CUBLAS"); env != nullptr && *env != '\0') names.push_back(env);
        names.push_back("libcublas.so.13");
        names.push_back("libcublas.so.12");
        names.push_back("libcublas.so");
        for (const std::string& n : names)
            if (void* l = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
                path = n;
                return l;
            }
        return static_cast<void*>(nullptr);
    }();
    if (!lib) {
        *why = "reference: none (cuBLAS not found: set RIDGE_CUBLAS, or install libcublas.so.13/.12)";
        return false;
    }
    *why = path;
    using Create = cublasStatus_t (*)(cublasHandle_t*);
    using Destroy = cublasStatus_t (*)(cublasHandle_t);
    using SetStream = cublasStatus_t (*)(cublasHandle_t, cudaStream_t);
    using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                      const void*, const void*, cudaDataType, int, const void*, cudaDataType, int,
                                      const void*, void*, cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
    auto create = reinterpret_cast<Create>(dlsym(lib, "cublasCreate_v2"));
    auto destroy = reinterpret_cast<Destroy>(dlsym(lib, "cublasDestroy_v2"));
    auto set_stream = reinterpret_cast<SetStream>(dlsym(lib, "cublasSetStream_v2"));
    auto gemm = reinterpret_cast<GemmEx>(dlsym(lib, "cublasGemmEx"));
    if (!create || !destroy || !set_stream || !gemm) {
        *why = "cuBLAS lacks cublasCreate_v2 / cublasGemmEx";
        return false;
    }
    // The inputs and the stream outlive the handle, which is destroyed however this returns.
    const std::vector<uint16_t> w = random_bf16(size_t(n * k), 1), x = random_bf16(size_t(m * k), 2);
    DeviceBuffer W(w.size() * 2), X(x.size() * 2), Y(size_t(m * n) * 4);
    W.upload(w.data(), w.size() * 2);
    X.upload(x.data(), x.size() * 2);
    Stream s;
    cublasHandle_t h = nullptr;
    if (create(&h) != CUBLAS_STATUS_SUCCESS) {
        *why = "cublasCreate failed";
        return false;
    }
    struct Handle {
        cublasHandle_t h;
        Destroy destroy;
        ~Handle() { destroy(h); }
    } guard{h, destroy};
    set_stream(h, stream_of(s));
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major Y (m, n) = X (m, k) . W (n, k)^T is column-major Y^T (n x m) = op(A) . B with
    // A = W read as column-major (k x n), transposed, and B = X read as column-major (k x m).
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    *t = time_events(stream_of(s), reps, [&] {
        const cublasStatus_t r = gemm(h, CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m), int(k), &alpha, W.data(), CUDA_R_16BF,
                                      int(k), X.data(), CUDA_R_16BF, int(k), &beta, Y.data(), CUDA_R_32F, int(n),
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (r != CUBLAS_STATUS_SUCCESS) st = r;
    });
    if (st != CUBLAS_STATUS_SUCCESS) {
        *why = "cublasGemmEx failed with status " + std::to_string(int(st));
        return false;
    }
    return true;
}

}  // namespace ridge::cuda
