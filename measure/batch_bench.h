// Batch bench: llama-batched-bench-style batched decode. For each batch size B, B sequences are
// prefilled with p random tokens (timed apart), then each of n decode steps advances all B by one
// token with ONE forward() over a Batch of B rows. Per B: step time, tokens/s, and what the
// counters say: each weight is read once per step and used B times, so intensity I ~ B.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "measure/bench.h"
#include "measure/ceilings.h"
#include "engine/counters.h"
#include "engine/engine.h"
#include "weights/types.h"

namespace ridge {

struct BatchBenchOptions {
    std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64};  // the B values, run in this order
    int n_prompt = 128;        // p: tokens prefilled into each sequence before the decode steps (0: none)
    int n_gen = 64;            // n: decode steps (each one token for each of the B sequences)
    int reps = 3;              // timed repetitions of the n steps, after one warm-up
    int max_rows = 512;        // most prompt rows per prefill forward pass
    DType kv_type = DType::F32;
    uint64_t seed = 1;         // random prompt and decode token ids
};

// One batch size's measurements. Every repetition decodes from the same prefilled prompts (the
// sequences are truncated back to p tokens between repetitions), so each does the same work.
struct BatchPoint {
    int batch = 0;                     // B: sequences, and rows per decode forward()
    int64_t kv_cache_tokens = 0;       // the cache's capacity: B * (p + n) rounded up to whole blocks per sequence
    double kv_cache_bytes = 0;         // its allocation
    double prefill_seconds = 0;        // B prompts of p tokens (not in the step times)
    std::vector<double> step_seconds;  // (reps) mean seconds per decode step of each repetition
    Spread step;                       // of step_seconds
    double tokens_per_second = 0;      // B / median step time: all sequences together
    double tokens_per_second_per_seq = 0;  // 1 / median step time
    Counters counters;                 // the timed repetitions' decode steps
    int64_t counted_steps = 0;         // decode forward() calls `counters` covers (reps * n)
    int64_t counted_tokens = 0;        // rows they fed (reps * n * B)
    Cost per_step;                // counters' total / counted_steps
    PhaseReport report;                // per token, at tokens_per_second (bound: min(peak, I * bw))
    double bound_gflops = 0;           // min(peak, I * bandwidth) (0 without ceilings)
    // The integer roof, beside it (0 without an integer peak in the ceilings): min(int dot peak,
    // I * bandwidth), the t/s it allows, and which of the two holds a step under it.
    double int_bound_gflops = 0;
    double int_bound_tokens_per_second = 0;
    double percent_of_int_bound = 0;
    bool int_bound_compute = false;    // under the integer peak (else under the bandwidth)
    // The bound measured with the run (CPU only; empty on a GPU), as bench.h's: after every timed
    // repetition, one plain read of the bytes a decode step reads (weights, and the KV slots the
    // counters count per step), with the same threads.
    std::vector<double> stream_samples;  // GB/s of each read
    double stream_bytes = 0;             // bytes each read streams
    double stream_gbs = 0;               // median of stream_samples
    double percent_of_stream = 0;        // 100 * step bytes / median step time / stream_gbs
};

// Where batched decode meets the ridge point I* = peak / bandwidth. A step of B rows costs
// B * f FLOPs and W + B * k bytes (W: the weights, read once per step; k: each row's KV cache
// traffic and embedding row), so I(B) = B f / (W + B k) rises with B towards f / k.
struct BatchCrossing {
    std::optional<int> first_measured;  // smallest measured B with intensity >= I*
    bool has_fit = false;               // two distinct B measured: W, f, k known
    double weight_bytes_per_step = 0;   // W
    double flops_per_row = 0;           // f
    double bytes_per_row = 0;           // k
    double intensity_limit = 0;         // f / k: I as B grows without end
    std::optional<double> predicted;    // B with I(B) = I* (none when f / k < I*: never compute-bound)
};

struct BatchBenchResult {
    int threads = 0;                  // OpenMP threads the tests ran with
    int n_prompt = 0, n_gen = 0, reps = 0;
    std::vector<BatchPoint> points;   // one per B, in the order of the options
    BatchCrossing crossing;           // empty (no values) without ceilings
    double peak_rss_bytes = 0;
};

// ridge::Error (one line) for options that make no sense for this model: B < 1 or listed twice,
// p < 0, n < 1, reps < 1, p + n past the model's context, or a KV cache for the largest B too big
// for this machine's memory.
void check_batch_bench_options(const Engine& engine, const BatchBenchOptions& opt);

// Runs the tests (checks first). `ceilings` may be nullptr: no bound and no crossing then.
BatchBenchResult run_batch_bench(const Engine& engine, const BatchBenchOptions& opt, const Ceilings* ceilings);

// The crossing from measured points (the fit takes the two largest B, which run the same kernels).
BatchCrossing batch_crossing(const std::vector<BatchPoint>& points, const Ceilings& ceilings);

}  // namespace ridge
