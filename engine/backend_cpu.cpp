// The CPU backend: forward()'s ops on kernels/cpu, with the Workspace's host buffers. Each op is
// the kernel call itself; what a batch needs between ops (KV slots, attention rows, the rotation
// angles, X as 16-bit integers) is placed by begin() and kept in the Workspace.
#include <cstring>

#include "engine/backend.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"

namespace ridge {

namespace {

class CpuBackend final : public Backend {
public:
    explicit CpuBackend(const Engine& engine) : engine_(engine), c_(engine.config()) {}

    Activations begin(const Batch& batch, KVCache& cache, Workspace& ws) override {
        ws_ = &ws;
        const int64_t m = batch.size();
        int64_t m_out = 0;
        for (uint8_t w : batch.want_logits) m_out += w ? 1 : 0;
        ws.reserve(c_, m, m_out);
        ws.n_logit_rows = m_out;
        // Where each row's key/value goes and which keys it may see (positions 0..pos of its sequence).
        for (int64_t i = 0; i < m; i++) {
            ws.slots[size_t(i)] = cache.slot(batch.seq[size_t(i)], batch.pos[size_t(i)]);  // checks seq and pos
            ws.attn_rows[size_t(i)] = AttentionRow{cache.block_table(batch.seq[size_t(i)]).data(), batch.pos[size_t(i)] + 1};
        }
        // The rows as runs (tiled prompt chunks, row-exact rest), and the same for the logits rows.
        split_batch(batch, engine_.plan().tiled_min_rows, ws.runs, ws.out_seq, ws.out_pos, ws.out_runs);
        // The rows' rotation angles, once for every layer.
        cpu::rope_table(batch.pos.data(), m, RopeParams{c_.head_dim, c_.rope_dim, c_.rope_freq_base, c_.rope_style}, ws.rope);
        tokens_ = batch.token.data();
        m_ = m;

        Activations a;
        a.m = m, a.m_out = m_out;
        a.x = ws.x.data(), a.x_norm = ws.x_norm.data(), a.q = ws.q.data(), a.k = ws.k.data(), a.v = ws.v.data();
        a.attn = ws.attn.data(), a.attn_out = ws.attn_out.data();
        a.ffn_gate = ws.ffn_gate.data(), a.ffn_up = ws.ffn_up.data(), a.ffn_act = ws.ffn_act.data(), a.ffn_out = ws.ffn_out.data();
        a.out_norm = ws.out_norm.data(), a.logits = ws.logits.data();
        a.runs = &ws.runs, a.out_runs = &ws.out_runs;
        return a;
    }
    void end(Workspace&) override {}  // the logits are in ws.logits already
    void read(const float* buf, int64_t n, float* host) override { std::memcpy(host, buf, size_t(n) * sizeof(float)); }

    Cost embed(const TensorView& table, float* out) override { return cpu::embed(table, tokens_, m_, out); }
    Cost rmsnorm(const float* x, const TensorView& w, int64_t m, float* y) override {
        return cpu::rmsnorm(x, reinterpret_cast<const float*>(w.data), m, w.ne(0), c_.norm_eps, y);
    }
    Cost add_bias(float* x, const TensorView& b, int64_t m) override {
        return cpu::add_bias(x, reinterpret_cast<const float*>(b.data), m, b.ne(0));
    }
    Cost rope(float* x, int n_heads) override { return cpu::rope(x, ws_->rope, n_heads); }
    Cost quantize(const float* x, int64_t m, int64_t k) override { return cpu::quantize_rows(x, m, k, ws_->x_q); }
    void matmul_rows(const LinearOut* outs, int n_outs, const float* x, int64_t m, Cost* costs) override {
        constexpr int kMaxOutputs = 3;
        cpu::MatmulOutput mo[kMaxOutputs];
        bool int_input = false;
        for (int i = 0; i < n_outs && i < kMaxOutputs; i++) {
            mo[i] = {outs[i].plan->w, outs[i].y};
            int_input = int_input || outs[i].plan->int_input;
        }
        cpu::matmul_rows_fused(mo, n_outs, x, m, int_input ? &ws_->x_q : nullptr, costs);
    }
    Cost matmul_tiled(const MatmulPlan& plan, const float* x, int64_t m, float* y) override {
        return cpu::matmul_tiled(*plan.w, x, m, plan.tiled_int ? &ws_->x_q : nullptr, y);
    }
    Cost kv_store(const KVLayer& kv, const float* k, const float* v) override {
        return cpu::kv_store(kv, k, v, ws_->slots.data(), m_);
    }
    AttentionCost attention(const RowRun& run, const KVLayer& kv, const float* q, float* out) override {
        const AttentionShape heads{c_.n_heads, c_.n_kv_heads, c_.head_dim};
        const AttentionRow* rows = ws_->attn_rows.data() + run.begin;
        return run.tiled ? cpu::attention(q, rows, run.rows(), kv, heads, out)
                         : cpu::attention_v3_split(q, rows, run.rows(), kv, heads, out);
    }
    Cost swiglu(const float* gate, const float* up, int64_t n, float* out) override {
        return cpu::swiglu(gate, up, n, out);
    }
    Cost add(float* x, const float* y, int64_t n) override { return cpu::add(x, y, n); }

private:
    const Engine& engine_;
    const Config& c_;
    Workspace* ws_ = nullptr;
    const int32_t* tokens_ = nullptr;  // (m) the batch's tokens
    int64_t m_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend(const Engine& engine) { return std::make_unique<CpuBackend>(engine); }

}  // namespace ridge
