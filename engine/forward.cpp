// forward(): embed; per layer: rmsnorm, q/k/v (+ biases: Qwen2), per-head q/k norms (Qwen3), rope,
// store k/v, attention, o, residual, rmsnorm, gate/up, silu*up, down, residual; final norm; logits. Reads top to bottom like the paper, one line
// per op, on any backend (engine/backend.h). Pass folds the bookkeeping into each op's call: it
// records the op's cost and time under its layer and op, and dumps its output by name.
#include "engine/forward.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "engine/backend.h"
#include "weights/error.h"

namespace ridge {

Workspace::Workspace() = default;
Workspace::~Workspace() = default;
Workspace::Workspace(Workspace&&) noexcept = default;
Workspace& Workspace::operator=(Workspace&&) noexcept = default;

void Workspace::reserve(const Config& c, int64_t m, int64_t m_out) {
    auto grow = [](auto& buf, int64_t n) {
        if (int64_t(buf.size()) < n) buf.resize(size_t(n));
    };
    const int64_t d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_ff = c.n_ff;
    grow(x, m * d);
    grow(x_norm, m * d);
    grow(q, m * q_dim);
    grow(k, m * kv_dim);
    grow(v, m * kv_dim);
    grow(attn, m * q_dim);
    grow(attn_out, m * d);
    grow(ffn_gate, m * n_ff);
    grow(ffn_up, m * n_ff);
    grow(ffn_act, m * n_ff);
    grow(ffn_out, m * d);
    grow(out_norm, m_out * d);
    grow(logits, m_out * c.n_vocab);
    grow(slots, m);
    grow(attn_rows, m);
    grow(rope.cos_t, m * (c.rope_dim / 2));
    grow(rope.sin_t, m * (c.rope_dim / 2));
    grow(out_seq, m_out);
    grow(out_pos, m_out);
    x_q.reserve(m, std::max({d, q_dim, n_ff}));  // the widest matmul input
    n_vocab = c.n_vocab;
}

void split_runs(const int32_t* seq, const int32_t* pos, int64_t m, int64_t min_tiled, std::vector<RowRun>& runs) {
    runs.clear();
    auto add = [&](int64_t begin, int64_t end, bool tiled) {
        if (begin == end) return;
        if (!tiled && !runs.empty() && !runs.back().tiled && runs.back().end == begin)
            runs.back().end = end;  // row-exact rows next to each other go together
        else
            runs.push_back(RowRun{begin, end, tiled});
    };
    for (int64_t i = 0; i < m;) {
        int64_t j = i + 1;  // [i, j): consecutive positions of one sequence
        while (j < m && seq[j] == seq[i] && pos[j] == pos[j - 1] + 1) j++;
        add(i, j, j - i >= min_tiled);
        i = j;
    }
}

int64_t split_batch(const Batch& batch, int64_t min_tiled, std::vector<RowRun>& runs, std::vector<int32_t>& out_seq,
                    std::vector<int32_t>& out_pos, std::vector<RowRun>& out_runs) {
    const int64_t m = batch.size();
    int64_t m_out = 0;
    for (uint8_t w : batch.want_logits) m_out += w ? 1 : 0;
    if (int64_t(out_seq.size()) < m_out) out_seq.resize(size_t(m_out));
    if (int64_t(out_pos.size()) < m_out) out_pos.resize(size_t(m_out));
    split_runs(batch.seq.data(), batch.pos.data(), m, min_tiled, runs);
    for (int64_t i = 0, r = 0; i < m; i++)
        if (batch.want_logits[size_t(i)]) out_seq[size_t(r)] = batch.seq[size_t(i)], out_pos[size_t(r)] = batch.pos[size_t(i)], r++;
    split_runs(out_seq.data(), out_pos.data(), m_out, min_tiled, out_runs);
    return m_out;
}

namespace {

// One output of a linear layer: the op it is counted as, the name its rows are dumped under.
struct Out {
    Op op;
    const char* name;
    const MatmulPlan& plan;
    float* y;  // (rows, plan.w->ne(1))
};

// The ops of one forward pass on a backend, each call recording its cost and wall time under
// (layer, op) when counting and writing its output as "layer.<l>.<name>" when dumping.
class Pass {
public:
    // timed: each op's wall time is recorded (the backend drained before each clock reading).
    Pass(Backend& be, const Config& c, int64_t m, Counters* counters, Dumper* dump, bool timed)
        : be_(be), c_(c), m_(m), dump_(dump), rec_(counters, [&be] { be.sync(); }, timed) {}

