// kernels/cuda/attention against kernels/cpu: kv_store bit for bit against cpu::kv_store (f32 and
// f16 pools, shuffled block tables, block sizes 16 and 5, f16 rounding edge values); v1_split,
// v3_wide (its own cap, 3 and 1 splits a row) and v2_flash against cpu::attention_v0_scalar on
// seeded random caches (head_dim 8 .. 256, GQA groups 1 .. 8, 1 .. 1037 keys, prefill chunks at
// position 0 and past it), their costs against the CPU's cost functions, the dispatch, and the
// errors. GPU tests skip without a device; the workspace sizing and v3's cap are host code and run
// anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernel_test_util.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/f16.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/runtime.h"
#include "weights/error.h"

namespace ridge {
namespace {

using test::expect_close;
using test::expect_cost_eq;
using test::from_device;
using test::poisoned_floats;
using test::to_device;

// Uploads and poisonings (DeviceBuffer::upload, fill_bytes) run on the legacy default stream,
// which a cuda::Stream (non-blocking) does not wait for, and fill_bytes returns before it is done.
// A synchronous download from any buffer returns only once that stream's earlier work has
// finished: call this between preparing inputs and queueing kernels on a Stream.
void finish_copies(const cuda::DeviceBuffer& any) {
    uint8_t byte = 0;
    any.download(&byte, 1);
}

// Index of the first byte where a and b differ (a.size() when equal and of one size).
size_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    if (a.size() != b.size()) return 0;
    return size_t(std::mismatch(a.begin(), a.end(), b.begin()).first - a.begin());
}

// The message of the ridge::Error that f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// One layer's paged KV cache on the host and its twin on the device, holding sequences in
// shuffled blocks (with spare blocks between them unused).
struct Cache {
    DType type = DType::F32;
    int block_size = 0, kv_dim = 0;
    int64_t n_slots = 0;
    std::vector<uint8_t> k_host, v_host;         // (n_slots, kv_dim) elements of `type`
    cuda::DeviceBuffer k_dev, v_dev;             // the same pools on the device
    std::vector<std::vector<int32_t>> tables;    // (sequences) each sequence's block ids
    std::vector<cuda::DeviceBuffer> tables_dev;  // the same tables on the device

