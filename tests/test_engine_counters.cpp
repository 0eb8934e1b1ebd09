// The counters against formulas worked out from the model's shapes (never against ridge's own
// output): 2*m*n*k per matmul, one decode step's weight bytes = ModelStats::decode_bytes_per_token
// (what `ridge info` reports), KV bytes read at position p, FLOPs per token = 2N + attention +
// the element-wise ops, per-layer records summing to the totals, prefill and decode kept apart.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/counters.h"
#include "engine/forward.h"
#include "engine/model.h"
#include "engine/session.h"
#include "kernels/cpu/matmul.h"
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

using test::load;
using test::Loaded;

const std::vector<std::string> kModels = {kStories, kSmol};
const Op kMatmulOps[] = {Op::Q, Op::K, Op::V, Op::O, Op::Gate, Op::Up, Op::Down};

// A session that has prefilled `prompt` tokens (ids 1, 2, ...) and then decoded `steps` more.
struct Ran {
    std::unique_ptr<Session> session;
    int seq = 0;
};
Ran run(const Engine& m, int prompt, int steps, DType kv = DType::F32, int max_rows = 256) {
    SessionOptions so;
    so.n_ctx = prompt + steps + 1;
    so.kv_type = kv;
    so.max_rows = max_rows;
    Ran r{std::make_unique<Session>(m, so), 0};
    r.seq = r.session->cache().new_sequence();
    std::vector<int32_t> ids;
    for (int i = 0; i < prompt; i++) ids.push_back(1 + i % (m.config().n_vocab - 1));
    if (prompt > 0) r.session->prefill(r.seq, ids);
    for (int i = 0; i < steps; i++) r.session->decode(r.seq, 1 + (prompt + i) % (m.config().n_vocab - 1));
    return r;
}

// Elements of the matrices a token is multiplied by: every layer's q, k, v, o, gate, up, down and
// the output head. That is every parameter except the norm weights and, when the output head is
// not tied to it, the token embedding table (looked up, not multiplied). Tied: the table is the head.
double matmul_params(const Engine& m) {
    const Config& c = m.config();
    double n = double(m.model().n_params()) - double(2 * c.n_layers + 1) * c.n_embd;  // less the norms
    if (m.model().output != m.model().token_embd) n -= double(m.model().token_embd->n_elements());
    return n;
}

// ---- 2*m*n*k ---------------------------------------------------------------------------------

TEST(Counters, EachProjectionCostsTwoMNK) {
    for (const std::string& path : kModels) {
        const Engine& m = load(path).engine();
        const Config& c = m.config();
        for (int T : {1, 7, 16}) {
            const Ran r = run(m, T, 0);
            const Counters& k = r.session->prefill_stats.counters;
            const double d = c.n_embd, L = c.n_layers;
            // (T x d) . (d x q_dim) and friends, summed over the layers.
            EXPECT_DOUBLE_EQ(k.op(Op::Q).cost.flops, L * 2 * T * c.q_dim() * d) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::K).cost.flops, L * 2 * T * c.kv_dim() * d) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::V).cost.flops, L * 2 * T * c.kv_dim() * d) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::O).cost.flops, L * 2 * T * d * c.q_dim()) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::Gate).cost.flops, L * 2 * T * c.n_ff * d) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::Up).cost.flops, L * 2 * T * c.n_ff * d) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::Down).cost.flops, L * 2 * T * d * c.n_ff) << path;
            // Logits for the last row only: (1 x d) . (d x n_vocab).
            EXPECT_DOUBLE_EQ(k.op(Op::OutputHead).cost.flops, 2.0 * d * c.n_vocab) << path;
            // Each weight matrix is read once per forward pass, whatever m is, in its stored format.
            EXPECT_DOUBLE_EQ(k.op(Op::Q).cost.weight_bytes,
                             L * c.q_dim() * double(row_bytes(m.model().layers[0].attn_q->type, c.n_embd)))
                << path;
            // The input: f32 rows, or on the fast path their 16-bit integer blocks (72 bytes per 32)
            // when T is below the tiled prefill's threshold.
            const bool q16 = (m.plan().layers[0].q.int_input && T < m.plan().tiled_min_rows);
            EXPECT_EQ(q16, path == kSmol && T < m.plan().tiled_min_rows);  // SmolLM2 is Q4_1; stories260K F32
            EXPECT_DOUBLE_EQ(k.op(Op::Q).cost.act_read, L * T * (q16 ? d / 32 * 72 : 4.0 * d)) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::Q).cost.act_written, L * 4.0 * T * c.q_dim()) << path;
        }
    }
}

