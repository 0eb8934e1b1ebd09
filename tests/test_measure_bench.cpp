// Tests for engine/bench: spread_of on hand-worked lists, the bound and the phase report on hand
// numbers on both sides of the ridge point, and run_bench on stories260K against formulas that do
// not come from bench itself: ModelStats::decode_bytes_per_token for a decode step's weights, the
// KV cache read at known positions, explain_model's prefill totals. No speed is asserted.
#include <gtest/gtest.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "measure/bench.h"
#include "measure/explain.h"
#include "engine/model.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "weights/model_stats.h"

#include "engine_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace ridge {
namespace {

const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

using test::expect_cost_near;
using test::Loaded;

// 20 GB/s and 100 GFLOP/s: the ridge point is I* = 5 FLOP/byte.
Ceilings hand_ceilings() {
    Ceilings c;
    c.threads = 2;
    c.bandwidth_gbs = 20.0;
    c.fma_gflops = 100.0;
    return c;
}

cpu::Cost cost(double flops, double weight_bytes, double kv_read = 0, double kv_written = 0, double act = 0) {
    cpu::Cost c;
    c.flops = flops;
    c.weight_bytes = weight_bytes;
    c.kv_read = kv_read;
    c.kv_written = kv_written;
    c.act_read = act;
    c.act_written = act;
    return c;
}

// ---- spread_of ----------------------------------------------------------------------------------

TEST(Bench, SpreadOfAnOddCount) {
    // {1, 2, 3}: median 2; mean 2, squares 1 + 0 + 1 over n - 1 = 2: stdev 1.
    const Spread s = spread_of({3, 1, 2});
    EXPECT_DOUBLE_EQ(s.median, 2.0);
    EXPECT_DOUBLE_EQ(s.min, 1.0);
    EXPECT_DOUBLE_EQ(s.max, 3.0);
    EXPECT_DOUBLE_EQ(s.stdev, 1.0);
}

TEST(Bench, SpreadOfAnEvenCount) {
    // {1, 2, 3, 4}: median (2 + 3) / 2; mean 2.5, squares 2.25 + 0.25 + 0.25 + 2.25 = 5 over 3.
    Spread s = spread_of({4, 1, 3, 2});
    EXPECT_DOUBLE_EQ(s.median, 2.5);
    EXPECT_DOUBLE_EQ(s.min, 1.0);
    EXPECT_DOUBLE_EQ(s.max, 4.0);
    EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(5.0 / 3.0));
    // The textbook list: mean 5, squares 9 + 1 + 1 + 1 + 0 + 0 + 4 + 16 = 32 over 7; median (4 + 5) / 2.
    s = spread_of({9, 2, 5, 4, 7, 4, 5, 4});
    EXPECT_DOUBLE_EQ(s.median, 4.5);
    EXPECT_DOUBLE_EQ(s.min, 2.0);
    EXPECT_DOUBLE_EQ(s.max, 9.0);
    EXPECT_DOUBLE_EQ(s.stdev, std::sqrt(32.0 / 7.0));
}

TEST(Bench, SpreadOfOneSampleAndOfNone) {
    const Spread one = spread_of({7.5});
    EXPECT_DOUBLE_EQ(one.median, 7.5);
    EXPECT_DOUBLE_EQ(one.min, 7.5);
    EXPECT_DOUBLE_EQ(one.max, 7.5);
    EXPECT_DOUBLE_EQ(one.stdev, 0.0);  // no spread from one sample (n - 1 = 0)
    const Spread none = spread_of({});
    EXPECT_EQ(none.median, 0.0);
    EXPECT_EQ(none.min, 0.0);
    EXPECT_EQ(none.max, 0.0);
    EXPECT_EQ(none.stdev, 0.0);
}

// ---- the bound: min(peak, I * bandwidth) / FLOPs per token ------------------------------------

TEST(Bench, BoundBelowTheRidgePointIsBandwidthOverBytes) {
    const Ceilings c = hand_ceilings();
    // A decode-like token: 200 MFLOP over 100 MB of weights, I = 2 < 5.
    // min(100, 2 * 20) = 40 GFLOP/s / 200 MFLOP = 200 tokens/s = 20 GB/s / 100 MB.
    EXPECT_DOUBLE_EQ(bound_tokens_per_second(cost(2e8, 1e8), c), 200.0);
    // KV cache bytes stream too: 100 MB of weights + 25 MB read + 0 MB written: 20e9 / 1.25e8 = 160.
    EXPECT_DOUBLE_EQ(bound_tokens_per_second(cost(2e8, 1e8, 2.5e7), c), 160.0);
    // Activations do not (they stay in cache): the same 200 tokens/s.
    EXPECT_DOUBLE_EQ(bound_tokens_per_second(cost(2e8, 1e8, 0, 0, 5e7), c), 200.0);
}

