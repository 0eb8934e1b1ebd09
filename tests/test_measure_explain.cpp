// Tests for engine/explain: the costs worked out on paper equal, op by op and layer by layer, what
// the counters record in a real forward pass of the same shape (stories260K and SmolLM2, prefill
// and decode, f32 and f16 KV cache); SmolLM2's shape strings; the KV cache and memory formulas;
// the roofline verdicts and least times on hand numbers; bad options as ridge::Error.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "measure/explain.h"
#include "engine/forward.h"
#include "kernels/cpu/matmul.h"
#include "engine/model.h"
#include "engine/session.h"
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

using test::expect_cost_near;
using test::load;
using test::Loaded;

// explain's ops summed per counters op.
std::array<cpu::Cost, kNumOps> by_op(const std::vector<ExplainOp>& ops) {
    std::array<cpu::Cost, kNumOps> s{};
    for (const ExplainOp& op : ops) s[size_t(op.op)] += op.cost;
    return s;
}

// A pass on paper against the counters of the same pass run for real: layer 0's ops, every
// layer's, the ops outside the layers, each op over the whole pass, and the total.
void expect_phase_matches(const ExplainPhase& p, const Counters& k, int n_layers, const std::string& what) {
    ASSERT_EQ(k.layers.size(), size_t(n_layers)) << what;
    const auto layer0 = by_op(p.layer), outside = by_op(p.outside);
    cpu::Cost layers;
    for (int l = 0; l < n_layers; l++) layers += k.layer(l).cost;
    for (size_t i = 0; i < kNumOps; i++) {
        const std::string op = what + " " + op_name(Op(i));
        expect_cost_near(layer0[i], k.layers[0][i].cost, op + " (layer 0)");
        for (int l = 1; l < n_layers; l++) expect_cost_near(layer0[i], k.layers[size_t(l)][i].cost, op);
        expect_cost_near(outside[i], k.outside[i].cost, op + " (outside)");
        expect_cost_near(p.by_op[i], k.op(Op(i)).cost, op + " (pass)");
        // Every op forward() called is in explain's lists, and no other.
        bool listed = false;
        for (const auto* ops : {&p.layer, &p.outside})
            for (const ExplainOp& x : *ops) listed = listed || x.op == Op(i);
        EXPECT_EQ(k.op(Op(i)).calls > 0, listed) << op;
    }
    expect_cost_near(p.layers, layers, what + " layers");
    expect_cost_near(p.total, k.total().cost, what + " total");
}

// Prefill of T tokens as one pass, then one decode step at position c - 1 (after c - 1 tokens).
TEST(Explain, EachOpCostsWhatTheCountersRecord) {
    for (const std::string& path : {kStories, kSmol}) {
        const Loaded& l = load(path);
        for (DType kv : {DType::F32, DType::F16}) {
            for (auto [T, c] : {std::pair{1, 1}, std::pair{7, 20}, std::pair{33, 64}}) {
                ExplainOptions eo;
                eo.tokens = T;
                eo.context = c;
                eo.kv_type = kv;
                const Explain e = explain_model(*l.file, eo);
                const std::string what = path + " T " + std::to_string(T) + " c " + std::to_string(c) +
                                         (kv == DType::F16 ? " f16" : " f32");

                SessionOptions so;
                so.n_ctx = std::max(T, c);
                so.kv_type = kv;
                so.max_rows = T;  // one pass
                Session pre(l.engine(), so);
                std::vector<int32_t> ids;
                for (int i = 0; i < T; i++) ids.push_back(1 + i % 100);
                pre.prefill(pre.cache().new_sequence(), ids);
                ASSERT_EQ(pre.prefill_stats.calls, 1);
                expect_phase_matches(e.prefill, pre.prefill_stats.counters, l.model.config.n_layers, what + " prefill");

                Session dec(l.engine(), so);
                const int seq = dec.cache().new_sequence();
                if (c > 1) dec.prefill(seq, std::vector<int32_t>(size_t(c - 1), 3));
                dec.decode(seq, 5);
                expect_phase_matches(e.decode, dec.decode_stats.counters, l.model.config.n_layers, what + " decode");
            }
        }
    }
}

// A decode step reads each weight once and one embedding row: what `ridge info` reports.
TEST(Explain, DecodeWeightBytesAreModelStats) {
    for (const std::string& path : {kStories, kSmol}) {
        const Loaded& l = load(path);
        const ModelStats stats = compute_stats(*l.file);
        const Explain e = explain_model(*l.file, ExplainOptions{});
        EXPECT_DOUBLE_EQ(e.decode.total.weight_bytes, double(stats.decode_bytes_per_token)) << path;
        EXPECT_EQ(e.n_params, stats.n_params);
        EXPECT_EQ(e.weight_bytes, stats.weight_bytes);
        EXPECT_EQ(e.decode.rows, 1);
        EXPECT_EQ(e.decode.first_pos, 511);  // c = 512 by default
        EXPECT_EQ(e.decode.n_keys, 512);
    }
}

