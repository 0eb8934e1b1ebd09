// Bench: llama-bench-style speed tests of prefill and decode, each repeated after a warm-up, and
// what the counters say about them: FLOPs and bytes per token, the achieved GB/s and GFLOP/s,
// and the roofline bound (min(peak, I * bandwidth) from the measured Ceilings) they reach a
// share of. Library functions returning plain structs; `ridge bench` prints them.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "measure/ceilings.h"
#include "engine/kv_cache.h"
#include "kernels/cpu/probe.h"
#include "engine/counters.h"
#include "engine/engine.h"
#include "weights/types.h"

namespace ridge {

struct BenchOptions {
    int n_prompt = 512;        // prefill test: prompt tokens (0 skips the test)
    int n_gen = 128;           // decode test: generated tokens (0 skips the test)
    int n_decode_prompt = 8;   // tokens in the cache before the decode test's first step (not timed)
    int reps = 5;              // timed repetitions of each test, after one warm-up
    int max_rows = 512;        // most prompt rows per forward pass (llama-bench's ubatch)
    DType kv_type = DType::F32;
    uint64_t seed = 1;         // random token ids, as llama-bench uses
    bool count = true;         // false: the timed repetitions count nothing (costs from the warm-up)
};

// median, min, max and sample standard deviation of a list of samples (all 0 when empty).
struct Spread {
    double median = 0, min = 0, max = 0, stdev = 0;
};
Spread spread_of(std::vector<double> samples);

// What a phase's costs and speed mean against the ceilings. "bytes" here (and in every roofline
// number) are the bytes that stream from memory each token: weights read plus KV cache read and
// written. Activations are counted apart: they are small and stay in cache.
struct PhaseReport {
    double tokens_per_second = 0;
    Cost per_token;                // every category, per token
    double flops_per_token = 0;
    double bytes_per_token = 0;         // per_token.memory_bytes()
    double intensity = 0;               // FLOPs / byte
    double achieved_gbs = 0;            // bytes_per_token * tokens/s
    double achieved_gflops = 0;         // flops_per_token * tokens/s
    bool has_bound = false;             // false without ceilings
    bool compute_bound = false;         // intensity at or past the ridge point
    double bound_tokens_per_second = 0; // min(peak, I * bandwidth) / flops_per_token
    double percent_of_bound = 0;        // 100 * tokens/s / bound
};
// `total` is the cost of `tokens` tokens; ceilings may be nullptr (no bound then).
PhaseReport phase_report(const Cost& total, int64_t tokens, double tokens_per_second, const Ceilings* ceilings);

// The bound in tokens/s for a token of this cost: min(peak, I * bandwidth) / FLOPs per token. Below
// the ridge point this is bandwidth / bytes per token (decode); past it, peak / FLOPs per token.
double bound_tokens_per_second(const Cost& per_token, const Ceilings& c);

struct BenchTest {
    std::string name;              // llama-bench's names: "pp512" (prefill), "tg128" (decode)
    Phase phase = Phase::Prefill;
    int n_tokens = 0;              // tokens timed in each repetition
    int n_past = 0;                // tokens in the KV cache before the timed ones
    std::vector<double> samples;   // tokens/s of each timed repetition
    Spread tokens_per_second;
    Counters counters;             // the counted repetitions (the warm-up when counting is off)
    int64_t counted_tokens = 0;    // tokens `counters` covers
    PhaseReport report;            // at the median tokens/s
    // The bound measured with the run (CPU only; 0 on a GPU): after every timed repetition, one
    // plain read of exactly the bytes a step of this test reads from memory (its weight pages and
    // its KV cache, as the counters count them per step), with the same threads.
    std::vector<double> stream_samples;  // GB/s of each such read
    double stream_bytes = 0;             // bytes each read streams
    double stream_gbs = 0;               // median of stream_samples
    double percent_of_stream = 0;        // 100 * achieved GB/s (counted bytes x tokens/s) / stream_gbs
};

struct BenchResult {
    int threads = 0;               // OpenMP threads the tests ran with
    std::vector<BenchTest> tests;  // prefill first, then decode (skipped ones absent)
    double peak_rss_bytes = 0;     // the process's peak resident memory after the tests
};

// What a step of a test reads from memory, for the stream read above: every weight the pass reads
// whole (each layer's norms and matrices, the output norm and head; the embedding table's rows are
// read one per token and are left out), and `kv_slots` slots of each layer's keys and values.
std::vector<ReadRegion> step_read_regions(const Engine& engine, KVCache& cache, int64_t kv_slots);

// Runs the tests (ridge::Error for bad options or a test that passes the model's context).
// `ceilings` may be nullptr: then no bound is reported.
BenchResult run_bench(const Engine& engine, const BenchOptions& opt, const Ceilings* ceilings);

// Peak resident set size of this process in bytes (getrusage ru_maxrss).
double peak_rss_bytes();

}  // namespace ridge
