// `ridge roofline (-m MODEL | --synthetic NAME) -o roofline.svg [-p 128] [-n 32] [-r 3] [-t THREADS]`:
// the roofline drawn with real measurements. The roof is this machine's bandwidth slope and FMA
// ceiling (`ridge probe`'s saved ceilings, measured now if none); the points are a short bench run
// (prefill and decode at their median speed, and each matmul kind and attention per phase).
// One self-contained SVG (engine/roofline.h), and a summary line of the points on stdout.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "engine/bench.h"
#include "engine/model.h"
#include "engine/roofline.h"
#include "tools/bench_args.h"
#include "tools/commands.h"
#include "weights/error.h"
#include "weights/model_file.h"

namespace ridge::cli {

namespace {

struct RooflineCommand {
    BenchArgs args;
    std::string output;  // -o
};

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
    check_writable(cmd.output);
    const std::unique_ptr<ModelFile> file = a.model.open();
    Model model = Model::from_file(*file);
    model.exact = a.model.exact;
    const Ceilings ceil = machine_ceilings(threads);
    const BenchResult res = run_bench(model, a.opt, &ceil);

    const std::string title = "ridge roofline: " + file->path() + ", " + std::to_string(res.threads) +
                              (res.threads == 1 ? " thread" : " threads");
    const RooflinePlot plot = roofline_from_bench(res, ceil, title);
    write_file(cmd.output, roofline_svg(plot));

    // Summary: the roof, then the phase points and how many op points were drawn.
    std::printf("wrote %s: roof %.2f GB/s, %.1f GFLOP/s peak, ridge point %.2f FLOP/byte (%d threads)\n",
                cmd.output.c_str(), ceil.bandwidth_gbs, ceil.peak_gflops(), ceil.ridge_point(), ceil.threads);
    std::string phases;
    int n_ops = 0, n_skipped = 0;
    for (const RooflineSeries& s : plot.series) {
        const bool is_phases = &s == &plot.series.front();  // roofline_from_bench puts the phases first
        for (const RooflinePoint& p : s.points) {
            if (!p.drawable()) {
                n_skipped++;
                continue;
            }
            if (!is_phases) {
                n_ops++;
                continue;
            }
            char buf[160];
            std::snprintf(buf, sizeof buf, "%s%s %.3g FLOP/byte %.3g GFLOP/s", phases.empty() ? "" : ", ",
                          p.label.c_str(), p.intensity, p.gflops);
            phases += buf;
        }
    }
    std::printf("points: %s; %d op points", phases.c_str(), n_ops);
    if (n_skipped > 0) std::printf(" (%d not drawn: no time or no bytes measured)", n_skipped);
    std::printf("\n");
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
    cmd->args.add_options(sub);
    sub->add_option("-o,--output", cmd->output, "the SVG file to write")->required();
    sub->footer("The roof is the ceilings `ridge probe -t N` saved for the thread count ($RIDGE_PROBE_FILE, else\n"
                "~/.cache/ridge/probe-t<N>.json), measured now and saved when there are none. The points are a\n"
                "short `ridge bench` run: its tests are smaller by default (-p 128 -n 32 -r 3).");
    sub->callback([cmd] { run(*cmd); });
}

}  // namespace ridge::cli