    void at_layer(int l) { layer_ = l; }

    void embed(const TensorView& table, float* x) {
        rec_.add(layer_, Op::Embed, be_.embed(table, x));
        dump("embed", x, m_, c_.n_embd);
    }
    void rmsnorm(const char* name, const float* x, const TensorView* w, float* y) {
        rec_.add(layer_, Op::Norm, be_.rmsnorm(x, *w, m_, y));
        dump(name, y, m_, c_.n_embd);
    }
    // y += b on every row; nothing without a bias.
    void bias(const char* name, float* y, const TensorView* b) {
        if (b == nullptr) return;
        rec_.add(layer_, Op::Bias, be_.add_bias(y, *b, m_));
        dump(name, y, m_, b->ne(0));
    }
    // RMSNorm of each of the n_heads heads of every row of x, in place; nothing without weights.
    void head_norm(const char* name, float* x, const TensorView* w, int n_heads) {
        if (w == nullptr) return;
        rec_.add(layer_, Op::Norm, be_.rmsnorm(x, *w, m_ * n_heads, x));
        dump(name, x, m_, int64_t(n_heads) * c_.head_dim);
    }
    // q and k rotate by their rows' positions.
    void rope(float* q, float* k) {
        rec_.add(layer_, Op::Rope, be_.rope(q, c_.n_heads));
        rec_.add(layer_, Op::Rope, be_.rope(k, c_.n_kv_heads));
        dump("q_rope", q, m_, c_.q_dim());
        dump("k_rope", k, m_, c_.kv_dim());
    }
    void kv_store(const KVLayer& kv, const float* k, const float* v) {
        rec_.add(layer_, Op::KVStore, be_.kv_store(kv, k, v));
    }
    void attention(const std::vector<RowRun>& runs, const KVLayer& kv, const float* q, float* out) {
        const int64_t width = c_.q_dim();
        for (const RowRun& run : runs)
            rec_.add_attention(layer_, be_.attention(run, kv, q + run.begin * width, out + run.begin * width));
        dump("attn", out, m_, width);
    }
    void swiglu(const float* gate, const float* up, float* act) {
        rec_.add(layer_, Op::Swiglu, be_.swiglu(gate, up, m_ * c_.n_ff, act));
        dump("ffn_act", act, m_, c_.n_ff);
    }
    void residual(const char* name, float* x, const float* y) {
        rec_.add(layer_, Op::Residual, be_.add(x, y, m_ * c_.n_embd));
        dump(name, x, m_, c_.n_embd);
    }
    // The final norm of the rows that want logits, one row a call (so that a row's norm does not
    // depend on which others want logits), gathered into out (m_out, d).
    void final_norm(const float* x, const std::vector<uint8_t>& want, const TensorView* w, float* out, int64_t m_out) {
        const int64_t d = c_.n_embd;
        for (int64_t i = 0, r = 0; i < m_; i++)
            if (want[size_t(i)]) rec_.add(layer_, Op::Norm, be_.rmsnorm(x + i * d, *w, 1, out + r++ * d));
        dump("final_norm", out, m_out, d);
    }