    cpu::KVLayer host_layer() {
        return {type, k_host.data(), v_host.data(), n_slots, kv_dim, block_size};
    }
    cpu::KVLayer device_layer() const {
        return {type, k_dev.as<uint8_t>(), v_dev.as<uint8_t>(), n_slots, kv_dim, block_size};
    }
    const int32_t* table_dev(size_t seq) const { return tables_dev[seq].as<int32_t>(); }
};

// Sequences of these lengths with seeded random keys and values, stored through cpu::kv_store on
// the host and cuda::kv_store on the device, one call per sequence; afterwards both pools are
// compared byte for byte (so the device store wrote every slot it should and no other), and each
// call's cost against the CPU's.
Cache make_cache(const cuda::Stream& stream, DType type, int block_size, int kv_dim, const std::vector<int>& lengths,
                 uint32_t seed) {
    Cache c;
    c.type = type;
    c.block_size = block_size;
    c.kv_dim = kv_dim;
    int n_blocks = 1 + int(lengths.size());  // spares: the first id, one after each odd sequence
    for (int len : lengths) n_blocks += (len + block_size - 1) / block_size;
    c.n_slots = int64_t(n_blocks) * block_size;
    const size_t pool_bytes = size_t(c.n_slots) * size_t(kv_dim) * (type == DType::F32 ? 4 : 2);
    c.k_host.assign(pool_bytes, 0);
    c.v_host.assign(pool_bytes, 0);
    c.k_dev = cuda::DeviceBuffer(pool_bytes);
    c.v_dev = cuda::DeviceBuffer(pool_bytes);
    c.k_dev.fill_bytes(0);
    c.v_dev.fill_bytes(0);
    std::vector<int32_t> ids(static_cast<size_t>(n_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(seed));
    size_t next = 1;  // block ids[0] stays unused
    std::vector<cuda::DeviceBuffer> inputs;  // the stores' inputs, alive until the stream has run them
    for (size_t s = 0; s < lengths.size(); s++) {
        const int len = lengths[s], nb = (len + block_size - 1) / block_size;
        std::vector<int32_t> table(ids.begin() + ptrdiff_t(next), ids.begin() + ptrdiff_t(next + size_t(nb)));
        next += size_t(nb) + (s % 2);  // a spare block between some sequences
        const auto K = test::random_floats(size_t(len) * size_t(kv_dim), seed + 100 * uint32_t(s) + 1);
        const auto V = test::random_floats(size_t(len) * size_t(kv_dim), seed + 100 * uint32_t(s) + 2);
        std::vector<int64_t> slots(static_cast<size_t>(len));
        for (int p = 0; p < len; p++) slots[size_t(p)] = cpu::kv_slot(table.data(), p, block_size);
        const cpu::Cost want = cpu::kv_store(c.host_layer(), K.data(), V.data(), slots.data(), len);
        inputs.push_back(to_device(K));
        inputs.push_back(to_device(V));
        inputs.push_back(to_device(slots));
        finish_copies(inputs.back());
        const size_t at = inputs.size() - 3;
        const cpu::Cost got = cuda::kv_store(stream, c.device_layer(), inputs[at].as<float>(),
                                             inputs[at + 1].as<float>(), inputs[at + 2].as<int64_t>(), len);
        expect_cost_eq(got, want, "kv_store of sequence " + std::to_string(s));
        c.tables_dev.push_back(to_device(table));
        c.tables.push_back(std::move(table));
    }
    stream.sync();
    if (!c.tables_dev.empty()) finish_copies(c.tables_dev.back());
    const auto k_got = from_device<uint8_t>(c.k_dev, pool_bytes), v_got = from_device<uint8_t>(c.v_dev, pool_bytes);
    EXPECT_TRUE(k_got == c.k_host) << "key pool: first differing byte " << first_difference(k_got, c.k_host);
    EXPECT_TRUE(v_got == c.v_host) << "value pool: first differing byte " << first_difference(v_got, c.v_host);
    return c;
}

std::string describe(const cpu::AttentionShape& s, int block_size, DType type) {
    return "heads " + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) + ", head_dim " +
           std::to_string(s.head_dim) + ", block_size " + std::to_string(block_size) + ", " +
           std::string(dtype_name(type)) + " cache";
}

// head_dim 8 (stories260K, group 2), 64 (SmolLM2, group 3), 128 (a Llama-3-8B layer, group 4), 72
// (not a power of two), 256 (the largest, one KV head per query head), 9 (odd), and a group of 8 (two
// blocks of 4 query heads per KV head in v1) and of 5 (4 + 1).
const std::vector<cpu::AttentionShape> kShapes = {{8, 4, 8},   {9, 3, 64},  {32, 8, 128}, {6, 2, 72},
                                                   {4, 4, 256}, {3, 1, 9},   {16, 2, 64},  {5, 1, 40}};

// A decode variant under test: v1_split, or v3_wide with a split cap (0: the device's).
struct DecodeVariant {
    std::string name;
    std::function<cpu::AttentionCost(const cuda::Stream&, const float*, const cuda::AttentionRows&,
                                     const cpu::KVLayer&, const cpu::AttentionShape&, float*, cuda::DeviceBuffer&)>
        run;
    int split_cap = 0;  // v3's, passed in the rows
    bool v3 = false;
};
const std::vector<DecodeVariant> kDecodeVariants = {
    {"v1_split", cuda::attention_v1_split, 0, false},
    {"v3_wide (the device's cap)", cuda::attention_v3_wide, 0, true},
    {"v3_wide (3 splits a row)", cuda::attention_v3_wide, 3, true},
    {"v3_wide (1 split a row)", cuda::attention_v3_wide, 1, true},
};

// Decode rows of six sequences against the scalar twin: a long one (1037 keys; v1: five splits)
// seen at its end and at position 512, 7 keys, 1 key, 300, exactly one v1 split (256) and one past
// it (257: a second split of one key). Then the launch for more splits than any row has, and each
// row alone, give the same bits as the seven together.
void decode_matches_scalar(const cpu::AttentionShape& s, int block_size, DType type, const DecodeVariant& variant) {
    SCOPED_TRACE(describe(s, block_size, type) + ", " + variant.name);
    const int kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim;
    cuda::Stream stream;
    Cache c = make_cache(stream, type, block_size, kv_dim, {1037, 7, 1, 300, 256, 257}, 11);
    const std::vector<std::pair<size_t, int>> picks = {{0, 1037}, {1, 7},   {2, 1},  {0, 513},
                                                       {3, 300},  {4, 256}, {5, 257}};  // (sequence, keys)
    const int64_t m = int64_t(picks.size());
    std::vector<cpu::AttentionRow> rows_cpu, rows_gpu;  // host block tables; device block tables
    for (auto [seq, n_keys] : picks) {
        rows_cpu.push_back({c.tables[seq].data(), n_keys});
        rows_gpu.push_back({c.table_dev(seq), n_keys});
    }
    const auto q = test::random_floats(size_t(m * q_dim), 21, -2, 2);
    std::vector<float> want(static_cast<size_t>(m * q_dim));
    const cpu::AttentionCost want_cost =
        cpu::attention_v0_scalar(q.data(), rows_cpu.data(), m, c.host_layer(), s, want.data());

    const cuda::DeviceBuffer q_dev = to_device(q), rows_dev = to_device(rows_gpu);
    const cuda::DeviceBuffer out = poisoned_floats(size_t(m * q_dim));
    finish_copies(out);
    const int cap = variant.v3 && variant.split_cap == 0
                        ? cuda::attention_v3_split_cap(cuda::device_info().sm_count, s)
                        : variant.split_cap;
    const cuda::AttentionRows rows{rows_dev.as<cpu::AttentionRow>(), rows_gpu.data(), m, 0, variant.split_cap};
    cuda::DeviceBuffer workspace;  // empty: the variant grows it
    const cpu::AttentionCost cost = variant.run(stream, q_dev.as<float>(), rows, c.device_layer(), s, out.as<float>(), workspace);
    stream.sync();
    const auto got = from_device<float>(out, size_t(m * q_dim));
    expect_close(got.data(), want.data(), got.size(), 1e-4, 1e-3, variant.name.c_str());
    expect_cost_eq(cost, want_cost, variant.name);
    EXPECT_GE(workspace.size(), cuda::attention_split_workspace_bytes(rows_gpu.data(), m, s, 0, cap));

    // Launched for more splits than the longest row needs (a graph captured for a cache's
    // capacity): the blocks past each row's keys do nothing, and every output is the same bit for bit.
    {
        const cuda::DeviceBuffer wide_out = poisoned_floats(size_t(m * q_dim));
        finish_copies(wide_out);
        const int launch = std::max(9, cap + 2);
        const cuda::AttentionRows wide{rows_dev.as<cpu::AttentionRow>(), rows_gpu.data(), m, launch, variant.split_cap};
        variant.run(stream, q_dev.as<float>(), wide, c.device_layer(), s, wide_out.as<float>(), workspace);
        stream.sync();
        const auto got_wide = from_device<float>(wide_out, size_t(m * q_dim));
        ASSERT_EQ(std::memcmp(got_wide.data(), got.data(), got.size() * sizeof(float)), 0)
            << "a launch for " << launch << " splits differs from one for the longest row's";
        EXPECT_GE(workspace.size(), cuda::attention_split_workspace_bytes(rows_gpu.data(), m, s, launch, cap));
    }

    for (int64_t i = 0; i < m; i++) {
        const cuda::DeviceBuffer one_out = poisoned_floats(size_t(q_dim));
        finish_copies(one_out);
        const cuda::AttentionRows one{rows_dev.as<cpu::AttentionRow>() + i, rows_gpu.data() + i, 1, 0, variant.split_cap};
        variant.run(stream, q_dev.as<float>() + i * q_dim, one, c.device_layer(), s, one_out.as<float>(), workspace);
        stream.sync();
        const auto alone = from_device<float>(one_out, size_t(q_dim));
        for (int e = 0; e < q_dim; e++)
            ASSERT_EQ(std::memcmp(&alone[size_t(e)], &got[size_t(i * q_dim + e)], sizeof(float)), 0)
                << "row " << i << " alone differs at element " << e << ": " << alone[size_t(e)] << " vs "
                << got[size_t(i * q_dim + e)];
    }
}

// A prefill chunk: positions first .. first+m-1 of a sequence that goes on 3 positions past the
// chunk (keys the mask must hide) and shares the pool with another. v2_flash against the scalar
// twin and its cost against cpu::attention_blocked_cost; v1_split on the same rows; attention()
// picks v2 from cpu::kBlockedMinRows rows on and v1 below.
void chunk_matches_scalar(const cpu::AttentionShape& s, int block_size, DType type, int first, int m) {
    SCOPED_TRACE(describe(s, block_size, type) + ", chunk of " + std::to_string(m) + " rows from position " +
                 std::to_string(first));
    const int kv_dim = s.n_kv_heads * s.head_dim, q_dim = s.n_heads * s.head_dim;
    cuda::Stream stream;
    Cache c = make_cache(stream, type, block_size, kv_dim, {40, first + m + 3}, 31 + uint32_t(first));
    std::vector<cpu::AttentionRow> rows_cpu, rows_gpu;
    for (int p = first; p < first + m; p++) {
        rows_cpu.push_back({c.tables[1].data(), p + 1});
        rows_gpu.push_back({c.table_dev(1), p + 1});
    }
    ASSERT_TRUE(cpu::attention_v2_applies(rows_gpu.data(), m));
    const auto q = test::random_floats(size_t(m) * size_t(q_dim), 41 + uint32_t(m), -2, 2);
    std::vector<float> want(q.size());
    cpu::attention_v0_scalar(q.data(), rows_cpu.data(), m, c.host_layer(), s, want.data());
    const cpu::AttentionCost want_cost = cpu::attention_blocked_cost(m, first + 1, kv_dim, type, s);

    const cuda::DeviceBuffer q_dev = to_device(q), rows_dev = to_device(rows_gpu);
    const cuda::DeviceBuffer out_v2 = poisoned_floats(q.size()), out_v1 = poisoned_floats(q.size()),
                             out_pick = poisoned_floats(q.size());
    finish_copies(out_pick);
    const cuda::AttentionRows rows{rows_dev.as<cpu::AttentionRow>(), rows_gpu.data(), m};
    cuda::DeviceBuffer workspace;
    const cpu::AttentionCost cost =
        cuda::attention_v2_flash(stream, q_dev.as<float>(), rows, c.device_layer(), s, out_v2.as<float>());
    cuda::attention_v1_split(stream, q_dev.as<float>(), rows, c.device_layer(), s, out_v1.as<float>(), workspace);
    cuda::attention(stream, q_dev.as<float>(), rows, c.device_layer(), s, out_pick.as<float>(), workspace);
    stream.sync();
    const auto got_v2 = from_device<float>(out_v2, q.size()), got_v1 = from_device<float>(out_v1, q.size()),
               got_pick = from_device<float>(out_pick, q.size());
    expect_close(got_v2.data(), want.data(), q.size(), 1e-4, 1e-3, "v2_flash");
    expect_close(got_v1.data(), want.data(), q.size(), 1e-4, 1e-3, "v1_split on the chunk");
    expect_cost_eq(cost, want_cost, "v2_flash");
    const auto& picked = m >= cpu::kBlockedMinRows ? got_v2 : got_v1;
    EXPECT_EQ(std::memcmp(got_pick.data(), picked.data(), q.size() * sizeof(float)), 0)
        << "attention() did not give " << (m >= cpu::kBlockedMinRows ? "v2_flash" : "v1_split") << "'s result";
}

TEST(CudaAttention, StoreMatchesTheCpuBitForBit) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream stream;
    for (DType t : {DType::F32, DType::F16})
        for (int bs : {16, 5}) {
            SCOPED_TRACE(std::string(dtype_name(t)) + ", block_size " + std::to_string(bs));
            make_cache(stream, t, bs, 3 * 64, {23, 1, 40, 16}, 5);  // compares pools and costs inside
            make_cache(stream, t, bs, 1 * 9, {7, 33}, 6);           // an odd kv_dim
        }
}