// ---- weight bytes of a decode step = what `ridge info` reports --------------------------------

// ModelStats::decode_bytes_per_token: every tensor once, except the token embedding table, of
// which one row is read (plus the whole table as the output head when tied). The counters read
// the same by construction: each linear layer and norm once, the embedding row of the token, the
// head once; the definitions agree, so the numbers must be equal.
TEST(Counters, DecodeWeightBytesEqualModelStats) {
    for (const std::string& path : kModels) {
        const Loaded& l = load(path);
        const ModelStats stats = compute_stats(*l.file);
        const Ran r = run(l.model, 3, 1);
        const Counters& k = r.session->decode_stats.counters;
        EXPECT_DOUBLE_EQ(k.total().cost.weight_bytes, double(stats.decode_bytes_per_token)) << path;
        EXPECT_DOUBLE_EQ(k.op(Op::OutputHead).cost.weight_bytes, double(stats.output_head_bytes)) << path;
        EXPECT_DOUBLE_EQ(k.op(Op::Embed).cost.weight_bytes, double(stats.embedding_row_bytes)) << path;
        EXPECT_DOUBLE_EQ(l.model.weight_bytes_per_token(), double(stats.decode_bytes_per_token)) << path;
    }
}

TEST(Counters, SmolLM2Q41WeightsAre20BytesPer32) {
    const Engine& m = load(kSmol).engine();
    ASSERT_EQ(m.model().layers[0].attn_q->type, DType::Q4_1);
    const Ran r = run(m, 1, 1);
    const Config& c = m.config();
    const double q_weights = double(c.q_dim()) * c.n_embd;  // one layer's W_q
    EXPECT_DOUBLE_EQ(r.session->decode_stats.counters.layers[0][size_t(Op::Q)].cost.weight_bytes,
                     q_weights / 32 * 20);
}

// ---- KV cache bytes ---------------------------------------------------------------------------

// A decode step at position p reads keys and values 0..p of every layer and kv head:
// 2 * n_layers * n_kv_heads * head_dim * (p + 1) * bytes per value; it writes its own one.
TEST(Counters, KVBytesOfADecodeStepAtPositionP) {
    for (const std::string& path : kModels) {
        const Engine& m = load(path).engine();
        const Config& c = m.config();
        for (DType kv : {DType::F32, DType::F16}) {
            const double bpv = kv == DType::F32 ? 4 : 2;
            for (int p : {0, 1, 16, 40}) {
                // p tokens prefilled, then the decode step at position p.
                SessionOptions so;
                so.n_ctx = p + 1;
                so.kv_type = kv;
                Session s(m, so);
                const int seq = s.cache().new_sequence();
                if (p > 0) s.prefill(seq, std::vector<int32_t>(size_t(p), 1));
                s.decode(seq, 2);
                const Counters& k = s.decode_stats.counters;
                const double per_key = double(c.n_layers) * c.n_kv_heads * c.head_dim * bpv;
                const double read = k.op(Op::AttnScores).cost.kv_read + k.op(Op::AttnMix).cost.kv_read;
                EXPECT_DOUBLE_EQ(read, 2 * per_key * (p + 1)) << path << " p " << p;
                EXPECT_DOUBLE_EQ(k.op(Op::AttnScores).cost.kv_read, per_key * (p + 1)) << "keys";
                EXPECT_DOUBLE_EQ(k.op(Op::AttnMix).cost.kv_read, per_key * (p + 1)) << "values";
                EXPECT_DOUBLE_EQ(k.total().cost.kv_written, 2 * per_key) << path;
                EXPECT_DOUBLE_EQ(k.op(Op::KVStore).cost.kv_written, 2 * per_key) << path;
                EXPECT_DOUBLE_EQ(k.total().cost.kv_read, read) << "only attention reads the cache";
            }
        }
    }
}

// ---- FLOPs per token ---------------------------------------------------------------------------

