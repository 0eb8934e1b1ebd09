// Explain (see explain.h): walks the ops of forward() in order, asking each kernel's *_cost
// function what it would cost for the given rows and positions, and sums them per layer and pass.
// Nothing here runs a kernel or reads a clock.
#include "engine/explain.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "engine/kv_cache.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_int.h"
#include "kernels/cpu/ops.h"
#include "weights/error.h"
#include "weights/model_stats.h"

namespace ridge {

namespace {

// "name(a×b)". (Built by appending: GCC 12 warns falsely (-Wrestrict) on "literal" + std::string&&.)
std::string dims(std::string name, int64_t a, int64_t b) {
    name += "(";
    name += std::to_string(a);
    name += "×";
    name += std::to_string(b);
    name += ")";
    return name;
}

std::string type_name(DType t) { return std::string(dtype_name(t)); }

// in (m x k) · W (k x n), W stored as a GGUF {k, n} tensor; q16: the input given as 16-bit integers.
ExplainOp matmul_op(Op kind, const std::string& name, const std::string& in, const std::string& w_name,
                    const TensorView& W, int64_t m, bool q16) {
    const int64_t k = W.ne(0), n = W.ne(1);
    return {kind, name, dims(dims(in, m, k) + " · " + w_name, k, n), type_name(W.type), cpu::matmul_cost(W, m, q16)};
}

// Appends forward()'s 16-bit integer copy of the input `in` (m x k) when the model's fast path makes one for
// these weights; returns whether it did (the matmuls then take it).
bool quantize_op(std::vector<ExplainOp>& ops, const Plan& plan, std::initializer_list<const MatmulPlan*> weights,
                 const std::string& in, int64_t m, int64_t k) {
    bool int_input = false;
    for (const MatmulPlan* w : weights) int_input = int_input || w->int_input;
    if (m >= plan.tiled_min_rows || !int_input) return false;
    ops.push_back({Op::Quantize, "quantize", dims(in, m, k) + " → int16", "F32", cpu::quantize_rows_cost(m, k)});
    return true;
}

ExplainOp f32_op(Op kind, const std::string& name, const std::string& shape, const cpu::Cost& cost) {
    return {kind, name, shape, "F32", cost};
}

// The ops of one layer for `rows` rows at positions first_pos.., in forward() order.
std::vector<ExplainOp> layer_ops(const Model& model, const Plan& plan, int l, int64_t rows, int64_t n_keys,
                                 int64_t first_pos, DType kv_type) {
    const LayerWeights& L = model.layers[size_t(l)];
    const LayerPlan& P = plan.layers[size_t(l)];
    const int64_t min_tiled = plan.tiled_min_rows;
    const Config& c = model.config;
    const int64_t m = rows, d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_ff = c.n_ff;
    const cpu::RopeParams rope{c.head_dim, c.rope_dim, c.rope_freq_base, c.rope_style};
    const cpu::AttentionShape heads{c.n_heads, c.n_kv_heads, c.head_dim};
    const std::string kv = type_name(kv_type);
    const int64_t seen = first_pos + m;  // positions the last row sees
    const std::string causal = m == 1 ? "" : " causal";
    // A chunk of min_tiled rows or more (a tiled run of forward()) takes the blocked
    // attention, which reads each key and value once for the whole chunk; shorter ones go row by
    // row (v3_split).
    const cpu::AttentionCost attn = m >= min_tiled
                                        ? cpu::attention_blocked_cost(m, first_pos + 1, int(kv_dim), kv_type, heads)
                                        : cpu::attention_cost(m, double(n_keys), int(kv_dim), kv_type, heads);
    const std::string h = std::to_string(c.n_heads) + "h × ";
    std::vector<ExplainOp> ops;
    ops.push_back(f32_op(Op::Norm, "attn_norm", dims("rmsnorm x", m, d), cpu::rmsnorm_cost(m, d)));
    bool q16 = quantize_op(ops, plan, {&P.q, &P.k, &P.v}, "x", m, d);
    ops.push_back(matmul_op(Op::Q, "q", "x", "Wq", *L.attn_q, m, q16));
    ops.push_back(matmul_op(Op::K, "k", "x", "Wk", *L.attn_k, m, q16));
    ops.push_back(matmul_op(Op::V, "v", "x", "Wv", *L.attn_v, m, q16));
    ops.push_back(f32_op(Op::Rope, "rope", dims(dims("q", m, q_dim) + ", k", m, kv_dim),
                         cpu::rope_cost(m, c.n_heads, rope) + cpu::rope_cost(m, c.n_kv_heads, rope)));
    ops.push_back({Op::KVStore, "kv_store", dims("k, v", m, kv_dim) + " → cache", kv, cpu::kv_store_cost(m, kv_dim, kv_type)});
    // One attention kernel, in its two products: the scores Q·Kᵀ/sqrt(head_dim) with their
    // softmax (reading every key), then the mix P·V (reading every value).
    ops.push_back({Op::AttnScores, "attn_scores", dims(dims(h + "q", m, c.head_dim) + " · Kᵀ", c.head_dim, seen) + causal,
                   kv, attn.scores});
    ops.push_back({Op::AttnMix, "attn_mix", dims(dims(h + "p", m, seen) + " · V", seen, c.head_dim) + causal, kv, attn.mix});
    q16 = quantize_op(ops, plan, {&P.o}, "attn", m, q_dim);
    ops.push_back(matmul_op(Op::O, "o", "attn", "Wo", *L.attn_output, m, q16));
    ops.push_back(f32_op(Op::Residual, "attn_resid", dims("x", m, d) + " += attn_out", cpu::add_cost(m * d)));
    ops.push_back(f32_op(Op::Norm, "ffn_norm", dims("rmsnorm x", m, d), cpu::rmsnorm_cost(m, d)));
    q16 = quantize_op(ops, plan, {&P.gate, &P.up}, "x", m, d);
    ops.push_back(matmul_op(Op::Gate, "gate", "x", "Wgate", *L.ffn_gate, m, q16));
    ops.push_back(matmul_op(Op::Up, "up", "x", "Wup", *L.ffn_up, m, q16));
    ops.push_back(f32_op(Op::Swiglu, "swiglu", dims("silu(gate) * up", m, n_ff), cpu::swiglu_cost(m * n_ff)));
    q16 = quantize_op(ops, plan, {&P.down}, "act", m, n_ff);
    ops.push_back(matmul_op(Op::Down, "down", "act", "Wdown", *L.ffn_down, m, q16));
    ops.push_back(f32_op(Op::Residual, "ffn_resid", dims("x", m, d) + " += ffn_out", cpu::add_cost(m * d)));
    return ops;
}

// Embedding lookup before the layers; final norm and logits (for m_out rows) after them.
std::vector<ExplainOp> outside_ops(const Model& model, const Plan& plan, int64_t rows, int64_t m_out) {
    const Config& c = model.config;
    // forward() normalizes each logits row with its own call.
    const cpu::Cost final_norm = cpu::Cost(cpu::rmsnorm_cost(1, c.n_embd)).scale(double(m_out));
    std::vector<ExplainOp> ops = {
        {Op::Embed, "embedding", dims(std::to_string(rows) + (rows == 1 ? " row" : " rows") + " of E", c.n_vocab, c.n_embd),
         type_name(model.token_embd->type), cpu::embed_cost(*model.token_embd, rows)},
        f32_op(Op::Norm, "final_norm", dims("rmsnorm x", m_out, c.n_embd), final_norm),
    };
    const bool q16 = quantize_op(ops, plan, {&plan.output}, "x", m_out, c.n_embd);
    ops.push_back(matmul_op(Op::OutputHead, "logits", "x", c.tied_output ? "Eᵀ" : "Wout", *model.output, m_out, q16));
    return ops;
}

bool same_types(const LayerWeights& a, const LayerWeights& b) {
    const TensorView* x[] = {a.attn_q, a.attn_k, a.attn_v, a.attn_output, a.ffn_gate, a.ffn_up, a.ffn_down};
    const TensorView* y[] = {b.attn_q, b.attn_k, b.attn_v, b.attn_output, b.ffn_gate, b.ffn_up, b.ffn_down};
    for (size_t i = 0; i < std::size(x); i++)
        if (x[i]->type != y[i]->type) return false;
    return true;
}

// rows consecutive rows of one sequence starting at first_pos; logits for the last row only.
ExplainPhase make_phase(const std::string& name, const Model& model, const Plan& plan, int64_t rows, int64_t first_pos,
                        DType kv_type) {
    const Config& c = model.config;
    ExplainPhase p;
    p.name = name;
    p.rows = rows;
    p.first_pos = first_pos;
    // Row i sees positions 0..first_pos+i: the sum of (first_pos + i + 1).
    p.n_keys = rows * (first_pos + 1) + rows * (rows - 1) / 2;
    for (int l = 0; l < c.n_layers; l++) {
        std::vector<ExplainOp> ops = layer_ops(model, plan, l, rows, p.n_keys, first_pos, kv_type);
        for (const ExplainOp& op : ops) {
            p.layers += op.cost;
            p.by_op[size_t(op.op)] += op.cost;
        }
        if (l == 0) p.layer = std::move(ops);
    }
    p.outside = outside_ops(model, plan, rows, 1);
    p.total = p.layers;
    for (const ExplainOp& op : p.outside) {
        p.total += op.cost;
        p.by_op[size_t(op.op)] += op.cost;
    }
    return p;
}

}  // namespace

uint64_t Explain::memory_bytes() const {
    return weight_bytes + (opt.kv_type == DType::F16 ? kv_bytes_f16 : kv_bytes_f32) + activation_bytes;
}

uint64_t workspace_bytes(const Config& c, int64_t m, int64_t m_out) {
    const int64_t d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_ff = c.n_ff;
    // x, x_norm, attn_out, ffn_out (d); q, attn (q_dim); k, v (kv_dim); gate, up, act (n_ff);
    // the rope table's cos and sin (rope_dim/2 each); the int16 copy of the widest matmul input;
    // the logits rows' sequences and positions.
    const int64_t floats = m * (4 * d + 2 * q_dim + 2 * kv_dim + 3 * n_ff + c.rope_dim) + m_out * (d + c.n_vocab + 2);
    const int64_t q_blocks = m * (std::max({d, q_dim, n_ff}) / 32);
    return uint64_t(floats) * sizeof(float) + uint64_t(m) * (sizeof(int64_t) + sizeof(cpu::AttentionRow)) +
           uint64_t(q_blocks) * uint64_t(cpu::kActBlockBytes);
}

Explain explain_model(const ModelFile& file, const ExplainOptions& opt) {
    if (opt.tokens < 1) throw Error("explain: tokens T = " + std::to_string(opt.tokens) + " must be >= 1");
    if (opt.context < 1) throw Error("explain: context c = " + std::to_string(opt.context) + " must be >= 1");
    if (opt.kv_type != DType::F32 && opt.kv_type != DType::F16)
        throw Error("explain: KV cache type " + type_name(opt.kv_type) + " must be F32 or F16");
    const Model model = Model::from_file(file);
    RunOptions run;
    run.exact = opt.exact;
    run.device = opt.gpu ? Device::Cuda : Device::Cpu;  // the GPU's matmuls take f32 activations
    const Plan plan = make_plan(model, run);
    const Config& c = model.config;
    const ModelStats stats = compute_stats(file);

    Explain e;
    e.config = c;
    e.opt = opt;
    e.prefill = make_phase("prefill", model, plan, opt.tokens, 0, opt.kv_type);
    e.decode = make_phase("decode", model, plan, 1, opt.context - 1, opt.kv_type);
    for (const LayerWeights& L : model.layers) e.layers_differ = e.layers_differ || !same_types(L, model.layers[0]);
    e.n_params = stats.n_params;
    e.weight_bytes = stats.weight_bytes;
    e.n_ctx = std::max(opt.tokens, opt.context);
    e.kv_bytes_f32 = uint64_t(KVCache::bytes_per_token(c, DType::F32)) * uint64_t(e.n_ctx);
    e.kv_bytes_f16 = uint64_t(KVCache::bytes_per_token(c, DType::F16)) * uint64_t(e.n_ctx);
    e.activation_bytes = workspace_bytes(c, opt.tokens, 1);
    return e;
}

Bound roofline_bound(const cpu::Cost& cost, const Ceilings& ceil) {
    if (cost.memory_bytes() <= 0) return Bound::Cache;
    return cost.intensity() < ceil.ridge_point() ? Bound::Memory : Bound::Compute;
}

const char* bound_name(Bound b) {
    switch (b) {
        case Bound::Memory: return "memory";
        case Bound::Compute: return "compute";
        case Bound::Cache: return "cache";
    }
    return "?";
}

double min_seconds(const cpu::Cost& cost, const Ceilings& ceil) {
    return std::max(cost.flops / (ceil.peak_gflops() * 1e9), cost.memory_bytes() / (ceil.bandwidth_gbs * 1e9));
}

}  // namespace ridge
