// `ridge batch-bench (-m MODEL | --synthetic NAME) [-B 1,2,4,8,16,32,64] [-p 128] [-n 64] [-r 3]
// [-t THREADS] [--json]`: llama-batched-bench-style batched decode. Per batch size B: step time,
// tokens/s in total and per sequence, intensity, GB/s, GFLOP/s and the roofline bound, and the B
// at which decode turns compute-bound against the probe's ridge point. A Markdown table, or JSON.
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "measure/batch_bench.h"
#include "engine/model.h"
#include "tools/bench_args.h"
#include "tools/commands.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "weights/model_stats.h"

namespace ridge::cli {

namespace {

struct BatchBenchCommand {
    ModelArgs model;
    BatchBenchOptions opt;
    int threads = 0;
    bool threads_set = false;
    std::string kv_type = "f32";
    std::string batch_list = "1,2,4,8,16,32,64";  // -B
    bool json = false;
};

template <class T>
nlohmann::ordered_json or_null(bool has, T v) {
    return has ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr);
}

nlohmann::ordered_json point_json(const BatchPoint& p, int n_prompt) {
    const PhaseReport& r = p.report;
    nlohmann::ordered_json j;
    j["batch"] = p.batch;
    j["kv_cache_tokens"] = p.kv_cache_tokens;
    j["kv_cache_bytes"] = p.kv_cache_bytes;
    const int64_t prefill_tokens = int64_t(p.batch) * n_prompt;
    j["prefill"] = {{"tokens", prefill_tokens},
                    {"seconds", p.prefill_seconds},
                    {"tokens_per_second", p.prefill_seconds > 0 ? double(prefill_tokens) / p.prefill_seconds : 0.0}};
    j["step_seconds"] = {{"median", p.step.median}, {"min", p.step.min}, {"max", p.step.max},
                         {"stdev", p.step.stdev},   {"samples", p.step_seconds}};
    j["tokens_per_second"] = p.tokens_per_second;
    j["tokens_per_second_per_sequence"] = p.tokens_per_second_per_seq;
    j["counted_steps"] = p.counted_steps;
    j["counted_tokens"] = p.counted_tokens;
    j["per_step"] = cost_json(p.per_step);
    j["per_token"] = cost_json(r.per_token);
    j["intensity"] = r.intensity;
    j["achieved_gbs"] = r.achieved_gbs;
    j["achieved_gflops"] = r.achieved_gflops;
    j["bound"] = r.has_bound ? nlohmann::ordered_json(r.compute_bound ? "compute" : "memory") : nullptr;
    j["bound_gflops"] = or_null(r.has_bound, p.bound_gflops);
    j["bound_tokens_per_second"] = or_null(r.has_bound, r.bound_tokens_per_second);
    j["percent_of_bound"] = or_null(r.has_bound, r.percent_of_bound);
    const bool int_roof = p.int_bound_gflops > 0;  // the integer kernels' roof, beside the FMA one
    j["int_bound"] = int_roof ? nlohmann::ordered_json(p.int_bound_compute ? "int" : "memory") : nullptr;
    j["int_bound_gflops"] = or_null(int_roof, p.int_bound_gflops);
    j["int_bound_tokens_per_second"] = or_null(int_roof, p.int_bound_tokens_per_second);
    j["percent_of_int_bound"] = or_null(int_roof, p.percent_of_int_bound);
    const bool stream = !p.stream_samples.empty();  // the bound measured with the run (CPU)
    j["stream_bytes"] = or_null(stream, p.stream_bytes);
    j["stream_gbs"] = or_null(stream, p.stream_gbs);
    j["stream_samples"] = stream ? nlohmann::ordered_json(p.stream_samples) : nlohmann::ordered_json(nullptr);
    j["percent_of_stream"] = or_null(stream, p.percent_of_stream);
    return j;
}

nlohmann::ordered_json crossing_json(const BatchCrossing& x) {
    nlohmann::ordered_json j;
    j["first_measured_batch"] = x.first_measured ? nlohmann::ordered_json(*x.first_measured) : nullptr;
    j["predicted_batch"] = x.predicted ? nlohmann::ordered_json(*x.predicted) : nullptr;
    j["weight_bytes_per_step"] = or_null(x.has_fit, x.weight_bytes_per_step);
    j["flops_per_sequence"] = or_null(x.has_fit, x.flops_per_row);
    j["bytes_per_sequence"] = or_null(x.has_fit, x.bytes_per_row);
    j["intensity_limit"] = or_null(x.has_fit, x.intensity_limit);
    return j;
}

void print_json(const BatchBenchCommand& cmd, const ModelFile& file, const Engine& engine, const ModelStats& stats,
                const Ceilings& ceil, const BatchBenchResult& res) {
    nlohmann::ordered_json j;
    j["model"] = model_json(file.path(), engine.config(), stats);
    j["threads"] = res.threads;
    j["device"] = engine.on_gpu() ? "cuda" : "cpu";
    j["kv_type"] = cmd.kv_type;
    j["n_prompt"] = res.n_prompt;
    j["n_gen"] = res.n_gen;
    j["repetitions"] = res.reps;
    j["seed"] = cmd.opt.seed;
    j["exact"] = engine.exact();
    j["ceilings"] = ceilings_json(ceil);
    j["compute_bound"] = crossing_json(res.crossing);
    j["peak_rss_bytes"] = res.peak_rss_bytes;
    nlohmann::ordered_json points = nlohmann::ordered_json::array();
    for (const BatchPoint& p : res.points) points.push_back(point_json(p, res.n_prompt));
    j["points"] = points;
    std::printf("%s\n", j.dump(2).c_str());
}

void print_table(const BatchBenchCommand& cmd, const ModelFile& file, const Engine& engine, const ModelStats& stats,
                 const Ceilings& ceil, const BatchBenchResult& res) {
    std::printf("model: %s (%s, %s params, %sB of %s weights), %d threads, KV cache %s, p = %d prompt tokens "
                "per sequence (prefilled apart), n = %d decode steps, %d repetitions after a warm-up%s\n\n",
                file.path().c_str(), engine.config().arch.c_str(), si(double(stats.n_params)).c_str(),
                si(double(stats.weight_bytes)).c_str(), types_of(stats).c_str(), res.threads, cmd.kv_type.c_str(),
                res.n_prompt, res.n_gen, res.reps, engine.exact() ? ", --exact" : "");
    std::printf("| B | step ms | t/s total | t/s per seq | FLOP/step | bytes/step | FLOP/byte | GB/s | GFLOP/s | "
                "bound GFLOP/s | bound t/s | %% of bound | int bound t/s | %% of int bound | stream GB/s | "
                "%% of stream |\n");
    std::printf("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (const BatchPoint& p : res.points) {
        const PhaseReport& r = p.report;
        char bound_g[32] = "-", bound_t[64] = "-", pct[32] = "-";
        if (r.has_bound) {
            std::snprintf(bound_g, sizeof bound_g, "%.1f", p.bound_gflops);
            std::snprintf(bound_t, sizeof bound_t, "%.1f (%s)", r.bound_tokens_per_second,
                          r.compute_bound ? "compute" : "memory");
            std::snprintf(pct, sizeof pct, "%.1f", r.percent_of_bound);
        }
        char int_t[64] = "-", int_pct[32] = "-";
        if (p.int_bound_gflops > 0) {
            std::snprintf(int_t, sizeof int_t, "%.1f (%s)", p.int_bound_tokens_per_second,
                          p.int_bound_compute ? "int" : "memory");
            std::snprintf(int_pct, sizeof int_pct, "%.1f", p.percent_of_int_bound);
        }
        char sgbs[32] = "-", spct[32] = "-";
        if (!p.stream_samples.empty()) {
            std::snprintf(sgbs, sizeof sgbs, "%.2f", p.stream_gbs);
            std::snprintf(spct, sizeof spct, "%.1f", p.percent_of_stream);
        }
        std::printf("| %d | %.2f ± %.2f | %.1f | %.2f | %s | %sB | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %s | %s |\n",
                    p.batch, 1e3 * p.step.median, 1e3 * p.step.stdev, p.tokens_per_second, p.tokens_per_second_per_seq,
                    si(p.per_step.flops).c_str(), si(p.per_step.memory_bytes()).c_str(), r.intensity, r.achieved_gbs,
                    r.achieved_gflops, bound_g, bound_t, pct, int_t, int_pct, sgbs, spct);
    }
    std::printf("\nbytes = weights + KV cache read and written per step (activations, in cache, apart); each "
                "weight is read once per step and used by all B rows. stream = one plain read of a step's bytes "
                "after each repetition, same threads (median).\n");
    if (res.n_prompt > 0) {
        std::printf("prefill (B prompts of %d tokens, one sequence at a time, not in the step times):", res.n_prompt);
        for (const BatchPoint& p : res.points)
            std::printf(" B=%d %.1f t/s%s", p.batch, double(p.batch) * res.n_prompt / p.prefill_seconds,
                        &p == &res.points.back() ? "\n" : ",");
    }
    std::printf("ceilings: %.2f GB/s read, %.1f GFLOP/s FMA peak, ridge point I* = %.2f FLOP/byte (%d threads; %s%s)\n",
                ceil.bandwidth_gbs, ceil.peak_gflops(), ceil.ridge_point(), ceil.threads, ceil.path.c_str(),
                ceil.measured_at.empty() ? "" : (", measured " + ceil.measured_at).c_str());
    if (ceil.int_dot_gflops > 0)
        std::printf("int bound: the same with the integer kernels' peak, %.1f GFLOP/s (%s), in place of the FMA peak "
                    "(the quantized matmuls run on it; the FMA bound is kept for comparison)\n",
                    ceil.int_dot_gflops, ceil.int_dot_name.c_str());
    const BatchCrossing& x = res.crossing;
    if (x.first_measured)
        std::printf("compute-bound (I >= I*) from B = %d on, of the B measured\n", *x.first_measured);
    else
        std::printf("memory-bound at every B measured (I < I*)\n");
    if (x.has_fit) {
        std::printf("a step of B rows: W = %sB of weights + B x (f = %sFLOP, k = %sB of KV cache and embedding), "
                    "I(B) = B f / (W + B k) ",
                    si(x.weight_bytes_per_step).c_str(), si(x.flops_per_row).c_str(), si(x.bytes_per_row).c_str());
        if (x.predicted)
            std::printf("reaches I* at B = %.1f and tends to f / k = %.1f FLOP/byte\n", *x.predicted,
                        x.intensity_limit);
        else
            std::printf("tends to f / k = %.2f FLOP/byte, below I*: the KV cache reads keep decode memory-bound\n",
                        x.intensity_limit);
    }
    std::printf("peak resident memory: %sB\n", si(res.peak_rss_bytes).c_str());
}

void run(BatchBenchCommand& cmd) {
    if (cmd.threads_set && cmd.threads < 1) throw Error("-t/--threads " + std::to_string(cmd.threads) + " must be >= 1");
    if (cmd.kv_type != "f32" && cmd.kv_type != "f16") throw Error("--kv-type '" + cmd.kv_type + "' must be f32 or f16");
    cmd.opt.kv_type = cmd.kv_type == "f16" ? DType::F16 : DType::F32;
    cmd.opt.batch_sizes = parse_batch_sizes(cmd.batch_list, "-B/--batch-sizes");
    if (cmd.threads_set) omp_set_num_threads(cmd.threads);
    const int threads = omp_get_max_threads();
    const std::unique_ptr<ModelFile> file = cmd.model.open();
    const Model model = Model::from_file(*file);
    const Engine engine(model, cmd.model.run_options());
    check_batch_bench_options(engine, cmd.opt);  // before the probe, which may take seconds
    const ModelStats stats = compute_stats(*file);
    const Ceilings ceil = machine_ceilings(threads, cmd.model.on_gpu());
    const BatchBenchResult res = run_batch_bench(engine, cmd.opt, &ceil);
    if (cmd.json)
        print_json(cmd, *file, engine, stats, ceil, res);
    else
        print_table(cmd, *file, engine, stats, ceil, res);
}

}  // namespace

