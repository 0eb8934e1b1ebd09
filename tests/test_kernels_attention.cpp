// Paged KV store and causal grouped-query attention: hand-worked cases (one key, softmax weights
// 1:2, the GQA head mapping), then the variants against a dense attention written out here from
// unpaged keys/values, with shuffled block tables, several rows and sequences, f32 and f16 caches;
// the blocked variant on prefill chunks (it takes one sequence's consecutive rows only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/f16.h"
#include "kernel_test_util.h"
#include "weights/error.h"

namespace ridge {
namespace {

using test::expect_close;

// A small paged cache owning its storage.
struct Pool {
    std::vector<uint8_t> k, v;
    cpu::KVLayer layer;
    Pool(DType type, int n_blocks, int block_size, int kv_dim) {
        const size_t eb = type == DType::F32 ? 4 : 2;
        const size_t n = size_t(n_blocks) * block_size * kv_dim * eb;
        k.assign(n, 0);
        v.assign(n, 0);
        layer = {type, k.data(), v.data(), int64_t(n_blocks) * block_size, kv_dim, block_size};
    }
};

using AttnFn = cpu::AttentionCost (*)(const float*, const cpu::AttentionRow*, int64_t, const cpu::KVLayer&,
                             const cpu::AttentionShape&, float*);
const std::vector<std::pair<std::string, AttnFn>> kVariants = {
    {"v0_scalar", cpu::attention_v0_scalar}, {"v1_omp", cpu::attention_v1_omp},
    {"v2_blocked", cpu::attention_v2_blocked}, {"v3_split", cpu::attention_v3_split},
    {"v4_tiled", cpu::attention_v4_tiled}};  // one-row cases are a chunk of one

TEST(Attention, OneKeyGivesItsValue) {
    for (DType t : {DType::F32, DType::F16}) {
        Pool pool(t, 2, 4, 2);  // one kv head of dim 2
        const int32_t table[1] = {1};  // the sequence lives in block 1
        const float k[2] = {0.3f, -0.7f}, v[2] = {1.5f, -2.25f};  // both exact in f16
        const int64_t slot = cpu::kv_slot(table, 0, 4);
        EXPECT_EQ(slot, 4);
        cpu::kv_store(pool.layer, k, v, &slot, 1);
        const float q[2] = {5.0f, 5.0f};
        const cpu::AttentionRow row{table, 1};
        for (auto& [name, fn] : kVariants) {
            float out[2] = {0, 0};
            fn(q, &row, 1, pool.layer, {1, 1, 2}, out);
            EXPECT_FLOAT_EQ(out[0], 1.5f) << name;
            EXPECT_FLOAT_EQ(out[1], -2.25f) << name;
        }
    }
}

TEST(Attention, TwoKeysWeighOneToTwo) {
    // head_dim 2, scale 1/sqrt(2): q = [1, 0], k0 = [0, 0], k1 = [sqrt(2) ln 2, 0] -> scores 0, ln 2
    // -> weights 1/3, 2/3; V0 = [3, 0], V1 = [0, 3] -> out = [1, 2].
    Pool pool(DType::F32, 1, 4, 2);
    const int32_t table[1] = {0};
    const float k[4] = {0, 0, float(std::sqrt(2.0) * std::log(2.0)), 0}, v[4] = {3, 0, 0, 3};
    const int64_t slots[2] = {0, 1};
    cpu::kv_store(pool.layer, k, v, slots, 2);
    const float q[2] = {1, 0};
    const cpu::AttentionRow row{table, 2};
    for (auto& [name, fn] : kVariants) {
        float out[2];
        const cpu::AttentionCost c = fn(q, &row, 1, pool.layer, {1, 1, 2}, out);
        EXPECT_NEAR(out[0], 1.0, 1e-6) << name;
        EXPECT_NEAR(out[1], 2.0, 1e-6) << name;
        EXPECT_DOUBLE_EQ(c.total().flops, 1 * 2 * (4.0 * 2 + 4)) << name;  // n_heads * keys * (4 hd + 4)
        EXPECT_DOUBLE_EQ(c.scores.flops, 1 * 2 * (2.0 * 2 + 4)) << name;   // q.k and softmax
        EXPECT_DOUBLE_EQ(c.mix.flops, 1 * 2 * (2.0 * 2)) << name;          // p * v
        EXPECT_DOUBLE_EQ(c.scores.kv_read, 2 * 2 * 4.0) << name;           // 2 keys of kv_dim 2, f32
        EXPECT_DOUBLE_EQ(c.mix.kv_read, 2 * 2 * 4.0) << name;              // 2 values
        EXPECT_DOUBLE_EQ(c.scores.act_read + c.mix.act_written, 8.0 * 2) << name;  // q in, out out
    }
    // The causal mask is n_keys: the same query seeing only key 0 gets V0.
    const cpu::AttentionRow first{table, 1};
    float out[2];
    cpu::attention(q, &first, 1, pool.layer, {1, 1, 2}, out);
    EXPECT_FLOAT_EQ(out[0], 3.0f);
    EXPECT_FLOAT_EQ(out[1], 0.0f);
}

TEST(Attention, GroupedQueryHeadsReadTheirKvHead) {
    // 4 query heads, 2 kv heads: heads 0, 1 read kv head 0; heads 2, 3 read kv head 1.
    Pool pool(DType::F32, 1, 2, 2);  // kv_dim = 2 kv heads * head_dim 1
    const int32_t table[1] = {0};
    const float k[2] = {1, 1}, v[2] = {10, 20};
    const int64_t slot = 0;
    cpu::kv_store(pool.layer, k, v, &slot, 1);
    const float q[4] = {1, 2, 3, 4};
    const cpu::AttentionRow row{table, 1};
    for (auto& [name, fn] : kVariants) {
        float out[4];
        fn(q, &row, 1, pool.layer, {4, 2, 1}, out);
        EXPECT_EQ(std::vector<float>(out, out + 4), (std::vector<float>{10, 10, 20, 20})) << name;
    }
}

// Dense attention from unpaged K, V (n_keys, kv_dim) for one query row, in double.
std::vector<double> dense_attention(const float* q, const std::vector<float>& K, const std::vector<float>& V,
                                    int n_keys, const cpu::AttentionShape& s) {
    const int kv_dim = s.n_kv_heads * s.head_dim;
    std::vector<double> out(size_t(s.n_heads * s.head_dim), 0.0);
    for (int h = 0; h < s.n_heads; h++) {
        const int g = h / (s.n_heads / s.n_kv_heads);
        std::vector<double> w(static_cast<size_t>(n_keys));
        double mx = -1e300, sum = 0;
        for (int j = 0; j < n_keys; j++) {
            double d = 0;
            for (int c = 0; c < s.head_dim; c++) d += double(q[h * s.head_dim + c]) * K[j * kv_dim + g * s.head_dim + c];
            w[j] = d / std::sqrt(double(s.head_dim));
            mx = std::max(mx, w[j]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int j = 0; j < n_keys; j++)
            for (int c = 0; c < s.head_dim; c++)
                out[h * s.head_dim + c] += w[j] / sum * V[j * kv_dim + g * s.head_dim + c];
    }
    return out;
}

// Every variant against the dense reference on five rows of two sequences in shuffled blocks.
void paged_matches_dense(const cpu::AttentionShape& s, int block_size) {
    SCOPED_TRACE("heads " + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) + ", head_dim " +
                 std::to_string(s.head_dim) + ", block_size " + std::to_string(block_size));
    const int kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim;
    const int n_blocks = 16;
    for (DType t : {DType::F32, DType::F16}) {
        Pool pool(t, n_blocks, block_size, kv_dim);
        // Two sequences of 23 and 9 tokens with interleaved, shuffled blocks.
        std::vector<int32_t> blocks(n_blocks);
        std::iota(blocks.begin(), blocks.end(), 0);
        std::shuffle(blocks.begin(), blocks.end(), std::mt19937(7));
        const std::vector<int32_t> table_a(blocks.begin(), blocks.begin() + 6);   // 6 blocks (at least 24 slots)
        const std::vector<int32_t> table_b(blocks.begin() + 6, blocks.begin() + 9);  // 3 blocks (at least 12)
        const int len_a = 23, len_b = 9;
        const auto Ka = test::random_floats(size_t(len_a * kv_dim), 61), Va = test::random_floats(size_t(len_a * kv_dim), 62);
        const auto Kb = test::random_floats(size_t(len_b * kv_dim), 63), Vb = test::random_floats(size_t(len_b * kv_dim), 64);
        std::vector<int64_t> slots_a(len_a), slots_b(len_b);
        for (int p = 0; p < len_a; p++) slots_a[p] = cpu::kv_slot(table_a.data(), p, block_size);
        for (int p = 0; p < len_b; p++) slots_b[p] = cpu::kv_slot(table_b.data(), p, block_size);
        cpu::kv_store(pool.layer, Ka.data(), Va.data(), slots_a.data(), len_a);
        cpu::kv_store(pool.layer, Kb.data(), Vb.data(), slots_b.data(), len_b);
        // What the cache holds (f16-rounded for an f16 cache) is the dense reference's input.
        auto rounded = [&](std::vector<float> x) {
            if (t == DType::F16)
                for (float& e : x) e = cpu::f16_to_f32(cpu::f32_to_f16(e));
            return x;
        };
        // Five query rows: a prefill-like run of seq a (positions 0, 5, 22) and decode rows of seq b.
        const std::vector<cpu::AttentionRow> rows = {
            {table_a.data(), 1}, {table_a.data(), 6}, {table_a.data(), 23}, {table_b.data(), 9}, {table_b.data(), 4}};
        const int64_t m = int64_t(rows.size());
        const auto q = test::random_floats(size_t(m * q_dim), 65, -2, 2);
        std::vector<float> want(size_t(m * q_dim));
        for (int64_t i = 0; i < m; i++) {
            const bool is_a = i < 3;
            const auto ref = dense_attention(q.data() + i * q_dim, rounded(is_a ? Ka : Kb), rounded(is_a ? Va : Vb),
                                             rows[i].n_keys, s);
            for (int c = 0; c < q_dim; c++) want[i * q_dim + c] = float(ref[c]);
        }
        for (auto& [name, fn] : kVariants) {
            if (name == "v2_blocked" || name == "v4_tiled") {  // these rows are not one chunk
                std::vector<float> got(size_t(m * q_dim));
                EXPECT_THROW(fn(q.data(), rows.data(), m, pool.layer, s, got.data()), Error);
                continue;
            }
            std::vector<float> got(size_t(m * q_dim), -99.0f);
            const cpu::AttentionCost c = fn(q.data(), rows.data(), m, pool.layer, s, got.data());
            expect_close(got.data(), want.data(), got.size(), 1e-5, 1e-4,
                         name + (t == DType::F16 ? " f16" : " f32"));
            const double n_keys = 1 + 6 + 23 + 9 + 4;
            EXPECT_DOUBLE_EQ(c.total().flops, s.n_heads * n_keys * (4.0 * s.head_dim + 4)) << name;
            const double kv_bytes = n_keys * s.n_kv_heads * s.head_dim * (t == DType::F16 ? 2.0 : 4.0);
            EXPECT_DOUBLE_EQ(c.scores.kv_read, kv_bytes) << name;  // every visible key once
            EXPECT_DOUBLE_EQ(c.mix.kv_read, kv_bytes) << name;     // every visible value once
        }
        // v3 (decode rows): each row alone gives exactly what it gives among all five (with 4-slot
        // blocks: at most 6 blocks alone, tasks of one KV head; 13 together, tasks of whole blocks).
        std::vector<float> together(size_t(m * q_dim));
        cpu::attention_v3_split(q.data(), rows.data(), m, pool.layer, s, together.data());
        for (int64_t i = 0; i < m; i++) {
            std::vector<float> alone(static_cast<size_t>(q_dim));
            cpu::attention_v3_split(q.data() + i * q_dim, &rows[size_t(i)], 1, pool.layer, s, alone.data());
            for (int c = 0; c < q_dim; c++)
                ASSERT_EQ(alone[size_t(c)], together[size_t(i * q_dim + c)]) << "row " << i << " element " << c;
        }
    }
}

TEST(Attention, PagedMatchesDenseOnRandomSequences) {
    // SmolLM2's heads (big enough for the OpenMP path) in blocks of 4 and of 16 (the cache's
    // default: v3's 8-key steps and their tails); head_dim 128 (the other AVX2 form) and 24 (the
    // generic loop).
    paged_matches_dense({9, 3, 64}, 4);
    paged_matches_dense({9, 3, 64}, 16);
    paged_matches_dense({4, 2, 128}, 16);
    paged_matches_dense({6, 2, 24}, 16);
}

// A prefill chunk: positions first .. len-1 of one sequence in shuffled blocks, 72 rows (two of
// v2's and v4's 64-row blocks); v2 and v4 against the dense reference, and attention() picks v4.
// Shapes: SmolLM2's heads, and head_dim 24 in groups of 2 (v4's partial last panel of values, and
// stacked row counts that are not a multiple of its 6-row tiles); 75 keys, not whole 16-key panels.
TEST(Attention, BlockedChunkMatchesDense) {
    const int block_size = 4, n_blocks = 20, len = 75, first = 3;
    for (const cpu::AttentionShape s : {cpu::AttentionShape{9, 3, 64}, cpu::AttentionShape{6, 3, 24}})
    for (DType t : {DType::F32, DType::F16}) {
        const int kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim;
        Pool pool(t, n_blocks, block_size, kv_dim);
        std::vector<int32_t> table(n_blocks);
        std::iota(table.begin(), table.end(), 0);
        std::shuffle(table.begin(), table.end(), std::mt19937(11));
        auto K = test::random_floats(size_t(len * kv_dim), 71), V = test::random_floats(size_t(len * kv_dim), 72);
        std::vector<int64_t> slots(len);
        for (int p = 0; p < len; p++) slots[p] = cpu::kv_slot(table.data(), p, block_size);
        cpu::kv_store(pool.layer, K.data(), V.data(), slots.data(), len);
        if (t == DType::F16)
            for (auto* x : {&K, &V})
                for (float& e : *x) e = cpu::f16_to_f32(cpu::f32_to_f16(e));
        const int64_t m = len - first;
        std::vector<cpu::AttentionRow> rows;
        for (int p = first; p < len; p++) rows.push_back({table.data(), p + 1});
        ASSERT_TRUE(cpu::attention_v2_applies(rows.data(), m));
        const auto q = test::random_floats(size_t(m * q_dim), 73, -2, 2);
        std::vector<float> want(size_t(m * q_dim));
        for (int64_t i = 0; i < m; i++) {
            const auto ref = dense_attention(q.data() + i * q_dim, K, V, rows[size_t(i)].n_keys, s);
            for (int c = 0; c < q_dim; c++) want[size_t(i * q_dim + c)] = float(ref[size_t(c)]);
        }
        double n_keys = 0;
        for (const auto& r : rows) n_keys += r.n_keys;
        const std::string what = std::string(t == DType::F16 ? "f16" : "f32") + ", head_dim " + std::to_string(s.head_dim);
        std::vector<float> v4_out;
        for (auto [name, fn] : {std::pair<std::string, AttnFn>{"v2", cpu::attention_v2_blocked},
                                std::pair<std::string, AttnFn>{"v4", cpu::attention_v4_tiled}}) {
            std::vector<float> got(want.size(), -99.0f);
            const cpu::AttentionCost c = fn(q.data(), rows.data(), m, pool.layer, s, got.data());
            expect_close(got.data(), want.data(), got.size(), 1e-5, 1e-4, (name + (", " + what)).c_str());
            EXPECT_DOUBLE_EQ(c.total().flops, s.n_heads * n_keys * (4.0 * s.head_dim + 4)) << name;
            // Each of the 75 positions' keys (and values) read once for the whole chunk, not once a row.
            const double position_bytes = double(kv_dim) * (t == DType::F16 ? 2 : 4);
            EXPECT_DOUBLE_EQ(c.scores.kv_read, len * position_bytes) << name;
            EXPECT_DOUBLE_EQ(c.mix.kv_read, len * position_bytes) << name;
            v4_out = got;
        }
        std::vector<float> picked(want.size(), -99.0f);
        cpu::attention(q.data(), rows.data(), m, pool.layer, s, picked.data());
        EXPECT_EQ(picked, v4_out) << what;
    }
    // Not a chunk: a gap in the positions, or two block tables.
    const int32_t t1[2] = {0, 1}, t2[2] = {0, 1};
    const cpu::AttentionRow gap[2] = {{t1, 3}, {t1, 5}}, two[2] = {{t1, 3}, {t2, 4}};
    EXPECT_FALSE(cpu::attention_v2_applies(gap, 2));
    EXPECT_FALSE(cpu::attention_v2_applies(two, 2));
    Pool pool(DType::F32, 2, 4, 2);
    const float q[4] = {1, 2, 3, 4};
    float out[4];
    for (AttnFn fn : {cpu::attention_v2_blocked, cpu::attention_v4_tiled}) {
        EXPECT_THROW(fn(q, gap, 2, pool.layer, {1, 1, 2}, out), Error);
        EXPECT_THROW(fn(q, two, 2, pool.layer, {1, 1, 2}, out), Error);
    }
}

TEST(Attention, StoreRejectsSlotOutsideTheCache) {
    Pool pool(DType::F32, 1, 2, 2);
    const float k[2] = {0, 0}, v[2] = {0, 0};
    const int64_t bad = 2;
    EXPECT_THROW(cpu::kv_store(pool.layer, k, v, &bad, 1), Error);
}

TEST(Attention, F16StoreRoundsToNearestHalf) {
    Pool pool(DType::F16, 1, 2, 2);
    const float k[2] = {0.1f, 65504.0f}, v[2] = {-1.0f / 3, 1e-8f};
    const int64_t slot = 1;
    cpu::kv_store(pool.layer, k, v, &slot, 1);
    const uint16_t* kh = reinterpret_cast<const uint16_t*>(pool.k.data()) + 2;
    const uint16_t* vh = reinterpret_cast<const uint16_t*>(pool.v.data()) + 2;
    EXPECT_EQ(kh[0], 0x2E66);
    EXPECT_EQ(kh[1], 0x7BFF);
    EXPECT_EQ(vh[0], 0xB555);
    EXPECT_EQ(vh[1], 0x0000);
}

}  // namespace
}  // namespace ridge
