// How close can decode come to the roofline bound? A decode step reads every matmul weight once.
// This program times three ways of going through a real model's decode weights, in forward order,
// in alternating rounds (so the machine's drift hits all three alike):
//   read, one region   a plain read of every weight byte (AVX2 loads, no arithmetic) in one OpenMP
//                      region, each thread its static share of each matrix, no waiting between
//                      them: the most a step could stream, on this machine, with these threads.
//   read, per group    the same read with one region per group of matmuls that forward() runs
//                      together (q/k/v, o, gate/up, down, output head), a join after each: the
//                      floor for forward()'s structure, with no arithmetic at all.
//   matmuls            the decode matmuls themselves (cpu::matmul_rows_fused on 16-bit integer
//                      activations, the default fast path), grouped as forward() groups them.
// It prints each one's median time per step, GB/s and share of the saved `ridge probe` bandwidth
// (the bound `ridge bench` quotes is that bandwidth / bytes per token).
// With LAYERS, only the first LAYERS layers' groups (no output head) go round: few enough of them
// stay in cache from one round to the next, and the matmuls' rate is then the kernels' own, with
// no wait on memory. Against the whole model's it tells whether memory or the kernels set decode's pace.
//
//   build/bench_stream [MODEL.gguf] [ROUNDS] [LAYERS]     (default: SmolLM2-135M Q4_1, 30 rounds, all)
//   OMP_NUM_THREADS sets the threads (default: all).
#include <CLI/CLI.hpp>
#include <omp.h>
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "measure/ceilings.h"
#include "engine/model.h"
#include "kernels/cpu/matmul.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "tests/test_paths.h"

namespace {

using namespace ridge;
using Clock = std::chrono::steady_clock;

// XOR of every 8-byte word of [p, p + n) into acc (a tail under 128 bytes is skipped). With AVX2,
// four 32-byte loads per step into four accumulators, as `ridge probe` reads (written as a plain
// loop, GCC 12 copied each piece through the stack and the loop, not memory, set the pace).
inline void read_all(const uint8_t* p, size_t n, uint64_t (&acc)[4]) {
#if defined(__AVX2__)
    __m256i a[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (size_t i = 0; i + 128 <= n; i += 128)
        for (int j = 0; j < 4; j++)
            a[j] = _mm256_xor_si256(a[j], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i + 32 * j)));
    const __m256i x = _mm256_xor_si256(_mm256_xor_si256(a[0], a[1]), _mm256_xor_si256(a[2], a[3]));
    for (int j = 0; j < 4; j++) acc[j] ^= uint64_t(_mm256_extract_epi64(x, 0) >> j);  // any dependence will do
#else
    for (size_t i = 0; i + 128 <= n; i += 8) {
        uint64_t w;
        std::memcpy(&w, p + i, 8);
        acc[(i / 8) % 4] ^= w;
    }
#endif
}

