// What counting costs: the same decode steps and prefills of SmolLM2, timed with the counters on
// and off, in alternating back-to-back pairs (which of the two runs first alternates too), so
// that slow drifts of a shared machine fall on both sides alike. Reports the median time per
// token of each and the median of the paired ratios on/off. On a noisy machine that ratio swings
// by a few percent either way, so the cost is also worked out from its parts: the time of one
// count (a clock read and Counters::add, timed over a million calls) times the counts per token.
// A measurement, not a test.
//
//   build/bench_counters [MODEL] [ROUNDS]     (default: models/SmolLM2-135M-Instruct.Q4_1.gguf, 15)
#include <omp.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/model.h"
#include "engine/session.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "tests/test_paths.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

constexpr int kPrompt = 64;       // prefill test: tokens per pass
constexpr int kDecodeSteps = 32;  // decode test: steps, after an 8-token prompt

// Seconds per token of one prefill of kPrompt tokens, on a fresh sequence.
double time_prefill(ridge::Session& s, bool count) {
    s.set_counting(count);
    std::vector<int32_t> tokens(kPrompt);
    for (int i = 0; i < kPrompt; i++) tokens[i] = 100 + i;
    const int seq = s.cache().new_sequence();
    const auto t0 = Clock::now();
    s.prefill(seq, tokens);
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    s.cache().free_sequence(seq);
    return sec / kPrompt;
}

// Seconds per token of kDecodeSteps decode steps after an 8-token prompt (not timed).
double time_decode(ridge::Session& s, bool count) {
    const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
    const int seq = s.cache().new_sequence();
    s.set_counting(true);
    s.prefill(seq, prompt);
    s.set_counting(count);
    const auto t0 = Clock::now();
    for (int i = 0; i < kDecodeSteps; i++) s.decode(seq, 100 + i);
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    s.cache().free_sequence(seq);
    return sec / kDecodeSteps;
}

// Seconds of one count as forward() makes it: a steady_clock read and Counters::add.
double seconds_per_count() {
    constexpr int kCalls = 1000000;
    ridge::Counters c;
    ridge::cpu::Cost cost;
    cost.flops = 1, cost.weight_bytes = 1;
    Clock::time_point last = Clock::now();
    const auto t0 = last;
    for (int i = 0; i < kCalls; i++) {
        const Clock::time_point now = Clock::now();
        c.add(i % 30, ridge::Op(i % int(ridge::kNumOps)), cost, std::chrono::duration<double>(now - last).count());
        last = now;
    }
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (c.total().calls != kCalls) std::abort();  // keeps the loop from being optimized away
    return sec / kCalls;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"bench_counters: decode and prefill timed with the counters on and off"};
    app.failure_message([](const CLI::App*, const CLI::Error& e) {  // argument errors: one line
        return "bench_counters: " + std::string(e.what()) + " (see --help)\n";
    });
    std::string path = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    int rounds = 15;
    app.add_option("model", path, "GGUF file (default: SmolLM2-135M Q4_1)");
    app.add_option("rounds", rounds, "alternating pairs of each test (default 15)")->check(CLI::Range(1, 1000000));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    try {
        const auto file = ridge::ModelFile::open(path);
        const ridge::Model model = ridge::Model::from_file(*file);
        const ridge::Engine engine(model);
        ridge::SessionOptions opt;
        opt.n_ctx = 128;
        opt.max_rows = kPrompt;
        ridge::Session s(engine, opt);
        time_prefill(s, true), time_decode(s, true);  // warm-up: page the weights in
        // Counts per decode token: one per kernel call of every layer, and of the ops outside.
        const double calls = double(s.decode_stats.counters.total().calls) / double(s.decode_stats.tokens);

        struct Test {
            const char* name;
            double (*run)(ridge::Session&, bool);
            std::vector<double> on, off, ratio;
        } tests[] = {{"prefill (64 tokens)", time_prefill, {}, {}, {}}, {"decode", time_decode, {}, {}, {}}};
        for (int r = 0; r < rounds; r++)
            for (Test& t : tests) {
                double on, off;
                if (r % 2 == 0) on = t.run(s, true), off = t.run(s, false);
                else off = t.run(s, false), on = t.run(s, true);
                t.on.push_back(on), t.off.push_back(off), t.ratio.push_back(on / off);
            }
        std::printf("%s, %d threads, %d alternating pairs\n", path.c_str(), omp_get_max_threads(), rounds);
        for (const Test& t : tests)
            std::printf("%-20s counting on %.3f ms/token, off %.3f ms/token; on/off median of pairs %.4f "
                        "(overhead %+.2f%%)\n",
                        t.name, 1e3 * median(t.on), 1e3 * median(t.off), median(t.ratio),
                        100.0 * (median(t.ratio) - 1.0));
        const double per_count = seconds_per_count();
        std::printf("from its parts: %.0f counts per decode token x %.1f ns = %.1f us per token, %.3f%% of decode\n",
                    calls, 1e9 * per_count, 1e6 * calls * per_count,
                    100.0 * calls * per_count / median(tests[1].off));
    } catch (const ridge::Error& e) {
        std::fprintf(stderr, "bench_counters: %s\n", e.what());
        return 1;
    }
    return 0;
}