// ---- shapes -------------------------------------------------------------------------------------

TEST(Explain, SmolLM2Shapes) {
    const Loaded& l = load(kSmol);
    ExplainOptions eo;
    eo.tokens = 192;  // past the tiled threshold (40, or 112 with the AVX-512 integer kernel)
    eo.context = 512;
    const Explain e = explain_model(*l.file, eo);
    EXPECT_FALSE(e.layers_differ);  // every layer Q4_1

    struct Want {
        const char* name;
        Op op;
        const char* shape;
        const char* type;
    };
    const std::vector<Want> decode = {
        {"attn_norm", Op::Norm, "rmsnorm x(1×576)", "F32"},
        {"quantize", Op::Quantize, "x(1×576) → int16", "F32"},
        {"q", Op::Q, "x(1×576) · Wq(576×576)", "Q4_1"},
        {"k", Op::K, "x(1×576) · Wk(576×192)", "Q4_1"},
        {"v", Op::V, "x(1×576) · Wv(576×192)", "Q4_1"},
        {"rope", Op::Rope, "q(1×576), k(1×192)", "F32"},
        {"kv_store", Op::KVStore, "k, v(1×192) → cache", "F32"},
        {"attn_scores", Op::AttnScores, "9h × q(1×64) · Kᵀ(64×512)", "F32"},
        {"attn_mix", Op::AttnMix, "9h × p(1×512) · V(512×64)", "F32"},
        {"quantize", Op::Quantize, "attn(1×576) → int16", "F32"},
        {"o", Op::O, "attn(1×576) · Wo(576×576)", "Q4_1"},
        {"attn_resid", Op::Residual, "x(1×576) += attn_out", "F32"},
        {"ffn_norm", Op::Norm, "rmsnorm x(1×576)", "F32"},
        {"quantize", Op::Quantize, "x(1×576) → int16", "F32"},
        {"gate", Op::Gate, "x(1×576) · Wgate(576×1536)", "Q4_1"},
        {"up", Op::Up, "x(1×576) · Wup(576×1536)", "Q4_1"},
        {"swiglu", Op::Swiglu, "silu(gate) * up(1×1536)", "F32"},
        {"quantize", Op::Quantize, "act(1×1536) → int16", "F32"},
        {"down", Op::Down, "act(1×1536) · Wdown(1536×576)", "Q4_1"},
        {"ffn_resid", Op::Residual, "x(1×576) += ffn_out", "F32"},
    };
    ASSERT_EQ(e.decode.layer.size(), decode.size());
    for (size_t i = 0; i < decode.size(); i++) {
        EXPECT_EQ(e.decode.layer[i].name, decode[i].name);
        EXPECT_EQ(e.decode.layer[i].op, decode[i].op) << decode[i].name;
        EXPECT_EQ(e.decode.layer[i].shape, decode[i].shape);
        EXPECT_EQ(e.decode.layer[i].type, decode[i].type) << decode[i].name;
    }
    // SmolLM2 ties its output head to the Q8_0 embedding table.
    ASSERT_EQ(e.decode.outside.size(), 4u);
    EXPECT_EQ(e.decode.outside[0].name, "embedding");
    EXPECT_EQ(e.decode.outside[0].shape, "1 row of E(49152×576)");
    EXPECT_EQ(e.decode.outside[1].shape, "rmsnorm x(1×576)");
    EXPECT_EQ(e.decode.outside[2].op, Op::Quantize);
    EXPECT_EQ(e.decode.outside[3].name, "logits");
    EXPECT_EQ(e.decode.outside[3].op, Op::OutputHead);
    EXPECT_EQ(e.decode.outside[3].shape, "x(1×576) · Eᵀ(576×49152)");
    EXPECT_EQ(e.decode.outside[3].type, "Q8_0");

    // Prefill of 192 rows: the same ops on (192 × k) inputs, causal attention over 192 positions,
    // the embedding 192 rows, the logits for the last row only. Prefill rows take the tiled kernel
    // (192 >= the model's tiled_min_rows()): the integer GEMM where the build has it, with the same
    // quantize steps as decode; else v6 on f32 rows, with no quantize step but before the logits
    // of the one last row.
    const bool tiled_int = cpu::v7_types(DType::Q4_1);
    EXPECT_EQ(e.prefill.layer.size(), tiled_int ? decode.size() : decode.size() - 4);
    auto prefill_op = [&](const std::string& name) -> const ExplainOp& {
        for (const ExplainOp& op : e.prefill.layer)
            if (op.name == name) return op;
        throw Error("no prefill op " + name);
    };
    EXPECT_EQ(prefill_op("q").shape, "x(192×576) · Wq(576×576)");
    EXPECT_EQ(prefill_op("down").shape, "act(192×1536) · Wdown(1536×576)");
    EXPECT_EQ(prefill_op("attn_scores").shape, "9h × q(192×64) · Kᵀ(64×192) causal");
    EXPECT_EQ(prefill_op("attn_mix").shape, "9h × p(192×192) · V(192×64) causal");
    EXPECT_EQ(e.prefill.layer[1].shape, tiled_int ? "x(192×576) → int16" : "x(192×576) · Wq(576×576)");
    EXPECT_EQ(e.prefill.outside[0].shape, "192 rows of E(49152×576)");
    EXPECT_EQ(e.prefill.outside[2].op, Op::Quantize);
    EXPECT_EQ(e.prefill.outside[3].shape, "x(1×576) · Eᵀ(576×49152)");
    // --exact: the same ops without the quantize steps, each matmul reading f32 rows.
    eo.exact = true;
    const Explain x = explain_model(*l.file, eo);
    ASSERT_EQ(x.decode.layer.size(), decode.size() - 4);
    for (const ExplainOp& op : x.decode.layer) EXPECT_NE(op.op, Op::Quantize);
    EXPECT_DOUBLE_EQ(x.decode.layer[1].cost.act_read, 4.0 * 576);
    EXPECT_DOUBLE_EQ(e.decode.layer[2].cost.act_read, 576 / 32 * 72.0);
    EXPECT_EQ(e.prefill.n_keys, 192 * 193 / 2);

    // The KV type is the attention's storage type.
    eo.kv_type = DType::F16;
    const Explain h = explain_model(*l.file, eo);
    EXPECT_EQ(h.decode.layer[5].type, "F16");
    EXPECT_EQ(h.decode.layer[6].type, "F16");
}