// Thread t's static share of n bytes, on 64-byte boundaries.
inline void share(size_t n, int t, int n_threads, size_t& begin, size_t& end) {
    const size_t lines = (n + 63) / 64;
    begin = std::min(n, lines * size_t(t) / size_t(n_threads) * 64);
    end = std::min(n, lines * size_t(t + 1) / size_t(n_threads) * 64);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"bench_stream: a plain read of the decode weights against the decode matmuls"};
    app.failure_message([](const CLI::App*, const CLI::Error& e) {  // argument errors: one line
        return "bench_stream: " + std::string(e.what()) + " (see --help)\n";
    });
    std::string path = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    int rounds = 30, layers = 0;
    app.add_option("model", path, "GGUF file (default: SmolLM2-135M Q4_1)");
    app.add_option("rounds", rounds, "rounds of each way (default 30)")->check(CLI::Range(1, 1000000));
    CLI::Option* layers_opt =
        app.add_option("layers", layers, "only the first LAYERS layers, no output head (default: all and the head)")
            ->check(CLI::Range(1, 1000000));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        const bool whole = layers_opt->count() == 0;  // every layer and the output head
        auto file = ModelFile::open(path);
        const Model model = Model::from_file(*file);
        const Config& c = model.config;
        if (whole) layers = c.n_layers;
        if (layers > c.n_layers)
            throw Error("LAYERS " + std::to_string(layers) + " is more than the model's " + std::to_string(c.n_layers));

        // The groups forward() runs as one matmul call each, in its order.
        std::vector<std::vector<const TensorView*>> groups;
        for (int l = 0; l < layers; l++) {
            const LayerWeights& L = model.layers[size_t(l)];
            groups.push_back({L.attn_q, L.attn_k, L.attn_v});
            groups.push_back({L.attn_output});
            groups.push_back({L.ffn_gate, L.ffn_up});
            groups.push_back({L.ffn_down});
        }
        if (whole) groups.push_back({model.output});
        double bytes = 0;
        for (const auto& g : groups)
            for (const TensorView* w : g) bytes += double(w->nbytes);

        std::vector<float> x(size_t(std::max(c.n_ff, c.q_dim())), 0.1f), y(size_t(c.n_vocab + 2 * c.n_ff));
        cpu::QuantizedRows xq;
        long sink = 0;

        // Groups [g0, g1) read in one OpenMP region, each thread its share of each matrix.
        auto read_groups = [&](size_t g0, size_t g1) {
            long s = 0;
#pragma omp parallel reduction(^ : s)
            {
                const int t = omp_get_thread_num(), nt = omp_get_num_threads();
                uint64_t acc[4] = {};
                for (size_t g = g0; g < g1; g++)
                    for (const TensorView* w : groups[g]) {
                        size_t b, e;
                        share(w->nbytes, t, nt, b, e);
                        read_all(w->data + b, e - b, acc);
                    }
                s ^= long(acc[0] ^ acc[1] ^ acc[2] ^ acc[3]);
            }
            sink ^= s;
        };
        auto read_one_region = [&] { read_groups(0, groups.size()); };
        auto read_per_group = [&] {
            for (size_t g = 0; g < groups.size(); g++) read_groups(g, g + 1);
        };
        auto matmuls = [&] {
            for (const auto& g : groups) {
                const int64_t k = g[0]->ne(0);
                cpu::quantize_rows(x.data(), 1, k, xq);
                cpu::MatmulOutput outs[3];
                cpu::Cost costs[3];
                float* out = y.data();
                for (size_t o = 0; o < g.size(); o++) outs[o] = {g[o], out}, out += g[o]->ne(1);
                cpu::matmul_rows_fused(outs, int(g.size()), x.data(), 1, &xq, costs);
            }
        };

        struct Way {
            const char* name;
            std::function<void()> run;
            std::vector<double> seconds;
        };
        std::vector<Way> ways = {{"read, one region", read_one_region, {}},
                                 {"read, per group", read_per_group, {}},
                                 {"matmuls", matmuls, {}}};
        for (Way& w : ways) w.run();  // warm-up: pages mapped, threads started
        for (int r = 0; r < rounds; r++)
            for (Way& w : ways) {
                const Clock::time_point t0 = Clock::now();
                w.run();
                w.seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
            }

        const int threads = omp_get_max_threads();
        const auto ceilings = load_ceilings(default_ceilings_path(threads));
        std::printf("%s: %.1f MB of decode weights (%s) in %zu matmul groups, %d threads, median of %d rounds\n",
                    path.c_str(), bytes / 1e6,
                    whole ? "all" : ("the first " + std::to_string(layers) + " layers, no head").c_str(),
                    groups.size(), threads, rounds);
        if (ceilings)
            std::printf("probe bandwidth %.2f GB/s (%s)\n", ceilings->bandwidth_gbs, ceilings->path.c_str());
        else
            std::printf("no saved probe for %d threads: run `ridge probe -t %d` for the %% column\n", threads, threads);
        std::printf("| way | ms per step | GB/s | %% of probe |\n|---|--:|--:|--:|\n");
        for (const Way& w : ways) {
            const double s = median(w.seconds), gbs = bytes / s / 1e9;
            if (ceilings)
                std::printf("| %s | %.2f | %.1f | %.0f |\n", w.name, s * 1e3, gbs, 100.0 * gbs / ceilings->bandwidth_gbs);
            else
                std::printf("| %s | %.2f | %.1f | - |\n", w.name, s * 1e3, gbs);
        }
        return sink == 42 ? 1 : 0;  // keeps the reads
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_stream: %s\n", e.what());
        return 1;
    }
}
