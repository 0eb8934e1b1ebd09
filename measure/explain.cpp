// Explain (see explain.h): runs forward() through the costs-only backend (engine/backend_cost.cpp)
// for the given rows and positions, names and shapes each op it called, and sums them per layer
// and pass. Nothing here runs a kernel: the op list is forward()'s own.
#include "measure/explain.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "engine/backend.h"
#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "kernels/cpu/matmul.h"
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

// The calls forward() makes for `rows` consecutive rows of one sequence at positions first_pos..
// (logits for the last row only), run through the costs-only backend: every op with its layer
// and cost, in order. Nothing is computed; the cache holds no keys or values.
std::vector<Counters::Call> pass_calls(const Engine& engine, int64_t rows, int64_t first_pos, DType kv_type) {
    KVCache cache = KVCache::layout_only(engine.config(), int(first_pos + rows), kv_type);
    const int seq = cache.new_sequence();
    if (first_pos > 0) cache.append(seq, int(first_pos));  // the keys the rows attend to before their own
    const int first = cache.append(seq, int(rows));
    Batch batch;
    for (int64_t i = 0; i < rows; i++) batch.add(0, seq, first + int(i), i == rows - 1);
    Workspace ws;
    ws.backend = make_cost_backend(engine);
    ws.engine = &engine;
    Counters counters;
    counters.keep_calls = true;
    forward(engine, cache, batch, ws, &counters);
    return counters.calls;
}

