// PrefixCache: keys and values of whole prompt chunks, kept after their request ends and shared with
// any later request whose prompt starts with the same tokens, so that a multi-turn chat or a shared
// system prompt prefills only from its first new chunk.
//
// The unit is the scheduler's prefill chunk: positions [c * chunk, (c + 1) * chunk) of a prompt,
// the rows the scheduler always computes together whatever else runs. An entry is one such chunk,
// keyed by its tokens and by the entry of the chunk before it (so by the whole prefix), and holds
// the chunk / block_size KV blocks that store it, with one reference each (KVCache::retain). Reusing
// an entry is exact: the kernels that computed the chunk are the ones that would compute it again
// (a whole chunk is one tiled run, forward.h), from the same tokens at the same positions after the
// same prefix, so a request's KV, logits and tokens are bit for bit those it would get without a hit.
// Only chunks computed as prompt chunks are entered; the keys of generated tokens (decode rows, a
// different kernel) never are.
//
// Entries no sequence holds are idle: they stay until the pool needs their blocks, and reclaim()
// drops the least recently used first, the ends of prefixes before what they extend (dropping an
// entry drops the entries that extend it too: they could no longer be reached).
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache.h"

namespace ridge {

class PrefixCache {
public:
    // chunk: the scheduler's prefill chunk, a multiple of the cache's block size.
    PrefixCache(int chunk, int block_size);

    // The KV blocks of the longest run of cached chunks that starts `prompt`, at most max_chunks
    // of them, in order (chunks * chunk / block_size blocks); marks them used now.
    std::vector<int32_t> lookup(const std::vector<int32_t>& prompt, int max_chunks);
    // After chunk c of prompt was computed into seq: enters it, holding its blocks, unless an equal
    // chunk is cached or the chunk before it is not (an entry must be reachable from the start).
    void insert(KVCache& cache, int seq, const std::vector<int32_t>& prompt, int c);
    // Drops idle entries, least recently used first, until the cache has `blocks` free blocks;
    // false when the idle entries cannot make that many.
    bool reclaim(KVCache& cache, int blocks);

    int chunk() const { return chunk_; }
    int cached_blocks() const;                      // blocks the entries hold
    int idle_blocks(const KVCache& cache) const;    // of those, blocks no sequence holds (reclaimable)
    int entries() const { return int(entries_.size()); }

private:
    struct Entry {
        uint64_t parent = 0;              // id of the entry of the chunk before (0: the first chunk)
        std::vector<int32_t> tokens;      // (chunk) the chunk's tokens
        std::vector<int32_t> blocks;      // (chunk / block_size) the KV blocks that hold it
        uint64_t last_used = 0;           // clock_ at the last lookup or insert
        int children = 0;                 // entries whose parent this is
    };
    uint64_t find(uint64_t parent, const int32_t* tokens) const;  // entry id or 0
    static uint64_t key(uint64_t parent, const int32_t* tokens, int n);
    void drop(KVCache& cache, uint64_t id);  // the entry and those that extend it

    int chunk_ = 0;
    int block_size_ = 0;
    uint64_t next_id_ = 1;   // ids are never reused, so a dropped parent matches no new entry
    uint64_t clock_ = 0;
    std::unordered_map<uint64_t, Entry> entries_;             // by id
    std::unordered_multimap<uint64_t, uint64_t> by_key_;      // key(parent, tokens) -> id
};

}  // namespace ridge