// ---- KV cache and memory ------------------------------------------------------------------------

TEST(Explain, KVCacheBytesAndMemoryToRun) {
    for (const std::string& path : {kStories, kSmol}) {
        const Loaded& l = load(path);
        const Config& c = l.model.config;
        for (auto [T, ctx] : {std::pair{1, 512}, std::pair{600, 100}, std::pair{16, 16}}) {
            for (DType kv : {DType::F32, DType::F16}) {
                ExplainOptions eo;
                eo.tokens = T;
                eo.context = ctx;
                eo.kv_type = kv;
                const Explain e = explain_model(*l.file, eo);
                const int64_t positions = std::max(T, ctx);
                EXPECT_EQ(e.n_ctx, positions);
                // 2 (K and V) * n_layers * n_kv_heads * head_dim * positions * bytes per value.
                const uint64_t values = 2ull * c.n_layers * c.n_kv_heads * c.head_dim * uint64_t(positions);
                EXPECT_EQ(e.kv_bytes_f32, values * 4) << path;
                EXPECT_EQ(e.kv_bytes_f16, values * 2) << path;
                // The activations: forward()'s Workspace once reserved for T rows, logits for one.
                Workspace ws;
                ws.reserve(c, T, 1);
                const uint64_t ws_bytes =
                    sizeof(float) * (ws.x.size() + ws.x_norm.size() + ws.q.size() + ws.k.size() + ws.v.size() +
                                     ws.attn.size() + ws.attn_out.size() + ws.ffn_gate.size() + ws.ffn_up.size() +
                                     ws.ffn_act.size() + ws.ffn_out.size() + ws.out_norm.size() + ws.logits.size() +
                                     ws.rope.cos_t.size() + ws.rope.sin_t.size()) +
                    sizeof(int32_t) * (ws.out_seq.size() + ws.out_pos.size()) +
                    sizeof(int64_t) * ws.slots.size() + sizeof(AttentionRow) * ws.attn_rows.size() +
                    sizeof(int16_t) * ws.x_q.q.size() + sizeof(float) * (ws.x_q.d.size() + ws.x_q.sum.size());
                EXPECT_EQ(e.activation_bytes, ws_bytes) << path << " T " << T;
                EXPECT_EQ(workspace_bytes(c, T, 1), ws_bytes);
                EXPECT_EQ(e.memory_bytes(), e.weight_bytes + (kv == DType::F32 ? values * 4 : values * 2) + ws_bytes);
            }
        }
    }
}

// ---- the verdicts on hand numbers ---------------------------------------------------------------