// A decode step at position p: FLOPs = 2N (N = matmul_params: the matrices multiplied, head
// included) + attention (4 * head_dim + 4) * n_layers * n_heads * (p + 1) (q.k and p.v, 2 * head_dim
// each per key and head, and 4 for the softmax) + the element-wise ops (norms, rope, swiglu,
// residual adds; the embedding lookup and the KV store do no arithmetic).
TEST(Counters, DecodeFlopsAreTwoNPlusAttention) {
    for (const std::string& path : kModels) {
        const Engine& m = load(path).engine();
        const Config& c = m.config();
        for (int p : {0, 9, 30}) {
            const Ran d = run(m, p, 1);  // p tokens prefilled, then the decode step at position p
            const Counters& k = d.session->decode_stats.counters;
            const double N = matmul_params(m), L = c.n_layers, H = c.n_heads, hd = c.head_dim;
            double matmul = k.op(Op::OutputHead).cost.flops;
            for (Op op : kMatmulOps) matmul += k.op(op).cost.flops;
            EXPECT_DOUBLE_EQ(matmul, 2 * N) << path;
            const double attention = 4 * L * H * hd * (p + 1) + 4 * L * H * (p + 1);
            EXPECT_DOUBLE_EQ(k.op(Op::AttnScores).cost.flops + k.op(Op::AttnMix).cost.flops, attention) << path;
            EXPECT_DOUBLE_EQ(k.op(Op::AttnMix).cost.flops, 2 * L * H * hd * (p + 1)) << path;
            const double d_ = c.n_embd;
            const double elementwise = 4 * d_ * (2 * L + 1)                                       // norms
                                       + 6.0 * L * (c.n_heads + c.n_kv_heads) * (c.rope_dim / 2)  // rope
                                       + 5.0 * L * c.n_ff                                       // swiglu
                                       + 2.0 * L * d_;                                          // residuals
            // On the fast path every matmul input is quantized once (3 FLOPs per element): x for
            // q/k/v and for gate/up, attn for o, act for down; the final x for the logits.
            const double quantize = m.plan().layers[0].q.int_input
                                        ? 3.0 * (L * (2 * d_ + c.q_dim() + c.n_ff) + d_) : 0.0;
            EXPECT_DOUBLE_EQ(k.op(Op::Quantize).cost.flops, quantize) << path;
            EXPECT_DOUBLE_EQ(k.total().cost.flops, 2 * N + attention + elementwise + quantize) << path;
            // "about 2N": on SmolLM2 the element-wise ops are under 1% (stories260K, d = 64, is
            // small enough for them to reach 2%).
            EXPECT_LT(elementwise, (path == kSmol ? 0.01 : 0.05) * k.total().cost.flops) << path;
        }
    }
}

// ---- records add up ----------------------------------------------------------------------------

TEST(Counters, LayersAndOpsSumToTheTotal) {
    const Engine& m = load(kSmol).engine();
    const Ran r = run(m, 6, 3);
    for (const Counters* k : {&r.session->prefill_stats.counters, &r.session->decode_stats.counters}) {
        ASSERT_EQ(k->layers.size(), size_t(m.config().n_layers));
        const OpRecord total = k->total();
        OpRecord by_layer = k->layer(-1), by_op;
        for (int l = 0; l < m.config().n_layers; l++) by_layer += k->layer(l);
        for (size_t i = 0; i < kNumOps; i++) by_op += k->op(Op(i));
        for (const OpRecord* s : {&by_layer, &by_op}) {
            EXPECT_NEAR(s->cost.flops, total.cost.flops, 1e-9 * total.cost.flops);
            EXPECT_NEAR(s->cost.bytes(), total.cost.bytes(), 1e-9 * total.cost.bytes());
            EXPECT_NEAR(s->cost.kv_read, total.cost.kv_read, 1e-9 * total.cost.kv_read);
            EXPECT_NEAR(s->seconds, total.seconds, 1e-9);
            EXPECT_EQ(s->calls, total.calls);
        }
        // Every layer has the same shapes and types, so the same cost; outside the layers only
        // the embedding, final norm, the head's quantized input and the output head.
        for (int l = 1; l < m.config().n_layers; l++)
            EXPECT_DOUBLE_EQ(k->layer(l).cost.bytes(), k->layer(0).cost.bytes()) << "layer " << l;
        for (size_t i = 0; i < kNumOps; i++) {
            const Op op = Op(i);
            const bool outside = op == Op::Embed || op == Op::Norm || op == Op::Quantize || op == Op::OutputHead;
            EXPECT_EQ(k->outside[i].calls > 0, outside) << op_name(op);
            if (op == Op::Bias) {
                EXPECT_EQ(k->op(op).calls, 0);  // a model without biases has none
            } else {
                EXPECT_GT(k->op(op).calls, 0) << op_name(op);
            }
            EXPECT_GE(k->op(op).seconds, 0.0) << op_name(op);
        }
    }
    // The kernels' time is inside the phase's wall time.
    EXPECT_LE(r.session->decode_stats.counters.total().seconds, r.session->decode_stats.seconds);
}

