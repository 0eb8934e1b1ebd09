// KVCache: block allocation per sequence, positions to slots, the context and pool limits, freeing
// and reuse, shared blocks and their reference counts, and the size formula
// 2 * n_layers * kv_dim * tokens * bytes_per_value. Also PrefixCache's index of whole prompt chunks.
#include <gtest/gtest.h>

#include <set>

#include "engine/kv_cache.h"
#include "engine/prefix_cache.h"
#include "weights/error.h"

namespace ridge {
namespace {

Config tiny_config() {
    Config c;
    c.n_embd = 64;
    c.n_layers = 3;
    c.n_heads = 8;
    c.n_kv_heads = 2;
    c.head_dim = 8;
    return c;  // kv_dim 16
}

TEST(KVCache, SizeFollowsTheFormula) {
    const Config c = tiny_config();
    KVCache f32(c, 64, DType::F32, 16);
    EXPECT_EQ(f32.bytes(), size_t(2 * 3 * 16 * 64 * 4));
    KVCache f16(c, 64, DType::F16, 16);
    EXPECT_EQ(f16.bytes(), size_t(2 * 3 * 16 * 64 * 2));
    EXPECT_EQ(KVCache::bytes_per_token(c, DType::F16), size_t(2 * 3 * 16 * 2));
    KVCache odd(c, 50, DType::F32, 16);  // rounded up to whole blocks: 4 blocks = 64 slots
    EXPECT_EQ(odd.bytes(), size_t(2 * 3 * 16 * 64 * 4));
    EXPECT_EQ(odd.n_ctx(), 50);
}

// The CPU pool starts on a 2 MiB boundary, where the kernel can back it with huge pages, and every
// layer's keys and values lie inside it: even a tiny cache, and one of F16 values.
TEST(KVCache, PoolStartsOnAHugePageBoundary) {
    for (DType t : {DType::F32, DType::F16}) {
        KVCache kv(tiny_config(), 50, t, 16);
        const uint8_t* base = kv.layer(0).k;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % KVCache::kAlign, 0u) << dtype_name(t);
        for (int l = 0; l < 3; l++) {
            const KVLayer L = kv.layer(l);
            const size_t half = size_t(L.n_slots) * size_t(L.kv_dim) * (t == DType::F32 ? 4 : 2);  // its keys, or values
            EXPECT_GE(L.k, base);
            EXPECT_LE(L.v + half, base + kv.bytes()) << dtype_name(t) << " layer " << l;
        }
    }
}

TEST(KVCache, SequencesGrowByBlocksAndMapPositionsToSlots) {
    KVCache kv(tiny_config(), 64, DType::F32, 4);
    const int a = kv.new_sequence(), b = kv.new_sequence();
    EXPECT_NE(a, b);
    EXPECT_EQ(kv.append(a, 3), 0);
    EXPECT_EQ(kv.append(b, 5), 0);
    EXPECT_EQ(kv.append(a, 2), 3);  // a now holds 5 tokens in 2 blocks
    EXPECT_EQ(kv.length(a), 5);
    ASSERT_EQ(kv.block_table(a).size(), 2u);
    ASSERT_EQ(kv.block_table(b).size(), 2u);
    // Blocks are handed out 0, 1, 2, ...: a got 0, b got 1 and 2, a got 3.
    EXPECT_EQ(kv.block_table(a), (std::vector<int32_t>{0, 3}));
    EXPECT_EQ(kv.block_table(b), (std::vector<int32_t>{1, 2}));
    EXPECT_EQ(kv.slot(a, 0), 0);
    EXPECT_EQ(kv.slot(a, 4), 12);  // block 3, offset 0
    EXPECT_EQ(kv.slot(b, 4), 8);   // block 2, offset 0
    std::set<int64_t> slots;
    for (int p = 0; p < 5; p++) slots.insert(kv.slot(a, p)), slots.insert(kv.slot(b, p));
    EXPECT_EQ(slots.size(), 10u);  // no two positions share a slot
    EXPECT_THROW(kv.slot(a, 5), Error);  // not appended yet
}

TEST(KVCache, ContextAndPoolLimitsAreErrorsThatChangeNothing) {
    KVCache kv(tiny_config(), 8, DType::F32, 4);  // 2 blocks
    const int a = kv.new_sequence();
    EXPECT_EQ(kv.append(a, 8), 0);
    EXPECT_THROW(kv.append(a, 1), Error);  // past n_ctx
    EXPECT_EQ(kv.length(a), 8);
    const int b = kv.new_sequence();
    EXPECT_THROW(kv.append(b, 1), Error);  // no free block
    EXPECT_EQ(kv.length(b), 0);
    kv.free_sequence(a);
    EXPECT_EQ(kv.free_tokens(), 8);
    EXPECT_EQ(kv.append(b, 6), 0);  // the freed blocks are reused
    EXPECT_THROW(kv.length(a), Error);
    EXPECT_EQ(kv.new_sequence(), a);  // and so is the id
}

// A block shared by two sequences (and a third holder) goes back to the free list only when the last
// one lets it go, and a shared block is never handed out or truncated into.
TEST(KVCache, SharedBlocksAreFreedByTheirLastHolder) {
    KVCache kv(tiny_config(), 32, DType::F32, 4);  // 8 blocks
    const int a = kv.new_sequence();
    kv.append(a, 10);  // blocks 0, 1, 2
    const std::vector<int32_t> prefix = {kv.block_table(a)[0], kv.block_table(a)[1]};
    const int b = kv.new_sequence();
    kv.share(b, prefix);
    EXPECT_EQ(kv.length(b), 8);
    EXPECT_EQ(kv.slot(b, 5), kv.slot(a, 5));  // the same keys and values
    EXPECT_EQ(kv.append(b, 1), 8);
    EXPECT_EQ(kv.block_table(b).back(), 3);  // its own next block, not a shared one
    EXPECT_EQ(kv.refs(0), 2);
    EXPECT_EQ(kv.refs(2), 1);
    EXPECT_EQ(kv.free_blocks(), 4);
    kv.retain(0);  // a third holder (the prefix cache)
    EXPECT_THROW(kv.truncate(b, 6), Error);  // would rewrite shared block 1
    EXPECT_EQ(kv.length(b), 9);
    kv.truncate(b, 8);  // its own block only: allowed
    EXPECT_THROW(kv.share(b, {2}), Error);  // b keeps block 3 past its length: its table ends later
    kv.free_sequence(a);
    EXPECT_EQ(kv.free_blocks(), 5);  // block 2 (a's alone) came back
    kv.free_sequence(b);
    EXPECT_EQ(kv.free_blocks(), 7);  // blocks 1 and 3; block 0 is still retained
    EXPECT_EQ(kv.refs(0), 1);
    kv.release(0);
    EXPECT_EQ(kv.free_blocks(), 8);
    EXPECT_THROW(kv.release(0), Error);  // not in use
    EXPECT_THROW(kv.retain(5), Error);
    const int c = kv.new_sequence();
    kv.append(c, 3);
    EXPECT_THROW(kv.share(c, {kv.block_table(c)[0]}), Error);  // 3 tokens: not on a block boundary
}

std::vector<int32_t> iota_tokens(int n, int32_t first) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; i++) t[size_t(i)] = first + i;
    return t;
}