TEST(CudaAttention, F16StoreRoundsLikeTheCpu) {
    RIDGE_REQUIRE_GPU();
    // Ties to even, the largest half, rounding into infinity, subnormals, the smallest subnormal's
    // tie (2^-25 -> 0), signed zero: two rows of 8, stored in slots 3 and 0 of a 4-slot pool.
    const std::vector<float> k = {0.1f,     65504.0f, 65519.0f,   65520.0f, 1e-8f,           3e-8f,
                                  6.1e-5f,  -0.0f,    1e-5f,      0x1p-25f, 0x1.8p-24f,      -1e30f,
                                  1.0f + 0x1p-11f,    1.0f + 0x3p-11f,      2049.0f,         -1.0f / 3};
    std::vector<float> v(k.size());
    for (size_t i = 0; i < v.size(); i++) v[i] = -k[i] * 0.5f;
    const std::vector<int64_t> slots = {3, 0};
    const int kv_dim = 8;
    std::vector<uint8_t> k_host(4 * kv_dim * 2, 0), v_host(k_host.size(), 0);
    const cpu::KVLayer host{DType::F16, k_host.data(), v_host.data(), 4, kv_dim, 2};
    cpu::kv_store(host, k.data(), v.data(), slots.data(), 2);

    cuda::Stream stream;
    cuda::DeviceBuffer k_pool(k_host.size()), v_pool(v_host.size());
    k_pool.fill_bytes(0);
    v_pool.fill_bytes(0);
    const cuda::DeviceBuffer k_dev = to_device(k), v_dev = to_device(v), slots_dev = to_device(slots);
    finish_copies(slots_dev);
    const cpu::KVLayer dev{DType::F16, k_pool.as<uint8_t>(), v_pool.as<uint8_t>(), 4, kv_dim, 2};
    cuda::kv_store(stream, dev, k_dev.as<float>(), v_dev.as<float>(), slots_dev.as<int64_t>(), 2);
    stream.sync();
    const auto k_got = from_device<uint8_t>(k_pool, k_host.size()), v_got = from_device<uint8_t>(v_pool, v_host.size());
    EXPECT_TRUE(k_got == k_host) << "first differing byte " << first_difference(k_got, k_host);
    EXPECT_TRUE(v_got == v_host) << "first differing byte " << first_difference(v_got, v_host);
}

