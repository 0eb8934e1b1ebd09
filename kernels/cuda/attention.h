// Causal grouped-query attention over the paged KV cache on the GPU, and the store of new keys and
// values into it: the CUDA twins of kernels/cpu/attention.h (same KVLayer, AttentionShape,
// AttentionRow, same contracts and costs), on device pointers, queued on a Stream. Variants:
// v1_split (decode rows, flash-decoding: the keys split across blocks, then combined), v2_flash (a
// prefill chunk: query tiles x key tiles in shared memory, online softmax) and v3_wide (v1 with
// 16-byte KV loads and splits sized from the SM count). Plain C++:
// host code includes it with the host compiler; attention.cu implements it.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/types.h"
#include "kernels/cuda/runtime.h"

namespace ridge::cuda {

// The query rows of one attention call, on both sides of the bus. The kernels read `device`; the
// host reads `host` to size the launch, check the preconditions and count the cost, so both must
// hold the same rows, and in both each block_table points to DEVICE memory (the host never
// dereferences it, it only compares the pointers: v2's "one sequence" check). The engine builds
// the rows once per step on the host, uploads them once, and passes both to every layer.
struct AttentionRows {
    const AttentionRow* device = nullptr;  // (m) in device memory (v2_flash does not read it)
    const AttentionRow* host = nullptr;    // (m) the same rows in host memory
    int64_t m = 0;                              // query rows
    // The decode kernels' grid: at least this many splits (0: the longest row's). A caller that
    // captures the launch in a graph passes the most a row can have (v1: its cache capacity's
    // splits; v3: split_cap), so that the launch stays the same while the rows grow; the blocks
    // past a row's keys return at once.
    int launch_splits = 0;
    // v3_wide: at most this many splits a row (0: attention_v3_split_cap of the current device).
    int split_cap = 0;
};

// Keys per split of v1_split: a CUDA block reads one split of one row's keys. Fixed (not chosen from
// the batch) so that a row's result depends only on its own keys, never on the other rows.
inline constexpr int kSplitKeys = 256;
// The most splits a row may have in v3_wide.
inline constexpr int kMaxSplitCap = 256;
// The largest head_dim the kernels take (the register and shared-memory tiles are sized for it).
inline constexpr int kMaxHeadDim = 256;

// Contract (as cpu::kv_store): for each row i, K[slots[i]] = k[i] and V[slots[i]] = v[i], converted
// to kv.type (F16: round to nearest even, bit for bit cpu::f32_to_f16 on every non-NaN value).
//   kv.k, kv.v: (n_slots, kv_dim) on the device; k, v: (m, kv_dim) f32 on the device;
//   slots: (m) int64 on the device, distinct, in [0, kv.n_slots).
// The slots stay on the device, so the host cannot check them: a slot outside the cache is skipped
// (nothing written outside the pool), and checking them is the caller's part (the engine computes
// them on the host from its block tables). ridge::Error for a KV type other than F32 or F16.
// Cost: ridge::kv_store_cost(m, kv_dim, kv.type), the CPU's counters exactly.
Cost kv_store(const Stream& stream, const KVLayer& kv, const float* k, const float* v,
                   const int64_t* slots, int64_t m);

// Bytes of the decode kernels' partials for these rows: m * n_heads * splits * (head_dim + 2)
// floats, splits = max(launch_splits, the most any row has: v1 (split_cap 0) ceil(n_keys /
// kSplitKeys), v3 at most split_cap); 0 when that is 1 (then each block writes its row's output
// itself and no combine runs). Host only: touches no device.
size_t attention_split_workspace_bytes(const AttentionRow* rows_host, int64_t m, const AttentionShape& s,
                                       int launch_splits = 0, int split_cap = 0);

// v1_split, for decode rows (any rows: several sequences, any positions). Flash-decoding: a CUDA
// block per (row, KV head, group of up to 4 of its query heads, split of kSplitKeys keys) reads
// its keys and values once for all those query heads and writes a partial (max score, sum of
// e^(s - max), e^(s - max)-weighted sum of values); a second kernel combines a row's splits in
// order, each rescaled to the row's max. One long sequence thus spreads over
// ceil(n_keys / 256) * n_kv_heads * ceil(group / 4) blocks (group = n_heads / n_kv_heads).
// Contract and cost: as cpu::attention_v0_scalar (ridge::attention_cost over the rows' keys), with
//   q, out: (m, n_heads * head_dim) f32 on the device, not aliasing; rows: see AttentionRows;
//   1 <= head_dim <= kMaxHeadDim; m <= 65535 (a grid dimension).
// workspace: device scratch for the partials, kept by the caller between calls (one per stream);
// grown here when smaller than attention_split_workspace_bytes (after a stream.sync(), so work
// queued earlier that used it has finished). Its contents between calls mean nothing.
AttentionCost attention_v1_split(const Stream& stream, const float* q, const AttentionRows& rows,
                                      const KVLayer& kv, const AttentionShape& s, float* out,
                                      DeviceBuffer& workspace);

// v3_wide: v1_split with two changes for the GPU's memory system.
// - A lane holds 8 consecutive dims of a key and reads them in 16-byte loads (one for an f16
//   cache, two for f32) instead of 8 loads of 2 or 4 bytes.
// - A row's keys are cut into at most split_cap splits of equal size (a multiple of 32, at least
//   64 keys), not into splits of 256: a cap sized from the SM count keeps the GPU busy at any
//   context length (256-key splits give one 1K-key row 4 * n_kv_heads blocks for 132 SMs). The
//   split depends only on the row's own length and the cap, so a row's result is the same in any
//   batch; the grid is split_cap wide for every step, so a captured graph stays valid.
// Contract, cost and workspace: as v1_split (attention_split_workspace_bytes with split_cap); the
// sums run in another order, so results agree with v1's to rounding, not bit for bit.
// Precondition (attention_v3_fits): head_dim and kv_dim multiples of 8, kv.k and kv.v 16-byte
// aligned; ridge::Error otherwise, or for a split_cap above kMaxSplitCap.
AttentionCost attention_v3_wide(const Stream& stream, const float* q, const AttentionRows& rows,
                                const KVLayer& kv, const AttentionShape& s, float* out, DeviceBuffer& workspace);
bool attention_v3_fits(const KVLayer& kv, const AttentionShape& s);
// v3's cap for a GPU of sm_count multiprocessors: the splits that give one row at least two blocks
// a multiprocessor (a block per split, KV head and group of up to 4 query heads), in [1,
// kMaxSplitCap]. Host only.
int attention_v3_split_cap(int sm_count, const AttentionShape& s);

// Decode rows: v3_wide where it fits, v1_split otherwise. Either way a row's result depends only on
// its own keys (and the cap), as the engine's row-exact path needs.
inline AttentionCost attention_decode(const Stream& stream, const float* q, const AttentionRows& rows,
                                      const KVLayer& kv, const AttentionShape& s, float* out,
                                      DeviceBuffer& workspace) {
    return attention_v3_fits(kv, s) ? attention_v3_wide(stream, q, rows, kv, s, out, workspace)
                                    : attention_v1_split(stream, q, rows, kv, s, out, workspace);
}

// v2_flash, for a prefill chunk. Precondition: the rows are consecutive positions of one sequence
// (rows_are_one_chunk on rows.host: one block table, n_keys rising by one a row);
// ridge::Error otherwise. A CUDA block takes a tile of 32 query vectors (row, query head of one KV
// head's group: a chunk's rows times the group's heads) and walks the keys in tiles of 64 through
// shared memory: S = Q K^T, the causal mask, the online softmax, O += P V; no (m, n_keys) matrix
// ever reaches device memory.
// Contract: as v1_split (q, out on the device; 1 <= head_dim <= kMaxHeadDim). rows.device is not
// read (the block table is rows.host[0].block_table, a device pointer; the keys come from
// rows.host[0].n_keys).
// Cost: ridge::attention_blocked_cost(m, rows.host[0].n_keys, ...), the CPU's v2 counters: each key
// and value the chunk sees counted once (the kernel reads them once per tile of 32 query vectors,
// the later tiles mostly from L2).
AttentionCost attention_v2_flash(const Stream& stream, const float* q, const AttentionRows& rows,
                                      const KVLayer& kv, const AttentionShape& s, float* out);

// v2_flash for a chunk of at least kFlashMinRows consecutive rows of one sequence, attention_decode
// otherwise (the CPU's attention() rule, with the same threshold).
inline constexpr int64_t kFlashMinRows = 8;
inline AttentionCost attention(const Stream& stream, const float* q, const AttentionRows& rows,
                                    const KVLayer& kv, const AttentionShape& s, float* out,
                                    DeviceBuffer& workspace) {
    if (rows.m >= kFlashMinRows && rows_are_one_chunk(rows.host, rows.m))
        return attention_v2_flash(stream, q, rows, kv, s, out);
    return attention_decode(stream, q, rows, kv, s, out, workspace);
}

}  // namespace ridge::cuda