    // Y = X . W^T for each output sharing the input X (rows of width k), run by run: a tiled run
    // through matmul_tiled, a row-exact run through matmul_rows (all outputs in one call), X
    // quantized to 16-bit integers first (once for all outputs) when a plan asks for it.
    void linear(const std::vector<RowRun>& runs, const float* x, int64_t k, std::initializer_list<Out> outs) {
        constexpr int kMaxOutputs = 3;  // q, k, v
        if (outs.size() > size_t(kMaxOutputs)) throw Error("forward: too many outputs for one input");
        bool int_input = false;
        for (const Out& o : outs) int_input = int_input || o.plan.int_input;
        int64_t rows = 0;
        for (const RowRun& run : runs) {
            const float* xr = x + run.begin * k;
            rows = std::max(rows, run.end);
            if (run.tiled) {
                bool tiled_int = false;
                for (const Out& o : outs) tiled_int = tiled_int || o.plan.tiled_int;
                if (tiled_int) rec_.add(layer_, Op::Quantize, be_.quantize(xr, run.rows(), k));
                for (const Out& o : outs)
                    rec_.add(layer_, o.op, be_.matmul_tiled(o.plan, xr, run.rows(), o.y + run.begin * o.plan.w->ne(1)));
                continue;
            }
            if (int_input) rec_.add(layer_, Op::Quantize, be_.quantize(xr, run.rows(), k));
            // The outputs in one call, its time shared among their ops by their weight bytes.
            LinearOut lo[kMaxOutputs];
            Cost costs[kMaxOutputs];
            const int n = int(outs.size());
            for (int i = 0; i < n; i++) lo[i] = {&outs.begin()[i].plan, outs.begin()[i].y + run.begin * outs.begin()[i].plan.w->ne(1)};
            be_.matmul_rows(lo, n, xr, run.rows(), costs);
            if (!rec_.on()) continue;
            double bytes = 0;
            for (int i = 0; i < n; i++) bytes += costs[i].weight_bytes;
            const double s = rec_.elapsed();
            for (int i = 0; i < n; i++)
                rec_.add(layer_, outs.begin()[i].op, costs[i], bytes > 0 ? s * costs[i].weight_bytes / bytes : s / n);
        }
        for (const Out& o : outs) dump(o.name, o.y, rows, o.plan.w->ne(1));
    }

private:
    void dump(const char* name, const float* buf, int64_t rows, int64_t width) {
        if (!dump_) return;
        host_.resize(size_t(rows * width));
        be_.read(buf, rows * width, host_.data());
        const std::string full = layer_ < 0 ? std::string(name) : "layer." + std::to_string(layer_) + "." + name;
        dump_->write(full, host_.data(), long(rows), long(width));
    }