TEST(CudaAttention, DecodeSplitMatchesScalar) {
    RIDGE_REQUIRE_GPU();
    for (const auto& s : kShapes)
        for (int bs : {16, 5})
            for (DType t : {DType::F32, DType::F16}) decode_matches_scalar(s, bs, t, kDecodeVariants[0]);
}

// v3_wide on every shape whose head_dim is a multiple of 8 (the others: attention_decode takes v1).
TEST(CudaAttention, DecodeWideMatchesScalar) {
    RIDGE_REQUIRE_GPU();
    for (const auto& s : kShapes) {
        if (s.head_dim % 8 != 0) continue;
        for (int bs : {16, 5})
            for (DType t : {DType::F32, DType::F16})
                for (size_t v = 1; v < kDecodeVariants.size(); v++) decode_matches_scalar(s, bs, t, kDecodeVariants[v]);
    }
}

TEST(CudaAttention, FlashChunkMatchesScalar) {
    RIDGE_REQUIRE_GPU();
    // (first position, rows): at position 0; a tile edge crossed; 70 rows past 300 keys; a short
    // chunk past 1000 keys; 5 rows (below kBlockedMinRows: attention() takes v1).
    const std::vector<std::pair<int, int>> chunks = {{0, 8}, {5, 33}, {300, 70}, {1000, 17}, {2, 5}};
    for (const auto& s : kShapes)
        for (auto [bs, t] : std::vector<std::pair<int, DType>>{
                 {16, DType::F32}, {5, DType::F16}, {5, DType::F32}, {16, DType::F16}})
            for (auto [first, m] : chunks) chunk_matches_scalar(s, bs, t, first, m);
}

