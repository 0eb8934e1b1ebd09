// Several matmuls in one OpenMP region (kernels/cpu/matmul.h, matmul_rows_fused): the row split
// covers every row once on row-aligned cuts for any thread count, and each fused output is what
// matmul_rows gives alone, bit for bit, for the integer, v3 and v1 paths and mixed lists.
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernel_test_util.h"

namespace ridge {
namespace {

// Sets the OpenMP thread count for a scope.
struct Threads {
    int saved;
    explicit Threads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
    ~Threads() { omp_set_num_threads(saved); }
};

TEST(RowJobs, EveryRowOnceOnAlignedCutsForAnyThreadCount) {
    // Three jobs of unequal sizes and costs; each records which calls covered which rows.
    const int64_t rows[3] = {37, 5, 130};
    const int64_t align[3] = {1, 4, 4};
    const double cost[3] = {1.0, 3.0, 0.5};
    for (int threads : {1, 2, 3, 7}) {
        for (bool parallel : {false, true}) {
            Threads scope(threads);
            std::vector<std::vector<int>> hits(3);
            std::vector<std::vector<std::pair<int64_t, int64_t>>> calls(3);
            std::vector<cpu::RowJob> jobs(3);
            for (int o = 0; o < 3; o++) {
                hits[size_t(o)].assign(size_t(rows[o]), 0);
                jobs[size_t(o)] = {rows[o], align[o], cost[o], [&, o](int64_t j0, int64_t j1) {
#pragma omp critical
                                       calls[size_t(o)].push_back({j0, j1});
                                       for (int64_t j = j0; j < j1; j++) hits[size_t(o)][size_t(j)]++;
                                   }};
            }
            cpu::run_row_jobs(jobs.data(), 3, parallel);
            for (int o = 0; o < 3; o++) {
                for (int64_t j = 0; j < rows[o]; j++)
                    EXPECT_EQ(hits[size_t(o)][size_t(j)], 1) << threads << " threads, job " << o << ", row " << j;
                for (auto [j0, j1] : calls[size_t(o)]) {
                    EXPECT_EQ(j0 % align[o], 0) << threads << " threads, job " << o;
                    EXPECT_TRUE(j1 == rows[o] || j1 % align[o] == 0) << threads << " threads, job " << o;
                    EXPECT_LT(j0, j1);
                }
                if (!parallel) {
                    EXPECT_EQ(calls[size_t(o)].size(), 1u);
                }
            }
        }
    }
}

TEST(RowJobs, SharesBalanceByCost) {
    // Two threads, one job of 100 rows at cost 1 and one of 100 at cost 3: the cut sits at cost
    // 200, row 100 + (200 - 100) / 3 = 133.3 -> the second job's row 34.
    Threads scope(2);
    std::vector<int> owner(200, -1);
    std::vector<cpu::RowJob> jobs(2);
    for (int o = 0; o < 2; o++)
        jobs[size_t(o)] = {100, 1, o == 0 ? 1.0 : 3.0, [&, o](int64_t j0, int64_t j1) {
                               for (int64_t j = j0; j < j1; j++) owner[size_t(o * 100 + j)] = omp_get_thread_num();
                           }};
    cpu::run_row_jobs(jobs.data(), 2, true);
    for (int j = 0; j < 200; j++) EXPECT_EQ(owner[size_t(j)], j < 134 ? 0 : 1) << j;
}

// Outputs of these types, k = 512 (a multiple of 256 for the K-quants), row counts that are not
// multiples of 4: fused against matmul_rows alone, m = 1 (decode) and m = 3, with X also given as
// integers (the fast path) or not (the exact path).
void fused_matches_alone(const std::vector<DType>& types, int threads, bool integers = true) {
    Threads scope(threads);
    const int64_t k = 512;
    const int64_t rows[3] = {67, 13, 130};
    std::vector<test::OwnedWeight> w;
    for (size_t o = 0; o < types.size(); o++) w.push_back(test::random_weight(types[o], rows[o], k, uint32_t(40 + o)));
    for (int64_t m : {1, 3}) {
        const std::vector<float> x = test::random_floats(size_t(m * k), 9, -2.0f, 2.0f);
        cpu::QuantizedRows q;
        cpu::quantize_rows(x.data(), m, k, q);
        const cpu::QuantizedRows* xq = integers ? &q : nullptr;  // nullptr: the exact (f32) path
        std::vector<std::vector<float>> alone(types.size()), fused(types.size());
        std::vector<cpu::MatmulOutput> outs;
        std::vector<cpu::Cost> costs(types.size());
        for (size_t o = 0; o < types.size(); o++) {
            alone[o].assign(size_t(m * rows[o]), 0.0f);
            fused[o].assign(size_t(m * rows[o]), -99.0f);
            cpu::matmul_rows(w[o].view, x.data(), m, xq, alone[o].data());
            outs.push_back({&w[o].view, fused[o].data()});
        }
        cpu::matmul_rows_fused(outs.data(), int(outs.size()), x.data(), m, xq, costs.data());
        for (size_t o = 0; o < types.size(); o++) {
            const std::string what = std::string(dtype_name(types[o])) + " output " + std::to_string(o) + ", m " +
                                     std::to_string(m) + ", " + std::to_string(threads) + " threads";
            for (size_t e = 0; e < fused[o].size(); e++) ASSERT_EQ(fused[o][e], alone[o][e]) << what << ", element " << e;
            const cpu::Cost want = cpu::matmul_cost(w[o].view, m, integers);
            EXPECT_DOUBLE_EQ(costs[o].flops, want.flops) << what;
            EXPECT_DOUBLE_EQ(costs[o].weight_bytes, want.weight_bytes) << what;
        }
    }
}

TEST(MatmulRowsFused, EachOutputAsAlone) {
    for (int threads : {1, 2, 3}) {
        fused_matches_alone({DType::Q4_1, DType::Q4_1, DType::Q4_1}, threads);  // SmolLM2's q, k, v
        fused_matches_alone({DType::Q4_0, DType::Q8_0, DType::Q4_1}, threads);
        fused_matches_alone({DType::Q4_K, DType::Q6_K}, threads);             // a Q4_K_M model's
        fused_matches_alone({DType::Q8_0, DType::Q6_K, DType::Q4_0}, threads);  // both integer families
        fused_matches_alone({DType::Q4_1, DType::F16, DType::BF16}, threads);  // v3 for the f16s
        fused_matches_alone({DType::Q4_1, DType::Q5_K, DType::F32}, threads);  // Q5_K: v1, alone
        fused_matches_alone({DType::Q4_1, DType::Q8_0, DType::F16}, threads, false);  // exact: all v3
    }
}

}  // namespace
}  // namespace ridge
