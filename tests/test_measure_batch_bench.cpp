// Tests for engine/batch_bench: run_batch_bench on stories260K against formulas from the model's
// shapes (a step of B rows costs B times one row's FLOPs, reads the weights once plus B embedding
// rows, and each sequence's KV cache), so intensity rises with B; B * n tokens counted per
// repetition; the cache sized for B * (p + n); batch_crossing on hand-made points; bad options as
// one-line errors. No speed is asserted.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "measure/batch_bench.h"
#include "engine/kv_cache.h"
#include "engine/model.h"
#include "kernels/cpu/matmul.h"
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
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";

using test::Loaded;

// 20 GB/s and 100 GFLOP/s: the ridge point is I* = 5 FLOP/byte.
Ceilings hand_ceilings() {
    Ceilings c;
    c.threads = 2;
    c.bandwidth_gbs = 20.0;
    c.fma_gflops = 100.0;
    c.int_dot_gflops = 160.0;
    c.int_dot_name = "vpdpwssd zmm";
    return c;
}

BatchBenchOptions tiny(std::vector<int> batch, int p, int n, int reps) {
    BatchBenchOptions o;
    o.batch_sizes = std::move(batch);
    o.n_prompt = p;
    o.n_gen = n;
    o.reps = reps;
    return o;
}

// Elements of the matrices a token is multiplied by (every parameter but the norms and an untied
// embedding table): one row of a forward pass does 2 of these FLOPs each.
double matmul_params(const Engine& m) {
    const Config& c = m.config();
    double n = double(m.model().n_params()) - double(2 * c.n_layers + 1) * c.n_embd;
    if (m.model().output != m.model().token_embd) n -= double(m.model().token_embd->n_elements());
    return n;
}

const Op kMatmulOps[] = {Op::Q, Op::K, Op::V, Op::O, Op::Gate, Op::Up, Op::Down, Op::OutputHead};

