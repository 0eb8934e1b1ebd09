// BenchArgs: the options `ridge bench` and `ridge roofline` share (the model, test sizes,
// repetitions, threads, KV type), their one-line checks, and the machine's ceilings for the
// thread count: the saved ones (`ridge probe`, or $RIDGE_PROBE_FILE), else measured now. Also the
// -B list parser and the printing helpers bench and batch-bench share.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "measure/bench.h"
#include "measure/ceilings.h"
#include "tools/model_args.h"
#include "weights/model_stats.h"

namespace ridge::cli {

struct BenchArgs {
    ModelArgs model;
    BenchOptions opt;        // set the command's defaults before add_options
    int threads = 0;         // -t (when threads_set; else OpenMP's default)
    bool threads_set = false;
    std::string kv_type = "f32";
    std::string rows_option = "-b,--batch";  // the prompt-rows option (roofline: "-b,--ubatch"; its --batch lists B)

    // Adds -m/--synthetic..., --exact, -p, -n, -r, -t, -b, --kv-type, --seed to `cmd` (bound to these fields).
    void add_options(CLI::App* cmd);
    // ridge::Error (one line) for a bad value; sets the OpenMP thread count; returns it.
    int check_and_apply();
};

// "1,4,16" -> {1, 4, 16}: whole numbers separated by commas (range checks are the engine's);
// ridge::Error naming `option` for an empty list or entry, or an entry that is not a number.
std::vector<int> parse_batch_sizes(const std::string& list, const std::string& option);

// Printing helpers of the bench commands: 1234567 -> "1.23 M" (SI prefixes, the caller appends the
// unit); the model's weight types as "F32+Q4_1+Q8_0"; a Cost as the JSON object `ridge bench --json`
// documents (flops, bytes, weight/kv/activation bytes).
std::string si(double v);
std::string types_of(const ModelStats& s);
nlohmann::ordered_json cost_json(const Cost& c);
nlohmann::ordered_json ceilings_json(const Ceilings& c);
nlohmann::ordered_json model_json(const std::string& path, const Config& c, const ModelStats& s);  // "model"  // the "ceilings" object of the --json outputs

// The ceilings for `threads`: saved ones, or measured now (with a note on stderr first, since the
// probe takes a few seconds) and saved for next time.
Ceilings machine_ceilings(int threads, bool gpu = false);  // gpu: the GPU's (ridge probe --device cuda)

}  // namespace ridge::cli
