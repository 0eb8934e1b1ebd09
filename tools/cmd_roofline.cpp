// `ridge roofline (-m MODEL | --synthetic NAME) -o roofline.svg [-p 128] [-n 32] [-r 3] [-t THREADS]
// [--batch 1,4,16,64]`: the roofline drawn with real measurements. The roof is this machine's
// bandwidth slope and FMA ceiling (`ridge probe`'s saved ceilings, measured now if none); the points
// are a short bench run (prefill and decode at their median speed, each matmul kind and attention
// per phase) and, with --batch, a batched decode point per B (measure/batch_bench.h, same -p -n -r).
// One self-contained SVG (measure/roofline.h), and a summary of the points on stdout.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "measure/batch_bench.h"
#include "measure/bench.h"
#include "engine/model.h"
#include "measure/roofline.h"
#include "tools/bench_args.h"
#include "tools/commands.h"
#include "weights/error.h"
#include "weights/mapped_file.h"
#include "weights/model_file.h"

namespace ridge::cli {

namespace {

struct RooflineCommand {
    BenchArgs args;
    std::string output;            // -o
    std::string batch_list;        // --batch: batch sizes of batched decode points
    bool batch_given = false;      // --batch was on the command line
    std::string overlay_probe;     // --overlay-probe: another machine's (or the GPU's) saved ceilings
    std::string overlay_bench;     // --overlay-bench: its `ridge bench --json` run
};

// The prefill and decode points of a saved `ridge bench --json` run: one per test, at its
// intensity and achieved GFLOP/s. ridge::Error naming the file when it is not such a run.
RooflineSeries bench_json_series(const std::string& path, const std::string& name, const std::string& color) {
    const std::string text = read_whole_file(path, "bench run");
    RooflineSeries series{name, color, {}};
    try {
        const nlohmann::json j = nlohmann::json::parse(text);
        for (const nlohmann::json& t : j.at("tests"))
            series.points.push_back(RooflinePoint{t.at("phase").get<std::string>() + " " + t.at("name").get<std::string>(),
                                                  t.at("intensity").get<double>(), t.at("achieved_gflops").get<double>()});
    } catch (const nlohmann::json::exception& e) {
        std::string what = e.what();
        std::replace(what.begin(), what.end(), '\n', ' ');
        throw Error(path + ": not a `ridge bench --json` run (" + what + ")");
    }
    return series;
}

// Fails (one line) before seconds of measuring if `path` cannot be written; leaves no new file.
void check_writable(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) throw Error(path + ": cannot write the SVG there (a directory)");
    const bool existed = std::filesystem::exists(path, ec);
    {
        std::ofstream out(path, std::ios::binary | std::ios::app);  // app: an existing file stays as it is
        if (!out) throw Error(path + ": cannot write the SVG (" + std::strerror(errno) + ")");
    }
    if (!existed) std::filesystem::remove(path, ec);
}

void write_file(const std::string& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot write the SVG (" + std::strerror(errno) + ")");
    out << text;
    out.close();
    if (!out) throw Error(path + ": writing the SVG failed (" + std::strerror(errno) + ")");
}

void run(RooflineCommand& cmd) {
    BenchArgs& a = cmd.args;
    const int threads = a.check_and_apply();
    const bool batched = cmd.batch_given;
    BatchBenchOptions batch;
    if (batched) batch.batch_sizes = parse_batch_sizes(cmd.batch_list, "-B/--batch");
    check_writable(cmd.output);
    if (!cmd.overlay_bench.empty() && cmd.overlay_probe.empty())
        throw Error("--overlay-bench needs --overlay-probe (the roof its points sit under)");
    std::optional<Ceilings> other;
    if (!cmd.overlay_probe.empty()) {
        other = load_ceilings(cmd.overlay_probe);
        if (!other) throw Error(cmd.overlay_probe + ": no such probe file");
    }
    RooflineSeries other_points;
    if (!cmd.overlay_bench.empty())
        other_points = bench_json_series(cmd.overlay_bench, "phases on " + roofline_roof(*other, "").label, "#ff7f0e");
    const std::unique_ptr<ModelFile> file = a.model.open();
    const Model model = Model::from_file(*file);
    const Engine engine(model, a.model.run_options());
    batch.n_prompt = a.opt.n_prompt;
    batch.n_gen = a.opt.n_gen;
    batch.reps = a.opt.reps;
    batch.max_rows = a.opt.max_rows;
    batch.kv_type = a.opt.kv_type;
    batch.seed = a.opt.seed;
    if (batched) check_batch_bench_options(engine, batch);  // before any measuring
    const Ceilings ceil = machine_ceilings(threads, a.model.on_gpu());
    const BenchResult res = run_bench(engine, a.opt, &ceil);

    const std::string title = "ridge roofline: " + file->path() + ", " + std::to_string(res.threads) +
                              (res.threads == 1 ? " thread" : " threads");
    RooflinePlot plot = roofline_from_bench(res, ceil, title);
    if (batched) {
        const BatchBenchResult bres = run_batch_bench(engine, batch, &ceil);
        plot.series.push_back(roofline_batch_series(bres));
        plot.notes.push_back("Batched decode: B sequences of " + std::to_string(batch.n_prompt) +
                             " prompt tokens, then " + std::to_string(batch.n_gen) +
                             " steps each advancing all B by one token in one forward pass (ridge batch-bench).");
    }
    if (other) {  // the other machine's roof (and its run's points) on the same axes
        plot.roofs.push_back(roofline_roof(*other, "#ff7f0e"));
        if (!other_points.points.empty()) plot.series.push_back(other_points);
        plot.notes.push_back("Second roof: " + plot.roofs.back().label + " (" + cmd.overlay_probe + ")" +
                             (cmd.overlay_bench.empty() ? "" : ", its points from " + cmd.overlay_bench) + ".");
    }
    write_file(cmd.output, roofline_svg(plot));

    // Summary: the roof, then the phase points, how many op points were drawn, the batch points.
    std::printf("wrote %s: roof %.2f GB/s, %.1f GFLOP/s peak, ridge point %.2f FLOP/byte (%d threads)\n",
                cmd.output.c_str(), ceil.bandwidth_gbs, ceil.peak_gflops(), ceil.ridge_point(), ceil.threads);
    std::string phases, batches;
    int n_ops = 0, n_skipped = 0;
    for (const RooflineSeries& s : plot.series) {
        const bool is_phases = &s == &plot.series.front();  // roofline_from_bench puts the phases first
        const bool is_overlay = !other_points.points.empty() && &s == &plot.series.back();
        if (is_overlay) continue;  // described in the notes
        const bool is_batch = batched && &s == &plot.series.back();  // and the batch series goes last
        for (const RooflinePoint& p : s.points) {
            if (!p.drawable()) {
                n_skipped++;
                continue;
            }
            if (!is_phases && !is_batch) {
                n_ops++;
                continue;
            }
            std::string& out = is_phases ? phases : batches;
            char buf[160];
            std::snprintf(buf, sizeof buf, "%s%s %.3g FLOP/byte %.3g GFLOP/s", out.empty() ? "" : ", ",
                          p.label.c_str(), p.intensity, p.gflops);
            out += buf;
        }
    }
    std::printf("points: %s; %d op points", phases.c_str(), n_ops);
    if (n_skipped > 0) std::printf(" (%d not drawn: no time or no bytes measured)", n_skipped);
    std::printf("\n");
    if (batched) std::printf("batched decode: %s\n", batches.c_str());
}

}  // namespace