TEST(BatchBench, StepCostsFollowTheShapesAndIntensityRisesWithB) {
    const Loaded& l = test::load(kStories);
    const Engine& m = l.engine();
    const Config& c = m.config();
    const ModelStats stats = compute_stats(*l.file);
    const int p = 5, n = 3, reps = 2;
    const Ceilings ceil = hand_ceilings();
    const BatchBenchResult res = run_batch_bench(m, tiny({1, 2, 3, 7, 12}, p, n, reps), &ceil);
    EXPECT_EQ(res.threads, omp_get_max_threads());
    EXPECT_EQ(res.n_prompt, p);
    EXPECT_EQ(res.n_gen, n);
    EXPECT_EQ(res.reps, reps);
    ASSERT_EQ(res.points.size(), 5u);

    const double L = c.n_layers, H = c.n_heads, hd = c.head_dim, d = c.n_embd;
    const double per_key = L * c.n_kv_heads * hd * 4;  // f32 cache: one position's keys of every layer
    // One row at position q: 2N + attention over q + 1 keys + the element-wise ops.
    const double elementwise = 4 * d * (2 * L + 1) + 6.0 * L * (c.n_heads + c.n_kv_heads) * (c.rope_dim / 2) +
                               5.0 * L * c.n_ff + 2.0 * L * d;
    double row_flops = 0, row_kv_read = 0;  // mean over the n steps (positions p .. p + n - 1)
    for (int s = 0; s < n; s++) {
        const double keys = p + s + 1;
        row_flops += (2 * matmul_params(m) + 4 * L * H * hd * keys + 4 * L * H * keys + elementwise) / n;
        row_kv_read += 2 * per_key * keys / n;
    }

    // Per row: its embedding row, and the final norm's weight (forward() normalizes each row that
    // wants logits in its own rmsnorm call, and each call counts the weight it reads).
    const double row_weights = double(stats.embedding_row_bytes) + double(m.model().output_norm->nbytes);

    double last_intensity = 0;
    for (const BatchPoint& pt : res.points) {
        const int B = pt.batch;
        SCOPED_TRACE("B = " + std::to_string(B));
        // Tokens: B rows per step, n steps per repetition; one forward() per step.
        EXPECT_EQ(pt.counted_steps, int64_t(reps) * n);
        EXPECT_EQ(pt.counted_tokens, int64_t(reps) * n * B);
        EXPECT_EQ(pt.counters.op(Op::OutputHead).calls, reps * n);  // one head call per step, B rows in it
        EXPECT_EQ(pt.counters.op(Op::Q).calls, int64_t(reps) * n * c.n_layers);
        ASSERT_EQ(pt.step_seconds.size(), size_t(reps));
        for (double s : pt.step_seconds) EXPECT_GT(s, 0.0);
        EXPECT_GT(pt.prefill_seconds, 0.0);

        // The KV cache holds B * (p + n) tokens, in whole blocks per sequence.
        const int bs = KVCache::kDefaultBlockSize;
        EXPECT_EQ(pt.kv_cache_tokens, int64_t(B) * ((p + n + bs - 1) / bs * bs));
        EXPECT_GE(pt.kv_cache_bytes, double(B) * (p + n) * double(KVCache::bytes_per_token(c, DType::F32)));

        // FLOPs per step: B rows; the matmuls 2N each, exactly.
        double matmul = 0;
        for (Op op : kMatmulOps) matmul += pt.counters.op(op).cost.flops;
        EXPECT_DOUBLE_EQ(matmul / pt.counted_steps, B * 2 * matmul_params(m));
        const double without_quantize = pt.per_step.flops - pt.counters.op(Op::Quantize).cost.flops / pt.counted_steps;
        EXPECT_NEAR(without_quantize, B * row_flops, 1e-12 * B * row_flops);
        // Weights: each read once per step whatever B is, plus what each row reads alone.
        EXPECT_DOUBLE_EQ(pt.per_step.weight_bytes, double(stats.decode_bytes_per_token) + (B - 1) * row_weights);
        // KV cache: each sequence reads its own keys and values and writes one position's.
        EXPECT_NEAR(pt.per_step.kv_read, B * row_kv_read, 1e-12 * B * row_kv_read);
        EXPECT_DOUBLE_EQ(pt.per_step.kv_written, B * 2 * per_key);

        // Per token, as PhaseReport defines it, and the speeds.
        const PhaseReport& r = pt.report;
        EXPECT_NEAR(r.flops_per_token * B, pt.per_step.flops, 1e-12 * pt.per_step.flops);
        EXPECT_NEAR(r.bytes_per_token * B, pt.per_step.memory_bytes(), 1e-12 * pt.per_step.memory_bytes());
        EXPECT_NEAR(r.intensity, pt.per_step.flops / pt.per_step.memory_bytes(), 1e-12 * r.intensity);
        EXPECT_GT(r.intensity, last_intensity);  // the weights are shared by more rows
        last_intensity = r.intensity;
        EXPECT_DOUBLE_EQ(pt.step.median, spread_of(pt.step_seconds).median);
        EXPECT_DOUBLE_EQ(pt.tokens_per_second_per_seq, 1.0 / pt.step.median);
        EXPECT_DOUBLE_EQ(pt.tokens_per_second, B / pt.step.median);
        EXPECT_DOUBLE_EQ(r.tokens_per_second, pt.tokens_per_second);
        EXPECT_NEAR(r.achieved_gflops, pt.per_step.flops / pt.step.median / 1e9, 1e-9 * r.achieved_gflops);
        EXPECT_NEAR(r.achieved_gbs, pt.per_step.memory_bytes() / pt.step.median / 1e9, 1e-9 * r.achieved_gbs);
        // The bound: min(peak, I * bandwidth).
        ASSERT_TRUE(r.has_bound);
        EXPECT_DOUBLE_EQ(pt.bound_gflops, std::min(100.0, r.intensity * 20.0));
        EXPECT_NEAR(r.bound_tokens_per_second, pt.bound_gflops * 1e9 / r.flops_per_token,
                    1e-9 * r.bound_tokens_per_second);
        EXPECT_NEAR(r.percent_of_bound, 100 * pt.tokens_per_second / r.bound_tokens_per_second, 1e-9);
        EXPECT_EQ(r.compute_bound, r.intensity >= 5.0);
        // The integer roof beside it: min(int dot peak, I * bandwidth), I* = 160 / 20 = 8 FLOP/byte.
        EXPECT_DOUBLE_EQ(pt.int_bound_gflops, std::min(160.0, r.intensity * 20.0));
        EXPECT_EQ(pt.int_bound_compute, r.intensity >= 8.0);
        EXPECT_NEAR(pt.int_bound_tokens_per_second, pt.int_bound_gflops * 1e9 / r.flops_per_token,
                    1e-9 * pt.int_bound_tokens_per_second);
        EXPECT_NEAR(pt.percent_of_int_bound, 100 * pt.tokens_per_second / pt.int_bound_tokens_per_second, 1e-9);
    }

    // The crossing's fit recovers the weights read per step and one row's FLOPs and bytes.
    const BatchCrossing& x = res.crossing;
    ASSERT_TRUE(x.has_fit);
    const double W = double(stats.decode_bytes_per_token) - row_weights;
    EXPECT_NEAR(x.weight_bytes_per_step, W, 1e-9 * W);
    EXPECT_NEAR(x.flops_per_row, row_flops, 1e-9 * row_flops);
    const double k = row_weights + row_kv_read + 2 * per_key;
    EXPECT_NEAR(x.bytes_per_row, k, 1e-9 * k);
}

