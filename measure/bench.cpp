// run_bench (see bench.h): one Session, the prefill and decode tests each run once to warm up and
// then `reps` times on a fresh sequence; tokens/s from the wall time around the timed calls, costs
// from the counters, bounds from the ceilings.
#include "measure/bench.h"

#include <omp.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <span>
#include <string>

#include "engine/session.h"
#include "weights/error.h"

namespace ridge {

Spread spread_of(std::vector<double> samples) {
    Spread s;
    const size_t n = samples.size();
    if (n == 0) return s;
    std::sort(samples.begin(), samples.end());
    s.min = samples.front();
    s.max = samples.back();
    s.median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
    if (n > 1) {
        double mean = 0;
        for (double x : samples) mean += x;
        mean /= double(n);
        double ss = 0;
        for (double x : samples) ss += (x - mean) * (x - mean);
        s.stdev = std::sqrt(ss / double(n - 1));
    }
    return s;
}

double bound_tokens_per_second(const Cost& per_token, const Ceilings& c) {
    if (per_token.flops <= 0 || per_token.memory_bytes() <= 0) return 0.0;
    return c.attainable_gflops(per_token.intensity()) * 1e9 / per_token.flops;
}

PhaseReport phase_report(const Cost& total, int64_t tokens, double tokens_per_second, const Ceilings* ceilings) {
    PhaseReport r;
    r.tokens_per_second = tokens_per_second;
    if (tokens <= 0) return r;
    r.per_token = total;
    r.per_token.scale(1.0 / double(tokens));
    r.flops_per_token = r.per_token.flops;
    r.bytes_per_token = r.per_token.memory_bytes();
    r.intensity = r.per_token.intensity();
    r.achieved_gbs = r.bytes_per_token * tokens_per_second / 1e9;
    r.achieved_gflops = r.flops_per_token * tokens_per_second / 1e9;
    if (ceilings && ceilings->bandwidth_gbs > 0 && ceilings->peak_gflops() > 0) {
        r.bound_tokens_per_second = bound_tokens_per_second(r.per_token, *ceilings);
        r.has_bound = r.bound_tokens_per_second > 0;
        r.compute_bound = r.intensity >= ceilings->ridge_point();
        if (r.has_bound) r.percent_of_bound = 100.0 * tokens_per_second / r.bound_tokens_per_second;
    }
    return r;
}

double peak_rss_bytes() {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    return double(ru.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

namespace {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> random_tokens(int n, int n_vocab, std::mt19937_64& rng) {
    std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& t : ids) t = pick(rng);
    return ids;
}

// One repetition on a fresh sequence: `prompt` prefilled, then (decode test) each of `steps`
// decoded one at a time. Returns the seconds of the timed part: the prefill for the prefill
// test, the decode steps for the decode test.
double run_once(Session& s, Phase phase, std::span<const int32_t> prompt, std::span<const int32_t> steps) {
    const int seq = s.cache().new_sequence();
    double seconds = 0;
    if (phase == Phase::Prefill) {
        const Clock::time_point t0 = Clock::now();
        s.prefill(seq, prompt);
        seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    } else {
        s.prefill(seq, prompt);
        const Clock::time_point t0 = Clock::now();
        for (int32_t t : steps) s.decode(seq, t);
        seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    s.cache().free_sequence(seq);
    return seconds;
}

// KV slots one step of the test reads or writes per layer, on average: its counted KV bytes per step
// over the bytes of one slot's key and value in every layer.
int64_t kv_slots_per_step(const Counters& counters, int64_t counted_tokens, int64_t steps_per_rep, int64_t tokens_per_rep,
                          const KVCache& cache, const Config& c) {
    if (counted_tokens <= 0 || steps_per_rep <= 0) return 0;
    const Cost total = counters.total().cost;
    const double kv_per_step = (total.kv_read + total.kv_written) / double(counted_tokens) * double(tokens_per_rep) /
                               double(steps_per_rep);
    const double slot_bytes = double(KVCache::bytes_per_token(c, cache.type()));
    return slot_bytes > 0 ? int64_t(std::llround(kv_per_step / slot_bytes)) : 0;
}

BenchTest run_test(Session& s, Phase phase, std::span<const int32_t> prompt, std::span<const int32_t> steps,
                   const BenchOptions& opt, const Ceilings* ceilings) {
    BenchTest t;
    t.phase = phase;
    t.n_tokens = int(phase == Phase::Prefill ? prompt.size() : steps.size());
    t.n_past = phase == Phase::Prefill ? 0 : int(prompt.size());
    t.name = (phase == Phase::Prefill ? "pp" : "tg") + std::to_string(t.n_tokens);
    PhaseStats& stats = phase == Phase::Prefill ? s.prefill_stats : s.decode_stats;

    // Warm-up, always counted (the costs when the timed repetitions count nothing).
    s.set_counting(true);
    s.prefill_stats = PhaseStats{};
    s.decode_stats = PhaseStats{};
    run_once(s, phase, prompt, steps);
    const PhaseStats warm = stats;

    // What one step of this test streams (a decode step is one token; a prefill pass reads its
    // weights once per chunk of max_rows rows), read after each repetition on the CPU.
    const bool on_cpu = !s.engine().on_gpu();
    const int64_t steps_per_rep = phase == Phase::Prefill ? (t.n_tokens + opt.max_rows - 1) / opt.max_rows : t.n_tokens;
    std::vector<ReadRegion> regions;
    if (on_cpu) {
        const int64_t slots = kv_slots_per_step(warm.counters, warm.tokens, steps_per_rep, t.n_tokens, s.cache(),
                                                s.engine().config());
        regions = step_read_regions(s.engine(), s.cache(), slots);
        for (const ReadRegion& r : regions) t.stream_bytes += double(r.bytes);
        stream_read_seconds(regions, omp_get_max_threads());  // warm-up: pages touched, threads started
    }

    s.set_counting(opt.count);
    s.prefill_stats = PhaseStats{};
    s.decode_stats = PhaseStats{};
    for (int r = 0; r < opt.reps; r++) {
        t.samples.push_back(double(t.n_tokens) / run_once(s, phase, prompt, steps));
        if (on_cpu) t.stream_samples.push_back(t.stream_bytes / stream_read_seconds(regions, omp_get_max_threads()) / 1e9);
    }
    const PhaseStats& counted = opt.count ? stats : warm;
    t.counters = counted.counters;
    t.counted_tokens = counted.tokens;
    s.set_counting(true);

    t.tokens_per_second = spread_of(t.samples);
    t.report = phase_report(t.counters.total().cost, t.counted_tokens, t.tokens_per_second.median, ceilings);
    if (!t.stream_samples.empty()) {
        t.stream_gbs = spread_of(t.stream_samples).median;
        if (t.stream_gbs > 0) t.percent_of_stream = 100.0 * t.report.achieved_gbs / t.stream_gbs;
    }
    return t;
}

}  // namespace

std::vector<ReadRegion> step_read_regions(const Engine& engine, KVCache& cache, int64_t kv_slots) {
    std::vector<ReadRegion> r;
    auto add = [&r](const TensorView* t) {
        if (t != nullptr && t->data != nullptr && t->nbytes > 0) r.push_back({t->data, size_t(t->nbytes)});
    };
    const Model& m = engine.model();
    for (const LayerWeights& l : m.layers)
        for (const TensorView* t : {l.attn_norm, l.attn_q, l.attn_k, l.attn_v, l.attn_output, l.ffn_norm, l.ffn_gate,
                                    l.ffn_up, l.ffn_down})
            add(t);
    add(m.output_norm);
    add(m.output);
    if (kv_slots > 0 && !cache.on_gpu()) {
        const int n_layers = int(m.layers.size());
        const size_t slot = KVCache::bytes_per_token(engine.config(), cache.type()) / size_t(2 * n_layers);  // one k or v
        for (int l = 0; l < n_layers; l++) {
            const KVLayer layer = cache.layer(l);
            const size_t bytes = size_t(std::min<int64_t>(kv_slots, layer.n_slots)) * slot;
            r.push_back({layer.k, bytes});
            r.push_back({layer.v, bytes});
        }
    }
    return r;
}

BenchResult run_bench(const Engine& engine, const BenchOptions& opt, const Ceilings* ceilings) {
    const Config& c = engine.config();
    if (opt.n_prompt < 0) throw Error("bench: -p " + std::to_string(opt.n_prompt) + " must be >= 0");
    if (opt.n_gen < 0) throw Error("bench: -n " + std::to_string(opt.n_gen) + " must be >= 0");
    if (opt.n_prompt == 0 && opt.n_gen == 0) throw Error("bench: -p 0 and -n 0 leave no test to run");
    if (opt.reps < 1) throw Error("bench: -r " + std::to_string(opt.reps) + " must be >= 1");
    if (opt.max_rows < 1) throw Error("bench: -b " + std::to_string(opt.max_rows) + " must be >= 1");
    if (opt.n_decode_prompt < 1) throw Error("bench: -d " + std::to_string(opt.n_decode_prompt) + " must be >= 1");
    const int n_ctx = std::max(opt.n_prompt, opt.n_gen > 0 ? opt.n_decode_prompt + opt.n_gen : 0);
    const int model_max = c.n_ctx_train > 0 ? c.n_ctx_train : n_ctx;
    if (n_ctx > model_max)
        throw Error("bench: the tests need a context of " + std::to_string(n_ctx) + " tokens (-p " +
                    std::to_string(opt.n_prompt) + ", or -d " + std::to_string(opt.n_decode_prompt) + " + -n " +
                    std::to_string(opt.n_gen) + "), past the model's " + std::to_string(model_max));

    SessionOptions so;
    so.n_ctx = n_ctx;
    so.kv_type = opt.kv_type;
    so.max_rows = opt.max_rows;
    Session session(engine, so);
    std::mt19937_64 rng(opt.seed);

    BenchResult res;
    res.threads = omp_get_max_threads();
    if (opt.n_prompt > 0) {
        const std::vector<int32_t> prompt = random_tokens(opt.n_prompt, c.n_vocab, rng);
        res.tests.push_back(run_test(session, Phase::Prefill, prompt, {}, opt, ceilings));
    }
    if (opt.n_gen > 0) {
        const std::vector<int32_t> prompt = random_tokens(opt.n_decode_prompt, c.n_vocab, rng);
        const std::vector<int32_t> steps = random_tokens(opt.n_gen, c.n_vocab, rng);
        res.tests.push_back(run_test(session, Phase::Decode, prompt, steps, opt, ceilings));
    }
    res.peak_rss_bytes = peak_rss_bytes();
    return res;
}

}  // namespace ridge
