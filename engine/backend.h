// Backend: the op set of a forward pass with one signature for every device. The CPU backend runs
// kernels/cpu (backend_cpu.cpp), the CUDA backend kernels/cuda (backend_cuda.cpp); forward() holds
// the only layer loop and calls these ops in order. A backend serves one Workspace: what a batch
// needs between ops (its rows' KV slots, runs, device buffers) lives in the backend or the Workspace.
// Buffers are f32 pointers in the backend's memory (host or device); weights are the model's views,
// which a GPU backend resolves to its own copies.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engine/engine.h"
#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "kernels/types.h"

namespace ridge {

// The activations of one pass, named by role, in the backend's memory. m = rows of the batch,
// m_out = rows whose logits are wanted.
struct Activations {
    int64_t m = 0, m_out = 0;
    float* x = nullptr;         // (m, d) the residual stream
    float* x_norm = nullptr;    // (m, d) RMSNorm of x (attention input, then FFN input)
    float* q = nullptr;         // (m, q_dim)
    float* k = nullptr;         // (m, kv_dim)
    float* v = nullptr;         // (m, kv_dim)
    float* attn = nullptr;      // (m, q_dim) attention output per head
    float* attn_out = nullptr;  // (m, d) after the output projection
    float* ffn_gate = nullptr;  // (m, n_ff)
    float* ffn_up = nullptr;    // (m, n_ff)
    float* ffn_act = nullptr;   // (m, n_ff) silu(gate) * up
    float* ffn_out = nullptr;   // (m, d)
    float* out_norm = nullptr;  // (m_out, d) final norm of the rows that want logits
    float* logits = nullptr;    // (m_out, n_vocab)
    const std::vector<RowRun>* runs = nullptr;      // the batch's rows as runs (split_runs)
    const std::vector<RowRun>* out_runs = nullptr;  // the same for the m_out logits rows
};

// One output of a linear layer that shares its input with others (q, k, v; gate, up).
struct LinearOut {
    const MatmulPlan* plan;
    float* y;  // (rows, plan->w->ne(1)) at the run's first row
};

class Backend {
public:
    virtual ~Backend() = default;

    // Places a batch: buffers for its rows, each row's KV slot and the keys it may see, its token
    // and position where the kernels read them, and the rows cut into runs (Plan::tiled_min_rows).
    virtual Activations begin(const Batch& batch, KVCache& cache, Workspace& ws) = 0;
    // Runs `ops`, every op of the pass queued through this backend. `replayable`: nothing needs
    // each op to run from the host (no dumps, no per-op times), so a GPU may capture the pass once
    // and replay it. Returns whether `ops` ran (false: the pass was replayed from a graph).
    virtual bool run(bool replayable, const std::function<void()>& ops) {
        ops();
        return true;
    }
    // Finishes the pass: the logits rows in ws.logits (host memory).
    virtual void end(Workspace& ws) = 0;
    // Waits for queued work (before a clock reading) and copies n floats to host memory (dumps).
    virtual void sync() {}
    virtual void read(const float* buf, int64_t n, float* host) = 0;

    // The ops. Contracts and costs are the kernels' (kernels/cpu, kernels/cuda, kernels/types.h).
    virtual Cost embed(const TensorView& table, float* out) = 0;  // out (m, d): every row's token
    // y (m, w.ne(0)) = RMSNorm of each row of x times w; y may be x (per-head norms run in place).
    virtual Cost rmsnorm(const float* x, const TensorView& w, int64_t m, float* y) = 0;
    virtual Cost add_bias(float* x, const TensorView& b, int64_t m) = 0;  // x (m, b.ne(0)) += b per row
    virtual Cost rope(float* x, int n_heads) = 0;  // x (m, n_heads * head_dim): every row by its position
    // X (m, k) as 16-bit integers, for the matmul_rows call that follows (plans with int_input) or
    // the matmul_tiled calls (plans with tiled_int).
    virtual Cost quantize(const float* x, int64_t m, int64_t k) = 0;
    // Row-exact: each row of each Y from its own row of X, whatever its neighbours (bit for bit).
    virtual void matmul_rows(const LinearOut* outs, int n_outs, const float* x, int64_t m, Cost* costs) = 0;
    // Tiled: m rows of one prompt chunk, weights reused across them.
    virtual Cost matmul_tiled(const MatmulPlan& plan, const float* x, int64_t m, float* y) = 0;
    virtual Cost kv_store(const KVLayer& kv, const float* k, const float* v) = 0;  // every row at its slot
    // The rows of one run attend to their sequences (tiled run: the blocked kernel; else row by row).
    virtual AttentionCost attention(const RowRun& run, const KVLayer& kv, const float* q, float* out) = 0;
    virtual Cost swiglu(const float* gate, const float* up, int64_t n, float* out) = 0;
    virtual Cost add(float* x, const float* y, int64_t n) = 0;
};

std::unique_ptr<Backend> make_cpu_backend(const Engine& engine);
// Costs only: every op returns what the engine's device would count for it and computes nothing
// (backend_cost.cpp; ridge explain). Its passes take a KVCache::layout_only cache.
std::unique_ptr<Backend> make_cost_backend(const Engine& engine);
// ridge::Error without CUDA in the build; `weights` from upload_weights.
std::unique_ptr<Backend> make_cuda_backend(const Engine& engine, std::shared_ptr<const DeviceWeights> weights);
std::shared_ptr<const DeviceWeights> upload_weights(const Model& model, int device);

}  // namespace ridge