TEST(Bench, BoundPastTheRidgePointIsPeakOverFlops) {
    const Ceilings c = hand_ceilings();
    // A prefill-like token: 200 MFLOP over 1 MB, I = 200 > 5: 100 GFLOP/s / 200 MFLOP = 500 tokens/s.
    EXPECT_DOUBLE_EQ(bound_tokens_per_second(cost(2e8, 1e6), c), 500.0);
    // At the ridge point both ceilings give the same: I = 5, 100e9 / 5e8 = 200 = 20e9 / 1e8.
    EXPECT_DOUBLE_EQ(bound_tokens_per_second(cost(5e8, 1e8), c), 200.0);
    // Nothing to count: no bound.
    EXPECT_EQ(bound_tokens_per_second(cost(0, 1e6), c), 0.0);
    EXPECT_EQ(bound_tokens_per_second(cost(1e6, 0), c), 0.0);
}

TEST(Bench, PhaseReportOfAMemoryBoundDecode) {
    const Ceilings c = hand_ceilings();
    // 4 tokens costing 4 x (200 MFLOP, 90 MB weights + 10 MB KV read), at 150 tokens/s.
    const cpu::Cost total = cost(8e8, 3.6e8, 4e7, 0, 1e6);
    const PhaseReport r = phase_report(total, 4, 150.0, &c);
    EXPECT_DOUBLE_EQ(r.tokens_per_second, 150.0);
    EXPECT_DOUBLE_EQ(r.flops_per_token, 2e8);
    EXPECT_DOUBLE_EQ(r.bytes_per_token, 1e8);          // weights + KV, not the activations
    EXPECT_DOUBLE_EQ(r.per_token.act_read, 2.5e5);     // kept apart, per token
    EXPECT_DOUBLE_EQ(r.intensity, 2.0);
    EXPECT_DOUBLE_EQ(r.achieved_gbs, 15.0);            // 1e8 B * 150 / 1e9
    EXPECT_DOUBLE_EQ(r.achieved_gflops, 30.0);         // 2e8 * 150 / 1e9
    EXPECT_TRUE(r.has_bound);
    EXPECT_FALSE(r.compute_bound);
    EXPECT_DOUBLE_EQ(r.bound_tokens_per_second, 200.0);
    EXPECT_DOUBLE_EQ(r.percent_of_bound, 75.0);        // 150 of 200
}

TEST(Bench, PhaseReportOfAComputeBoundPrefill) {
    const Ceilings c = hand_ceilings();
    // 64 tokens in one pass: 64 x 200 MFLOP, the 100 MB of weights read once, 64 kB of KV written.
    const cpu::Cost total = cost(64 * 2e8, 1e8, 0, 64e3);
    const PhaseReport r = phase_report(total, 64, 400.0, &c);
    EXPECT_DOUBLE_EQ(r.flops_per_token, 2e8);
    EXPECT_DOUBLE_EQ(r.bytes_per_token, 1e8 / 64 + 1e3);
    EXPECT_NEAR(r.intensity, 2e8 / (1e8 / 64 + 1e3), 1e-9);
    EXPECT_TRUE(r.compute_bound);
    EXPECT_DOUBLE_EQ(r.bound_tokens_per_second, 500.0);  // 100 GFLOP/s / 200 MFLOP
    EXPECT_DOUBLE_EQ(r.percent_of_bound, 80.0);
    EXPECT_DOUBLE_EQ(r.achieved_gflops, 80.0);
}

TEST(Bench, PhaseReportWithoutCeilingsOrTokens) {
    const PhaseReport r = phase_report(cost(8e8, 4e8), 4, 100.0, nullptr);
    EXPECT_DOUBLE_EQ(r.flops_per_token, 2e8);
    EXPECT_DOUBLE_EQ(r.achieved_gbs, 10.0);
    EXPECT_FALSE(r.has_bound);
    EXPECT_EQ(r.bound_tokens_per_second, 0.0);
    EXPECT_EQ(r.percent_of_bound, 0.0);
    const Ceilings c = hand_ceilings();
    const PhaseReport none = phase_report(cost(8e8, 4e8), 0, 100.0, &c);
    EXPECT_EQ(none.flops_per_token, 0.0);
    EXPECT_FALSE(none.has_bound);
}

// ---- run_bench on stories260K -------------------------------------------------------------------

const Loaded& stories() { return test::load(kStories); }

BenchOptions tiny(int p, int n, int reps) {
    BenchOptions o;
    o.n_prompt = p;
    o.n_gen = n;
    o.reps = reps;
    o.n_decode_prompt = 8;
    return o;
}

