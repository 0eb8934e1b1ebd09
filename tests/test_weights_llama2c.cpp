// Tests for the llama2.c checkpoint loader: stories260K.bin and its llama.cpp GGUF conversion
// stories260K.gguf must give the same model (config and bit-identical tensors), and malformed
// checkpoints (truncated, padded, bad header) must fail with an error naming the file.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "weights/llama2c.h"
#include "weights/model_file.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/stories260K.bin");

using namespace ridge;

namespace {

const std::string kBin = std::string(RIDGE_TESTDATA_DIR) + "/llama2c-stories260K/stories260K.bin";
const std::string kGGUF = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

std::string write_temp(const std::string& name, const std::vector<uint8_t>& bytes) {
    // The pid keeps concurrent runs (ctest -j, several build dirs) from sharing files.
    const std::string path = ::testing::TempDir() + std::to_string(::getpid()) + "-" + name;
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    return path;
}

// Opening `path` must throw ridge::Error whose message names the file and contains `needle`.
void expect_error(const std::string& path, const std::string& needle) {
    try {
        ModelFile::open(path);
        ADD_FAILURE() << path << ": no error (wanted '" << needle << "')";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(path), std::string::npos) << m;
        EXPECT_NE(m.find(needle), std::string::npos) << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
}

}  // namespace

TEST(Llama2c, Stories260KHeader) {
    // Header per SOURCES.md: dim 64, hidden 172, 5 layers, 8 heads, 4 KV heads, vocab 512, seq_len 512.
    auto m = ModelFile::open(kBin);
    EXPECT_EQ(m->format(), ModelFormat::Llama2c);
    EXPECT_EQ(m->gguf(), nullptr);
    const Config& c = m->config();
    EXPECT_EQ(c.n_embd, 64);
    EXPECT_EQ(c.n_ff, 172);
    EXPECT_EQ(c.n_layers, 5);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.n_vocab, 512);
    EXPECT_EQ(c.n_ctx_train, 512);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.rope_dim, 8);
    EXPECT_EQ(c.rope_freq_base, 10000.0f);
    EXPECT_EQ(c.norm_eps, 1e-5f);
    EXPECT_EQ(c.rope_style, RopeStyle::Norm);
    EXPECT_TRUE(c.tied_output);  // vocab_size > 0 in the header: the classifier is the embedding
    // token_embd + 9 per layer + output_norm; no output.weight when the classifier is shared.
    EXPECT_EQ(m->tensors().size(), 1u + 9u * 5u + 1u);
    EXPECT_EQ(m->find("output.weight"), nullptr);
    const TensorView& wq = m->require("blk.4.attn_q.weight", {DType::F32}, {64, 64});
    const TensorView& wk = m->require("blk.0.attn_k.weight", {DType::F32}, {64, 32});
    m->require("blk.2.attn_output.weight", {DType::F32}, {64, 64});
    m->require("blk.3.ffn_down.weight", {DType::F32}, {172, 64});
    m->require("blk.3.ffn_gate.weight", {DType::F32}, {64, 172});
    m->require("output_norm.weight", {DType::F32}, {64});
    EXPECT_EQ(wq.nbytes, 64u * 64u * 4u);
    // Offsets into the file: token_embd (512*64) + rms_att (5*64) floats after the 28-byte header.
    EXPECT_EQ(size_t(wk.data - m->tensors()[0].data), size_t(512 * 64 + 5 * 64 + 5 * 64 * 64) * 4);
}

