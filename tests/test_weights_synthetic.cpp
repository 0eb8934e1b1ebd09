// Synthetic models (weights/synthetic.h): each shape's config and tensor list against the public
// configs, parameter counts from the Llama formula and the published totals, seeded bytes (same
// seed same bytes, other seed other bytes), every type dequantizing to finite values of the
// intended scale, and the one-line refusals (unknown name or type, not enough memory); written as
// a GGUF file (write_synthetic_gguf), the same bytes with a real vocabulary.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "weights/config.h"
#include "weights/error.h"
#include "weights/gguf.h"
#include "weights/quant.h"
#include "weights/synthetic.h"
#include "test_paths.h"

namespace ridge {
namespace {

// A shape as its public config.json gives it.
struct Expected {
    std::string name;
    int d, layers, ff, heads, kv_heads, vocab, ctx;
    float rope_base;
    bool tied;
    int64_t params;      // exact count, from the formula below (the published safetensors totals)
    double params_known; // the well-known rounded total
};

const std::vector<Expected> kExpected = {
    {"smollm2-135m", 576, 30, 1536, 9, 3, 49152, 8192, 100000.0f, true, 134515008, 135e6},
    {"llama-3.2-1b", 2048, 16, 8192, 32, 8, 128256, 8192, 500000.0f, true, 1235814400, 1.24e9},
    {"llama-3.2-3b", 3072, 28, 8192, 24, 8, 128256, 8192, 500000.0f, true, 3212749824, 3.21e9},
    {"llama-3-8b", 4096, 32, 14336, 32, 8, 128256, 8192, 500000.0f, false, 8030261248, 8.03e9},
};

// Llama parameters: the embedding (and a separate output head when untied), per layer
// q (d x q_dim), k and v (d x kv_dim), o (q_dim x d), gate and up (d x ff), down (ff x d) and two
// norms (d), plus the final norm (d).
int64_t llama_params(const Expected& e) {
    const int64_t d = e.d, hd = e.d / e.heads, q_dim = e.heads * hd, kv_dim = e.kv_heads * hd;
    const int64_t per_layer = d * q_dim + 2 * d * kv_dim + q_dim * d + 3 * d * e.ff + 2 * d;
    return int64_t(e.vocab) * d * (e.tied ? 1 : 2) + e.layers * per_layer + d;
}

int64_t elements(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return n;
}

TEST(Synthetic, ConfigsMatchThePublicShapes) {
    ASSERT_EQ(synthetic_shapes().size(), kExpected.size());
    for (const Expected& e : kExpected) {
        SCOPED_TRACE(e.name);
        const Config c = synthetic_config(e.name);
        EXPECT_EQ(c.arch, "llama");
        EXPECT_EQ(c.n_embd, e.d);
        EXPECT_EQ(c.n_layers, e.layers);
        EXPECT_EQ(c.n_ff, e.ff);
        EXPECT_EQ(c.n_heads, e.heads);
        EXPECT_EQ(c.n_kv_heads, e.kv_heads);
        EXPECT_EQ(c.head_dim, e.d / e.heads);
        EXPECT_EQ(c.rope_dim, c.head_dim);
        EXPECT_EQ(c.n_vocab, e.vocab);
        EXPECT_EQ(c.n_ctx_train, e.ctx);
        EXPECT_EQ(c.rope_freq_base, e.rope_base);
        EXPECT_EQ(c.tied_output, e.tied);
        EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
    }
    EXPECT_EQ(synthetic_names(), "smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3-8b");
    EXPECT_EQ(synthetic_config("Llama-3-8B").n_embd, 4096);  // names are case-insensitive
}

TEST(Synthetic, TensorListsHaveGGUFNamesAndShapes) {
    for (const Expected& e : kExpected) {
        SCOPED_TRACE(e.name);
        const int64_t d = e.d, hd = e.d / e.heads, q_dim = e.heads * hd, kv_dim = e.kv_heads * hd;
        std::vector<std::pair<std::string, std::vector<int64_t>>> want = {{"token_embd.weight", {d, e.vocab}}};
        for (int l = 0; l < e.layers; l++) {
            const std::string p = "blk." + std::to_string(l) + ".";
            want.push_back({p + "attn_norm.weight", {d}});
            want.push_back({p + "attn_q.weight", {d, q_dim}});
            want.push_back({p + "attn_k.weight", {d, kv_dim}});
            want.push_back({p + "attn_v.weight", {d, kv_dim}});
            want.push_back({p + "attn_output.weight", {q_dim, d}});
            want.push_back({p + "ffn_norm.weight", {d}});
            want.push_back({p + "ffn_gate.weight", {d, e.ff}});
            want.push_back({p + "ffn_up.weight", {d, e.ff}});
            want.push_back({p + "ffn_down.weight", {e.ff, d}});
        }
        want.push_back({"output_norm.weight", {d}});
        if (!e.tied) want.push_back({"output.weight", {d, e.vocab}});

        const std::vector<SyntheticTensor> got = synthetic_tensors(synthetic_config(e.name), DType::Q4_0);
        ASSERT_EQ(got.size(), want.size());
        for (size_t i = 0; i < got.size(); i++) {
            EXPECT_EQ(got[i].name, want[i].first);
            EXPECT_EQ(got[i].shape, want[i].second) << got[i].name;
            EXPECT_EQ(got[i].type, got[i].shape.size() == 1 ? DType::F32 : DType::Q4_0) << got[i].name;
        }
    }
}

TEST(Synthetic, ParameterCountsMatchTheFormulaAndThePublishedTotals) {
    for (const Expected& e : kExpected) {
        SCOPED_TRACE(e.name);
        int64_t n = 0;
        for (const SyntheticTensor& t : synthetic_tensors(synthetic_config(e.name), DType::Q8_0)) n += elements(t.shape);
        EXPECT_EQ(n, llama_params(e));
        EXPECT_EQ(n, e.params);
        EXPECT_NEAR(double(n), e.params_known, 0.01 * e.params_known);
    }
}

TEST(Synthetic, BytesNeededCountEveryTensor) {
    // Weight bytes exactly as the block formats say, plus at most 64 bytes of padding per tensor
    // and the pools (at most a few MiB per row length).
    for (const Expected& e : kExpected) {
        for (DType t : {DType::Q4_0, DType::Q8_0, DType::F16, DType::F32}) {
            SCOPED_TRACE(e.name + " " + std::string(dtype_name(t)));
            const std::vector<SyntheticTensor> ts = synthetic_tensors(synthetic_config(e.name), t);
            uint64_t weights = 0;
            for (const SyntheticTensor& x : ts) weights += row_bytes(x.type, x.shape[0]) * uint64_t(elements(x.shape) / x.shape[0]);
            const uint64_t need = synthetic_model_bytes(e.name, t);
            EXPECT_GE(need, weights);
            EXPECT_LE(need, weights + 64 * ts.size() + 2 * 4 * uint64_t(kSyntheticPoolElems));
        }
    }
    // Q4_0: 18 bytes per 32 weights (4.5 bits), so the 8B model is about 4.5 GB.
    EXPECT_NEAR(double(synthetic_model_bytes("llama-3-8b", DType::Q4_0)), 8.03e9 * 18 / 32, 0.01 * 4.5e9);
}

// A built model: the tensors it holds are the list, in place, with the right byte counts.
TEST(Synthetic, BuiltModelHoldsTheListedTensors) {
    const std::unique_ptr<ModelFile> m = make_synthetic_model("smollm2-135m", DType::Q4_0, 7);
    EXPECT_EQ(m->format(), ModelFormat::Synthetic);
    EXPECT_EQ(m->gguf(), nullptr);
    EXPECT_EQ(m->path(), "synthetic smollm2-135m (q4_0, seed 7)");
    EXPECT_EQ(m->config().n_embd, 576);
    const std::vector<SyntheticTensor> want = synthetic_tensors(m->config(), DType::Q4_0);
    ASSERT_EQ(m->tensors().size(), want.size());
    int64_t params = 0;
    for (size_t i = 0; i < want.size(); i++) {
        const TensorView& t = m->tensors()[i];
        EXPECT_EQ(t.name, want[i].name);
        EXPECT_EQ(t.shape, want[i].shape);
        EXPECT_EQ(t.type, want[i].type);
        EXPECT_EQ(t.nbytes, row_bytes(t.type, t.shape[0]) * size_t(t.ne(1)));
        EXPECT_EQ(m->file_offset(t) % 64, 0u) << t.name;
        if (i > 0) {  // laid out in order without overlap
            const TensorView& prev = m->tensors()[i - 1];
            EXPECT_GE(m->file_offset(t), m->file_offset(prev) + prev.nbytes) << t.name;
        }
        params += t.n_elements();
    }
    EXPECT_EQ(params, 134515008);
    EXPECT_NE(m->find("blk.29.ffn_down.weight"), nullptr);
    EXPECT_EQ(m->find("output.weight"), nullptr);  // tied
}

bool same_bytes(const ModelFile& a, const ModelFile& b, const std::string& name) {
    const TensorView* x = a.find(name);
    const TensorView* y = b.find(name);
    return x && y && x->nbytes == y->nbytes && std::memcmp(x->data, y->data, x->nbytes) == 0;
}

TEST(Synthetic, SameSeedSameBytesOtherSeedOtherBytes) {
    const auto a = make_synthetic_model("smollm2-135m", DType::Q4_0, 1);
    const auto b = make_synthetic_model("smollm2-135m", DType::Q4_0, 1);
    const auto c = make_synthetic_model("smollm2-135m", DType::Q4_0, 2);
    for (const TensorView& t : a->tensors()) {
        EXPECT_TRUE(same_bytes(*a, *b, t.name)) << t.name;
        EXPECT_FALSE(same_bytes(*a, *c, t.name)) << t.name;
    }
    // Within one model, tensors of the same shape start at different places of the pool.
    const TensorView* q0 = a->find("blk.0.attn_q.weight");
    const TensorView* q1 = a->find("blk.1.attn_q.weight");
    EXPECT_NE(std::memcmp(q0->data, q1->data, 4096), 0);
}

// Mean and standard deviation of the dequantized values of `rows` rows spread over t.
struct Moments {
    double mean = 0, stddev = 0;
    bool finite = true;
};
Moments moments(const TensorView& t, int64_t rows) {
    const int64_t k = t.shape[0], n_rows = t.ne(1);
    std::vector<float> row(static_cast<size_t>(k));  // (k)
    double sum = 0, sum2 = 0;
    int64_t n = 0;
    Moments m;
    for (int64_t i = 0; i < rows && i < n_rows; i++) {
        const int64_t r = i * n_rows / std::min(rows, n_rows);
        dequantize_row(t.type, t.row(r), row.data(), k);
        for (float v : row) {
            if (!std::isfinite(v)) m.finite = false;
            sum += v;
            sum2 += double(v) * v;
            n++;
        }
    }
    m.mean = sum / double(n);
    m.stddev = std::sqrt(sum2 / double(n) - m.mean * m.mean);
    return m;
}

class SyntheticTypes : public ::testing::TestWithParam<DType> {};

TEST_P(SyntheticTypes, DequantizeToFiniteValuesOfTheIntendedScale) {
    const DType type = GetParam();
    const auto m = make_synthetic_model("smollm2-135m", type, 3);
    for (const TensorView& t : m->tensors()) {
        if (t.shape.size() == 1) {  // norms: F32 around 1
            ASSERT_EQ(t.type, DType::F32) << t.name;
            const Moments s = moments(t, 1);
            EXPECT_TRUE(s.finite) << t.name;
            EXPECT_NEAR(s.mean, 1.0, 0.01) << t.name;
            EXPECT_NEAR(s.stddev, 0.02, 0.005) << t.name;
            continue;
        }
        ASSERT_EQ(t.type, type) << t.name;
        // Linear layers and the embedding: normal(0, 1/sqrt(k)), k the row length. Quantization
        // adds a little noise (Q4_0 about 10%), so the spread is checked to 15%.
        const Moments s = moments(t, 64);
        const double want = 1.0 / std::sqrt(double(t.shape[0]));
        EXPECT_TRUE(s.finite) << t.name;
        EXPECT_NEAR(s.mean, 0.0, 0.05 * want) << t.name;
        EXPECT_NEAR(s.stddev, want, 0.15 * want) << t.name;
    }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, SyntheticTypes,
                         ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                                           DType::F16, DType::BF16, DType::F32),
                         [](const ::testing::TestParamInfo<DType>& i) { return std::string(dtype_name(i.param)); });

// The message of the ridge::Error `f` throws ("" if none).
template <class F>
std::string error_of(F f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

void expect_one_line_containing(const std::string& msg, const std::vector<std::string>& needles) {
    ASSERT_FALSE(msg.empty());
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const std::string& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << n << " in: " << msg;
}

TEST(Synthetic, UnknownNameOrTypeListsTheValidOnes) {
    expect_one_line_containing(error_of([] { make_synthetic_model("llama-9000", DType::Q4_0, 1); }),
                               {"llama-9000", "smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3-8b"});
    expect_one_line_containing(error_of([] { synthetic_type_from_name("q4_k"); }),
                               {"q4_k", "q4_0, q4_1, q5_0, q5_1, q8_0, f16, bf16, f32"});
    expect_one_line_containing(error_of([] { make_synthetic_model("smollm2-135m", DType::Q6_K, 1); }),
                               {"Q6_K", "q4_0, q4_1"});
    EXPECT_EQ(synthetic_type_from_name("Q8_0"), DType::Q8_0);
    EXPECT_EQ(synthetic_type_from_name("bf16"), DType::BF16);
}

TEST(Synthetic, RefusesWhenMemoryIsShort) {
    const uint64_t need = synthetic_model_bytes("llama-3-8b", DType::F32);
    char need_gb[32];
    std::snprintf(need_gb, sizeof need_gb, "%.2f GB", double(need) / 1e9);
    // A 1 MB limit: refused before anything is allocated, naming the size it would need.
    expect_one_line_containing(error_of([] { make_synthetic_model("llama-3-8b", DType::F32, 1, 1000000); }),
                               {"llama-3-8b", std::string("needs ") + need_gb, "only 0.00 GB", "q4_0"});
    expect_one_line_containing(error_of([] { make_synthetic_model("smollm2-135m", DType::Q4_0, 1, 1000); }),
                               {"smollm2-135m", "needs 0.08 GB", "smaller model"});
    // Exactly enough is enough.
    EXPECT_NO_THROW(make_synthetic_model("smollm2-135m", DType::Q4_0, 1, synthetic_model_bytes("smollm2-135m", DType::Q4_0)));
}

TEST(Synthetic, MemoryLimitComesFromMemAvailable) {
    const uint64_t limit = synthetic_memory_limit();
    EXPECT_GT(limit, 0u);  // a Linux test machine has /proc/meminfo and more than the margin
    EXPECT_LT(limit, uint64_t(1) << 50);
}

}  // namespace
}  // namespace ridge