TEST(BatchBench, NoPromptDecodesFromPositionZeroAndNoCeilingsNoBound) {
    const Engine& m = test::load(kStories).engine();
    const BatchBenchResult res = run_batch_bench(m, tiny({4, 2}, 0, 2, 1), nullptr);
    ASSERT_EQ(res.points.size(), 2u);
    EXPECT_EQ(res.points[0].batch, 4);  // the order given
    EXPECT_EQ(res.points[1].batch, 2);
    for (const BatchPoint& pt : res.points) {
        EXPECT_EQ(pt.prefill_seconds, 0.0);
        EXPECT_EQ(pt.counted_tokens, 2 * pt.batch);
        EXPECT_FALSE(pt.report.has_bound);
        EXPECT_EQ(pt.bound_gflops, 0.0);
        // Steps at positions 0 and 1 read 1 and 2 positions of each sequence.
        const double per_key = 2.0 * m.config().n_layers * m.config().kv_dim() * 4;
        EXPECT_DOUBLE_EQ(pt.per_step.kv_read, pt.batch * per_key * (1 + 2) / 2);
    }
    EXPECT_FALSE(res.crossing.has_fit);
    EXPECT_FALSE(res.crossing.first_measured);
}

TEST(BatchBench, SmolLM2WeightsAreReadOncePerStep) {
    const Loaded& l = test::load(kSmol);
    const ModelStats stats = compute_stats(*l.file);
    // Below and above the tiled matmul's row threshold (the model's tiled_min_rows()); decode rows
    // of separate sequences are row-exact either way.
    const int above = int(l.engine().plan().tiled_min_rows) + 2;
    const std::vector<int> batch = test::kSanitized ? std::vector<int>{1, 2} : std::vector<int>{1, 3, above};
    const BatchBenchResult res = run_batch_bench(l.engine(), tiny(batch, 2, 1, 1), nullptr);
    const double row_weights = double(stats.embedding_row_bytes) + double(l.model.output_norm->nbytes);
    for (const BatchPoint& pt : res.points) {
        EXPECT_DOUBLE_EQ(pt.per_step.weight_bytes, double(stats.decode_bytes_per_token) + (pt.batch - 1) * row_weights)
            << "B = " << pt.batch;
        EXPECT_EQ(pt.counted_tokens, pt.batch);
    }
    EXPECT_GT(res.points.back().report.intensity, 1.5 * res.points.front().report.intensity);
}

