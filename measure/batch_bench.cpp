// run_batch_bench (see batch_bench.h): per B one Session whose KV cache holds B * (p + n) tokens,
// the B prompts prefilled once, then a warm-up and `reps` timed runs of n batched decode steps,
// each run starting again from the prompts (KVCache::truncate); costs from the counters.
#include "measure/batch_bench.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <random>
#include <span>
#include <string>

#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "engine/session.h"
#include "weights/error.h"

namespace ridge {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Tokens the cache is made for: each of the B sequences takes whole blocks.
int64_t kv_tokens_for(int64_t batch, int64_t tokens_per_seq) {
    const int64_t bs = KVCache::kDefaultBlockSize;
    return batch * ((tokens_per_seq + bs - 1) / bs * bs);
}

double physical_memory_bytes() {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && page > 0 ? double(pages) * double(page) : 0.0;
}

std::vector<int32_t> random_tokens(int64_t n, int n_vocab, std::mt19937_64& rng) {
    std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
    std::vector<int32_t> ids(static_cast<size_t>(n));
    for (int32_t& t : ids) t = pick(rng);
    return ids;
}

// n decode steps of all sequences, one forward() each: row i is sequence seqs[i] at its next
// position. tokens: (n, B). Returns the wall time of the steps.
double decode_steps(const Engine& engine, KVCache& cache, const std::vector<int>& seqs,
                    const std::vector<int32_t>& tokens, int n, Workspace& ws, Batch& batch, Counters* counters) {
    const size_t B = seqs.size();
    const Clock::time_point t0 = Clock::now();
    for (int step = 0; step < n; step++) {
        batch.clear();
        for (size_t i = 0; i < B; i++) {
            const int pos = cache.append(seqs[i], 1);
            batch.add(tokens[size_t(step) * B + i], seqs[i], pos, /*logits=*/true);  // every sequence samples
        }
        forward(engine, cache, batch, ws, counters);
    }
    return seconds_since(t0);
}

BatchPoint run_point(const Engine& engine, int B, const BatchBenchOptions& opt, const Ceilings* ceilings,
                     std::mt19937_64& rng) {
    const Config& c = engine.config();
    BatchPoint pt;
    pt.batch = B;
    pt.kv_cache_tokens = kv_tokens_for(B, opt.n_prompt + opt.n_gen);

    SessionOptions so;
    so.n_ctx = int(pt.kv_cache_tokens);
    so.kv_type = opt.kv_type;
    so.max_rows = opt.max_rows;
    Session session(engine, so);
    KVCache& cache = session.cache();
    pt.kv_cache_bytes = double(cache.bytes());

    std::vector<int> seqs;
    for (int i = 0; i < B; i++) seqs.push_back(cache.new_sequence());
    const std::vector<int32_t> prompts = random_tokens(int64_t(B) * opt.n_prompt, c.n_vocab, rng);  // (B, p)
    const std::vector<int32_t> steps = random_tokens(int64_t(B) * opt.n_gen, c.n_vocab, rng);       // (n, B)
    if (opt.n_prompt > 0) {
        const Clock::time_point t0 = Clock::now();
        for (int i = 0; i < B; i++)
            session.prefill(seqs[size_t(i)], std::span<const int32_t>(prompts).subspan(size_t(i) * opt.n_prompt,
                                                                                        size_t(opt.n_prompt)));
        pt.prefill_seconds = seconds_since(t0);
    }

    Workspace ws;
    Batch batch;
    auto rewind = [&] {
        for (int s : seqs) cache.truncate(s, opt.n_prompt);
    };
    decode_steps(engine, cache, seqs, steps, opt.n_gen, ws, batch, nullptr);  // warm-up
    rewind();
    std::vector<ReadRegion> regions;  // a step's bytes, known once a repetition has been counted
    for (int r = 0; r < opt.reps; r++) {
        const double secs = decode_steps(engine, cache, seqs, steps, opt.n_gen, ws, batch, &pt.counters);
        pt.step_seconds.push_back(secs / opt.n_gen);
        rewind();
        if (engine.on_gpu()) continue;
        if (regions.empty()) {
            const Cost kv = pt.counters.total().cost;
            const double kv_per_step = (kv.kv_read + kv.kv_written) / double(int64_t(r + 1) * opt.n_gen);
            const double slot = double(KVCache::bytes_per_token(c, cache.type()));
            regions = step_read_regions(engine, cache, slot > 0 ? int64_t(std::llround(kv_per_step / slot)) : 0);
            for (const ReadRegion& g : regions) pt.stream_bytes += double(g.bytes);
            stream_read_seconds(regions, omp_get_max_threads());  // warm-up
        }
        pt.stream_samples.push_back(pt.stream_bytes / stream_read_seconds(regions, omp_get_max_threads()) / 1e9);
    }
    pt.counted_steps = int64_t(opt.reps) * opt.n_gen;
    pt.counted_tokens = pt.counted_steps * B;

    pt.step = spread_of(pt.step_seconds);
    pt.tokens_per_second_per_seq = pt.step.median > 0 ? 1.0 / pt.step.median : 0.0;
    pt.tokens_per_second = B * pt.tokens_per_second_per_seq;
    pt.per_step = pt.counters.total().cost;
    pt.per_step.scale(1.0 / double(pt.counted_steps));
    pt.report = phase_report(pt.counters.total().cost, pt.counted_tokens, pt.tokens_per_second, ceilings);
    if (ceilings && pt.report.has_bound) pt.bound_gflops = ceilings->attainable_gflops(pt.report.intensity);
    if (ceilings && pt.report.has_bound && ceilings->int_dot_gflops > 0 && pt.report.flops_per_token > 0) {
        pt.int_bound_gflops = ceilings->int_attainable_gflops(pt.report.intensity);
        pt.int_bound_compute = pt.int_bound_gflops >= ceilings->int_dot_gflops;
        pt.int_bound_tokens_per_second = pt.int_bound_gflops * 1e9 / pt.report.flops_per_token;
        pt.percent_of_int_bound = 100.0 * pt.tokens_per_second / pt.int_bound_tokens_per_second;
    }
    if (!pt.stream_samples.empty()) {
        pt.stream_gbs = spread_of(pt.stream_samples).median;
        if (pt.stream_gbs > 0 && pt.step.median > 0)
            pt.percent_of_stream = 100.0 * pt.per_step.memory_bytes() / pt.step.median / 1e9 / pt.stream_gbs;
    }
    return pt;
}

}  // namespace

