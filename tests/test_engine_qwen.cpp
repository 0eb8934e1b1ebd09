// Qwen2 (q/k/v biases) and Qwen3 (per-head q/k RMSNorm, heads wider than the embedding / head
// count) against Hugging Face transformers' float32 Qwen2ForCausalLM / Qwen3ForCausalLM on the same
// weights: the tiny random models of the shared test data (tiny-qwen/, converted by llama.cpp's
// own converter) and tests/data/tiny-qwen/*.json (made by tools/qwen_goldens.py). On the exact
// path (f32 activations): the config and the tokenizer's prompt ids as transformers has them; at
// every prompt position the top-1 token (unless the reference's top two are a near tie) and max
// |ridge - ref| <= 1e-3 * max|ref| over the stored logits (the top 8 and fixed probe ids); the same
// 24-token greedy continuation, a divergence accepted only at a recorded near tie; token-by-token
// decode gives the prefill's logits. The default (integer) path is held to the top-1 tokens.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "engine/forward.h"
#include "engine/model.h"
#include "shared_testdata.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"
#include "weights/model_file.h"

RIDGE_SHARED_TESTDATA("tiny-qwen/tiny-random-qwen2.Q8_0.gguf", "tiny-qwen/tiny-random-qwen3.Q8_0.gguf");