// ---- prefill and decode apart ------------------------------------------------------------------

TEST(Counters, PrefillAndDecodeAreSeparate) {
    const Engine& m = load(kStories).engine();
    const Config& c = m.config();
    const int K = int(m.plan().tiled_min_rows), T = 2 * K + 4, n = 5;
    const Ran r = run(m, T, n, DType::F32, /*max_rows=*/K);  // prefill in chunks of K, K, 4
    const PhaseStats& pre = r.session->prefill_stats;
    const PhaseStats& dec = r.session->decode_stats;
    EXPECT_EQ(pre.tokens, T);
    EXPECT_EQ(pre.calls, 3);
    EXPECT_EQ(dec.tokens, n);
    EXPECT_EQ(dec.calls, n);
    const double per_row = 2.0 * c.q_dim() * c.n_embd * c.n_layers;
    EXPECT_DOUBLE_EQ(pre.counters.op(Op::Q).cost.flops, T * per_row);
    EXPECT_DOUBLE_EQ(dec.counters.op(Op::Q).cost.flops, n * per_row);
    // One weight read per forward pass: three in prefill (its chunks), one per decode step.
    const double wq = double(m.model().layers[0].attn_q->nbytes) * c.n_layers;
    EXPECT_DOUBLE_EQ(pre.counters.op(Op::Q).cost.weight_bytes, 3 * wq);
    EXPECT_DOUBLE_EQ(dec.counters.op(Op::Q).cost.weight_bytes, n * wq);
    // Prefill: the chunks of K (tiled_min_rows()) take the blocked attention, which reads each
    // position it sees once (K, then 2K); the chunk of 4 attends row by row to 2K+1 .. 2K+4 keys.
    // Decode attends to T+1 + ... + T+n.
    const double kv_row = 2.0 * c.n_layers * c.kv_dim() * 4;
    EXPECT_DOUBLE_EQ(pre.counters.total().cost.kv_read, kv_row * (K + 2 * K + (8 * K + 10)));
    EXPECT_DOUBLE_EQ(dec.counters.total().cost.kv_read, kv_row * ((T + n) * (T + n + 1) / 2 - T * (T + 1) / 2));
    EXPECT_EQ(pre.counters.op(Op::OutputHead).calls, 1);  // logits for the last prompt row only
    EXPECT_EQ(dec.counters.op(Op::OutputHead).calls, n);
}

TEST(Counters, CountingOffCountsNothingAndChangesNoResult) {
    const Engine& m = load(kStories).engine();
    SessionOptions so;
    so.n_ctx = 16;
    Session on(m, so);
    so.count = false;
    Session off(m, so);
    const std::vector<int32_t> ids = {1, 5, 9, 13};
    const int a = on.cache().new_sequence(), b = off.cache().new_sequence();
    const float* la = on.prefill(a, ids);
    const float* lb = off.prefill(b, ids);
    for (int i = 0; i < m.config().n_vocab; i++) ASSERT_EQ(la[i], lb[i]) << i;
    EXPECT_EQ(off.prefill_stats.counters.total().calls, 0);
    EXPECT_EQ(off.prefill_stats.tokens, 4);  // the phase's tokens and time are still kept
    EXPECT_GT(on.prefill_stats.counters.total().calls, 0);
}

}  // namespace
}  // namespace ridge

