// Tests for the GGUF reader and config_from_gguf: real files checked against numbers read
// independently with gguf-py 0.19 (GGUFReader: counts, data_offset, field values, tensor infos),
// and corrupted copies (truncated, header fields overwritten) that must fail with a located error.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "weights/config.h"
#include "weights/gguf.h"
#include "weights/model_file.h"

using namespace ridge;

namespace {

const std::string kTestdata = RIDGE_TESTDATA_DIR;
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kStories = kTestdata + "/gguf-stories260K/stories260K.gguf";
const std::string kTinyRandom = kTestdata + "/ollama-tiny-random/llama-2-tiny-random.gguf";
const std::string kVocab = kTestdata + "/llamacpp-vocab/";

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Real files. Expected values: gguf-py GGUFReader on the same files (see the file comment).

TEST(GGUFReal, SmolLM2Header) {
    auto f = GGUFFile::open(kSmol);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->tensors().size(), 272u);
    EXPECT_EQ(f->metadata().size(), 33u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->data_offset(), 1785664u);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->get_string("general.name"), "Smollm2 135M 8k Lc100K Mix1 Ep2");
    EXPECT_EQ(f->get_u64("llama.block_count"), 30u);
    EXPECT_EQ(f->get_u64("llama.context_length"), 8192u);
    EXPECT_EQ(f->get_u64("general.file_type"), 3u);
    EXPECT_EQ(f->get_f64("llama.rope.freq_base"), 100000.0);
    EXPECT_EQ(float(f->get_f64("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_FALSE(f->get_bool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 49152u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").size(), 48900u);
    EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type").size(), 49152u);
    EXPECT_EQ(f->get_string_array("general.languages"), std::vector<std::string>{"en"});
    EXPECT_EQ(f->value_str("tokenizer.ggml.tokens"), "[49152 strings]");
    EXPECT_EQ(f->value_str("llama.block_count"), "30");
    EXPECT_EQ(f->value_str("general.languages"), "[\"en\"]");
    EXPECT_EQ(f->get_u64_or("no.such.key", 7), 7u);

    // Tensor infos; offsets are absolute (data_offset + relative offset) as gguf-py reports them.
    const TensorView* emb = f->find("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->type, DType::Q8_0);
    EXPECT_EQ(emb->shape, (std::vector<int64_t>{576, 49152}));
    EXPECT_EQ(emb->nbytes, 30081024u);
    EXPECT_EQ(size_t(emb->data - f->tensors()[0].data), 0u);
    const TensorView& down = f->require("blk.0.ffn_down.weight", {DType::Q4_1}, {1536, 576});
    EXPECT_EQ(down.nbytes, 552960u);
    EXPECT_EQ(size_t(down.data - emb->data) + 1785664u, 31868992u);
    const TensorView& k = f->require("blk.0.attn_k.weight", {DType::Q4_1, DType::Q8_0}, {576, 192});
    EXPECT_EQ(size_t(k.data - emb->data) + 1785664u, 33530176u);
    EXPECT_EQ(f->find("output.weight"), nullptr);
}

TEST(GGUFReal, SmolLM2Config) {
    auto f = GGUFFile::open(kSmol);
    Config c = config_from_gguf(*f);
    EXPECT_EQ(c.arch, "llama");
    EXPECT_EQ(c.n_embd, 576);
    EXPECT_EQ(c.n_layers, 30);
    EXPECT_EQ(c.n_ff, 1536);
    EXPECT_EQ(c.n_heads, 9);
    EXPECT_EQ(c.n_kv_heads, 3);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.q_dim(), 576);
    EXPECT_EQ(c.kv_dim(), 192);
    EXPECT_EQ(c.norm_eps, 1e-5f);
    EXPECT_EQ(c.rope_freq_base, 100000.0f);
    EXPECT_EQ(c.rope_dim, 64);
    EXPECT_EQ(c.rope_style, RopeStyle::Norm);
    EXPECT_EQ(c.n_ctx_train, 8192);
    EXPECT_EQ(c.n_vocab, 49152);
    EXPECT_TRUE(c.tied_output);  // no output.weight in the file
}

TEST(GGUFReal, Stories260K) {
    auto f = GGUFFile::open(kStories);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->tensors().size(), 48u);
    EXPECT_EQ(f->metadata().size(), 19u);
    EXPECT_EQ(f->data_offset(), 14176u);
    EXPECT_EQ(f->file_size(), 1185376u);
    EXPECT_EQ(f->get_u64("tokenizer.ggml.seperator_token_id"), 4294967295u);
    EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores").size(), 512u);
    const TensorView& out = f->require("output.weight", {DType::F32}, {64, 512});
    EXPECT_EQ(size_t(out.data - f->tensors()[0].data) + 14176u, 145504u);
    for (const TensorView& t : f->tensors()) EXPECT_EQ(t.type, DType::F32) << t.name;

    Config c = config_from_gguf(*f);
    EXPECT_EQ(c.n_embd, 64);
    EXPECT_EQ(c.n_layers, 5);
    EXPECT_EQ(c.n_ff, 172);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.rope_dim, 8);
    EXPECT_EQ(c.rope_freq_base, 10000.0f);  // key absent: the default
    EXPECT_EQ(c.n_ctx_train, 2048);
    EXPECT_EQ(c.n_vocab, 512);              // no llama.vocab_size: from the token array
    EXPECT_FALSE(c.tied_output);
}

