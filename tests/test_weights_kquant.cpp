// The K-quant writers (weights/formats/k_quants.h) and llama.cpp's _M mixes (quantize_plan) against
// llama-quantize itself: tests/data/kquant/goldens.json holds, for each of llama-quantize's runs on
// tests/data/kquant/input.f16.gguf (--pure Q4_K_S, --pure Q5_K_S, Q6_K, Q4_K_M, Q5_K_M), the type
// and the FNV-1a hash of every tensor it wrote (tools/kquant_goldens.py). ridge must write the same
// types and the same bytes. Hand-worked cases cover what a row of a real model rarely holds.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "weights/gguf.h"
#include "weights/quant.h"
#include "weights/quantize_model.h"
#include "test_paths.h"

using namespace ridge;

namespace {

const std::string kDir = std::string(RIDGE_TESTS_DIR) + "/data/kquant";

std::string scratch(const std::string& name) {
    const std::string dir = ::testing::TempDir() + "ridge_kquant_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    return dir + "/" + name;
}

uint64_t fnv1a64(const uint8_t* p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

std::string hex(uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

nlohmann::json goldens() {
    std::ifstream f(kDir + "/goldens.json");
    std::stringstream ss;
    ss << f.rdbuf();
    return nlohmann::json::parse(ss.str());
}

TEST(KQuantLlamaQuantize, EveryTensorHasLlamaQuantizesTypeAndBytes) {
    const nlohmann::json g = goldens();
    ASSERT_EQ(g["runs"].size(), 5u);
    for (const nlohmann::json& run : g["runs"]) {
        const std::string target_name = run["target"];
        SCOPED_TRACE(target_name + " vs " + std::string(run["llama_quantize"]));
        const std::optional<QuantizeTarget> target = quantize_target_from_name(target_name);
        ASSERT_TRUE(target.has_value());
        const std::string out = scratch(target_name + ".gguf");
        quantize_model(kDir + "/input.f16.gguf", out, *target);
        auto f = GGUFFile::open(out);
        EXPECT_EQ(f->get_u64("general.file_type"), run["file_type"].get<uint64_t>());
        ASSERT_EQ(f->tensors().size(), run["tensors"].size());
        size_t n_k = 0, n_checked = 0;
        for (const nlohmann::json& want : run["tensors"]) {
            const std::string name = want["name"];
            const TensorView* t = f->find(name);
            ASSERT_NE(t, nullptr) << name;
            EXPECT_EQ(std::string(dtype_name(t->type)), std::string(want["type"])) << name;
            EXPECT_EQ(hex(fnv1a64(t->data, t->nbytes)), std::string(want["fnv1a64"])) << name << " (" << dtype_name(t->type) << ")";
            n_k += t->type == DType::Q4_K || t->type == DType::Q5_K || t->type == DType::Q6_K;
            n_checked++;
        }
        EXPECT_EQ(n_checked, 76u);
        EXPECT_GE(n_k, 57u) << "all but the two odd-width matrices are K-quants";
        std::filesystem::remove(out);
    }
}

// The mix alone, on a model shape with an output head (untied) and 32 layers: llama-quantize's
// use_more_bits picks layers 0-3, 28-31 and every third from 6 (6, 9, ..., 27) for attn_v and
// ffn_down.
TEST(KQuantPlan, Q4KMOnAnUntiedThirtyTwoLayerModel) {
    std::vector<QuantizePlanTensor> ts = {{"token_embd.weight", DType::F16, {4096, 1000}},
                                          {"output.weight", DType::F16, {4096, 1000}},
                                          {"output_norm.weight", DType::F32, {4096}}};
    for (int i = 0; i < 32; i++) {
        const std::string b = "blk." + std::to_string(i) + ".";
        ts.push_back({b + "attn_v.weight", DType::F16, {4096, 1024}});
        ts.push_back({b + "ffn_down.weight", DType::F16, {14336, 4096}});
        ts.push_back({b + "attn_q.weight", DType::F16, {4096, 4096}});
    }
    const std::vector<QuantizePlanEntry> plan = quantize_plan(ts, *quantize_target_from_name("q4_k_m"), 32);
    EXPECT_EQ(plan[0].type, DType::Q4_K) << "an untied embedding keeps the target's type";
    EXPECT_EQ(plan[1].type, DType::Q6_K) << "the head";
    EXPECT_EQ(plan[2].type, DType::F32);
    auto more = [](int i) { return i < 4 || i >= 28 || (i - 4) % 3 == 2; };
    for (int i = 0; i < 32; i++) {
        const DType want = more(i) ? DType::Q6_K : DType::Q4_K;
        EXPECT_EQ(plan[3 + 3 * i].type, want) << "attn_v " << i;
        EXPECT_EQ(plan[4 + 3 * i].type, want) << "ffn_down " << i;
        EXPECT_EQ(plan[5 + 3 * i].type, DType::Q4_K) << "attn_q " << i;
        EXPECT_FALSE(plan[4 + 3 * i].fell_back);
    }
    // A head whose rows no 256-block fits is Q8_0 by rule, not as a fallback.
    ts[1].shape = {576, 1000};
    const std::vector<QuantizePlanEntry> narrow = quantize_plan(ts, *quantize_target_from_name("q4_k_m"), 32);
    EXPECT_EQ(narrow[1].type, DType::Q8_0);
    EXPECT_FALSE(narrow[1].fell_back);
}

TEST(KQuantPlan, FallbacksForRowsNoBlockFits) {
    const std::vector<QuantizePlanTensor> ts = {{"a.weight", DType::F16, {288, 4}}, {"b.weight", DType::F16, {48, 4}}};
    struct Case {
        const char* target;
        DType a, b;
    };
    for (const Case c : {Case{"q4_k", DType::Q5_0, DType::F16}, Case{"q5_k", DType::Q5_1, DType::F16},
                         Case{"q6_k", DType::Q8_0, DType::F16}, Case{"q4_0", DType::Q4_0, DType::F16},
                         Case{"f16", DType::F16, DType::F16}}) {
        const std::vector<QuantizePlanEntry> plan = quantize_plan(ts, *quantize_target_from_name(c.target), 0);
        EXPECT_EQ(plan[0].type, c.a) << c.target;
        EXPECT_EQ(plan[1].type, c.b) << c.target;
        EXPECT_EQ(plan[1].fell_back, std::string(c.target) != "f16") << c.target;
    }
}

// Hand-worked blocks: all zeros gives zero scales and codes; a block of equal positive values is
// stored exactly by the min-free fit; every K-quant round trip stays within its step.
TEST(KQuantHand, ZeroAndConstantBlocks) {
    float zeros[QK_K] = {};
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        std::vector<uint8_t> buf(row_bytes(t, QK_K));
        quantize_row(t, zeros, buf.data(), QK_K);
        for (uint8_t b : buf) EXPECT_EQ(b, 0) << dtype_name(t);
    }
    // 0.5 everywhere: Q4_K/Q5_K fit scale 0.5/15 (0.5/31) with min 0 and codes 15 (31); the 6-bit
    // scale 63 and d = scale/63 round-trip through f16 close to 0.5.
    float half[QK_K];
    for (float& v : half) v = 0.5f;
    for (DType t : {DType::Q4_K, DType::Q5_K, DType::Q6_K}) {
        std::vector<uint8_t> buf(row_bytes(t, QK_K));
        quantize_row(t, half, buf.data(), QK_K);
        float y[QK_K];
        dequantize_row(t, buf.data(), y, QK_K);
        for (int i = 0; i < QK_K; i++) EXPECT_NEAR(y[i], 0.5f, 0.5f * 2e-3f) << dtype_name(t) << " " << i;
    }
}

TEST(KQuantHand, RoundTripWithinAStep) {
    std::vector<float> x(16 * QK_K);
    uint64_t s = 12345;
    for (float& v : x) {  // uniform in [-1, 1)
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        v = float(int64_t(s >> 40) - (int64_t(1) << 23)) / float(1 << 23);
    }
    // Steps over a range of 2: Q4_K 2/15, Q5_K 2/31, Q6_K 1/32 (codes -32..31 of max/32), plus
    // the 6-bit (8-bit for Q6_K) rounding of the sub-block scales.
    struct Case {
        DType t;
        float tol;
    };
    for (const Case c : {Case{DType::Q4_K, 2.0f / 15}, Case{DType::Q5_K, 2.0f / 31}, Case{DType::Q6_K, 1.0f / 32}}) {
        std::vector<uint8_t> buf(row_bytes(c.t, int64_t(x.size())));
        quantize_row(c.t, x.data(), buf.data(), int64_t(x.size()));
        std::vector<float> y(x.size());
        dequantize_row(c.t, buf.data(), y.data(), int64_t(x.size()));
        double worst = 0;
        for (size_t i = 0; i < x.size(); i++) worst = std::max(worst, double(std::fabs(y[i] - x[i])));
        EXPECT_LE(worst, c.tol) << dtype_name(c.t);
        EXPECT_GT(worst, 0.0) << dtype_name(c.t);
    }
}

}  // namespace