namespace ridge {
namespace {

// A backend whose every pass is "replayed" (run() returns without calling the ops, as a GPU
// replaying a CUDA graph does); everything else is the CPU backend's.
class ReplayingBackend final : public Backend {
public:
    explicit ReplayingBackend(const Engine& e) : cpu_(make_cpu_backend(e)) {}
    Activations begin(const Batch& b, KVCache& c, Workspace& ws) override { return cpu_->begin(b, c, ws); }
    bool run(bool, const std::function<void()>&) override { return false; }
    void end(Workspace& ws) override { cpu_->end(ws); }
    void read(const float* buf, int64_t n, float* host) override { cpu_->read(buf, n, host); }
    Cost embed(const TensorView& t, float* o) override { return cpu_->embed(t, o); }
    Cost rmsnorm(const float* x, const TensorView& w, int64_t m, float* y) override { return cpu_->rmsnorm(x, w, m, y); }
    Cost add_bias(float* x, const TensorView& b, int64_t m) override { return cpu_->add_bias(x, b, m); }
    Cost rope(float* x, int h) override { return cpu_->rope(x, h); }
    Cost quantize(const float* x, int64_t m, int64_t k) override { return cpu_->quantize(x, m, k); }
    void matmul_rows(const LinearOut* o, int n, const float* x, int64_t m, Cost* c) override { cpu_->matmul_rows(o, n, x, m, c); }
    Cost matmul_tiled(const MatmulPlan& p, const float* x, int64_t m, float* y) override { return cpu_->matmul_tiled(p, x, m, y); }
    Cost kv_store(const KVLayer& kv, const float* k, const float* v) override { return cpu_->kv_store(kv, k, v); }
    AttentionCost attention(const RowRun& r, const KVLayer& kv, const float* q, float* o) override {
        return cpu_->attention(r, kv, q, o);
    }
    Cost swiglu(const float* g, const float* u, int64_t n, float* o) override { return cpu_->swiglu(g, u, n, o); }
    Cost add(float* x, const float* y, int64_t n) override { return cpu_->add(x, y, n); }

private:
    std::unique_ptr<Backend> cpu_;
};

// A pass the backend replayed is counted on paper (the costs-only backend), op by op: the same
// calls, FLOPs and bytes as the kernels return running it. SmolLM2's decode rows take the integer
// kernels (quantize ops); a 50-row chunk is tiled; rows of other sequences join a decode row.
TEST(Counters, AReplayedPassCountsWhatRunningItCounts) {
    const Engine& e = load(kSmol).engine();
    const Config& c = e.config();
    KVCache ran_cache(c, 128, DType::F32), replayed_cache(c, 128, DType::F32);
    Workspace ran, replayed;
    replayed.backend = std::make_unique<ReplayingBackend>(e);
    replayed.engine = &e;
    std::vector<int> seqs;
    for (int i = 0; i < 3; i++) seqs.push_back(ran_cache.new_sequence()), replayed_cache.new_sequence();
    auto batch_of = [&](KVCache& cache, const std::vector<std::pair<int, int>>& rows) {  // (seq, rows)
        Batch b;
        for (auto [seq, n] : rows) {
            const int first = cache.append(seq, n);
            for (int i = 0; i < n; i++) b.add(int32_t(100 + 7 * i), seq, first + i, i == n - 1);
        }
        return b;
    };
    for (const auto& rows : std::vector<std::vector<std::pair<int, int>>>{{{0, 50}}, {{0, 1}, {1, 5}}, {{0, 1}, {1, 1}, {2, 3}}}) {
        Counters a, b;
        forward(e, ran_cache, batch_of(ran_cache, rows), ran, &a);
        forward(e, replayed_cache, batch_of(replayed_cache, rows), replayed, &b);
        for (size_t o = 0; o < kNumOps; o++) {
            SCOPED_TRACE(op_name(Op(o)));
            EXPECT_EQ(a.op(Op(o)).calls, b.op(Op(o)).calls);
            test::expect_cost_near(a.op(Op(o)).cost, b.op(Op(o)).cost, "whole pass");
            EXPECT_EQ(b.op(Op(o)).seconds, 0.0);  // replayed: no op is timed
        }
        ASSERT_EQ(a.layers.size(), b.layers.size());
        for (size_t l = 0; l < a.layers.size(); l++) test::expect_cost_near(a.layer(int(l)).cost, b.layer(int(l)).cost, "layer");
    }
}

}  // namespace
}  // namespace ridge