TEST(Explain, RooflineBoundAndLeastTimeByHand) {
    Ceilings ceil;
    ceil.threads = 1;
    ceil.bandwidth_gbs = 20.0;
    ceil.fma_gflops = 100.0;  // I* = 5 FLOP/byte
    auto cost = [](double flops, double weights, double kv, double act) {
        cpu::Cost c;
        c.flops = flops;
        c.weight_bytes = weights;
        c.kv_read = kv;
        c.act_read = act;
        return c;
    };
    // A matvec: 2 MFLOP over 1 MB, I = 2: memory-bound, 1e6 B / 20e9 B/s = 50 µs (compute: 20 µs).
    const cpu::Cost mv = cost(2e6, 1e6, 0, 4e3);
    EXPECT_EQ(roofline_bound(mv, ceil), Bound::Memory);
    EXPECT_DOUBLE_EQ(min_seconds(mv, ceil), 5e-5);
    // A matmul of 64 rows: 128 MFLOP over the same 1 MB, I = 128: compute-bound, 1.28e8 / 1e11 = 1.28 ms.
    const cpu::Cost mm = cost(1.28e8, 1e6, 0, 0);
    EXPECT_EQ(roofline_bound(mm, ceil), Bound::Compute);
    EXPECT_DOUBLE_EQ(min_seconds(mm, ceil), 1.28e-3);
    // Exactly at the ridge point counts as compute-bound; KV bytes count like weight bytes.
    EXPECT_EQ(roofline_bound(cost(5e6, 0, 1e6, 0), ceil), Bound::Compute);
    EXPECT_EQ(roofline_bound(cost(4.99e6, 0, 1e6, 0), ceil), Bound::Memory);
    EXPECT_DOUBLE_EQ(min_seconds(cost(5e6, 0, 1e6, 0), ceil), 5e-5);
    // Only activations (rope, swiglu, the residual adds): in cache, the least time is compute's.
    const cpu::Cost ew = cost(3e3, 0, 0, 1e4);
    EXPECT_EQ(roofline_bound(ew, ceil), Bound::Cache);
    EXPECT_DOUBLE_EQ(min_seconds(ew, ceil), 3e-8);
    EXPECT_STREQ(bound_name(Bound::Memory), "memory");
    EXPECT_STREQ(bound_name(Bound::Compute), "compute");
    EXPECT_STREQ(bound_name(Bound::Cache), "cache");
}

// On SmolLM2 with I* = 5: a decode step's Q4_1 matvecs (I = 3.2) are memory-bound, the same
// matrices against 192 rows (I = 614) compute-bound.
TEST(Explain, SmolLM2VerdictsFollowTheRidgePoint) {
    const Loaded& l = load(kSmol);
    Ceilings ceil;
    ceil.bandwidth_gbs = 20.0;
    ceil.fma_gflops = 100.0;
    ExplainOptions eo;
    eo.tokens = 192;  // a tiled prefill (past the threshold)
    const Explain e = explain_model(*l.file, eo);
    const ExplainOp& q = e.decode.layer[2];
    ASSERT_EQ(q.name, "q");
    EXPECT_DOUBLE_EQ(q.cost.intensity(), 2.0 * 32 / 20);  // 2 FLOPs per 20/32 byte
    EXPECT_EQ(roofline_bound(q.cost, ceil), Bound::Memory);
    const ExplainOp& q_prefill = e.prefill.layer[cpu::v7_types(DType::Q4_1) ? 2 : 1];  // after its quantize step, if any
    ASSERT_EQ(q_prefill.name, "q");
    EXPECT_EQ(roofline_bound(q_prefill.cost, ceil), Bound::Compute);
    EXPECT_EQ(roofline_bound(e.decode.total, ceil), Bound::Memory);
    ASSERT_EQ(e.decode.layer[5].name, "rope");
    EXPECT_EQ(roofline_bound(e.decode.layer[5].cost, ceil), Bound::Cache);
    EXPECT_EQ(roofline_bound(e.decode.layer[1].cost, ceil), Bound::Cache);  // quantize
    ceil.fma_gflops = 50.0;  // I* = 2.5: the decode matvecs are compute-bound now
    EXPECT_EQ(roofline_bound(q.cost, ceil), Bound::Compute);
}

// ---- bad options --------------------------------------------------------------------------------

TEST(Explain, BadOptionsThrow) {
    const Loaded& l = load(kStories);
    auto with = [](int T, int c, DType kv) {
        ExplainOptions o;
        o.tokens = T;
        o.context = c;
        o.kv_type = kv;
        return o;
    };
    EXPECT_THROW(explain_model(*l.file, with(0, 16, DType::F32)), Error);
    EXPECT_THROW(explain_model(*l.file, with(-3, 16, DType::F32)), Error);
    EXPECT_THROW(explain_model(*l.file, with(1, 0, DType::F32)), Error);
    EXPECT_THROW(explain_model(*l.file, with(1, -1, DType::F32)), Error);
    EXPECT_THROW(explain_model(*l.file, with(1, 16, DType::Q8_0)), Error);
    EXPECT_THROW(explain_model(*l.file, with(1, 16, DType::BF16)), Error);
    EXPECT_NO_THROW(explain_model(*l.file, with(1, 1, DType::F16)));
}

}  // namespace
}  // namespace ridge
