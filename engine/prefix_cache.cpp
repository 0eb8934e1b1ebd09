// PrefixCache: the index of cached prompt chunks, their lookup along a prompt, and reclaiming idle
// ones least recently used first.
#include "engine/prefix_cache.h"

#include <algorithm>
#include <string>

#include "weights/error.h"

namespace ridge {

PrefixCache::PrefixCache(int chunk, int block_size) : chunk_(chunk), block_size_(block_size) {
    if (chunk <= 0 || block_size <= 0 || chunk % block_size != 0)
        throw Error("prefix cache: the prefill chunk " + std::to_string(chunk) +
                    " must be a positive multiple of the KV block size " + std::to_string(block_size));
}

uint64_t PrefixCache::key(uint64_t parent, const int32_t* tokens, int n) {
    uint64_t h = 1469598103934665603ull ^ parent;  // FNV-1a over the parent id and the tokens
    for (int i = 0; i < n; i++) {
        h ^= uint32_t(tokens[i]);
        h *= 1099511628211ull;
    }
    return h;
}

uint64_t PrefixCache::find(uint64_t parent, const int32_t* tokens) const {
    auto [it, end] = by_key_.equal_range(key(parent, tokens, chunk_));
    for (; it != end; ++it) {  // a key is a hash: the entry must match exactly
        const Entry& e = entries_.at(it->second);
        if (e.parent == parent && std::equal(e.tokens.begin(), e.tokens.end(), tokens)) return it->second;
    }
    return 0;
}

std::vector<int32_t> PrefixCache::lookup(const std::vector<int32_t>& prompt, int max_chunks) {
    std::vector<uint64_t> path;
    uint64_t parent = 0;
    for (int c = 0; c < max_chunks && size_t(c + 1) * size_t(chunk_) <= prompt.size(); c++) {
        const uint64_t id = find(parent, prompt.data() + size_t(c) * size_t(chunk_));
        if (id == 0) break;
        path.push_back(id);
        parent = id;
    }
    std::vector<int32_t> blocks;
    for (uint64_t id : path) {
        const Entry& e = entries_.at(id);
        blocks.insert(blocks.end(), e.blocks.begin(), e.blocks.end());
    }
    // The start of a prefix counts as used later than its end, so that the end is dropped first.
    for (auto it = path.rbegin(); it != path.rend(); ++it) entries_.at(*it).last_used = ++clock_;
    return blocks;
}

void PrefixCache::insert(KVCache& cache, int seq, const std::vector<int32_t>& prompt, int c) {
    if (c < 0 || size_t(c + 1) * size_t(chunk_) > prompt.size())
        throw Error("prefix cache: chunk " + std::to_string(c) + " is not a whole chunk of the prompt");
    uint64_t parent = 0;
    for (int i = 0; i < c; i++) {
        parent = find(parent, prompt.data() + size_t(i) * size_t(chunk_));
        if (parent == 0) return;  // the prefix before it is not cached: the chunk could not be reached
    }
    const int32_t* tokens = prompt.data() + size_t(c) * size_t(chunk_);
    if (find(parent, tokens) != 0) return;  // an equal chunk is cached (computed by another request)
    const std::vector<int32_t>& table = cache.block_table(seq);
    const size_t per = size_t(chunk_ / block_size_), first = size_t(c) * per;
    if (table.size() < first + per) throw Error("prefix cache: sequence " + std::to_string(seq) + " does not hold chunk " + std::to_string(c));
    Entry e;
    e.parent = parent;
    e.tokens.assign(tokens, tokens + chunk_);
    e.blocks.assign(table.begin() + std::ptrdiff_t(first), table.begin() + std::ptrdiff_t(first + per));
    e.last_used = ++clock_;
    for (int32_t b : e.blocks) cache.retain(b);
    if (parent != 0) entries_.at(parent).children++;
    const uint64_t id = next_id_++;
    by_key_.emplace(key(parent, tokens, chunk_), id);
    entries_.emplace(id, std::move(e));
}

void PrefixCache::drop(KVCache& cache, uint64_t id) {
    std::vector<uint64_t> children;
    for (const auto& [cid, e] : entries_)
        if (e.parent == id) children.push_back(cid);
    for (uint64_t cid : children) drop(cache, cid);
    Entry& e = entries_.at(id);
    auto [it, end] = by_key_.equal_range(key(e.parent, e.tokens.data(), chunk_));
    for (; it != end; ++it)
        if (it->second == id) {
            by_key_.erase(it);
            break;
        }
    if (e.parent != 0) entries_.at(e.parent).children--;
    for (int32_t b : e.blocks) cache.release(b);  // an idle block goes back to the free list
    entries_.erase(id);
}

bool PrefixCache::reclaim(KVCache& cache, int blocks) {
    while (cache.free_blocks() < blocks) {
        // The idle entry used longest ago, preferring one that nothing extends.
        uint64_t victim = 0;
        bool victim_leaf = false;
        uint64_t victim_used = 0;
        for (const auto& [id, e] : entries_) {
            if (cache.refs(e.blocks.front()) != 1) continue;  // a sequence holds it
            const bool leaf = e.children == 0;
            if (victim == 0 || (leaf && !victim_leaf) || (leaf == victim_leaf && e.last_used < victim_used)) {
                victim = id;
                victim_leaf = leaf;
                victim_used = e.last_used;
            }
        }
        if (victim == 0) return false;
        drop(cache, victim);
    }
    return true;
}

int PrefixCache::cached_blocks() const { return int(entries_.size()) * (chunk_ / block_size_); }

int PrefixCache::idle_blocks(const KVCache& cache) const {
    int n = 0;
    for (const auto& [id, e] : entries_)
        if (cache.refs(e.blocks.front()) == 1) n += int(e.blocks.size());
    return n;
}

}  // namespace ridge