TEST(CudaAttention, RejectsWhatItCannotTake) {
    RIDGE_REQUIRE_GPU();
    cuda::Stream stream;
    const cpu::AttentionShape s{4, 2, 8};
    Cache c = make_cache(stream, DType::F32, 4, 16, {9, 9}, 3);
    const cuda::DeviceBuffer q = poisoned_floats(4 * 32), out = poisoned_floats(4 * 32);
    cuda::DeviceBuffer ws;
    auto v1 = [&](const cuda::AttentionRows& rows, const cpu::KVLayer& kv, const cpu::AttentionShape& shape) {
        return error_of([&] { cuda::attention_v1_split(stream, q.as<float>(), rows, kv, shape, out.as<float>(), ws); });
    };
    auto v2 = [&](const cuda::AttentionRows& rows) {
        return error_of(
            [&] { cuda::attention_v2_flash(stream, q.as<float>(), rows, c.device_layer(), s, out.as<float>()); });
    };
    const auto has = [](const std::string& message, const std::string& part) {
        return message.find(part) != std::string::npos;
    };
    // Two rows of different sequences, then a gap in one sequence's positions: not chunks.
    const std::vector<cpu::AttentionRow> two = {{c.table_dev(0), 5}, {c.table_dev(1), 6}},
                                         gap = {{c.table_dev(0), 5}, {c.table_dev(0), 7}};
    const cuda::DeviceBuffer two_dev = to_device(two), gap_dev = to_device(gap);
    finish_copies(gap_dev);
    const cuda::AttentionRows rows{two_dev.as<cpu::AttentionRow>(), two.data(), 2};
    EXPECT_TRUE(has(v2(rows), "not consecutive positions of one sequence"));
    EXPECT_TRUE(has(v2({gap_dev.as<cpu::AttentionRow>(), gap.data(), 2}), "not consecutive positions of one sequence"));
    // A KV type other than F32 or F16, named.
    cpu::KVLayer bf16 = c.device_layer();
    bf16.type = DType::BF16;
    EXPECT_TRUE(has(v1(rows, bf16, s), "BF16"));
    EXPECT_TRUE(has(error_of([&] { cuda::kv_store(stream, bf16, q.as<float>(), q.as<float>(), nullptr, 0); }), "BF16"));
    // A head_dim above kMaxHeadDim; query heads that are no multiple of the KV heads.
    cpu::KVLayer wide = c.device_layer();
    wide.kv_dim = 264;
    EXPECT_TRUE(has(v1(rows, wide, {1, 1, 264}), "head_dim 264"));
    EXPECT_TRUE(has(v1(rows, c.device_layer(), {3, 2, 8}), "do not fit kv_dim"));
    // A row without keys; no device rows for v1.
    const std::vector<cpu::AttentionRow> empty = {{c.table_dev(0), 0}};
    EXPECT_TRUE(has(v1({two_dev.as<cpu::AttentionRow>(), empty.data(), 1}, c.device_layer(), s), "has 0 keys"));
    EXPECT_TRUE(has(v1({nullptr, two.data(), 2}, c.device_layer(), s), "null device rows"));
    // v3_wide: a head_dim that is no multiple of 8, a pool off 16-byte alignment, a cap above the most.
    auto v3 = [&](const cuda::AttentionRows& r, const cpu::KVLayer& kv, const cpu::AttentionShape& shape) {
        return error_of([&] { cuda::attention_v3_wide(stream, q.as<float>(), r, kv, shape, out.as<float>(), ws); });
    };
    cpu::KVLayer odd = c.device_layer();
    odd.kv_dim = 12;
    EXPECT_TRUE(has(v3(rows, odd, {2, 2, 6}), "multiples of 8"));
    cpu::KVLayer shifted = c.device_layer();
    shifted.k += 4;
    EXPECT_FALSE(cuda::attention_v3_fits(shifted, s));
    EXPECT_TRUE(has(v3(rows, shifted, s), "16-byte aligned"));
    EXPECT_TRUE(cuda::attention_v3_fits(c.device_layer(), s));
    EXPECT_TRUE(has(v3({two_dev.as<cpu::AttentionRow>(), two.data(), 2, 0, cuda::kMaxSplitCap + 1}, c.device_layer(), s),
                    "split_cap 257"));
    // No rows: nothing to do, a zero cost.
    const cpu::AttentionCost none = cuda::attention_v1_split(stream, q.as<float>(), {nullptr, nullptr, 0},
                                                             c.device_layer(), s, out.as<float>(), ws);
    EXPECT_EQ(none.total().flops, 0.0);
    EXPECT_EQ(none.total().bytes(), 0.0);
    stream.sync();
}

