// forward(): embed; per layer: rmsnorm, q/k/v, rope, store k/v, attention, o, residual, rmsnorm,
// gate/up, silu*up, down, residual; final norm; logits. Reads top to bottom like the paper.
#include "engine/forward.h"

#include <algorithm>
#include <string>

#include "engine/gpu.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"
#include "weights/error.h"

namespace ridge {

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

void forward(const Model& model, KVCache& cache, const Batch& batch, Workspace& ws, Counters* counters,
             Dumper* dump) {
    if (model.gpu) return forward_gpu(model, cache, batch, ws, counters, dump);  // the same, on a GPU
    const Config& c = model.config;
    const int64_t m = batch.size();  // rows
    const int64_t d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_ff = c.n_ff;
    if (m == 0) throw Error("forward: empty batch");
    if (batch.seq.size() != size_t(m) || batch.pos.size() != size_t(m) || batch.want_logits.size() != size_t(m))
        throw Error("forward: batch columns have different lengths");
    int64_t m_out = 0;
    for (uint8_t w : batch.want_logits) m_out += w ? 1 : 0;
    ws.reserve(c, m, m_out);
    ws.n_logit_rows = m_out;

    // Where each row's key/value goes and which keys it may see (positions 0..pos of its sequence).
    for (int64_t i = 0; i < m; i++) {
        ws.slots[i] = cache.slot(batch.seq[i], batch.pos[i]);  // checks seq and pos
        ws.attn_rows[i] = cpu::AttentionRow{cache.block_table(batch.seq[i]).data(), batch.pos[i] + 1};
    }

    // The rows as runs (tiled prompt chunks, row-exact rest), and the same for the logits rows.
    const int64_t min_tiled = model.tiled_min_rows();
    split_runs(batch.seq.data(), batch.pos.data(), m, min_tiled, ws.runs);
    for (int64_t i = 0, r = 0; i < m; i++)
        if (batch.want_logits[i]) ws.out_seq[r] = batch.seq[i], ws.out_pos[r] = batch.pos[i], r++;
    split_runs(ws.out_seq.data(), ws.out_pos.data(), m_out, min_tiled, ws.out_runs);

    // rec.add(layer, op, cost) records a kernel call that has just returned: its cost, and the wall
    // time since the previous record (the kernels run one after another, each joining its threads;
    // a dump, when debugging, is timed into the next op). Without counters no clock is read.
    CallRecorder rec(counters);
    auto count = [&](int layer, Op op, const cpu::Cost& cost) { rec.add(layer, op, cost); };
    auto dump_rows = [&](const std::string& name, const std::vector<float>& buf, int64_t rows, int64_t width) {
        if (dump) dump->write(name, buf.data(), long(rows), long(width));
    };
    // Y = X . W^T for each (op, W, Y) sharing the input X (rows of width k), run by run: tiled runs
    // through cpu::matmul_tiled, row-exact runs through cpu::matmul_rows_fused (all the weights in
    // one call) with X quantized to 16-bit integers once per run (into ws.x_q) when one of the
    // weights has an integer kernel (fast path).
    struct Linear {
        Op op;
        const TensorView* w;
        float* y;  // (rows, w->ne(1))
    };
    constexpr int kMaxLinearOutputs = 3;  // q, k, v
    auto linear = [&](int layer, const std::vector<RowRun>& runs, const float* x, int64_t k,
                      std::initializer_list<Linear> outs) {
        if (outs.size() > size_t(kMaxLinearOutputs)) throw Error("forward: too many outputs for one input");
        bool int_rows = false;
        for (const Linear& o : outs) int_rows = int_rows || model.int_rows({o.w});
        for (const RowRun& run : runs) {
            const float* xr = x + run.begin * k;
            const cpu::QuantizedRows* xq = nullptr;
            if (!run.tiled && int_rows) {
                count(layer, Op::Quantize, cpu::quantize_rows(xr, run.rows(), k, ws.x_q));
                xq = &ws.x_q;
            }
            if (run.tiled) {
                for (const Linear& o : outs)
                    count(layer, o.op, cpu::matmul_tiled(*o.w, xr, run.rows(), o.y + run.begin * o.w->ne(1)));
                continue;
            }
            // Row-exact: the outputs in one call (one OpenMP region for all of them), its time
            // shared among their ops in proportion to their weight bytes.
            const Linear* o = outs.begin();
            const int n = int(outs.size());
            cpu::MatmulOutput mo[kMaxLinearOutputs];
            cpu::Cost costs[kMaxLinearOutputs];
            for (int i = 0; i < n; i++) mo[i] = {o[i].w, o[i].y + run.begin * o[i].w->ne(1)};
            cpu::matmul_rows_fused(mo, n, xr, run.rows(), xq, costs);
            if (!rec.on()) continue;
            double bytes = 0;
            for (int i = 0; i < n; i++) bytes += costs[i].weight_bytes;
            const double s = rec.elapsed();
            for (int i = 0; i < n; i++)
                rec.add(layer, o[i].op, costs[i], bytes > 0 ? s * costs[i].weight_bytes / bytes : s / n);
        }
    };
    // Attention run by run: a tiled run (one prompt chunk) through the blocked kernel, row-exact
    // runs through the split kernel (each row over its own keys, blocks in parallel).
    auto attend = [&](int layer, const cpu::KVLayer& kv, const cpu::AttentionShape& heads) {
        const int64_t q_stride = int64_t(heads.n_heads) * heads.head_dim;
        for (const RowRun& run : ws.runs) {
            const float* q = ws.q.data() + run.begin * q_stride;
            const cpu::AttentionRow* rows = ws.attn_rows.data() + run.begin;
            float* out = ws.attn.data() + run.begin * q_stride;
            rec.add_attention(layer, run.tiled ? cpu::attention(q, rows, run.rows(), kv, heads, out)
                                               : cpu::attention_v3_split(q, rows, run.rows(), kv, heads, out));
        }
    };
    // The rows' rotation angles, once for every layer (their time is counted with the embedding).
    cpu::rope_table(batch.pos.data(), m, cpu::RopeParams{c.head_dim, c.rope_dim, c.rope_freq_base, c.rope_style},
                    ws.rope);
    const cpu::AttentionShape heads{c.n_heads, c.n_kv_heads, c.head_dim};

    // Token embeddings -> the residual stream x (m, d).
    count(-1, Op::Embed, cpu::embed(*model.token_embd, batch.token.data(), m, ws.x.data()));
    dump_rows("embed", ws.x, m, d);

    for (int l = 0; l < c.n_layers; l++) {
        const LayerWeights& L = model.layers[size_t(l)];
        const std::string name = "layer." + std::to_string(l) + ".";
        const cpu::KVLayer kv = cache.layer(l);

        // Attention block: x_norm = rmsnorm(x); q, k, v = x_norm W_q, W_k, W_v; rotate q, k.
        count(l, Op::Norm, cpu::rmsnorm(ws.x.data(), f32_data(L.attn_norm), m, d, c.norm_eps, ws.x_norm.data()));
        dump_rows(name + "attn_norm", ws.x_norm, m, d);
        linear(l, ws.runs, ws.x_norm.data(), d,
               {{Op::Q, L.attn_q, ws.q.data()}, {Op::K, L.attn_k, ws.k.data()}, {Op::V, L.attn_v, ws.v.data()}});
        dump_rows(name + "q", ws.q, m, q_dim);
        dump_rows(name + "k", ws.k, m, kv_dim);
        dump_rows(name + "v", ws.v, m, kv_dim);
        count(l, Op::Rope, cpu::rope(ws.q.data(), ws.rope, c.n_heads));
        count(l, Op::Rope, cpu::rope(ws.k.data(), ws.rope, c.n_kv_heads));
        dump_rows(name + "q_rope", ws.q, m, q_dim);
        dump_rows(name + "k_rope", ws.k, m, kv_dim);

        // Keys and values of these rows into the cache, then each row attends to its sequence.
        count(l, Op::KVStore, cpu::kv_store(kv, ws.k.data(), ws.v.data(), ws.slots.data(), m));
        attend(l, kv, heads);
        dump_rows(name + "attn", ws.attn, m, q_dim);
        linear(l, ws.runs, ws.attn.data(), q_dim, {{Op::O, L.attn_output, ws.attn_out.data()}});
        dump_rows(name + "attn_out", ws.attn_out, m, d);
        count(l, Op::Residual, cpu::add(ws.x.data(), ws.attn_out.data(), m * d));
        dump_rows(name + "attn_resid", ws.x, m, d);

        // Feed-forward block: x_norm = rmsnorm(x); ffn_out = (silu(x_norm W_gate) * x_norm W_up) W_down.
        count(l, Op::Norm, cpu::rmsnorm(ws.x.data(), f32_data(L.ffn_norm), m, d, c.norm_eps, ws.x_norm.data()));
        dump_rows(name + "ffn_norm", ws.x_norm, m, d);
        linear(l, ws.runs, ws.x_norm.data(), d,
               {{Op::Gate, L.ffn_gate, ws.ffn_gate.data()}, {Op::Up, L.ffn_up, ws.ffn_up.data()}});
        dump_rows(name + "ffn_gate", ws.ffn_gate, m, n_ff);
        dump_rows(name + "ffn_up", ws.ffn_up, m, n_ff);
        count(l, Op::Swiglu, cpu::swiglu(ws.ffn_gate.data(), ws.ffn_up.data(), m * n_ff, ws.ffn_act.data()));
        dump_rows(name + "ffn_act", ws.ffn_act, m, n_ff);
        linear(l, ws.runs, ws.ffn_act.data(), n_ff, {{Op::Down, L.ffn_down, ws.ffn_out.data()}});
        dump_rows(name + "ffn_out", ws.ffn_out, m, d);
        count(l, Op::Residual, cpu::add(ws.x.data(), ws.ffn_out.data(), m * d));
        dump_rows(name + "out", ws.x, m, d);
    }

    // Final norm and logits, only for the rows that want them.
    if (m_out == 0) return;
    int64_t r = 0;
    for (int64_t i = 0; i < m; i++) {
        if (!batch.want_logits[i]) continue;
        count(-1, Op::Norm, cpu::rmsnorm(ws.x.data() + i * d, f32_data(model.output_norm), 1, d, c.norm_eps,
                                        ws.out_norm.data() + r * d));
        r++;
    }
    dump_rows("final_norm", ws.out_norm, m_out, d);
    linear(-1, ws.out_runs, ws.out_norm.data(), d, {{Op::OutputHead, model.output, ws.logits.data()}});
    dump_rows("logits", ws.logits, m_out, c.n_vocab);
}

}  // namespace ridge
