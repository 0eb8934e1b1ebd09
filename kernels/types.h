// The types both kernel backends share (kernels/cpu and kernels/cuda take and return the same
// ones): Cost, the KV cache and attention views, the rope parameters, and every op's cost formula,
// so that the counters count the same bytes whichever device ran the op. Plain C++, no OpenMP, no
// CUDA; header-only, so kernels/cuda links nothing of kernels/cpu.
// Cost conventions: a fused multiply-add counts as 2 FLOPs; bytes are the bytes the kernel must read
// and write at least once, kept apart by what they are: weights (in their stored format, e.g.
// Q4_1 = 20 bytes per 32 weights), activations (f32, plus small index arrays such as token ids),
// and the KV cache (in its element type: f32 4 bytes, f16 2 bytes per value).
#pragma once
#include <cstdint>

#include "weights/config.h"
#include "weights/types.h"

namespace ridge {

struct Cost {
    double flops = 0;        // floating-point operations
    double weight_bytes = 0; // model weights read
    double act_read = 0;     // activations (and index arrays) read
    double act_written = 0;  // activations written
    double kv_read = 0;      // KV cache read
    double kv_written = 0;   // KV cache written

    // Not an aggregate on purpose: a positional {flops, bytes} from before the byte categories
    // must not compile into {flops, weight_bytes}. Set the fields by name.
    Cost() = default;

    // Everything the kernel reads and writes.
    double bytes() const { return weight_bytes + act_read + act_written + kv_read + kv_written; }
    // The roofline's bytes: what streams from memory every step (weights, KV cache). Activations
    // are left out: at these sizes they stay in cache between kernels.
    double memory_bytes() const { return weight_bytes + kv_read + kv_written; }
    // Arithmetic intensity I = FLOPs / memory_bytes() (0 when no weight or KV byte moved).
    double intensity() const { return memory_bytes() > 0 ? flops / memory_bytes() : 0.0; }