// Host code only (no device needed): the partials the decode variants need for a batch of rows.
TEST(CudaAttention, WorkspaceHoldsTheSplitsOfTheLongestRow) {
    const int32_t table[1] = {0};  // never read
    const cpu::AttentionShape s{9, 3, 64};
    const cpu::AttentionRow one_split[2] = {{table, 1}, {table, cuda::kSplitKeys}};
    EXPECT_EQ(cuda::attention_split_workspace_bytes(one_split, 2, s), 0u);  // each block writes its row
    const cpu::AttentionRow rows[3] = {{table, 1}, {table, cuda::kSplitKeys + 1}, {table, 1000}};
    // 1000 keys: 4 splits of 256; every (row, head) gets 4 records of (max, sum, 64 weighted values).
    EXPECT_EQ(cuda::attention_split_workspace_bytes(rows, 3, s), size_t(3) * 9 * 4 * (64 + 2) * sizeof(float));
    EXPECT_EQ(cuda::attention_split_workspace_bytes(rows, 0, s), 0u);
    // v3 with at most 3 splits a row: 1 key is one split of 64; 257 keys, three of 96 (ceil(257/3)
    // = 86, up to a multiple of 32); 1000 keys, three of 352. With a cap of 100, 1000 keys are cut
    // in 64s (10 a split is below the least): 16 splits.
    EXPECT_EQ(cuda::attention_split_workspace_bytes(rows, 3, s, 0, 3), size_t(3) * 9 * 3 * (64 + 2) * sizeof(float));
    EXPECT_EQ(cuda::attention_split_workspace_bytes(rows, 3, s, 0, 100), size_t(3) * 9 * 16 * (64 + 2) * sizeof(float));
    EXPECT_EQ(cuda::attention_split_workspace_bytes(rows, 1, s, 0, 3), 0u);  // 1 key: one split, no partials
    EXPECT_EQ(cuda::attention_split_workspace_bytes(rows, 3, s, 5, 3), size_t(3) * 9 * 5 * (64 + 2) * sizeof(float));
}

// Host code only: v3's cap gives one row two blocks a multiprocessor. An H200 (132 SMs) on a
// Llama-3-8B layer (32 query heads on 8 KV heads: a block per KV head and split) takes ceil(264 /
// 8) = 33 splits; SmolLM2 (9 on 3: groups of 3 in one block of 4) ceil(264 / 3) = 88; no SMs
// reported counts as one; the cap stops at kMaxSplitCap.
TEST(CudaAttention, WideSplitCapFromTheSmCount) {
    EXPECT_EQ(cuda::attention_v3_split_cap(132, {32, 8, 128}), 33);
    EXPECT_EQ(cuda::attention_v3_split_cap(132, {9, 3, 64}), 88);
    EXPECT_EQ(cuda::attention_v3_split_cap(132, {16, 2, 64}), 66);  // group 8: two blocks of 4 a KV head
    EXPECT_EQ(cuda::attention_v3_split_cap(0, {32, 8, 128}), 1);
    EXPECT_EQ(cuda::attention_v3_split_cap(1000, {1, 1, 64}), cuda::kMaxSplitCap);
}

}  // namespace
}  // namespace ridge