void register_batch_bench(CLI::App& app) {
    auto cmd = std::make_shared<BatchBenchCommand>();
    CLI::App* sub = app.add_subcommand(
        "batch-bench", "batched decode of B sequences, one forward pass per step: tokens/s, intensity and bound per B");
    cmd->model.add_options(sub, /*with_tokenizer=*/false);
    cmd->model.add_exact_option(sub);
    sub->add_option("-B,--batch-sizes", cmd->batch_list, "batch sizes, comma-separated (sequences decoded together)")
        ->capture_default_str();
    sub->add_option("-p,--n-prompt", cmd->opt.n_prompt, "prompt tokens prefilled into each sequence (not in the step times)")
        ->capture_default_str();
    sub->add_option("-n,--n-gen", cmd->opt.n_gen, "decode steps (each one token for every sequence)")->capture_default_str();
    sub->add_option("-r,--repetitions", cmd->opt.reps, "timed repetitions of the n steps (after one warm-up)")
        ->capture_default_str();
    sub->add_option("-t,--threads", cmd->threads, "CPU threads (default: all)")->each([cmd](const std::string&) {
        cmd->threads_set = true;
    });
    sub->add_option("--kv-type", cmd->kv_type, "KV cache element type: f32 or f16")->capture_default_str();
    sub->add_option("--seed", cmd->opt.seed, "seed of the random prompt and decode token ids")->capture_default_str();
    sub->add_flag("--json", cmd->json, "print one JSON document (fields: docs/measuring.md)");
    sub->footer("Each B gets a KV cache of B x (p + n) tokens. The bound is min(peak, I x bandwidth) from the\n"
                "ceilings `ridge probe -t N` saved (measured now when there are none); the int bound takes the\n"
                "integer kernels' peak in place of the FMA peak.");
    sub->callback([cmd] { run(*cmd); });
}

}  // namespace ridge::cli