// Chunks of 8 tokens in blocks of 4: an entry is keyed by its tokens and the whole prefix before
// it, holds its blocks past its sequence's end, and idle entries are dropped ends first.
TEST(PrefixCache, FindsWholeChunksOfTheSamePrefixAndReclaimsIdleOnes) {
    KVCache kv(tiny_config(), 64, DType::F32, 4);  // 16 blocks
    PrefixCache pc(8, 4);
    const std::vector<int32_t> p = iota_tokens(20, 100);  // chunks [0, 8), [8, 16), and 4 more tokens
    const int a = kv.new_sequence();
    kv.append(a, 20);
    const std::vector<int32_t> table = kv.block_table(a);  // 5 blocks
    EXPECT_TRUE(pc.lookup(p, 2).empty());
    pc.insert(kv, a, p, 1);  // chunk 0 is not cached: chunk 1 could not be reached
    EXPECT_EQ(pc.entries(), 0);
    pc.insert(kv, a, p, 0);
    pc.insert(kv, a, p, 1);
    pc.insert(kv, a, p, 1);  // already cached: no second entry
    EXPECT_EQ(pc.entries(), 2);
    EXPECT_EQ(pc.cached_blocks(), 4);
    EXPECT_EQ(kv.refs(table[0]), 2);
    EXPECT_EQ(kv.refs(table[4]), 1);  // the partial chunk is not cached
    EXPECT_THROW(pc.insert(kv, a, p, 2), Error);  // not a whole chunk of p

    EXPECT_EQ(pc.lookup(p, 2), (std::vector<int32_t>{table[0], table[1], table[2], table[3]}));
    EXPECT_EQ(pc.lookup(p, 1), (std::vector<int32_t>{table[0], table[1]}));
    std::vector<int32_t> other_second = p;
    other_second[12] = 7;  // the second chunk differs
    EXPECT_EQ(pc.lookup(other_second, 2), (std::vector<int32_t>{table[0], table[1]}));
    std::vector<int32_t> other_first = p;
    other_first[0] = 7;  // the same second chunk after another first one: no match
    EXPECT_TRUE(pc.lookup(other_first, 2).empty());
    EXPECT_TRUE(pc.lookup(std::vector<int32_t>(p.begin(), p.begin() + 7), 2).empty());  // shorter than a chunk

    EXPECT_EQ(pc.idle_blocks(kv), 0);  // sequence a holds them
    EXPECT_FALSE(pc.reclaim(kv, kv.free_blocks() + 1));
    kv.free_sequence(a);
    EXPECT_EQ(pc.idle_blocks(kv), 4);
    EXPECT_EQ(kv.free_blocks(), 12);  // the partial chunk's block came back
    ASSERT_TRUE(pc.reclaim(kv, 14));  // the end of the prefix goes first
    EXPECT_EQ(kv.free_blocks(), 14);
    EXPECT_EQ(pc.lookup(p, 2), (std::vector<int32_t>{table[0], table[1]}));
    ASSERT_TRUE(pc.reclaim(kv, 16));
    EXPECT_EQ(pc.entries(), 0);
    EXPECT_FALSE(pc.reclaim(kv, 17));  // more than the pool

    // A taker holds an entry: it is not idle, and dropping what it extends keeps the taker's blocks.
    const int b = kv.new_sequence();
    kv.append(b, 16);
    pc.insert(kv, b, p, 0);
    pc.insert(kv, b, p, 1);
    const int c = kv.new_sequence();
    kv.share(c, pc.lookup(p, 2));
    kv.free_sequence(b);
    EXPECT_EQ(pc.idle_blocks(kv), 0);
    EXPECT_FALSE(pc.reclaim(kv, 15));
    kv.free_sequence(c);
    EXPECT_EQ(pc.idle_blocks(kv), 4);

    EXPECT_THROW(PrefixCache(6, 4), Error);  // a chunk must be whole blocks
}