void check_batch_bench_options(const Engine& engine, const BatchBenchOptions& opt) {
    const Config& c = engine.config();
    if (opt.batch_sizes.empty()) throw Error("no batch sizes given (a list such as 1,2,4,8)");
    for (size_t i = 0; i < opt.batch_sizes.size(); i++) {
        const int B = opt.batch_sizes[i];
        if (B < 1) throw Error("batch size " + std::to_string(B) + " must be >= 1");
        for (size_t j = 0; j < i; j++)
            if (opt.batch_sizes[j] == B) throw Error("batch size " + std::to_string(B) + " is listed twice");
    }
    if (opt.n_prompt < 0) throw Error("-p " + std::to_string(opt.n_prompt) + " must be >= 0");
    if (opt.n_gen < 1) throw Error("-n " + std::to_string(opt.n_gen) + " must be >= 1 (batched decode steps to time)");
    if (opt.reps < 1) throw Error("-r " + std::to_string(opt.reps) + " must be >= 1");
    if (opt.max_rows < 1) throw Error("prefill rows " + std::to_string(opt.max_rows) + " must be >= 1");
    const int64_t per_seq = int64_t(opt.n_prompt) + opt.n_gen;
    if (c.n_ctx_train > 0 && per_seq > c.n_ctx_train)
        throw Error("-p " + std::to_string(opt.n_prompt) + " + -n " + std::to_string(opt.n_gen) + " = " +
                    std::to_string(per_seq) + " tokens per sequence pass the model's context of " +
                    std::to_string(c.n_ctx_train));
    const int B = *std::max_element(opt.batch_sizes.begin(), opt.batch_sizes.end());
    const int64_t tokens = kv_tokens_for(B, per_seq);
    const double bytes = double(tokens) * double(KVCache::bytes_per_token(c, opt.kv_type));
    const double memory = physical_memory_bytes();
    if (tokens > INT_MAX || (memory > 0 && bytes > memory))
        throw Error("B = " + std::to_string(B) + " sequences of " + std::to_string(per_seq) +
                    " tokens need a KV cache of " + std::to_string(tokens) + " tokens (" +
                    std::to_string(int64_t(bytes / 1e6)) + " MB), more than this machine's " +
                    std::to_string(int64_t(memory / 1e6)) + " MB of memory");
}

BatchCrossing batch_crossing(const std::vector<BatchPoint>& points, const Ceilings& ceilings) {
    BatchCrossing x;
    const double ridge = ceilings.ridge_point();
    if (!(ceilings.bandwidth_gbs > 0 && ceilings.peak_gflops() > 0)) return x;
    for (const BatchPoint& p : points)
        if (p.report.intensity >= ridge && (!x.first_measured || p.batch < *x.first_measured))
            x.first_measured = p.batch;

    // The two largest B: FLOPs and bytes per step are straight lines in B between them.
    const BatchPoint *hi = nullptr, *lo = nullptr;
    for (const BatchPoint& p : points)
        if (!hi || p.batch > hi->batch) hi = &p;
    for (const BatchPoint& p : points)
        if (hi && p.batch < hi->batch && (!lo || p.batch > lo->batch)) lo = &p;
    if (!hi || !lo) return x;
    const double dB = double(hi->batch - lo->batch);
    x.flops_per_row = (hi->per_step.flops - lo->per_step.flops) / dB;
    x.bytes_per_row = (hi->per_step.memory_bytes() - lo->per_step.memory_bytes()) / dB;
    x.weight_bytes_per_step = hi->per_step.memory_bytes() - hi->batch * x.bytes_per_row;
    if (x.flops_per_row <= 0 || x.weight_bytes_per_step <= 0) return x;
    x.has_fit = true;
    x.intensity_limit = x.bytes_per_row > 0 ? x.flops_per_row / x.bytes_per_row : 0.0;  // 0: no limit
    // B f = I* (W + B k)  =>  B = I* W / (f - I* k), when f > I* k.
    const double denom = x.flops_per_row - ridge * x.bytes_per_row;
    if (denom > 0) x.predicted = ridge * x.weight_bytes_per_step / denom;
    return x;
}

BatchBenchResult run_batch_bench(const Engine& engine, const BatchBenchOptions& opt, const Ceilings* ceilings) {
    check_batch_bench_options(engine, opt);
    BatchBenchResult res;
    res.threads = omp_get_max_threads();
    res.n_prompt = opt.n_prompt;
    res.n_gen = opt.n_gen;
    res.reps = opt.reps;
    std::mt19937_64 rng(opt.seed);
    for (int B : opt.batch_sizes) res.points.push_back(run_point(engine, B, opt, ceilings, rng));
    if (ceilings) res.crossing = batch_crossing(res.points, *ceilings);
    res.peak_rss_bytes = peak_rss_bytes();
    return res;
}

}  // namespace ridge
