// Counters: the FLOPs, bytes (by category: weights, activations, KV cache) and time of every
// kernel call of a forward pass, attributed to its op (q, k, v, o, gate, ...) and layer. A
// Session keeps one Counters per phase (prefill, decode). Plain data, passed in; forward() fills
// it when given one, and counts nothing (not even the clock) when given nullptr.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "kernels/types.h"

namespace ridge {

// Every op of a Llama forward pass, in the order forward() runs them.
enum class Op {
    Embed,       // token embedding lookup (one table row per token)
    Norm,        // RMSNorm (two per layer, Qwen3's q and k head norms, and the final norm)
    Quantize,    // a matmul input as 16-bit integers (the fast path; see kernels/cpu/matmul.h)
    Q, K, V,     // the query / key / value projections
    Bias,        // Qwen2's q, k, v biases added to the projections
    Rope,        // rotary position embedding of q and k
    KVStore,     // keys and values into the KV cache
    AttnScores,  // softmax(Q K^T / sqrt(head_dim)): reads the keys
    AttnMix,     // P V: reads the values
    O,           // the attention output projection
    Residual,    // the residual adds (two per layer)
    Gate, Up,    // the feed-forward input projections
    Swiglu,      // silu(gate) * up
    Down,        // the feed-forward output projection
    OutputHead,  // the logits matmul (the tied embedding table, or output.weight)
    Count
};
inline constexpr size_t kNumOps = size_t(Op::Count);

inline const char* op_name(Op op) {
    switch (op) {
        case Op::Embed: return "embedding";
        case Op::Norm: return "norm";
        case Op::Quantize: return "quantize";
        case Op::Q: return "q";
        case Op::K: return "k";
        case Op::V: return "v";
        case Op::Bias: return "bias";
        case Op::Rope: return "rope";
        case Op::KVStore: return "kv_store";
        case Op::AttnScores: return "attn_scores";
        case Op::AttnMix: return "attn_mix";
        case Op::O: return "o";
        case Op::Residual: return "residual";
        case Op::Gate: return "gate";
        case Op::Up: return "up";
        case Op::Swiglu: return "swiglu";
        case Op::Down: return "down";
        case Op::OutputHead: return "output_head";
        case Op::Count: break;
    }
    return "?";
}

enum class Phase { Prefill, Decode };
inline const char* phase_name(Phase p) { return p == Phase::Prefill ? "prefill" : "decode"; }

// One op's totals: its cost, the wall time of its kernel calls, and how many calls.
struct OpRecord {
    Cost cost;
    double seconds = 0;
    int64_t calls = 0;

    OpRecord& operator+=(const OpRecord& o) {
        cost += o.cost;
        seconds += o.seconds;
        calls += o.calls;
        return *this;
    }
};

struct Counters {
    using OpRecords = std::array<OpRecord, kNumOps>;
    std::vector<OpRecords> layers;  // (n_layers) per layer, per op
    OpRecords outside{};            // ops outside the layers: embedding, final norm, output head
    // Every call in order, when keep_calls is set (ridge explain reads a pass on paper this way).
    struct Call {
        int layer;
        Op op;
        Cost cost;
    };
    bool keep_calls = false;
    std::vector<Call> calls;

    // Adds one kernel call; layer < 0 means outside the layers (the vector grows as needed).
    void add(int layer, Op op, const Cost& cost, double seconds) {
        OpRecords* rec = &outside;
        if (layer >= 0) {
            if (size_t(layer) >= layers.size()) layers.resize(size_t(layer) + 1, OpRecords{});
            rec = &layers[size_t(layer)];
        }
        if (keep_calls) calls.push_back(Call{layer, op, cost});
        OpRecord& r = (*rec)[size_t(op)];
        r.cost += cost;
        r.seconds += seconds;
        r.calls += 1;
    }

    // Sums over layers and ops.
    OpRecord op(Op op) const {
        OpRecord r = outside[size_t(op)];
        for (const OpRecords& l : layers) r += l[size_t(op)];
        return r;
    }
    OpRecord layer(int l) const {  // l < 0: the ops outside the layers
        const OpRecords& recs = l < 0 ? outside : layers.at(size_t(l));
        OpRecord r;
        for (const OpRecord& x : recs) r += x;
        return r;
    }
    OpRecord total() const {
        OpRecord r = layer(-1);
        for (size_t l = 0; l < layers.size(); l++) r += layer(int(l));
        return r;
    }

    Counters& operator+=(const Counters& o) {
        if (layers.size() < o.layers.size()) layers.resize(o.layers.size(), OpRecords{});
        for (size_t l = 0; l < o.layers.size(); l++)
            for (size_t i = 0; i < kNumOps; i++) layers[l][i] += o.layers[l][i];
        for (size_t i = 0; i < kNumOps; i++) outside[i] += o.outside[i];
        return *this;
    }
    void clear() { *this = Counters{}; }
};

// How forward() records its kernel calls: add() gives a call that has just
// finished its cost and the wall time since the previous record (the kernels run one after
// another). `drain` runs before each clock reading (the GPU waits for its stream there). With
// counters == nullptr nothing is recorded and no clock is read; with timed == false the costs are
// recorded with no time and no clock is read either (a GPU pass replayed from a CUDA graph, whose
// ops run without the host).
class CallRecorder {
public:
    explicit CallRecorder(Counters* counters, std::function<void()> drain = {}, bool timed = true)
        : counters_(counters), drain_(std::move(drain)), timed_(timed),
          last_(counters && timed ? Clock::now() : Clock::time_point{}) {}
    bool on() const { return counters_ != nullptr; }
    // Seconds since the previous reading (call only when on()); 0 when not timed.
    double elapsed() {
        if (!timed_) return 0;
        if (drain_) drain_();
        const Clock::time_point now = Clock::now();
        const double s = std::chrono::duration<double>(now - last_).count();
        last_ = now;
        return s;
    }
    void add(int layer, Op op, const Cost& cost) {
        if (counters_) counters_->add(layer, op, cost, elapsed());
    }
    void add(int layer, Op op, const Cost& cost, double seconds) {
        if (counters_) counters_->add(layer, op, cost, seconds);
    }
    // One attention call computes both the scores (Q.K) and the mix (P.V): its time is shared
    // between them in proportion to their FLOPs (only the sum is measured).
    void add_attention(int layer, const AttentionCost& cost) {
        if (!counters_) return;
        const double s = elapsed(), flops = cost.scores.flops + cost.mix.flops;
        const double share = flops > 0 ? cost.scores.flops / flops : 0.5;
        counters_->add(layer, Op::AttnScores, cost.scores, s * share);
        counters_->add(layer, Op::AttnMix, cost.mix, s * (1.0 - share));
    }

private:
    using Clock = std::chrono::steady_clock;
    Counters* counters_;
    std::function<void()> drain_;
    bool timed_;
    Clock::time_point last_;
};

}  // namespace ridge