TEST(KVCache, TruncateForgetsTokens) {
    KVCache kv(tiny_config(), 16, DType::F16, 4);
    const int a = kv.new_sequence();
    kv.append(a, 10);
    kv.truncate(a, 4);
    EXPECT_EQ(kv.length(a), 4);
    EXPECT_EQ(kv.append(a, 1), 4);
    EXPECT_THROW(kv.truncate(a, 6), Error);
}

TEST(KVCache, LayerViewsAreDisjoint) {
    KVCache kv(tiny_config(), 16, DType::F16, 4);
    const KVLayer l0 = kv.layer(0), l1 = kv.layer(1), l2 = kv.layer(2);
    EXPECT_EQ(l0.type, DType::F16);
    EXPECT_EQ(l0.n_slots, 16);
    EXPECT_EQ(l0.kv_dim, 16);
    const size_t half = 16 * 16 * 2;
    EXPECT_EQ(l0.v, l0.k + half);
    EXPECT_EQ(l1.k, l0.k + 2 * half);
    EXPECT_EQ(l2.v + half, l0.k + kv.bytes());
}

TEST(KVCache, RejectsOtherTypesAndSizes) {
    EXPECT_THROW(KVCache(tiny_config(), 16, DType::Q8_0), Error);
    EXPECT_THROW(KVCache(tiny_config(), 0, DType::F32), Error);
}

}  // namespace
}  // namespace ridge
