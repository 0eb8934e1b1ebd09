// The costs-only backend: forward()'s ops return what the kernels of the engine's device would
// return as their cost, and compute nothing (no buffers, no keys or values: the cache may be
// KVCache::layout_only). ridge explain runs forward() through it, so the ops it lists and their
// FLOPs and bytes are those of a real pass by construction.
#include "engine/backend.h"

namespace ridge {

namespace {

class CostBackend final : public Backend {
public:
    explicit CostBackend(const Engine& engine) : engine_(engine), c_(engine.config()) {}

    // The batch's runs as the engine's backend cuts them; the Workspace is left as it is (a GPU
    // pass replayed from a graph is counted here while its logits are still to be read).
    Activations begin(const Batch& batch, KVCache&, Workspace&) override {
        const int64_t m = batch.size();
        const int64_t m_out = split_batch(batch, engine_.plan().tiled_min_rows, runs_, out_seq_, out_pos_, out_runs_);
        pos_ = batch.pos.data();
        m_ = m;
        Activations a;  // no buffers: every pointer stays null
        a.m = m, a.m_out = m_out;
        a.runs = &runs_, a.out_runs = &out_runs_;
        return a;
    }
    void end(Workspace&) override {}
    void read(const float*, int64_t, float*) override {}

    Cost embed(const TensorView& table, float*) override { return embed_cost(table.type, table.ne(0), m_); }
    Cost rmsnorm(const float*, const TensorView& w, int64_t m, float*) override { return rmsnorm_cost(m, w.ne(0)); }
    Cost add_bias(float*, const TensorView& b, int64_t m) override { return add_bias_cost(m, b.ne(0)); }
    Cost rope(float*, int n_heads) override {
        return rope_cost(m_, n_heads, RopeParams{c_.head_dim, c_.rope_dim, c_.rope_freq_base, c_.rope_style});
    }
    Cost quantize(const float*, int64_t m, int64_t k) override { return quantize_rows_cost(m, k); }
    void matmul_rows(const LinearOut* outs, int n_outs, const float*, int64_t m, Cost* costs) override {
        for (int o = 0; o < n_outs; o++) {
            const TensorView& w = *outs[o].plan->w;
            costs[o] = outs[o].plan->int_input ? matmul_int_cost(w.type, w.ne(0), w.ne(1), m)
                                               : matmul_cost(w.type, w.ne(0), w.ne(1), m);
        }
    }
    Cost matmul_tiled(const MatmulPlan& plan, const float*, int64_t m, float*) override {
        const TensorView& w = *plan.w;
        return plan.tiled_int ? matmul_int_cost(w.type, w.ne(0), w.ne(1), m) : matmul_cost(w.type, w.ne(0), w.ne(1), m);
    }
    Cost kv_store(const KVLayer& kv, const float*, const float*) override { return kv_store_cost(m_, kv.kv_dim, kv.type); }
    // A tiled run (one prompt chunk) takes the blocked kernel, which reads each key and value once
    // for the whole chunk; other rows read their own keys.
    AttentionCost attention(const RowRun& run, const KVLayer& kv, const float*, float*) override {
        const AttentionShape heads{c_.n_heads, c_.n_kv_heads, c_.head_dim};
        if (run.tiled) return attention_blocked_cost(run.rows(), int64_t(pos_[run.begin]) + 1, kv.kv_dim, kv.type, heads);
        double n_keys = 0;
        for (int64_t i = run.begin; i < run.end; i++) n_keys += double(pos_[i]) + 1;
        return attention_cost(run.rows(), n_keys, kv.kv_dim, kv.type, heads);
    }
    Cost swiglu(const float*, const float*, int64_t n, float*) override { return swiglu_cost(n); }
    Cost add(float*, const float*, int64_t n) override { return add_cost(n); }

private:
    const Engine& engine_;
    const Config& c_;
    const int32_t* pos_ = nullptr;  // (m) the batch's positions
    int64_t m_ = 0;
    std::vector<RowRun> runs_, out_runs_;        // the rows as runs, and the logits rows
    std::vector<int32_t> out_seq_, out_pos_;     // (m_out) the logits rows' sequences and positions
};

}  // namespace

std::unique_ptr<Backend> make_cost_backend(const Engine& engine) { return std::make_unique<CostBackend>(engine); }

}  // namespace ridge