namespace ridge {
namespace {

constexpr double kRelTol = 1e-3;

struct Qwen {
    std::unique_ptr<ModelFile> file;
    Model model;
    std::unique_ptr<Engine> exact, fast;
    std::unique_ptr<Tokenizer> tok;
    nlohmann::json goldens;
};

// The model of `name` ("qwen2", "qwen3") and its goldens, or nullptr when the shared data is absent.
const Qwen* load(const std::string& name) {
    static std::map<std::string, std::unique_ptr<Qwen>> cache;
    if (auto it = cache.find(name); it != cache.end()) return it->second.get();
    const std::string path = std::string(RIDGE_TESTDATA_DIR) + "/tiny-qwen/tiny-random-" + name + ".Q8_0.gguf";
    if (!std::filesystem::exists(path)) return nullptr;
    auto q = std::make_unique<Qwen>();
    q->file = ModelFile::open(path);
    q->model = Model::from_file(*q->file);
    q->exact = std::make_unique<Engine>(q->model, RunOptions{.exact = true});
    q->fast = std::make_unique<Engine>(q->model);
    q->tok = Tokenizer::from_gguf(*q->file->gguf());
    std::ifstream in(std::string(RIDGE_TESTS_DIR) + "/data/tiny-qwen/tiny-" + name + ".json");
    if (!in) throw std::runtime_error("cannot read the goldens of " + name);
    q->goldens = nlohmann::json::parse(in);
    return (cache[name] = std::move(q)).get();
}

// Logits (T, n_vocab) of every position of ids: one prefill batch, or one token a step.
std::vector<float> logits_of(const Engine& e, const std::vector<int32_t>& ids, bool one_by_one) {
    KVCache cache(e.config(), int(ids.size()), DType::F32);
    Workspace ws;
    const int seq = cache.new_sequence();
    std::vector<float> out;
    const int64_t n_vocab = e.config().n_vocab;
    for (size_t start = 0; start < ids.size();) {
        const size_t rows = one_by_one ? 1 : ids.size();
        const int first = cache.append(seq, int(rows));
        Batch b;
        for (size_t i = 0; i < rows; i++) b.add(ids[start + i], seq, first + int(i), true);
        forward(e, cache, b, ws);
        out.insert(out.end(), ws.logits.begin(), ws.logits.begin() + int64_t(rows) * n_vocab);
        start += rows;
    }
    return out;
}

int32_t argmax(const float* row, int64_t n) {
    return int32_t(std::max_element(row, row + n) - row);
}

class QwenModel : public ::testing::TestWithParam<std::string> {
protected:
    void SetUp() override {
        q_ = load(GetParam());
        if (q_ == nullptr) GTEST_SKIP() << "no tiny-qwen/ in the shared test data (" << RIDGE_TESTDATA_DIR << ")";
    }
    const Qwen* q_ = nullptr;
};

TEST_P(QwenModel, ConfigAndPromptIdsAreTransformers) {
    const auto& g = q_->goldens["config"];
    const Config& c = q_->model.config;
    EXPECT_EQ(c.arch, GetParam());
    EXPECT_EQ(c.n_embd, g["hidden"].get<int>());
    EXPECT_EQ(c.n_layers, g["layers"].get<int>());
    EXPECT_EQ(c.n_heads, g["heads"].get<int>());
    EXPECT_EQ(c.n_kv_heads, g["kv_heads"].get<int>());
    EXPECT_EQ(c.head_dim, g["head_dim"].get<int>());
    EXPECT_EQ(c.n_ff, g["intermediate"].get<int>());
    EXPECT_EQ(c.n_vocab, g["vocab_size"].get<int>());
    EXPECT_FLOAT_EQ(c.rope_freq_base, g["rope_theta"].get<float>());
    EXPECT_FLOAT_EQ(c.norm_eps, g["rms_norm_eps"].get<float>());
    EXPECT_EQ(c.rope_style, RopeStyle::Neox);
    EXPECT_TRUE(c.tied_output);
    const bool bias = g["qkv_bias"][0].get<bool>(), norm = g["qk_norm"].get<bool>();
    for (const LayerWeights& L : q_->model.layers) {
        EXPECT_EQ(L.attn_q_bias != nullptr, bias);
        EXPECT_EQ(L.attn_v_bias != nullptr, bias);
        EXPECT_EQ(L.attn_q_norm != nullptr, norm);
        EXPECT_EQ(L.attn_k_norm != nullptr, norm);
    }
    const std::vector<int32_t> want = q_->goldens["prompt_ids"];
    EXPECT_EQ(q_->tok->encode(q_->goldens["prompt_text"].get<std::string>(), q_->tok->add_bos_default(), false), want);
}

TEST_P(QwenModel, ExactLogitsAreTransformers) {
    const std::vector<int32_t> ids = q_->goldens["prompt_ids"];
    const int64_t n_vocab = q_->model.config.n_vocab;
    const std::vector<float> got = logits_of(*q_->exact, ids, /*one_by_one=*/false);
    const auto& positions = q_->goldens["positions"];
    ASSERT_EQ(positions.size(), ids.size());
    for (size_t t = 0; t < ids.size(); t++) {
        SCOPED_TRACE("position " + std::to_string(t));
        const auto& p = positions[t];
        const float* row = got.data() + int64_t(t) * n_vocab;
        double max_ref = 0, max_diff = 0;
        for (const char* kind : {"top", "probe"}) {
            const std::vector<int32_t> pid = p[std::string(kind) + "_ids"];
            const std::vector<double> ref = p[std::string(kind) + "_logits"];
            for (size_t i = 0; i < pid.size(); i++) {
                max_ref = std::max(max_ref, std::abs(ref[i]));
                max_diff = std::max(max_diff, std::abs(double(row[pid[i]]) - ref[i]));
            }
        }
        EXPECT_LE(max_diff, kRelTol * max_ref);
        const double margin = q_->goldens["margins"][t].get<double>();
        if (margin > kRelTol * max_ref) {
            EXPECT_EQ(argmax(row, n_vocab), p["top_ids"][0].get<int32_t>());
        }
    }
    // Token by token, each step's logits are the prefill's row (the same keys, attended one at a time).
    const std::vector<float> step = logits_of(*q_->exact, ids, /*one_by_one=*/true);
    ASSERT_EQ(step.size(), got.size());
    double worst = 0;
    for (size_t i = 0; i < got.size(); i++) worst = std::max(worst, double(std::abs(step[i] - got[i])));
    EXPECT_LE(worst, 1e-4);
}

TEST_P(QwenModel, GreedyContinuationIsTransformers) {
    std::vector<int32_t> ids = q_->goldens["prompt_ids"];
    const std::vector<int32_t> want = q_->goldens["greedy_ids"];
    const std::vector<double> margins = q_->goldens["greedy_margins"];
    const int64_t n_vocab = q_->model.config.n_vocab;
    KVCache cache(q_->model.config, int(ids.size() + want.size()), DType::F32);
    Workspace ws;
    const int seq = cache.new_sequence();
    Batch b;
    const int first = cache.append(seq, int(ids.size()));
    for (size_t i = 0; i < ids.size(); i++) b.add(ids[i], seq, first + int(i), i + 1 == ids.size());
    forward(*q_->exact, cache, b, ws);
    for (size_t s = 0; s < want.size(); s++) {
        const int32_t next = argmax(ws.logits.data(), n_vocab);
        if (next != want[s]) {
            // Only where transformers' own top two were within float noise of each other.
            EXPECT_LT(margins[s], 0.01) << "step " << s << ": " << next << " instead of " << want[s];
            std::printf("[ note ] %s: greedy parts from transformers at step %zu (a near tie, margin %.4g)\n",
                        GetParam().c_str(), s, margins[s]);
            return;
        }
        Batch d;
        d.add(next, seq, cache.append(seq, 1), true);
        forward(*q_->exact, cache, d, ws);
    }
}

// The default path (Q8_0 rows against 8-bit integer activations): its top-1 token wherever the
// reference's margin is clear of its error.
TEST_P(QwenModel, DefaultPathKeepsTheTopTokens) {
    const std::vector<int32_t> ids = q_->goldens["prompt_ids"];
    const int64_t n_vocab = q_->model.config.n_vocab;
    const std::vector<float> got = logits_of(*q_->fast, ids, /*one_by_one=*/false);
    int compared = 0;
    for (size_t t = 0; t < ids.size(); t++) {
        if (q_->goldens["margins"][t].get<double>() < 0.1) continue;
        EXPECT_EQ(argmax(got.data() + int64_t(t) * n_vocab, n_vocab), q_->goldens["positions"][t]["top_ids"][0].get<int32_t>())
            << "position " << t;
        compared++;
    }
    EXPECT_GE(compared, 8);
}

INSTANTIATE_TEST_SUITE_P(TinyRandom, QwenModel, ::testing::Values("qwen2", "qwen3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ridge
