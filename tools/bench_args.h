// BenchArgs: the options `ridge bench` and `ridge roofline` share (the model, test sizes,
// repetitions, threads, KV type), their one-line checks, and the machine's ceilings for the
// thread count: the saved ones (`ridge probe`, or $RIDGE_PROBE_FILE), else measured now.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "engine/bench.h"
#include "engine/ceilings.h"
#include "tools/model_args.h"

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

// The ceilings for `threads`: saved ones, or measured now (with a note on stderr first, since the
// probe takes a few seconds) and saved for next time.
Ceilings machine_ceilings(int threads);

}  // namespace ridge::cli
