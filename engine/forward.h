// The forward pass: one function for prefill, decode and batches. Its input is a Batch of token
// rows, each carrying its token, its sequence and its position; every linear layer is then one
// (rows x d) . W product. Keys and values go to each row's sequence in the paged KVCache and each
// row attends to its own sequence's positions 0..pos (the causal mask).
//
// Batch invariance: the rows split into runs (see RowRun). A stretch of Plan::tiled_min_rows or
// more consecutive positions of one sequence (a prompt chunk) is a tiled run: its matmuls take f32
// tiles (weights reused across its rows) and its attention the blocked kernel. All other rows
// (decode rows, short prompts) form row-exact runs: matmuls and attention that compute each row
// alone. So a row's values depend only on its sequence and on how its prompt was cut into chunks,
// never on which other sequences share the batch.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/counters.h"
#include "engine/dump.h"
#include "engine/engine.h"
#include "engine/kv_cache.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/ops.h"

namespace ridge {

struct Batch {
    std::vector<int32_t> token;       // (n_rows) token ids
    std::vector<int32_t> seq;         // (n_rows) KV cache sequence of each row
    std::vector<int32_t> pos;         // (n_rows) position of each row in its sequence
    std::vector<uint8_t> want_logits; // (n_rows) 1 where this row's logits are needed

    void add(int32_t tok, int32_t seq_id, int32_t position, bool logits) {
        token.push_back(tok);
        seq.push_back(seq_id);
        pos.push_back(position);
        want_logits.push_back(logits ? 1 : 0);
    }
    int64_t size() const { return int64_t(token.size()); }
    void clear() { token.clear(), seq.clear(), pos.clear(), want_logits.clear(); }
};

// Rows [begin, end) of a batch, computed together: tiled (one prompt chunk) or row-exact.
struct RowRun {
    int64_t begin = 0, end = 0;
    bool tiled = false;
    int64_t rows() const { return end - begin; }
};
// Splits rows with these sequences and positions into runs: each stretch of at least min_tiled
// (Plan::tiled_min_rows) consecutive positions of one sequence is a tiled run; the rows between them
// (any number) form row-exact runs. Appends to `runs` (cleared first).
void split_runs(const int32_t* seq, const int32_t* pos, int64_t m, int64_t min_tiled, std::vector<RowRun>& runs);
// A batch as every backend cuts it: its rows into `runs`; the rows that want logits (m_out, the
// return value) with their sequences and positions in out_seq, out_pos (grown to m_out), into
// `out_runs`.
int64_t split_batch(const Batch& batch, int64_t min_tiled, std::vector<RowRun>& runs, std::vector<int32_t>& out_seq,
                    std::vector<int32_t>& out_pos, std::vector<RowRun>& out_runs);

// Activation buffers, named by role, grown to the largest batch seen and then reused.
// m = rows of the batch, m_out = rows whose logits are wanted. The float buffers are the CPU
// backend's; a GPU backend keeps its own in device memory and uses only the host-side rows here.
struct Workspace {
    Workspace();
    ~Workspace();
    Workspace(Workspace&&) noexcept;
    Workspace& operator=(Workspace&&) noexcept;

    std::vector<float> x;          // (m, d) the residual stream
    std::vector<float> x_norm;     // (m, d) RMSNorm of x (attention input, then FFN input)
    std::vector<float> q;          // (m, q_dim) queries (rotated in place)
    std::vector<float> k;          // (m, kv_dim) keys (rotated in place)
    std::vector<float> v;          // (m, kv_dim) values
    std::vector<float> attn;       // (m, q_dim) attention output per head, before the output projection
    std::vector<float> attn_out;   // (m, d) after the output projection
    std::vector<float> ffn_gate;   // (m, n_ff)
    std::vector<float> ffn_up;     // (m, n_ff)
    std::vector<float> ffn_act;    // (m, n_ff) silu(gate) * up
    std::vector<float> ffn_out;    // (m, d)
    std::vector<float> out_norm;   // (m_out, d) final norm of the rows that want logits
    std::vector<float> logits;     // (m_out, n_vocab) in batch order of those rows
    cpu::QuantizedRows x_q;       // (m, k) the current matmul input as int16 (fast path)
    std::vector<int64_t> slots;    // (m) KV slot of each row
    std::vector<AttentionRow> attn_rows;  // (m) what each row may attend to
    cpu::RopeTable rope;           // (m, rope_dim/2) cos and sin of each row's rotation angles
    std::vector<RowRun> runs;      // the batch's rows as runs (split_runs)
    std::vector<RowRun> out_runs;  // the same for the m_out rows that want logits
    std::vector<int32_t> out_seq, out_pos;  // (m_out) those rows' sequences and positions
    // The backend that runs this workspace's passes, made for `engine` by the first forward().
    std::unique_ptr<Backend> backend;
    const Engine* engine = nullptr;
    // The costs-only backend that counts a pass the GPU replayed from a graph (made when needed).
    std::unique_ptr<Backend> cost_backend;
    int64_t n_logit_rows = 0;      // m_out of the last forward
    int n_vocab = 0;

    const float* logits_row(int64_t i) const { return logits.data() + i * n_vocab; }
    void reserve(const Config& c, int64_t m, int64_t m_out);
};

// Runs the model over the batch, on the engine's device with its plan. Preconditions: every row's sequence exists in the cache with
// length > pos (KVCache::append made room), and positions of a sequence below a row's pos are
// either stored already or in this batch. Writes ws.logits for the rows with want_logits, adds
// every kernel's cost and wall time to `counters` under its op and layer (if given; nullptr counts
// nothing and reads no clock) and writes named intermediates to `dump` (if given).
void forward(const Engine& engine, KVCache& cache, const Batch& batch, Workspace& ws,
             Counters* counters = nullptr, Dumper* dump = nullptr);

}  // namespace ridge