    Cost& operator+=(const Cost& o) {
        flops += o.flops;
        weight_bytes += o.weight_bytes;
        act_read += o.act_read;
        act_written += o.act_written;
        kv_read += o.kv_read;
        kv_written += o.kv_written;
        return *this;
    }
    friend Cost operator+(Cost a, const Cost& b) { return a += b; }
    // Every field times f (per-token figures: total.scale(1.0 / tokens)).
    Cost& scale(double f) {
        flops *= f, weight_bytes *= f, act_read *= f, act_written *= f, kv_read *= f, kv_written *= f;
        return *this;
    }
};

// ---- the KV cache and attention ---------------------------------------------------------------
// One layer's keys and values (F32 or F16 elements), in host or device memory.
struct KVLayer {
    DType type = DType::F32;  // F32 or F16
    uint8_t* k = nullptr;     // (n_slots, kv_dim) keys, already rotated
    uint8_t* v = nullptr;     // (n_slots, kv_dim) values
    int64_t n_slots = 0;      // n_blocks * block_size
    int kv_dim = 0;           // n_kv_heads * head_dim
    int block_size = 0;       // slots per block
};

struct AttentionShape {
    int n_heads = 0;     // query heads
    int n_kv_heads = 0;  // key/value heads; query head h reads kv head h / (n_heads / n_kv_heads)
    int head_dim = 0;
};

// What one query row may see: keys 0 .. n_keys-1 of its sequence (n_keys = its position + 1 gives
// the causal mask), found through the sequence's block table.
struct AttentionRow {
    const int32_t* block_table = nullptr;  // (ceil(n_keys / block_size)) block ids of the sequence
    int32_t n_keys = 0;                    // >= 1
};

// Slot of position pos in a sequence with this block table.
inline int64_t kv_slot(const int32_t* block_table, int32_t pos, int block_size) {
    return int64_t(block_table[pos / block_size]) * block_size + pos % block_size;
}

// Whether m >= 1 rows are consecutive positions of one sequence (one block table, n_keys rising by
// one from row to row), as a prefill chunk's are: the precondition of the blocked attention kernels.
inline bool rows_are_one_chunk(const AttentionRow* rows, int64_t m) {
    for (int64_t i = 1; i < m; i++)
        if (rows[i].block_table != rows[0].block_table || rows[i].n_keys != rows[0].n_keys + i) return false;
    return m >= 1;
}

// Attention's cost in two parts: the scores (Q.K, scale, softmax; reads the keys) and the mix
// (P.V; reads the values).
struct AttentionCost {
    Cost scores;
    Cost mix;
    Cost total() const { return scores + mix; }
};

// ---- rotary position embedding ----------------------------------------------------------------
struct RopeParams {
    int head_dim = 0;      // elements per head
    int rope_dim = 0;      // leading elements of each head that rotate (even, <= head_dim)
    float freq_base = 10000.0f;
    RopeStyle style = RopeStyle::Norm;  // Norm: pairs (2i, 2i+1); Neox: pairs (i, i + rope_dim/2)
};

// ---- the cost of every op (the contracts are in kernels/cpu/*.h) ------------------------------
// Embedding lookup of m tokens from a table of rows of d elements of `type`.
inline Cost embed_cost(DType type, int64_t d, int64_t m) {
    Cost c;
    c.weight_bytes = double(m) * double(row_bytes(type, d));  // one table row per token
    c.act_read = 4.0 * double(m);                             // the token ids
    c.act_written = 4.0 * double(m * d);
    return c;
}

inline Cost rmsnorm_cost(int64_t m, int64_t d) {
    Cost c;
    c.flops = 4.0 * double(m * d);
    c.weight_bytes = 4.0 * double(d);  // the f32 norm weights, once per call
    c.act_read = 4.0 * double(m * d);
    c.act_written = 4.0 * double(m * d);
    return c;
}

inline Cost rope_cost(int64_t m, int n_heads, const RopeParams& p) {
    Cost c;
    c.flops = 6.0 * double(m) * n_heads * (p.rope_dim / 2);
    c.act_read = 4.0 * double(m) * n_heads * p.head_dim + 4.0 * double(m);  // x and the positions
    c.act_written = 4.0 * double(m) * n_heads * p.head_dim;
    return c;
}

inline Cost softmax_cost(int64_t n) {
    Cost c;
    c.flops = 4.0 * double(n);
    c.act_read = 4.0 * double(n);
    c.act_written = 4.0 * double(n);
    return c;
}

inline Cost swiglu_cost(int64_t n) {
    Cost c;
    c.flops = 5.0 * double(n);
    c.act_read = 8.0 * double(n);  // gate and up
    c.act_written = 4.0 * double(n);
    return c;
}

inline Cost add_cost(int64_t n) {
    Cost c;
    c.flops = double(n);
    c.act_read = 8.0 * double(n);  // x and y
    c.act_written = 4.0 * double(n);
    return c;
}

// A bias b (n) added to each of m rows: FLOPs m*n; weight bytes 4*n (b); activations read and
// written 4*m*n each.
inline Cost add_bias_cost(int64_t m, int64_t n) {
    Cost c;
    c.flops = double(m) * double(n);
    c.weight_bytes = 4.0 * double(n);
    c.act_read = 4.0 * double(m) * double(n);
    c.act_written = 4.0 * double(m) * double(n);
    return c;
}

// Y (m, n) = X (m, k) . W^T for W of n rows of k elements of `type`, X in f32.
inline Cost matmul_cost(DType type, int64_t k, int64_t n, int64_t m) {
    Cost c;
    c.flops = 2.0 * double(m) * double(n) * double(k);
    c.weight_bytes = double(n) * double(row_bytes(type, k));  // W once, in its stored format
    c.act_read = 4.0 * double(m) * double(k);                  // X
    c.act_written = 4.0 * double(m) * double(n);               // Y
    return c;
}

// X as 16-bit integer blocks of 32 (kernels/cpu/matmul.h): 32 codes, a scale and a sum.
inline constexpr double kActBlockBytes = 32 * 2 + 2 * 4;  // 72 bytes per block
inline Cost quantize_rows_cost(int64_t m, int64_t k) {
    Cost c;
    c.flops = 3.0 * double(m) * double(k);
    c.act_read = 4.0 * double(m) * double(k);
    c.act_written = double(m) * double(k / 32) * kActBlockBytes;
    return c;
}
// The same matmul with X given as those blocks.
inline Cost matmul_int_cost(DType type, int64_t k, int64_t n, int64_t m) {
    Cost c = matmul_cost(type, k, n, m);
    c.act_read = double(m) * double(k / 32) * kActBlockBytes;
    return c;
}

// Bytes of one KV cache value of type F32 or F16.
inline double kv_value_bytes(DType kv_type) { return double(block_bytes(kv_type)); }

// Keys and values of m rows into the cache.
inline Cost kv_store_cost(int64_t m, int kv_dim, DType kv_type) {
    const double eb = kv_value_bytes(kv_type);
    Cost c;
    c.act_read = 8.0 * double(m) * kv_dim + 8.0 * double(m);  // k, v and the slots
    c.kv_written = 2.0 * double(m) * kv_dim * eb;
    return c;
}

// m query rows that see n_keys keys in all (N = sum_i n_keys_i):
//   scores: FLOPs n_heads*N*(2*head_dim + 4) (dot products, then the softmax's 4 per score, which
//     takes the 1/sqrt(head_dim) scale with its subtract); KV read N*kv_dim*bytes (the keys);
//     activations read 4*m*n_heads*head_dim (q).
//   mix: FLOPs n_heads*N*2*head_dim; KV read N*kv_dim*bytes (the values); activations written
//     4*m*n_heads*head_dim (out).
inline AttentionCost attention_cost(int64_t m, double n_keys, int kv_dim, DType kv_type, const AttentionShape& s) {
    const double eb = kv_value_bytes(kv_type), qo = 4.0 * double(m) * s.n_heads * s.head_dim;
    AttentionCost c;
    c.scores.flops = double(s.n_heads) * n_keys * (2.0 * s.head_dim + 4.0);
    c.scores.kv_read = n_keys * kv_dim * eb;  // the keys
    c.scores.act_read = qo;                   // q
    c.mix.flops = double(s.n_heads) * n_keys * 2.0 * s.head_dim;
    c.mix.kv_read = n_keys * kv_dim * eb;     // the values
    c.mix.act_written = qo;                   // out
    return c;
}
// A chunk of m consecutive rows whose first row sees first_keys keys, through a blocked kernel:
// the FLOPs above (N = m * first_keys + m (m - 1) / 2), but each key and value the chunk sees is
// read from the cache once (first_keys + m - 1 positions), not once per row: the tiling lesson,
// KV intensity rising with the chunk's length.
inline AttentionCost attention_blocked_cost(int64_t m, int64_t first_keys, int kv_dim, DType kv_type,
                                            const AttentionShape& s) {
    const double n_keys = double(m) * double(first_keys) + double(m) * double(m - 1) / 2;  // sum over rows
    AttentionCost c = attention_cost(m, n_keys, kv_dim, kv_type, s);
    const double once = double(first_keys + m - 1) * kv_dim * kv_value_bytes(kv_type);
    c.scores.kv_read = once;
    c.mix.kv_read = once;
    return c;
}

}  // namespace ridge