TEST(Llama2c, SameModelAsGGUF) {
    auto bin = ModelFile::open(kBin);
    auto gg = ModelFile::open(kGGUF);
    const Config &a = bin->config(), &b = gg->config();
    EXPECT_EQ(a.arch, b.arch);
    EXPECT_EQ(a.n_embd, b.n_embd);
    EXPECT_EQ(a.n_layers, b.n_layers);
    EXPECT_EQ(a.n_ff, b.n_ff);
    EXPECT_EQ(a.n_heads, b.n_heads);
    EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
    EXPECT_EQ(a.head_dim, b.head_dim);
    EXPECT_EQ(a.n_vocab, b.n_vocab);
    EXPECT_EQ(a.rope_dim, b.rope_dim);
    EXPECT_EQ(a.rope_freq_base, b.rope_freq_base);
    EXPECT_EQ(a.rope_style, b.rope_style);
    EXPECT_EQ(a.norm_eps, b.norm_eps);
    // Known differences: the converter wrote context_length 2048 (the .bin says seq_len 512) and
    // stored the shared classifier as its own output.weight (a copy of token_embd, checked below).
    EXPECT_EQ(a.n_ctx_train, 512);
    EXPECT_EQ(b.n_ctx_train, 2048);
    EXPECT_TRUE(a.tied_output);
    EXPECT_FALSE(b.tied_output);

    // Every tensor of the .bin exists in the GGUF with the same type, shape and bytes.
    EXPECT_EQ(gg->tensors().size(), bin->tensors().size() + 1);
    for (const TensorView& t : bin->tensors()) {
        const TensorView* u = gg->find(t.name);
        ASSERT_NE(u, nullptr) << t.name;
        EXPECT_EQ(u->type, t.type) << t.name;
        EXPECT_EQ(u->shape, t.shape) << t.name;
        ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
        EXPECT_EQ(std::memcmp(u->data, t.data, t.nbytes), 0) << t.name << " differs";
    }
    // The one GGUF-only tensor is output.weight, equal to the .bin's (tied) token embedding.
    const TensorView& out = gg->require("output.weight", {DType::F32}, {64, 512});
    const TensorView& emb = bin->require("token_embd.weight", {DType::F32}, {64, 512});
    EXPECT_EQ(std::memcmp(out.data, emb.data, emb.nbytes), 0);
}

TEST(Llama2c, SeparateClassifier) {
    // Negative vocab_size: a separate wcls (vocab, dim) follows the freq_cis arrays.
    std::vector<uint8_t> f = read_all(kBin);
    int32_t vocab;
    std::memcpy(&vocab, f.data() + 20, 4);
    int32_t neg = -vocab;
    std::memcpy(f.data() + 20, &neg, 4);
    const size_t emb_bytes = size_t(512) * 64 * 4;
    std::vector<uint8_t> wcls(f.begin() + 28, f.begin() + 28 + long(emb_bytes));
    for (size_t i = 0; i < wcls.size(); i += 4) wcls[i] ^= 1;  // make it differ from the embedding
    f.insert(f.end(), wcls.begin(), wcls.end());
    auto m = ModelFile::open(write_temp("wcls.bin", f));
    EXPECT_FALSE(m->config().tied_output);
    EXPECT_EQ(m->config().n_vocab, 512);
    const TensorView& out = m->require("output.weight", {DType::F32}, {64, 512});
    EXPECT_EQ(std::memcmp(out.data, wcls.data(), emb_bytes), 0);
    EXPECT_EQ(m->tensors().back().name, "output.weight");
}

TEST(Llama2c, Malformed) {
    const std::vector<uint8_t> f = read_all(kBin);
    // Truncated by one float, and one byte too long: the exact size check names both sizes.
    expect_error(write_temp("short.bin", std::vector<uint8_t>(f.begin(), f.end() - 4)), "implies 1056540 bytes");
    std::vector<uint8_t> longer = f;
    longer.push_back(0);
    expect_error(write_temp("long.bin", longer), "checkpoint size is 1056541 bytes");
    // Shorter than the header.
    expect_error(write_temp("tiny.bin", std::vector<uint8_t>(f.begin(), f.begin() + 10)), "too small");
    // n_heads 7 does not divide dim 64.
    std::vector<uint8_t> bad = f;
    int32_t seven = 7;
    std::memcpy(bad.data() + 12, &seven, 4);
    expect_error(write_temp("heads.bin", bad), "multiple of n_heads");
    // A zero and a huge dimension.
    bad = f;
    std::memset(bad.data(), 0, 4);
    expect_error(write_temp("zero.bin", bad), "dim is 0");
    bad = f;
    int32_t huge = 0x7fffffff;
    std::memcpy(bad.data() + 8, &huge, 4);
    expect_error(write_temp("huge.bin", bad), "n_layers");
    // Every byte of the header overwritten with 0xff (all fields -1).
    bad = f;
    std::memset(bad.data(), 0xff, 28);
    expect_error(write_temp("ff.bin", bad), "not a valid llama2.c checkpoint");
    // An empty file.
    expect_error(write_temp("empty.bin", {}), "empty");
}