TEST(Bench, RunsPrefillThenDecodeWithRepsSamples) {
    const Ceilings c = hand_ceilings();
    const BenchResult res = run_bench(stories().engine(), tiny(16, 8, 3), &c);
    EXPECT_EQ(res.threads, omp_get_max_threads());
    EXPECT_GT(res.peak_rss_bytes, 0.0);
    ASSERT_EQ(res.tests.size(), 2u);
    const BenchTest& pp = res.tests[0];
    const BenchTest& tg = res.tests[1];
    EXPECT_EQ(pp.name, "pp16");
    EXPECT_EQ(pp.phase, Phase::Prefill);
    EXPECT_EQ(pp.n_tokens, 16);
    EXPECT_EQ(pp.n_past, 0);
    EXPECT_EQ(tg.name, "tg8");
    EXPECT_EQ(tg.phase, Phase::Decode);
    EXPECT_EQ(tg.n_tokens, 8);
    EXPECT_EQ(tg.n_past, 8);  // the decode test's prompt
    for (const BenchTest* t : {&pp, &tg}) {
        ASSERT_EQ(t->samples.size(), 3u) << t->name;
        for (double s : t->samples) EXPECT_GT(s, 0.0) << t->name;
        const Spread s = spread_of(t->samples);
        EXPECT_EQ(t->tokens_per_second.median, s.median) << t->name;
        EXPECT_EQ(t->tokens_per_second.min, s.min) << t->name;
        EXPECT_EQ(t->tokens_per_second.max, s.max) << t->name;
        EXPECT_EQ(t->counted_tokens, 3 * t->n_tokens) << t->name;  // every timed repetition counted
        // The report is the median against the ceilings.
        const PhaseReport& r = t->report;
        EXPECT_EQ(r.tokens_per_second, s.median) << t->name;
        ASSERT_TRUE(r.has_bound) << t->name;
        EXPECT_NEAR(r.percent_of_bound, 100.0 * s.median / r.bound_tokens_per_second, 1e-9 * r.percent_of_bound);
        EXPECT_NEAR(r.achieved_gbs, r.bytes_per_token * s.median / 1e9, 1e-12 * r.achieved_gbs);
        EXPECT_NEAR(r.achieved_gflops, r.flops_per_token * s.median / 1e9, 1e-12 * r.achieved_gflops);
        EXPECT_DOUBLE_EQ(r.bound_tokens_per_second, bound_tokens_per_second(r.per_token, c)) << t->name;
        EXPECT_EQ(r.compute_bound, r.intensity >= c.ridge_point()) << t->name;
    }
}

// A decode step reads every weight once (one embedding row): what `ridge info` reports; and the
// KV cache of positions 0..p, p = 8..15 in the decode test (after its 8-token prompt).
TEST(Bench, DecodeBytesPerTokenAreModelStatsAndTheKVCache) {
    const Loaded& l = stories();
    const Config& cfg = l.model.config;
    const ModelStats stats = compute_stats(*l.file);
    const Ceilings c = hand_ceilings();
    for (DType kv : {DType::F32, DType::F16}) {
        BenchOptions o = tiny(0, 8, 2);
        o.kv_type = kv;
        const BenchResult res = run_bench(l.engine(), o, &c);
        ASSERT_EQ(res.tests.size(), 1u);  // -p 0 skips the prefill test
        const BenchTest& tg = res.tests[0];
        EXPECT_EQ(tg.name, "tg8");
        const cpu::Cost& per = tg.report.per_token;
        EXPECT_DOUBLE_EQ(per.weight_bytes, double(stats.decode_bytes_per_token));
        EXPECT_DOUBLE_EQ(tg.counters.total().cost.weight_bytes / double(tg.counted_tokens),
                         double(stats.decode_bytes_per_token));
        // Keys and values of one position, every layer: 2 * n_layers * kv_dim * bytes per value.
        const double per_pos = 2.0 * cfg.n_layers * cfg.kv_dim() * (kv == DType::F32 ? 4 : 2);
        const double keys = (9 + 10 + 11 + 12 + 13 + 14 + 15 + 16) / 8.0;  // positions seen, per step
        EXPECT_DOUBLE_EQ(per.kv_read, per_pos * keys);
        EXPECT_DOUBLE_EQ(per.kv_written, per_pos);
        EXPECT_DOUBLE_EQ(tg.report.bytes_per_token, double(stats.decode_bytes_per_token) + per_pos * (keys + 1));
        // Decode is a matrix-vector product, far below a ridge point of 5: the bound is bandwidth / bytes.
        EXPECT_FALSE(tg.report.compute_bound);
        EXPECT_NEAR(tg.report.bound_tokens_per_second, c.bandwidth_gbs * 1e9 / tg.report.bytes_per_token,
                    1e-9 * tg.report.bound_tokens_per_second);
    }
}

