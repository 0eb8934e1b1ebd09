// The matmul kernels on SmolLM2's shapes (Google Benchmark): prefill variants v5_tiled (Eigen over
// f32 tiles, the baseline), v6_packed (ridge's GEMM) and v7_int_packed (its integer form, where the
// build has AVX-512; on Llama-3.2-1B's shapes too) at m = 512 rows, and the decode kernels
// (v3_simd in f32, v4_int on 16-bit activations in its AVX-512 and AVX2 forms) at m = 1, for Q4_1,
// Q8_0 and F16 weights (and Q4_0, Q5_0, Q5_1 for v4_int) of the gate/up shape (1536 x 576) and the
// down shape (576 x 1536).
// Counters: GFLOP/s, and weight GB/s for decode. Random weights; the matrices of one benchmark fit
// in the L3 cache, so decode numbers here are the kernels' compute speed, not DRAM streaming
// (ridge bench measures that).
//
//   build/bench_matmul [--benchmark_filter=REGEX] [--benchmark_repetitions=N]
//   OMP_NUM_THREADS sets the threads (default: all).
#if __has_include(<benchmark/benchmark.h>)
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "weights/quant.h"

namespace {

using namespace ridge;

struct Weight {
    std::vector<uint8_t> bytes;
    TensorView view;
};

Weight random_weight(DType t, int64_t n, int64_t k) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> row(static_cast<size_t>(k));
    Weight w;
    const size_t rb = row_bytes(t, k);
    w.bytes.resize(rb * size_t(n));
    for (int64_t r = 0; r < n; r++) {
        for (float& x : row) x = dist(rng);
        quantize_row(t, row.data(), w.bytes.data() + size_t(r) * rb, k);
    }
    w.view = TensorView{"bench", t, {k, n}, w.bytes.data(), w.bytes.size()};
    return w;
}

// The first three take every benchmark; the next three (the other integer-kernel types) the integer
// ones; the K-quants the K-quant kernel and v6.
const DType kTypes[] = {DType::Q4_1, DType::Q8_0, DType::F16, DType::Q4_0, DType::Q5_0, DType::Q5_1, DType::Q4_K, DType::Q6_K};

// args: type index, n, k, m.
void run(benchmark::State& state, cpu::Cost (*fn)(const TensorView&, const float*, int64_t, float*)) {
    const DType t = kTypes[state.range(0)];
    const int64_t n = state.range(1), k = state.range(2), m = state.range(3);
    const Weight w = random_weight(t, n, k);
    std::vector<float> x(size_t(m * k), 0.5f), y(size_t(m * n));
    for (auto _ : state) {
        fn(w.view, x.data(), m, y.data());
        benchmark::DoNotOptimize(y.data());
    }
    state.SetLabel(std::string(dtype_name(t)));
    state.counters["GFLOP/s"] = benchmark::Counter(2.0 * double(m * n * k) * double(state.iterations()) / 1e9,
                                                   benchmark::Counter::kIsRate);
    state.counters["weight_GB/s"] = benchmark::Counter(double(w.bytes.size()) * double(state.iterations()) / 1e9,
                                                       benchmark::Counter::kIsRate);
}

void BM_v5_tiled(benchmark::State& s) { run(s, cpu::matmul_v5_tiled); }
void BM_v6_packed(benchmark::State& s) { run(s, cpu::matmul_v6_packed); }
void BM_v7_int_packed(benchmark::State& s) {
    if (!cpu::v7_types(kTypes[s.range(0)])) return s.SkipWithError("v7_int_packed needs an AVX-512 build");
    run(s, cpu::matmul_v7_int_packed);
}
void BM_v3_simd(benchmark::State& s) { run(s, cpu::matmul_v3_simd); }

// The integer decode kernel with the quantization of its input in the timing (forward() quantizes
// once per input, shared by q/k/v and by gate/up).
// BM_v4_int takes the form matmul_v4_int takes on this machine (cpu::int_form(): the AVX-512 form
// where the build has it, 8 weight rows a step, its scales by one gather where this CPU's gathers
// run at full speed); BM_v4_int_zmm_loads the AVX-512 form with the scales by loads, BM_v4_int_ymm
// always the AVX2 form (4 rows a step).
template <cpu::Cost (*kKernel)(const TensorView&, const cpu::QuantizedRows&, float*)>
void int_run(benchmark::State& state) {
    const DType t = kTypes[state.range(0)];
    if (!cpu::int_simd_types(t)) {
        state.SkipWithError("no integer kernel for this type in this build");
        return;
    }
    run(state, [](const TensorView& W, const float* X, int64_t m, float* Y) {
        static thread_local cpu::QuantizedRows q;
        cpu::quantize_rows(X, m, W.ne(0), q);
        return kKernel(W, q, Y);
    });
}
cpu::Cost v4_zmm_loads(const TensorView& W, const cpu::QuantizedRows& X, float* Y) {
    return cpu::matmul_v4_int_as(W, X, Y, cpu::IntForm::zmm_loads);
}
cpu::Cost v4_ymm(const TensorView& W, const cpu::QuantizedRows& X, float* Y) {
    return cpu::matmul_v4_int_as(W, X, Y, cpu::IntForm::ymm);
}
// The K-quant integer kernel, quantization included, as int_run.
template <cpu::IntForm kForm>
void int_k_run(benchmark::State& state) {
    run(state, [](const TensorView& W, const float* X, int64_t m, float* Y) {
        static thread_local cpu::QuantizedRows q;
        cpu::quantize_rows(X, m, W.ne(0), q);
        return cpu::matmul_v4_int_k_as(W, q, Y, kForm);
    });
}
void BM_v4_int(benchmark::State& s) { int_run<cpu::matmul_v4_int>(s); }
void BM_v4_int_k(benchmark::State& s) { int_k_run<cpu::IntForm::zmm_loads>(s); }  // ymm where the build has no AVX-512
void BM_v4_int_k_ymm(benchmark::State& s) { int_k_run<cpu::IntForm::ymm>(s); }
void BM_v4_int_zmm_loads(benchmark::State& s) { int_run<v4_zmm_loads>(s); }
void BM_v4_int_ymm(benchmark::State& s) { int_run<v4_ymm>(s); }

