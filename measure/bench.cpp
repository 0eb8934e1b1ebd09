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

    s.set_counting(opt.count);
    s.prefill_stats = PhaseStats{};
    s.decode_stats = PhaseStats{};
    for (int r = 0; r < opt.reps; r++) t.samples.push_back(double(t.n_tokens) / run_once(s, phase, prompt, steps));
    const PhaseStats& counted = opt.count ? stats : warm;
    t.counters = counted.counters;
    t.counted_tokens = counted.tokens;
    s.set_counting(true);

    t.tokens_per_second = spread_of(t.samples);
    t.report = phase_report(t.counters.total().cost, t.counted_tokens, t.tokens_per_second.median, ceilings);
    return t;
}

}  // namespace

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