// A prefill of p tokens in one pass costs what explain_model says a pass of T = p rows costs.
TEST(Bench, PrefillCostsPerTokenAreExplainsPrefill) {
    const Loaded& l = stories();
    for (int p : {1, 16, 40}) {
        const BenchResult res = run_bench(l.engine(), tiny(p, 0, 2), nullptr);
        ASSERT_EQ(res.tests.size(), 1u);  // -n 0 skips the decode test
        const BenchTest& pp = res.tests[0];
        EXPECT_EQ(pp.name, "pp" + std::to_string(p));
        EXPECT_FALSE(pp.report.has_bound);  // no ceilings
        ExplainOptions eo;
        eo.tokens = p;
        const Explain e = explain_model(*l.file, eo);
        expect_cost_near(pp.report.per_token, e.prefill.per_token(), "pp" + std::to_string(p));
        for (size_t i = 0; i < kNumOps; i++) {
            cpu::Cost op = pp.counters.op(Op(i)).cost;
            op.scale(1.0 / double(pp.counted_tokens));
            expect_cost_near(op, cpu::Cost(e.prefill.by_op[i]).scale(1.0 / p), op_name(Op(i)));
        }
    }
}

// Prompts longer than -b run in several passes: the weights are read once per pass.
TEST(Bench, PrefillInChunksReadsTheWeightsOncePerChunk) {
    const Loaded& l = stories();
    BenchOptions o = tiny(32, 0, 1);
    o.max_rows = 8;  // 4 passes of 8 rows
    const BenchResult res = run_bench(l.engine(), o, nullptr);
    ExplainOptions eo;
    eo.tokens = 8;
    const Explain e = explain_model(*l.file, eo);
    const BenchTest& pp = res.tests.at(0);
    for (Op op : {Op::Q, Op::K, Op::V, Op::O, Op::Gate, Op::Up, Op::Down}) {
        EXPECT_DOUBLE_EQ(pp.counters.op(op).cost.weight_bytes, 4 * e.prefill.by_op[size_t(op)].weight_bytes)
            << op_name(op);
        EXPECT_DOUBLE_EQ(pp.counters.op(op).cost.flops, 4 * e.prefill.by_op[size_t(op)].flops) << op_name(op);
    }
}

// --no-count: the timed repetitions count nothing, the costs come from the (counted) warm-up.
TEST(Bench, CountingOffStillGivesTheCosts) {
    const Loaded& l = stories();
    const Ceilings c = hand_ceilings();
    const BenchResult on = run_bench(l.engine(), tiny(16, 8, 2), &c);
    BenchOptions o = tiny(16, 8, 2);
    o.count = false;
    const BenchResult off = run_bench(l.engine(), o, &c);
    ASSERT_EQ(off.tests.size(), 2u);
    for (size_t i = 0; i < 2; i++) {
        const BenchTest& a = on.tests[i];
        const BenchTest& b = off.tests[i];
        EXPECT_EQ(b.samples.size(), 2u) << b.name;
        EXPECT_EQ(b.counted_tokens, b.n_tokens) << b.name;  // the warm-up alone
        EXPECT_GT(b.report.flops_per_token, 0.0) << b.name;
        expect_cost_near(b.report.per_token, a.report.per_token, b.name);  // same tokens, same costs
        EXPECT_TRUE(b.report.has_bound) << b.name;
        EXPECT_NEAR(b.report.bound_tokens_per_second, a.report.bound_tokens_per_second,
                    1e-9 * a.report.bound_tokens_per_second);
    }
}

TEST(Bench, BadOptionsThrow) {
    const Engine& m = stories().engine();
    auto with = [](auto set) {
        BenchOptions o = tiny(4, 4, 1);
        set(o);
        return o;
    };
    EXPECT_THROW(run_bench(m, with([](BenchOptions& o) { o.reps = 0; }), nullptr), Error);
    EXPECT_THROW(run_bench(m, with([](BenchOptions& o) { o.n_prompt = -1; }), nullptr), Error);
    EXPECT_THROW(run_bench(m, with([](BenchOptions& o) { o.n_gen = -1; }), nullptr), Error);
    EXPECT_THROW(run_bench(m, with([](BenchOptions& o) { o.n_prompt = 0, o.n_gen = 0; }), nullptr), Error);
    EXPECT_THROW(run_bench(m, with([](BenchOptions& o) { o.max_rows = 0; }), nullptr), Error);
    EXPECT_THROW(run_bench(m, with([](BenchOptions& o) { o.n_decode_prompt = 0; }), nullptr), Error);
    // Past the model's context (the decode test adds its 8-token prompt).
    EXPECT_THROW(run_bench(m, with([&](BenchOptions& o) { o.n_prompt = m.config().n_ctx_train + 1; }), nullptr), Error);
    EXPECT_THROW(run_bench(m, with([&](BenchOptions& o) { o.n_gen = m.config().n_ctx_train; }), nullptr), Error);
}

}  // namespace
}  // namespace ridge