// Explain's entries for the calls of one layer (layer < 0: outside the layers): each call named,
// shaped and typed for people; the two rope calls (q, k) as one entry.
std::vector<ExplainOp> entries(const std::vector<Counters::Call>& all, int layer, const Model& model, int64_t rows,
                               int64_t first_pos, DType kv_type) {
    const Config& c = model.config;
    const int64_t d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_ff = c.n_ff;
    const LayerWeights& L = model.layers[size_t(std::max(layer, 0))];
    const int64_t m = layer < 0 ? 1 : rows;  // outside: the final norm and logits of the last row
    const int64_t seen = first_pos + rows;    // positions the last row sees
    const std::string causal = rows == 1 ? "" : " causal", kv = type_name(kv_type);
    const std::string h = std::to_string(c.n_heads) + "h × ";
    auto matmul = [&](const Counters::Call& call, const char* name, const std::string& in, const char* w_name,
                      const TensorView& W) {
        return ExplainOp{call.op, name, dims(dims(in, m, W.ne(0)) + " · " + w_name, W.ne(0), W.ne(1)),
                         type_name(W.type), call.cost};
    };
    std::vector<Counters::Call> calls;
    for (const Counters::Call& call : all)
        if (call.layer == layer) calls.push_back(call);
    std::vector<ExplainOp> ops;
    int norms = 0, head_norms = 0, biases = 0, residuals = 0;
    bool roped = false;
    for (size_t i = 0; i < calls.size(); i++) {
        const Counters::Call& call = calls[i];
        switch (call.op) {
            case Op::Embed:
                ops.push_back({call.op, "embedding", dims(std::to_string(rows) + (rows == 1 ? " row" : " rows") + " of E",
                                                         c.n_vocab, d),
                               type_name(model.token_embd->type), call.cost});
                break;
            case Op::Norm: {
                if (layer >= 0 && norms > 0 && !roped) {  // Qwen3's per-head norms of q and k, before rope
                    const bool q = head_norms++ == 0;
                    ops.push_back({call.op, q ? "q_norm" : "k_norm",
                                   dims(std::string("rmsnorm ") + (q ? "q" : "k") + " heads", m * (q ? c.n_heads : c.n_kv_heads),
                                        c.head_dim),
                                   "F32", call.cost});
                    break;
                }
                const char* name = layer < 0 ? "final_norm" : norms++ == 0 ? "attn_norm" : "ffn_norm";
                ops.push_back({call.op, name, dims("rmsnorm x", m, d), "F32", call.cost});
                break;
            }
            case Op::Bias: {  // Qwen2's, in the order q, k, v
                const int which = biases++;
                ops.push_back({call.op, which == 0 ? "q_bias" : which == 1 ? "k_bias" : "v_bias",
                               dims(which == 0 ? "q" : which == 1 ? "k" : "v", m, which == 0 ? q_dim : kv_dim) + " += b",
                               "F32", call.cost});
                break;
            }
            case Op::Quantize: {  // the input of the matmuls that follow
                const Op next = i + 1 < calls.size() ? calls[i + 1].op : Op::Count;
                const std::string in = next == Op::O ? dims("attn", m, q_dim) : next == Op::Down ? dims("act", m, n_ff)
                                                                                                  : dims("x", m, d);
                ops.push_back({call.op, "quantize", in + " → int16", "F32", call.cost});
                break;
            }
            case Op::Q: ops.push_back(matmul(call, "q", "x", "Wq", *L.attn_q)); break;
            case Op::K: ops.push_back(matmul(call, "k", "x", "Wk", *L.attn_k)); break;
            case Op::V: ops.push_back(matmul(call, "v", "x", "Wv", *L.attn_v)); break;
            case Op::O: ops.push_back(matmul(call, "o", "attn", "Wo", *L.attn_output)); break;
            case Op::Gate: ops.push_back(matmul(call, "gate", "x", "Wgate", *L.ffn_gate)); break;
            case Op::Up: ops.push_back(matmul(call, "up", "x", "Wup", *L.ffn_up)); break;
            case Op::Down: ops.push_back(matmul(call, "down", "act", "Wdown", *L.ffn_down)); break;
            case Op::OutputHead:
                ops.push_back(matmul(call, "logits", "x", c.tied_output ? "Eᵀ" : "Wout", *model.output));
                break;
            case Op::Rope:
                roped = true;
                if (!ops.empty() && ops.back().op == Op::Rope) {
                    ops.back().cost += call.cost;  // k after q
                } else {
                    ops.push_back({call.op, "rope", dims(dims("q", m, q_dim) + ", k", m, kv_dim), "F32", call.cost});
                }
                break;
            case Op::KVStore: ops.push_back({call.op, "kv_store", dims("k, v", m, kv_dim) + " → cache", kv, call.cost}); break;
            // One attention kernel, in its two products: the scores Q·Kᵀ/sqrt(head_dim) with their
            // softmax (reading every key), then the mix P·V (reading every value).
            case Op::AttnScores:
                ops.push_back({call.op, "attn_scores", dims(dims(h + "q", m, c.head_dim) + " · Kᵀ", c.head_dim, seen) + causal,
                               kv, call.cost});
                break;
            case Op::AttnMix:
                ops.push_back({call.op, "attn_mix", dims(dims(h + "p", m, seen) + " · V", seen, c.head_dim) + causal, kv,
                               call.cost});
                break;
            case Op::Residual: {
                const bool attn = residuals++ == 0;  // the attention block's, then the feed-forward's
                ops.push_back({call.op, attn ? "attn_resid" : "ffn_resid", dims("x", m, d) + (attn ? " += attn_out" : " += ffn_out"),
                               "F32", call.cost});
                break;
            }
            case Op::Swiglu: ops.push_back({call.op, "swiglu", dims("silu(gate) * up", m, n_ff), "F32", call.cost}); break;
            case Op::Count: break;
        }
    }
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
ExplainPhase make_phase(const std::string& name, const Engine& engine, int64_t rows, int64_t first_pos, DType kv_type) {
    const Model& model = engine.model();
    ExplainPhase p;
    p.name = name;
    p.rows = rows;
    p.first_pos = first_pos;
    // Row i sees positions 0..first_pos+i: the sum of (first_pos + i + 1).
    p.n_keys = rows * (first_pos + 1) + rows * (rows - 1) / 2;
    const std::vector<Counters::Call> calls = pass_calls(engine, rows, first_pos, kv_type);
    for (const Counters::Call& call : calls) {
        p.total += call.cost;
        p.by_op[size_t(call.op)] += call.cost;
        if (call.layer >= 0) p.layers += call.cost;
    }
    p.layer = entries(calls, 0, model, rows, first_pos, kv_type);
    p.outside = entries(calls, -1, model, rows, first_pos, kv_type);
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
    return uint64_t(floats) * sizeof(float) + uint64_t(m) * (sizeof(int64_t) + sizeof(AttentionRow)) +
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
    const Engine engine(model, run, /*place=*/false);
    const Config& c = model.config;
    const ModelStats stats = compute_stats(file);

    Explain e;
    e.config = c;
    e.opt = opt;
    e.prefill = make_phase("prefill", engine, opt.tokens, 0, opt.kv_type);
    e.decode = make_phase("decode", engine, 1, opt.context - 1, opt.kv_type);
    for (const LayerWeights& L : model.layers) e.layers_differ = e.layers_differ || !same_types(L, model.layers[0]);
    e.n_params = stats.n_params;
    e.weight_bytes = stats.weight_bytes;
    e.n_ctx = std::max(opt.tokens, opt.context);
    e.kv_bytes_f32 = uint64_t(KVCache::bytes_per_token(c, DType::F32)) * uint64_t(e.n_ctx);
    e.kv_bytes_f16 = uint64_t(KVCache::bytes_per_token(c, DType::F16)) * uint64_t(e.n_ctx);
    e.activation_bytes = workspace_bytes(c, opt.tokens, 1);
    e.plan = describe_plan(engine.plan());
    return e;
}

Bound roofline_bound(const Cost& cost, const Ceilings& ceil) {
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

double min_seconds(const Cost& cost, const Ceilings& ceil) {
    return std::max(cost.flops / (ceil.peak_gflops() * 1e9), cost.memory_bytes() / (ceil.bandwidth_gbs * 1e9));
}

}  // namespace ridge