void register_roofline(CLI::App& app) {
    auto cmd = std::make_shared<RooflineCommand>();
    CLI::App* sub = app.add_subcommand(
        "roofline", "draw this machine's roofline with measured prefill, decode and per-op points (SVG)");
    // Shorter tests than bench's: a plot needs the points, not tight error bars (a few seconds on SmolLM2).
    cmd->args.opt.n_prompt = 128;
    cmd->args.opt.n_gen = 32;
    cmd->args.opt.reps = 3;
    cmd->args.rows_option = "-b,--ubatch";  // --batch is the list of batch sizes here
    cmd->args.add_options(sub);
    sub->add_option("-B,--batch", cmd->batch_list,
                    "also draw batched decode at these batch sizes, comma-separated (e.g. 1,4,16,64)")
        ->each([cmd](const std::string&) { cmd->batch_given = true; });
    sub->add_option("-o,--output", cmd->output, "the SVG file to write")->required();
    sub->add_option("--overlay-probe", cmd->overlay_probe,
                    "also draw another machine's roof from its saved probe (e.g. the GPU's probe-cuda.json beside "
                    "this CPU's, or a CPU's probe beside --device cuda)");
    sub->add_option("--overlay-bench", cmd->overlay_bench,
                    "with --overlay-probe: that machine's `ridge bench --json` run, drawn as its prefill and decode points");
    sub->footer("The roof is the ceilings `ridge probe -t N` saved for the thread count ($RIDGE_PROBE_FILE, else\n"
                "~/.cache/ridge/probe-t<N>.json), measured now and saved when there are none. The points are a\n"
                "short `ridge bench` run: its tests are smaller by default (-p 128 -n 32 -r 3). --batch adds\n"
                "a `ridge batch-bench` run with the same -p, -n and -r: one point per batch size.");
    sub->callback([cmd] { run(*cmd); });
}

}  // namespace ridge::cli
