// Explain: a model's roofline worked out on paper (formulas, no timing), the teaching view behind
// `ridge explain`. For one layer and the output head it lists every op of forward() with its shape,
// FLOPs and bytes (from the kernels' own *_cost functions, so explain and the counters of a real
// run agree op for op), its intensity and, against a machine's ceilings, whether it is memory- or
// compute-bound; then totals for a prefill of T tokens and a decode step at context c, the KV
// cache and the memory to run.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "measure/ceilings.h"
#include "engine/counters.h"
#include "engine/engine.h"
#include "kernels/types.h"
#include "weights/model_file.h"

namespace ridge {

struct ExplainOptions {
    int tokens = 1;             // T: prompt tokens run as one forward of T rows (positions 0..T-1)
    int context = 512;          // c: positions the decoded token attends to (itself and c-1 before)
    DType kv_type = DType::F32; // KV cache element type: F32 or F16
    bool exact = false;         // Model::exact: f32 activations for every matmul (no quantize ops)
    bool gpu = false;           // the plan of the CUDA backend (--device cuda): f32 activations, the GPU's tiled threshold
};

// One op of forward(): what it computes and what it costs, for one layer (or outside the layers).
struct ExplainOp {
    Op op = Op::Count;      // the counters' op (engine/counters.h) this call is recorded under
    std::string name;       // forward()'s name for the call: attn_norm, q, ..., ffn_resid, final_norm, logits
    std::string shape;      // e.g. "x(1×576) · Wq(576×576)"
    std::string type;       // storage type of what it streams: the weight's ("Q4_1"), the KV cache's, or F32
    Cost cost;         // FLOPs and bytes by category, from the kernel's *_cost function
};

// One forward pass: `rows` consecutive rows of one sequence through every layer (rows = T for a
// prefill, 1 for a decode step), logits for the last row only.
struct ExplainPhase {
    std::string name;              // "prefill" or "decode"
    int64_t rows = 0;              // m of every (m x k) . (k x n) product
    int64_t first_pos = 0;         // position of the first row
    int64_t n_keys = 0;            // keys all rows attend to, per layer (sum over rows of pos + 1)
    std::vector<ExplainOp> layer;  // layer 0's ops, in forward() order
    std::vector<ExplainOp> outside;  // embedding, final_norm, logits
    Cost layers;              // every layer (each with its own weights)
    Cost total;               // the whole forward: outside + layers
    std::array<Cost, kNumOps> by_op{};  // the whole forward per counters op

    Cost per_token() const { return Cost(total).scale(1.0 / double(rows)); }
};

struct Explain {
    Config config;
    ExplainOptions opt;
    ExplainPhase prefill;          // T rows at positions 0..T-1
    ExplainPhase decode;           // one row at position c-1, which attends to c positions
    bool layers_differ = false;    // some layer's weight types differ from layer 0's
    int64_t n_params = 0;
    uint64_t weight_bytes = 0;     // every tensor of the model, as stored
    int64_t n_ctx = 0;             // positions the KV cache must hold: max(T, c)
    uint64_t kv_bytes_f32 = 0;     // KV cache at n_ctx positions, f32 values
    uint64_t kv_bytes_f16 = 0;     // the same with f16 values
    uint64_t activation_bytes = 0; // forward()'s workspace for T rows (workspace_bytes)
    std::vector<std::string> plan; // the kernel of every matrix, decided at load (describe_plan)
    uint64_t memory_bytes() const;  // weights + KV cache (opt.kv_type) + activations
};

// Throws ridge::Error for T < 1, c < 1 or a KV type other than F32/F16.
Explain explain_model(const ModelFile& file, const ExplainOptions& opt);

// Bytes of forward()'s Workspace (engine/forward.h) after reserve(c, m, m_out).
uint64_t workspace_bytes(const Config& c, int64_t m, int64_t m_out);

// The roofline verdicts, with the counters' and `ridge bench`'s conventions: intensity is FLOPs
// per byte of memory traffic (weights + KV cache; activations stay in cache, Cost).
enum class Bound { Memory, Compute, Cache };  // Cache: no weight or KV byte moves (rope, swiglu, ...)
Bound roofline_bound(const Cost& cost, const Ceilings& ceil);  // intensity vs I* = peak / bw
const char* bound_name(Bound b);                                    // "memory", "compute", "cache"
// The least time the machine needs for it: max(FLOPs / peak, memory bytes / bandwidth), seconds.
double min_seconds(const Cost& cost, const Ceilings& ceil);

}  // namespace ridge