    Backend& be_;
    const Config& c_;
    const int64_t m_;
    Dumper* dump_;
    CallRecorder rec_;
    int layer_ = -1;
    std::vector<float> host_;  // a dumped buffer in host memory
};

void check_batch(const Batch& batch, const Config& c) {
    const int64_t m = batch.size();
    if (m == 0) throw Error("forward: empty batch");
    if (batch.seq.size() != size_t(m) || batch.pos.size() != size_t(m) || batch.want_logits.size() != size_t(m))
        throw Error("forward: batch columns have different lengths");
    for (int64_t i = 0; i < m; i++)
        if (batch.token[size_t(i)] < 0 || batch.token[size_t(i)] >= c.n_vocab)
            throw Error("token id " + std::to_string(batch.token[size_t(i)]) + " at row " + std::to_string(i) +
                        " is outside the vocabulary of " + std::to_string(c.n_vocab));
}

}  // namespace

void forward(const Engine& engine, KVCache& cache, const Batch& batch, Workspace& ws, Counters* counters,
             Dumper* dump) {
    const Model& model = engine.model();
    const Plan& plan = engine.plan();
    const Config& c = model.config;
    const int64_t d = c.n_embd, q_dim = c.q_dim(), n_ff = c.n_ff;
    check_batch(batch, c);
    if (ws.engine != &engine) ws.backend = engine.make_backend(), ws.engine = &engine;
    Backend& be = *ws.backend;

    // Every op of the pass, in order, through Pass p on the activations a.
    auto ops = [&](Pass& p, const Activations& a) {
        const std::vector<RowRun>& runs = *a.runs;
        p.embed(*model.token_embd, a.x);  // x = E[token]   (m, d)

        for (int l = 0; l < c.n_layers; l++) {
            const LayerWeights& L = model.layers[size_t(l)];
            const LayerPlan& P = plan.layers[size_t(l)];
            const KVLayer kv = cache.layer(l);
            p.at_layer(l);

            // Attention block: x += Wo · attention(rope(Wq · norm(x)), rope(Wk · norm(x)), Wv · norm(x))
            p.rmsnorm("attn_norm", a.x, L.attn_norm, a.x_norm);
            p.linear(runs, a.x_norm, d, {{Op::Q, "q", P.q, a.q}, {Op::K, "k", P.k, a.k}, {Op::V, "v", P.v, a.v}});
            p.bias("q_bias", a.q, L.attn_q_bias);  // Qwen2: q, k, v = W · norm(x) + b
            p.bias("k_bias", a.k, L.attn_k_bias);
            p.bias("v_bias", a.v, L.attn_v_bias);
            p.head_norm("q_norm", a.q, L.attn_q_norm, c.n_heads);  // Qwen3: each head RMSNormed
            p.head_norm("k_norm", a.k, L.attn_k_norm, c.n_kv_heads);
            p.rope(a.q, a.k);
            p.kv_store(kv, a.k, a.v);  // this batch's keys and values into each row's sequence
            p.attention(runs, kv, a.q, a.attn);
            p.linear(runs, a.attn, q_dim, {{Op::O, "attn_out", P.o, a.attn_out}});
            p.residual("attn_resid", a.x, a.attn_out);

            // Feed-forward block: x += Wdown · (silu(Wgate · norm(x)) * Wup · norm(x))
            p.rmsnorm("ffn_norm", a.x, L.ffn_norm, a.x_norm);
            p.linear(runs, a.x_norm, d, {{Op::Gate, "ffn_gate", P.gate, a.ffn_gate}, {Op::Up, "ffn_up", P.up, a.ffn_up}});
            p.swiglu(a.ffn_gate, a.ffn_up, a.ffn_act);
            p.linear(runs, a.ffn_act, n_ff, {{Op::Down, "ffn_out", P.down, a.ffn_out}});
            p.residual("out", a.x, a.ffn_out);
        }

        // Final norm and logits, only for the rows that want them.
        p.at_layer(-1);
        if (a.m_out == 0) return;
        p.final_norm(a.x, batch.want_logits, model.output_norm, a.out_norm, a.m_out);
        p.linear(*a.out_runs, a.out_norm, d, {{Op::OutputHead, "logits", plan.output, a.logits}});
    };

    // Per-op times need each op finished before the clock is read: on the CPU they always are; a
    // GPU drains its stream for them only under --profile, and otherwise may replay a graph.
    const bool timed = counters != nullptr && (!engine.on_gpu() || engine.options().profile);
    Pass p(be, c, batch.size(), counters, dump, timed);  // counting starts here: placing the rows is the embedding's
    const Activations a = be.begin(batch, cache, ws);
    const bool ran = be.run(!dump && !timed, [&] { ops(p, a); });
    if (!ran && counters) {  // replayed from a graph: the same pass counted on paper, op by op
        if (!ws.cost_backend) ws.cost_backend = make_cost_backend(engine);
        Pass paper(*ws.cost_backend, c, batch.size(), counters, nullptr, /*timed=*/false);
        ops(paper, ws.cost_backend->begin(batch, cache, ws));
    }
    be.end(ws);
}

}  // namespace ridge
