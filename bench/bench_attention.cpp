// Decode attention on SmolLM2's shape (Google Benchmark): one query row against n_keys keys of an
// f32 or f16 KV cache (9 query heads, 3 KV heads, head_dim 64, blocks of 16 slots), for 30 layers
// in turn as a decode step runs them, warm (the 30 layers' keys and values stay in the caches
// between steps) or cold (128 MB are read between steps, as a decode step streams its weights, so
// each layer's keys and values come from DRAM as they do in `ridge bench`). Beside
// attention_v3_split, a plain read of the same bytes, each layer's keys and values in order: the
// floor for a kernel that reads them once. Counters: µs per layer, KV GB/s.
//
//   build/bench_attention [--benchmark_filter=REGEX] [--benchmark_repetitions=N]
//   OMP_NUM_THREADS sets the threads (default: all). Arguments: n_keys / cold / f16.
#if __has_include(<benchmark/benchmark.h>)
#include <benchmark/benchmark.h>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/f16.h"

namespace {

using namespace ridge;

constexpr int kLayers = 30, kBlockSize = 16;
const cpu::AttentionShape kShape{9, 3, 64};

// 30 layers' keys and values (f32, or f16 converted from the same f32 values) for up to n_keys
// positions of one sequence (blocks 0, 1, ...).
struct Cache {
    int kv_dim = kShape.n_kv_heads * kShape.head_dim;
    DType type;
    std::vector<std::vector<uint8_t>> k, v;
    std::vector<int32_t> table;
    std::vector<cpu::KVLayer> layers;
    Cache(int n_keys, DType t) : type(t) {
        const int n_blocks = (n_keys + kBlockSize - 1) / kBlockSize;
        const size_t n = size_t(n_blocks) * kBlockSize * kv_dim, elem = t == DType::F16 ? 2 : 4;
        std::mt19937 rng(3);
        std::normal_distribution<float> dist;
        auto fill = [&](std::vector<uint8_t>& bytes) {
            bytes.resize(n * elem);
            for (size_t i = 0; i < n; i++) {
                const float x = dist(rng);
                if (t == DType::F16) {
                    const uint16_t h = cpu::f32_to_f16(x);
                    std::memcpy(bytes.data() + 2 * i, &h, 2);
                } else {
                    std::memcpy(bytes.data() + 4 * i, &x, 4);
                }
            }
        };
        table.resize(size_t(n_blocks));
        std::iota(table.begin(), table.end(), 0);
        for (int l = 0; l < kLayers; l++) {
            fill(k.emplace_back());
            fill(v.emplace_back());
            layers.push_back(
                cpu::KVLayer{t, k.back().data(), v.back().data(), n_blocks * kBlockSize, kv_dim, kBlockSize});
        }
    }
    size_t bytes_per_key() const { return size_t(kv_dim) * (type == DType::F16 ? 2 : 4); }
};

// Reads 128 MB (more than any L3 here) between timed steps of a cold benchmark, on all the threads
// (as a decode step's matmuls do: every core's caches are refilled, and the team is awake).
float evict(const std::vector<float>& junk) {
    float sum = 0.0f;
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (size_t i = 0; i < junk.size(); i += 16) sum += junk[i];
    return sum;
}

// args: n_keys, cold (0 or 1), f16 (0 or 1). `layer(l)` runs layer l's attention (or its read).
template <class F>
void run(benchmark::State& state, const Cache& cache, F&& layer) {
    const int n_keys = int(state.range(0));
    const bool cold = state.range(1) != 0;
    std::vector<float> junk(cold ? (size_t(128) << 20) / sizeof(float) : 0, 1.0f);
    for (auto _ : state) {
        if (cold) {
            state.PauseTiming();
            benchmark::DoNotOptimize(evict(junk));
            state.ResumeTiming();
        }
        for (int l = 0; l < kLayers; l++) layer(l);
    }
    const double kv_bytes = 2.0 * n_keys * double(cache.bytes_per_key()) * kLayers;
    state.SetLabel(std::string(cold ? "cold" : "warm") + (cache.type == DType::F16 ? " f16" : " f32"));
    state.counters["us_per_layer"] =
        benchmark::Counter(double(state.iterations()) * kLayers * 1e-6,
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["KV_GB/s"] = benchmark::Counter(kv_bytes * double(state.iterations()) / 1e9,
                                                   benchmark::Counter::kIsRate);
}

DType kv_type(const benchmark::State& state) { return state.range(2) != 0 ? DType::F16 : DType::F32; }

void BM_v3_split(benchmark::State& state) {
    const Cache cache(int(state.range(0)), kv_type(state));
    std::vector<float> q(size_t(kShape.n_heads * kShape.head_dim), 0.1f), out(q.size());
    const cpu::AttentionRow row{cache.table.data(), int32_t(state.range(0))};
    run(state, cache, [&](int l) {
        cpu::attention_v3_split(q.data(), &row, 1, cache.layers[size_t(l)], kShape, out.data());
        benchmark::DoNotOptimize(out.data());
    });
}

// Every key and value of the layer read once, in slot order (one byte a cache line summed).
void BM_read_kv(benchmark::State& state) {
    const Cache cache(int(state.range(0)), kv_type(state));
    const size_t n = size_t(state.range(0)) * cache.bytes_per_key();
    run(state, cache, [&](int l) {
        unsigned sum = 0;
        for (const auto* kv : {&cache.k[size_t(l)], &cache.v[size_t(l)]})
            for (size_t i = 0; i < n; i += 64) sum += (*kv)[i];
        benchmark::DoNotOptimize(sum);
    });
}

void args(benchmark::internal::Benchmark* b) {
    for (int f16 = 0; f16 < 2; f16++)
        for (int cold = 0; cold < 2; cold++)
            for (int n_keys : {24, 72, 136, 512}) b->Args({n_keys, cold, f16});
    b->Unit(benchmark::kMicrosecond)->UseRealTime();
}

BENCHMARK(BM_v3_split)->Apply(args);
BENCHMARK(BM_read_kv)->Apply(args);

}  // namespace

BENCHMARK_MAIN();
#else
#include <cstdio>
int main() {
    std::puts("bench_attention: built without Google Benchmark (install libbenchmark-dev)");
    return 1;
}
#endif