namespace ridge {
namespace {

// The file write_synthetic_gguf makes holds, tensor for tensor, the bytes make_synthetic_model
// builds in memory when the vocabulary has the shape's size (SmolLM2's own for smollm2-135m), with
// the vocabulary file's tokenizer keys and the shape's llama.* keys.
TEST(SyntheticFile, HoldsTheInMemoryModelsBytesAndTheVocabulary) {
    const std::string vocab = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!std::filesystem::exists(vocab)) GTEST_SKIP() << vocab << " not downloaded (tools/fetch_model.sh)";
    const std::string out = ::testing::TempDir() + "ridge_synthetic_" + std::to_string(::getpid()) + ".gguf";
    const SyntheticFileSummary sum = write_synthetic_gguf("smollm2-135m", DType::Q4_0, 11, vocab, out);
    EXPECT_EQ(sum.config.n_vocab, 49152);
    const auto file = GGUFFile::open(out);
    const auto mem = make_synthetic_model("smollm2-135m", DType::Q4_0, 11);
    ASSERT_EQ(file->tensors().size(), mem->tensors().size());
    for (size_t i = 0; i < mem->tensors().size(); i++) {
        const TensorView &a = file->tensors()[i], &b = mem->tensors()[i];
        EXPECT_EQ(a.name, b.name);
        EXPECT_EQ(a.type, b.type) << a.name;
        EXPECT_EQ(a.shape, b.shape) << a.name;
        ASSERT_EQ(a.nbytes, b.nbytes) << a.name;
        EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << a.name;
    }
    const Config c = config_from_gguf(*file);
    const Config want = synthetic_config("smollm2-135m");
    EXPECT_EQ(c.n_embd, want.n_embd);
    EXPECT_EQ(c.n_layers, want.n_layers);
    EXPECT_EQ(c.n_ff, want.n_ff);
    EXPECT_EQ(c.n_heads, want.n_heads);
    EXPECT_EQ(c.n_kv_heads, want.n_kv_heads);
    EXPECT_EQ(c.rope_freq_base, want.rope_freq_base);
    EXPECT_TRUE(c.tied_output);
    EXPECT_EQ(file->get_u64("general.file_type"), 2u);
    const auto v = GGUFFile::open(vocab);
    EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens"), v->get_string_array("tokenizer.ggml.tokens"));
    EXPECT_EQ(file->get_string("tokenizer.ggml.model"), v->get_string("tokenizer.ggml.model"));
    EXPECT_EQ(file->get_string("tokenizer.chat_template"), v->get_string("tokenizer.chat_template"));
    std::filesystem::remove(out);
}

// A vocabulary file without a vocabulary, or no file, is refused, naming it, and writes nothing.
TEST(SyntheticFile, AVocabularyFileWithoutTokensIsRefused) {
    const std::string out = ::testing::TempDir() + "ridge_synthetic_bad_" + std::to_string(::getpid()) + ".gguf";
    const std::string no_vocab = std::string(RIDGE_TESTS_DIR) + "/data/kquant/input.f16.gguf";
    try {
        write_synthetic_gguf("smollm2-135m", DType::Q4_0, 1, no_vocab, out);
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(no_vocab + ": no tokenizer.ggml.tokens"), std::string::npos) << e.what();
    }
    EXPECT_THROW(write_synthetic_gguf("smollm2-135m", DType::Q4_0, 1, "/nonexistent/vocab.gguf", out), Error);
    EXPECT_THROW(write_synthetic_gguf("smollm2-135m", DType::Q4_K, 1, no_vocab, out), Error);
    EXPECT_FALSE(std::filesystem::exists(out));
    EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
}

}  // namespace
}  // namespace ridge