TEST(GGUFReal, TinyRandomF16) {
    auto m = ModelFile::open(kTinyRandom);
    EXPECT_EQ(m->format(), ModelFormat::GGUF);
    ASSERT_NE(m->gguf(), nullptr);
    EXPECT_EQ(m->tensors().size(), 12u);
    EXPECT_EQ(m->gguf()->data_offset(), 724416u);
    EXPECT_EQ(m->gguf()->get_string("general.name"), "LLaMA v2");
    const Config& c = m->config();
    EXPECT_EQ(c.n_embd, 8);
    EXPECT_EQ(c.n_layers, 1);
    EXPECT_EQ(c.n_ff, 32);
    EXPECT_EQ(c.n_heads, 2);
    EXPECT_EQ(c.n_kv_heads, 2);
    EXPECT_EQ(c.rope_dim, 4);
    EXPECT_EQ(c.n_vocab, 32000);
    EXPECT_EQ(c.n_ctx_train, 4096);
}

TEST(GGUFReal, VocabOnlyFiles) {
    // name, kv count, vocab size, architecture (gguf-py; SOURCES.md agrees on vocab and arch)
    struct Case { const char* file; size_t n_kv; size_t n_vocab; const char* arch; };
    const Case cases[] = {
        {"ggml-vocab-llama-spm.gguf", 22, 32000, "llama"},   {"ggml-vocab-phi-3.gguf", 26, 32064, "phi3"},
        {"ggml-vocab-gpt-2.gguf", 16, 50257, "gpt2"},        {"ggml-vocab-starcoder.gguf", 19, 49152, "starcoder2"},
        {"ggml-vocab-refact.gguf", 18, 49216, "refact"},     {"ggml-vocab-deepseek-coder.gguf", 25, 32256, "llama"},
        {"ggml-vocab-mpt.gguf", 17, 50432, "mpt"},
    };
    for (const Case& c : cases) {
        auto f = GGUFFile::open(kVocab + c.file);
        EXPECT_EQ(f->tensors().size(), 0u) << c.file;
        EXPECT_EQ(f->metadata().size(), c.n_kv) << c.file;
        EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), c.n_vocab) << c.file;
        EXPECT_EQ(f->get_string("general.architecture"), c.arch) << c.file;
    }
    auto spm = GGUFFile::open(kVocab + "ggml-vocab-llama-spm.gguf");
    EXPECT_TRUE(spm->get_bool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(spm->get_f32_array("tokenizer.ggml.scores").size(), 32000u);
    // deepseek-coder: rope base 100000, eps 1e-6, linear rope scaling factor 4
    auto ds = GGUFFile::open(kVocab + "ggml-vocab-deepseek-coder.gguf");
    EXPECT_EQ(ds->get_f64("llama.rope.freq_base"), 100000.0);
    EXPECT_EQ(float(ds->get_f64("llama.attention.layer_norm_rms_epsilon")), 1e-6f);
    EXPECT_EQ(ds->get_string("llama.rope.scaling.type"), "linear");
    EXPECT_EQ(ds->get_u64("tokenizer.ggml.bos_token_id"), 32013u);
    // A non-llama architecture is refused by config_from_gguf with the file named.
    auto gpt2 = GGUFFile::open(kVocab + "ggml-vocab-gpt-2.gguf");
    try {
        config_from_gguf(*gpt2);
        FAIL() << "gpt2 architecture accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ggml-vocab-gpt-2.gguf"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("gpt2"), std::string::npos) << e.what();
    }
}

TEST(GGUFReal, GetterErrorsNameFileAndKey) {
    auto f = GGUFFile::open(kStories);
    auto expect_error = [&](auto fn, const char* needle) {
        try {
            fn();
            ADD_FAILURE() << "no error for " << needle;
        } catch (const Error& e) {
            std::string m = e.what();
            EXPECT_NE(m.find(kStories), std::string::npos) << m;
            EXPECT_NE(m.find(needle), std::string::npos) << m;
        }
    };
    expect_error([&] { f->get_u64("llama.nope"); }, "llama.nope");
    expect_error([&] { f->get_u64("general.name"); }, "general.name");
    expect_error([&] { f->get_string("llama.block_count"); }, "llama.block_count");
    expect_error([&] { f->get_string_array("tokenizer.ggml.scores"); }, "tokenizer.ggml.scores");
    expect_error([&] { f->require("output.weight", {DType::Q4_1}, {64, 512}); }, "expected Q4_1");
    expect_error([&] { f->require("output.weight", {DType::F32}, {64, 500}); }, "[64, 512], expected [64, 500]");
    expect_error([&] { f->require("blk.9.attn_q.weight", {DType::F32}, {64, 64}); }, "blk.9.attn_q.weight");
}

TEST(GGUFReal, ModelFileMissingFile) {
    try {
        ModelFile::open("/nonexistent/dir/model.gguf");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
    }
}
