// `ridge bench (-m MODEL | --synthetic NAME) [-p 512] [-n 128] [-r 5] [-t THREADS] [--json]`:
// llama-bench-style prefill (ppP) and decode (tgN) tests with, for each, tokens/s (median and
// spread), FLOPs and bytes per token from the counters, achieved GB/s and GFLOP/s, arithmetic
// intensity and the share of the roofline bound reached. A Markdown table, or one JSON document
// (fields: docs/measuring.md, "ridge bench --json fields").
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "measure/bench.h"
#include "measure/ceilings.h"
#include "engine/model.h"
#include "tools/bench_args.h"
#include "tools/commands.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "weights/model_stats.h"

extern char** environ;  // POSIX: this process's environment, for the probe's child

namespace ridge::cli {

namespace {

struct BenchCommand {
    BenchArgs args;
    bool json = false;
    bool no_count = false;
    bool probe_now = false;
};

// `ridge probe -t threads` in a child process (this program, run again), its table to /dev/null
// and its JSON to a temporary file: its 1 GiB buffer stays out of this process's peak memory.
Ceilings probe_in_child(int threads) {
    char file[] = "/tmp/ridge-probe-XXXXXX";
    const int fd = mkstemp(file);
    if (fd < 0) throw Error(std::string("bench: --probe-now: cannot create a temporary file: ") + std::strerror(errno));
    close(fd);
    const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string(), t = std::to_string(threads);
    const char* argv[] = {exe.c_str(), "probe", "-t", t.c_str(), "-o", file, nullptr};
    posix_spawn_file_actions_t io;
    posix_spawn_file_actions_init(&io);
    posix_spawn_file_actions_addopen(&io, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int status = 0;
    const int err = posix_spawn(&pid, exe.c_str(), &io, nullptr, const_cast<char* const*>(argv), environ);
    posix_spawn_file_actions_destroy(&io);
    if (err != 0) {
        std::remove(file);
        throw Error("bench: --probe-now: cannot start `" + exe + " probe`: " + std::strerror(err));
    }
    waitpid(pid, &status, 0);
    std::optional<Ceilings> c;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) c = load_ceilings(file);
    std::remove(file);
    if (!c)
        throw Error("bench: --probe-now: `" + exe + " probe -t " + t + "` " +
                    (WIFEXITED(status) ? "exited with status " + std::to_string(WEXITSTATUS(status))
                                       : std::string("was killed")) + " (its error is above)");
    return *c;
}

// --probe-now: the ceilings measured in this run, before and after the timed tests (the machine
// drifts: a shared one's bandwidth can move by half between a saved probe and a bench). The probe
// that read faster gives the bound: the stricter of the two, never the flattering one.
Ceilings probe_around(const Ceilings& before, const Ceilings& after) {
    Ceilings c = before.bandwidth_gbs >= after.bandwidth_gbs ? before : after;
    char path[160];
    std::snprintf(path, sizeof path, "measured in this run: %.2f GB/s before the tests, %.2f after, the higher taken",
                  before.bandwidth_gbs, after.bandwidth_gbs);
    c.path = path;
    return c;
}

nlohmann::ordered_json test_json(const BenchTest& t) {
    const PhaseReport& r = t.report;
    nlohmann::ordered_json j;
    j["name"] = t.name;
    j["phase"] = phase_name(t.phase);
    j["n_tokens"] = t.n_tokens;
    j["n_past"] = t.n_past;
    j["tokens_per_second"] = {{"median", t.tokens_per_second.median}, {"min", t.tokens_per_second.min},
                              {"max", t.tokens_per_second.max},       {"stdev", t.tokens_per_second.stdev},
                              {"samples", t.samples}};
    j["per_token"] = cost_json(r.per_token);
    j["intensity"] = r.intensity;
    j["achieved_gbs"] = r.achieved_gbs;
    j["achieved_gflops"] = r.achieved_gflops;
    auto or_null = [](bool has, auto v) { return has ? nlohmann::ordered_json(v) : nlohmann::ordered_json(nullptr); };
    j["bound"] = or_null(r.has_bound, r.compute_bound ? "compute" : "memory");
    j["bound_tokens_per_second"] = or_null(r.has_bound, r.bound_tokens_per_second);
    j["percent_of_bound"] = or_null(r.has_bound, r.percent_of_bound);
    const bool stream = !t.stream_samples.empty();  // the bound measured with the run (CPU)
    j["stream_bytes"] = or_null(stream, t.stream_bytes);
    j["stream_gbs"] = or_null(stream, t.stream_gbs);
    j["stream_samples"] = or_null(stream, t.stream_samples);
    j["percent_of_stream"] = or_null(stream, t.percent_of_stream);
    const OpRecord total = t.counters.total();
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (size_t i = 0; i < kNumOps; i++) {
        const OpRecord o = t.counters.op(Op(i));
        if (o.calls == 0) continue;
        const double tok = double(t.counted_tokens);
        nlohmann::ordered_json e;
        e["op"] = op_name(Op(i));
        e["calls_per_token"] = double(o.calls) / tok;
        e["flops_per_token"] = o.cost.flops / tok;
        e["bytes_per_token"] = o.cost.memory_bytes() / tok;
        e["activation_bytes_per_token"] = (o.cost.act_read + o.cost.act_written) / tok;
        e["intensity"] = o.cost.intensity();
        e["time_share"] = total.seconds > 0 ? o.seconds / total.seconds : 0.0;
        e["gflops"] = o.seconds > 0 ? o.cost.flops / o.seconds / 1e9 : 0.0;
        e["gbs"] = o.seconds > 0 ? o.cost.memory_bytes() / o.seconds / 1e9 : 0.0;
        ops.push_back(e);
    }
    j["ops"] = ops;
    return j;
}

void run(BenchCommand& cmd) {
    BenchArgs& a = cmd.args;
    const int threads = a.check_and_apply();
    if (cmd.probe_now && a.model.on_gpu())
        throw Error("bench: --probe-now measures the CPU; for the GPU run `ridge probe --device cuda` first");
    a.opt.count = !cmd.no_count;
    const std::unique_ptr<ModelFile> file = a.model.open();
    const Model model = Model::from_file(*file);
    const Engine engine(model, a.model.run_options());
    const ModelStats stats = compute_stats(*file);
    const Config& c = model.config;
    Ceilings ceil;
    BenchResult res;
    if (cmd.probe_now) {
        const Ceilings before = probe_in_child(threads);
        res = run_bench(engine, a.opt, nullptr);
        ceil = probe_around(before, probe_in_child(threads));
        for (BenchTest& t : res.tests)
            t.report = phase_report(t.counters.total().cost, t.counted_tokens, t.tokens_per_second.median, &ceil);
    } else {
        ceil = machine_ceilings(threads, a.model.on_gpu());  // saved, or measured now (a note on stderr)
        res = run_bench(engine, a.opt, &ceil);
    }

    const double huge_bytes = double(file->huge_page_bytes());  // after the tests: what they read through
    // Weights that fit in the CPU's last-level cache can be read from it faster than the probe's
    // read from memory, so % of bound can pass 100 (docs/measuring.md).
    const double cache_bytes = engine.on_gpu() ? 0.0 : double(last_level_cache_bytes());
    const bool weights_fit_in_cache = cache_bytes > 0 && double(stats.weight_bytes) <= cache_bytes;
    if (cmd.json) {
        nlohmann::ordered_json j;
        j["model"] = model_json(file->path(), model.config, stats);
        j["threads"] = res.threads;
        j["device"] = engine.on_gpu() ? "cuda" : "cpu";
        j["kv_type"] = a.kv_type;
        j["batch"] = a.opt.max_rows;
        j["repetitions"] = a.opt.reps;
        j["seed"] = a.opt.seed;
        j["counting"] = a.opt.count;
        j["exact"] = engine.exact();
        j["ceilings"] = ceilings_json(ceil);
        j["peak_rss_bytes"] = res.peak_rss_bytes;
        j["weights_huge_page_bytes"] = huge_bytes;
        j["last_level_cache_bytes"] = engine.on_gpu() ? nlohmann::ordered_json() : nlohmann::ordered_json(cache_bytes);
        j["weights_fit_in_cache"] = weights_fit_in_cache;
        nlohmann::ordered_json tests = nlohmann::ordered_json::array();
        for (const BenchTest& t : res.tests) tests.push_back(test_json(t));
        j["tests"] = tests;
        std::printf("%s\n", j.dump(2).c_str());
        return;
    }

    const std::string where = engine.on_gpu() ? "GPU " + ceil.cpu : std::to_string(res.threads) + " threads";
    std::printf("model: %s (%s, %s params, %sB of %s weights), %s, KV cache %s, batch %d, "
                "%d repetitions after a warm-up%s%s\n\n",
                file->path().c_str(), c.arch.c_str(), si(double(stats.n_params)).c_str(),
                si(double(stats.weight_bytes)).c_str(), types_of(stats).c_str(), where.c_str(), a.kv_type.c_str(),
                a.opt.max_rows, a.opt.reps, a.opt.count ? "" : ", counting off", engine.exact() ? ", --exact" : "");
    std::printf("| test | t/s | min .. max | FLOP/token | bytes/token | FLOP/byte | GB/s | GFLOP/s | bound t/s | "
                "%% of bound | stream GB/s | %% of stream |\n");
    std::printf("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    for (const BenchTest& t : res.tests) {
        const PhaseReport& r = t.report;
        char bound[64] = "-", pct[32] = "-";
        if (r.has_bound) {
            std::snprintf(bound, sizeof bound, "%.2f (%s)", r.bound_tokens_per_second,
                          r.compute_bound ? "compute" : "memory");
            std::snprintf(pct, sizeof pct, "%.1f", r.percent_of_bound);
        }
        char sgbs[32] = "-", spct[32] = "-";
        if (!t.stream_samples.empty()) {
            std::snprintf(sgbs, sizeof sgbs, "%.2f", t.stream_gbs);
            std::snprintf(spct, sizeof spct, "%.1f", t.percent_of_stream);
        }
        std::printf("| %s | %.2f ± %.2f | %.2f .. %.2f | %s | %sB | %.2f | %.2f | %.2f | %s | %s | %s | %s |\n",
                    t.name.c_str(), t.tokens_per_second.median, t.tokens_per_second.stdev, t.tokens_per_second.min,
                    t.tokens_per_second.max, si(r.flops_per_token).c_str(), si(r.bytes_per_token).c_str(),
                    r.intensity, r.achieved_gbs, r.achieved_gflops, bound, pct, sgbs, spct);
    }
    std::printf("\n");
    for (const BenchTest& t : res.tests)
        if (t.phase == Phase::Decode)
            std::printf("%s: decode of %d tokens after a %d-token prompt; ", t.name.c_str(), t.n_tokens, t.n_past);
    std::printf("bytes = weights + KV cache read and written (activations, in cache, apart); stream = one plain "
                "read of a step's bytes after each repetition, same threads (median):");
    for (const BenchTest& t : res.tests)
        std::printf(" %s activations %sB/token;", t.name.c_str(),
                    si(t.report.per_token.act_read + t.report.per_token.act_written).c_str());
    const std::string ceil_of = ceil.device == "cuda" ? "GPU" : std::to_string(ceil.threads) + " threads";
    std::printf("\nceilings: %.2f GB/s read, %.1f GFLOP/s %s, ridge point %.2f FLOP/byte (%s; %s%s)\n",
                ceil.bandwidth_gbs, ceil.peak_gflops(), ceil.device == "cuda" ? "peak" : "FMA peak", ceil.ridge_point(),
                ceil_of.c_str(), ceil.path.c_str(),
                ceil.measured_at.empty() ? "" : (", measured " + ceil.measured_at).c_str());
    std::printf("peak resident memory: %sB; model file mapped in 2 MiB pages: %sB (weights: %sB)\n",
                si(res.peak_rss_bytes).c_str(), si(huge_bytes).c_str(), si(double(stats.weight_bytes)).c_str());
    if (weights_fit_in_cache)
        std::printf("note: the weights (%sB) fit in this CPU's %sB last-level cache, and the bound is the probe's "
                    "read from memory: a test that finds them cached can pass 100%% of it\n",
                    si(double(stats.weight_bytes)).c_str(), si(cache_bytes).c_str());
}

}  // namespace

void register_bench(CLI::App& app) {
    auto cmd = std::make_shared<BenchCommand>();
    CLI::App* sub = app.add_subcommand(
        "bench", "llama-bench-style prefill/decode speed, with FLOPs, bytes and the roofline bound per token");
    cmd->args.add_options(sub);
    sub->add_flag("--json", cmd->json, "print one JSON document (fields: docs/measuring.md)");
    sub->add_flag("--no-count", cmd->no_count,
                  "timed runs without counters (measures what counting costs; costs come from the warm-up)");
    sub->add_flag("--probe-now", cmd->probe_now,
                  "measure the CPU's ceilings in this run, before and after the tests (about 5 s each), and take "
                  "the bound from the faster read, instead of the saved `ridge probe` file");
    sub->callback([cmd] { run(*cmd); });
}

}  // namespace ridge::cli