// ---- batch_crossing -------------------------------------------------------------------------------

// A point whose step costs B * f FLOPs and W + B * k bytes.
BatchPoint hand_point(int B, double W, double f, double k) {
    BatchPoint p;
    p.batch = B;
    p.per_step.flops = B * f;
    p.per_step.weight_bytes = W;
    p.per_step.kv_read = B * k;
    p.report.intensity = p.per_step.flops / p.per_step.memory_bytes();
    return p;
}

TEST(BatchBench, CrossingByHand) {
    const Ceilings c = hand_ceilings();  // I* = 5
    // W = 100 MB, f = 200 MFLOP, k = 10 MB: I(B) = 200 B / (100 + 10 B); I = 5 at 200 B = 500 + 50 B, B = 10/3.
    const double W = 1e8, f = 2e8, k = 1e7;
    std::vector<BatchPoint> pts = {hand_point(1, W, f, k), hand_point(2, W, f, k), hand_point(4, W, f, k),
                                   hand_point(8, W, f, k)};
    BatchCrossing x = batch_crossing(pts, c);
    ASSERT_TRUE(x.first_measured);
    EXPECT_EQ(*x.first_measured, 4);  // I(2) = 400 / 120 = 3.3; I(4) = 800 / 140 = 5.7
    ASSERT_TRUE(x.has_fit);
    EXPECT_NEAR(x.weight_bytes_per_step, W, 1e-6);
    EXPECT_NEAR(x.flops_per_row, f, 1e-6);
    EXPECT_NEAR(x.bytes_per_row, k, 1e-6);
    EXPECT_NEAR(x.intensity_limit, 20.0, 1e-12);
    ASSERT_TRUE(x.predicted);
    EXPECT_NEAR(*x.predicted, 10.0 / 3.0, 1e-12);

    // k = 50 MB: I tends to f / k = 4 < 5, never compute-bound.
    pts = {hand_point(16, W, f, 5e7), hand_point(64, W, f, 5e7)};
    x = batch_crossing(pts, c);
    EXPECT_FALSE(x.first_measured);
    ASSERT_TRUE(x.has_fit);
    EXPECT_NEAR(x.intensity_limit, 4.0, 1e-12);
    EXPECT_FALSE(x.predicted);

    // One B: no fit.
    x = batch_crossing({hand_point(8, W, f, k)}, c);
    EXPECT_FALSE(x.has_fit);
    EXPECT_TRUE(x.first_measured);
}

// ---- bad options ----------------------------------------------------------------------------------

void expect_error(const BatchBenchOptions& o, const std::string& fragment) {
    const Engine& m = test::load(kStories).engine();
    try {
        run_batch_bench(m, o, nullptr);
        ADD_FAILURE() << "no error for " << fragment;
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(fragment), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
}

TEST(BatchBench, BadOptionsAreOneLineErrors) {
    expect_error(tiny({}, 4, 2, 1), "no batch sizes");
    expect_error(tiny({1, 0, 4}, 4, 2, 1), "batch size 0");
    expect_error(tiny({-3}, 4, 2, 1), "batch size -3");
    expect_error(tiny({2, 4, 2}, 4, 2, 1), "batch size 2 is listed twice");
    expect_error(tiny({1}, -1, 2, 1), "-p -1");
    expect_error(tiny({1}, 4, 0, 1), "-n 0");
    expect_error(tiny({1}, 4, -2, 1), "-n -2");
    expect_error(tiny({1}, 4, 2, 0), "-r 0");
    const int ctx = test::load(kStories).model.config.n_ctx_train;
    ASSERT_GT(ctx, 0);
    expect_error(tiny({1}, ctx, 1, 1), "pass the model's context of " + std::to_string(ctx));
    // A KV cache larger than any machine's memory (and than an int of tokens).
    expect_error(tiny({1, 2000000000}, 4, 2, 1), "need a KV cache");
}

}  // namespace
}  // namespace ridge
