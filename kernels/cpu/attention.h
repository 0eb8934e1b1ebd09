// Causal grouped-query attention over a paged KV cache, and the store of new keys/values into it.
// The cache of one layer is a pool of slots (n_slots, kv_dim) grouped in fixed-size blocks; a
// sequence owns a list of blocks (its block table), and its position p lives in slot
// table[p / block_size] * block_size + p % block_size. Variants: v0_scalar (reference twin, one
// thread, double accumulators), v1_omp (OpenMP over (row, head) pairs, f32 accumulators) and
// v2_blocked (a prefill chunk: per KV head the keys and values are gathered once into contiguous
// f32 matrices, and each block of query rows and head is two Eigen GEMMs, S = Q K^T and O = P V,
// with the causal mask in the softmax; the baseline v4 is measured against), v3_split (decode
// rows: OpenMP over (row, KV block) pairs, the softmax combined over blocks) and v4_tiled (v2's
// plan on ridge's own register-tiled GEMM). attention() takes v4 for a chunk of at least
// kBlockedMinRows consecutive rows of one sequence, v3 otherwise.
#pragma once
#include <cstdint>

#include "kernels/cpu/cost.h"
#include "weights/types.h"

namespace ridge::cpu {

// The shared views (kernels/types.h).
using ridge::AttentionCost;
using ridge::AttentionRow;
using ridge::AttentionShape;
using ridge::KVLayer;
using ridge::kv_slot;

// Contract: for each row i, kv.k[slots[i]] = k[i] and kv.v[slots[i]] = v[i] (converted to kv.type).
//   k, v: (m, kv_dim) f32; slots: (m) distinct, in [0, kv.n_slots).
// Cost: FLOPs 0; activations read 8*m*kv_dim + 8*m (k, v, slots); KV written 2*m*kv_dim*bytes(kv.type).
using ridge::kv_store_cost;  // the cost above, alone (for planning; kernels/types.h)
Cost kv_store(const KVLayer& kv, const float* k, const float* v, const int64_t* slots, int64_t m);

// Contract: for each row i and query head h (kv head g = h / (n_heads / n_kv_heads)):
//   s_j = q[i,h] . K[key j, g] / sqrt(head_dim) for j < n_keys;  p = softmax(s);
//   out[i,h] = sum_j p_j V[key j, g].
//   q, out: (m, n_heads * head_dim) f32, not aliasing; rows: (m); the keys must be stored already.
// Cost, in two parts (N = sum_i n_keys_i; the scores matrix lives in a per-thread buffer):
//   scores (Q.K, scale, softmax): FLOPs n_heads*N*(2*head_dim + 4) (dot products, then the
//     softmax's 4 per score, which takes the 1/sqrt(head_dim) scale with its subtract);
//     KV read N*kv_dim*bytes(kv.type) (the keys); activations read 4*m*n_heads*head_dim (q).
//   mix (P.V): FLOPs n_heads*N*2*head_dim; KV read N*kv_dim*bytes(kv.type) (the values);
//     activations written 4*m*n_heads*head_dim (out).
//   Together: FLOPs n_heads*N*(4*head_dim + 4), bytes 2*N*kv_dim*bytes(kv.type) + 8*m*n_heads*head_dim.
// The cost above, alone (for planning): m query rows that see n_keys keys in all (N above).
using ridge::attention_cost;
// The cost of v2_blocked on a chunk of m consecutive rows whose first row sees first_keys keys:
// the FLOPs above (N = m * first_keys + m (m - 1) / 2), but each key and value the chunk sees is
// read from the cache once (K_read = first_keys + m - 1 positions), not once per row: the tiling
// lesson, KV intensity rising with the chunk's length.
using ridge::attention_blocked_cost;
AttentionCost attention_v0_scalar(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                                  const AttentionShape& s, float* out);
AttentionCost attention_v1_omp(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                               const AttentionShape& s, float* out);
// v3_split, for decode rows: OpenMP over (row, KV block, KV head) triples. A block's keys and
// values are one stretch of the pool (block_size consecutive slots); a task reads its KV head's
// part of them once for every query head of the group: the scores, their max, e^(s - max), their
// sum and the weighted sum of values. The row's blocks are then combined in order, each rescaled
// to the row's max (the softmax split over blocks, as in flash-decoding). A row's result depends
// only on its own keys, not on m, the other rows or the thread count.
// Same contract and cost as above (its partials, (blocks, n_heads, head_dim + 2) floats, stay in
// a per-thread buffer and are not counted, like the scores).
AttentionCost attention_v3_split(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                                 const AttentionShape& s, float* out);
// Precondition: rows are consecutive positions of one sequence (one block table, n_keys rising by
// one from row to row), as a prefill chunk's are; ridge::Error otherwise.
AttentionCost attention_v2_blocked(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                                   const AttentionShape& s, float* out);
inline bool attention_v2_applies(const AttentionRow* rows, int64_t m) { return rows_are_one_chunk(rows, m); }
// v4_tiled: v2's plan with ridge's own GEMM in place of Eigen's. The chunk's keys (transposed) and
// values are gathered once per KV head into panels of 16 columns; a task is a block of 64 query rows
// and one KV head, the group's query heads stacked into one matrix, so that both products run on
// all of them with 6 x 16 register tiles (as the prefill matmul v6); the softmax's division comes
// after P V, once per output element. Same precondition, contract and cost as v2; faster than v2
// on prompt chunks (docs/measurements/source-comment-history.md).
AttentionCost attention_v4_tiled(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                                 const AttentionShape& s, float* out);
inline constexpr int64_t kBlockedMinRows = 8;

inline AttentionCost attention(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                               const AttentionShape& s, float* out) {
    if (m >= kBlockedMinRows && attention_v2_applies(rows, m)) return attention_v4_tiled(q, rows, m, kv, s, out);
    return attention_v3_split(q, rows, m, kv, s, out);
}

}  // namespace ridge::cpu