void prefill_args(benchmark::internal::Benchmark* b) {
    for (int t = 0; t < 3; t++) b->Args({t, 1536, 576, 512})->Args({t, 576, 1536, 512});
    b->Unit(benchmark::kMillisecond)->UseRealTime();
}
void decode_args(benchmark::internal::Benchmark* b) {
    for (int t = 0; t < 3; t++) b->Args({t, 1536, 576, 1})->Args({t, 576, 1536, 1});
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void int_decode_args(benchmark::internal::Benchmark* b) {
    for (int t : {0, 1, 3, 4, 5}) b->Args({t, 1536, 576, 1})->Args({t, 576, 1536, 1});
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
// Batched decode: 16 and 64 rows of X (the zmm forms take them 16 at a time in lanes).
void int_batch_args(benchmark::internal::Benchmark* b) {
    for (int t : {0, 1, 5})
        for (int m : {16, 64}) b->Args({t, 1536, 576, m})->Args({t, 576, 1536, m});
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

// The integer GEMM's types on SmolLM2's shapes; and prefill on Llama-3.2-1B's gate/up and down
// shapes (v6 for F16 too), 512 rows of X.
void int_prefill_args(benchmark::internal::Benchmark* b) {
    for (int t : {0, 1, 3}) b->Args({t, 1536, 576, 512})->Args({t, 576, 1536, 512});
    b->Unit(benchmark::kMillisecond)->UseRealTime();
}
void prefill_1b_args(benchmark::internal::Benchmark* b, bool with_f16) {
    for (int t : {2, 3, 6, 7})
        if (t != 2 || with_f16) b->Args({t, 8192, 2048, 512})->Args({t, 2048, 8192, 512});
    b->Unit(benchmark::kMillisecond)->UseRealTime();
}

BENCHMARK(BM_v5_tiled)->Apply(prefill_args);
BENCHMARK(BM_v6_packed)->Apply(prefill_args);
BENCHMARK(BM_v6_packed)->Apply(int_prefill_args)->Name("BM_v6_packed_int_types");
BENCHMARK(BM_v7_int_packed)->Apply(int_prefill_args);
BENCHMARK(BM_v6_packed)->Apply([](auto* b) { prefill_1b_args(b, true); })->Name("BM_v6_packed_1b");
BENCHMARK(BM_v7_int_packed)->Apply([](auto* b) { prefill_1b_args(b, false); })->Name("BM_v7_int_packed_1b");
BENCHMARK(BM_v3_simd)->Apply(decode_args);
BENCHMARK(BM_v4_int)->Apply(int_decode_args);
BENCHMARK(BM_v4_int)->Apply(int_batch_args)->Name("BM_v4_int_batch");
// K-quants on Llama-3.2-1B's gate/up (8192 x 2048) and down (2048 x 8192) shapes (SmolLM2's 576 is
// not a multiple of 256): decode and batched decode, and v6 beside them at the rows where the
// tiled threshold is chosen. 1024 x 2048 at one row is a weight the cores' L2 holds: the decode
// kernel's own pace, with DRAM out of it.
void int_k_args(benchmark::internal::Benchmark* b) {
    for (int t : {6, 7}) {
        for (int m : {1, 4, 16, 64}) b->Args({t, 8192, 2048, m})->Args({t, 2048, 8192, m});
        b->Args({t, 1024, 2048, 1});
    }
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
void int_k_threshold_args(benchmark::internal::Benchmark* b) {
    for (int t : {6, 7})
        for (int m : {22, 32, 48, 64, 96, 112, 128}) b->Args({t, 8192, 2048, m});
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(BM_v4_int_k)->Apply(int_k_args);
BENCHMARK(BM_v4_int_k_ymm)->Apply(int_k_args);
BENCHMARK(BM_v4_int_k)->Apply(int_k_threshold_args)->Name("BM_v4_int_k_threshold");
BENCHMARK(BM_v6_packed)->Apply(int_k_threshold_args)->Name("BM_v6_packed_k_threshold");
BENCHMARK(BM_v7_int_packed)->Apply(int_k_threshold_args)->Name("BM_v7_int_packed_k_threshold");
// Where the integer GEMM overtakes the row kernel on SmolLM2's gate/up shape.
void int_threshold_args(benchmark::internal::Benchmark* b) {
    for (int t : {0, 1, 3})
        for (int m : {16, 24, 32, 48, 64, 96, 112}) b->Args({t, 1536, 576, m});
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}
BENCHMARK(BM_v4_int)->Apply(int_threshold_args)->Name("BM_v4_int_threshold");
BENCHMARK(BM_v7_int_packed)->Apply(int_threshold_args)->Name("BM_v7_int_packed_threshold");
BENCHMARK(BM_v4_int_zmm_loads)->Apply(int_decode_args);
BENCHMARK(BM_v4_int_ymm)->Apply(int_decode_args);

}  // namespace

BENCHMARK_MAIN();
#else
#include <cstdio>
int main() {
    std::puts("bench_matmul: built without Google Benchmark (install libbenchmark-dev)");
    return 1;
}
#endif
