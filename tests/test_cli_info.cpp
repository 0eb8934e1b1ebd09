// Tests for `ridge info`: run the real binary (RIDGE_BINARY) on SmolLM2 (GGUF, Q4_1 + Q8_0) and
// stories260K.bin (llama2.c, F32) and check its numbers against ones computed here from the
// Llama formulas and block sizes; bad input must give one "ridge: ..." line and a non-zero exit.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/stories260K.bin");

namespace {

using cli_test::field;
using cli_test::ridge;
using cli_test::RunResult;
using cli_test::type_row;

const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kBin = std::string(RIDGE_TESTDATA_DIR) + "/llama2c-stories260K/stories260K.bin";
const std::string kStoriesGGUF = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

int count_lines_starting(const std::string& text, const std::string& prefix) {
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line))
        if (line.rfind(prefix, 0) == 0) n++;
    return n;
}

// Llama sizes from the config alone.
struct Shape {
    int64_t d, L, ff, heads, kv_heads, vocab;
    int64_t head_dim() const { return d / heads; }
    int64_t kv_dim() const { return kv_heads * head_dim(); }
    int64_t matrix_elems_per_layer() const { return d * d + 2 * d * kv_dim() + d * d + 3 * d * ff; }  // q, k, v, o, ffn
    int64_t norm_elems() const { return 2 * L * d + d; }  // attn_norm, ffn_norm per layer; output_norm
    int64_t kv_bytes_per_token(int64_t bytes) const { return 2 * L * kv_heads * head_dim() * bytes; }
};

}  // namespace

TEST(CliInfo, SmolLM2) {
    // SmolLM2-135M: d 576, 30 layers, ff 1536, 9 heads, 3 KV heads, vocab 49152, tied output.
    // The file's types (gguf-py listing): norms F32, layer matrices Q4_1, token_embd Q8_0.
    const Shape s{576, 30, 1536, 9, 3, 49152};
    const int64_t matrices = s.L * s.matrix_elems_per_layer();
    const int64_t embd = s.vocab * s.d;
    const int64_t params = matrices + s.norm_elems() + embd;
    const int64_t q4_1_bytes = matrices / 32 * 20, q8_0_bytes = embd / 32 * 34, f32_bytes = s.norm_elems() * 4;
    const int64_t weight_bytes = q4_1_bytes + q8_0_bytes + f32_bytes;
    // Decode reads all weights (the tied embedding is the output head) plus one embedding row.
    const int64_t decode = weight_bytes + s.d / 32 * 34;

    RunResult r = ridge({"info", "-m", kSmol});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_NE(r.out.find("architecture: llama"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("name: Smollm2 135M 8k Lc100K Mix1 Ep2"), std::string::npos) << r.out;
    EXPECT_EQ(field(r.out, "n_embd"), 576);
    EXPECT_EQ(field(r.out, "n_layers"), 30);
    EXPECT_EQ(field(r.out, "n_ff"), 1536);
    EXPECT_EQ(field(r.out, "n_heads"), 9);
    EXPECT_EQ(field(r.out, "n_kv_heads"), 3);
    EXPECT_EQ(field(r.out, "head_dim"), 64);
    EXPECT_EQ(field(r.out, "n_vocab"), 49152);
    EXPECT_EQ(field(r.out, "n_ctx_train"), 8192);
    EXPECT_EQ(field(r.out, "rope_dim"), 64);
    EXPECT_EQ(field(r.out, "rope_freq_base"), 100000);
    EXPECT_NE(r.out.find("tied_output: yes"), std::string::npos);
    EXPECT_EQ(field(r.out, "parameters"), params);
    EXPECT_EQ(type_row(r.out, "F32"), (std::vector<int64_t>{2 * s.L + 1, s.norm_elems(), f32_bytes}));
    EXPECT_EQ(type_row(r.out, "Q4_1"), (std::vector<int64_t>{7 * s.L, matrices, q4_1_bytes}));
    EXPECT_EQ(type_row(r.out, "Q8_0"), (std::vector<int64_t>{1, embd, q8_0_bytes}));
    EXPECT_EQ(field(r.out, "weight bytes"), weight_bytes);
    EXPECT_EQ(field(r.out, "decode bytes per token"), decode);
    EXPECT_NE(r.out.find("kv cache bytes per token: f32 " + std::to_string(s.kv_bytes_per_token(4)) + ", f16 " +
                         std::to_string(s.kv_bytes_per_token(2))),
              std::string::npos)
        << r.out;
}

TEST(CliInfo, SmolLM2Tensors) {
    RunResult r = ridge({"info", "-m", kSmol, "--tensors"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(count_lines_starting(r.out, "  blk."), 30 * 9);
    // token_embd.weight is the first tensor, at the start of the data section (byte 1785664, gguf-py).
    EXPECT_NE(r.out.find("token_embd.weight"), std::string::npos);
    std::istringstream in(r.out.substr(r.out.find("  token_embd.weight")));
    std::string name, type, s0, s1;
    uint64_t bytes, offset;
    in >> name >> type >> s0 >> s1 >> bytes >> offset;
    EXPECT_EQ(type, "Q8_0");
    EXPECT_EQ(s0 + " " + s1, "[576, 49152]");
    EXPECT_EQ(bytes, 49152u * 576u / 32u * 34u);
    EXPECT_EQ(offset, 1785664u);
}

TEST(CliInfo, Stories260KBin) {
    const Shape s{64, 5, 172, 8, 4, 512};
    const int64_t params = s.L * s.matrix_elems_per_layer() + s.norm_elems() + s.vocab * s.d;  // shared classifier
    RunResult r = ridge({"info", "-m", kBin, "--tensors"});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("format: llama2.c checkpoint"), std::string::npos) << r.out;
    EXPECT_EQ(field(r.out, "n_embd"), 64);
    EXPECT_EQ(field(r.out, "n_kv_heads"), 4);
    EXPECT_EQ(field(r.out, "n_ctx_train"), 512);
    EXPECT_NE(r.out.find("tied_output: yes"), std::string::npos);
    EXPECT_EQ(field(r.out, "parameters"), params);
    EXPECT_EQ(type_row(r.out, "F32"), (std::vector<int64_t>{1 + 9 * s.L + 1, params, 4 * params}));
    EXPECT_EQ(field(r.out, "weight bytes"), 4 * params);
    EXPECT_EQ(field(r.out, "decode bytes per token"), 4 * params + 4 * s.d);
    EXPECT_NE(r.out.find("f32 " + std::to_string(s.kv_bytes_per_token(4)) + ", f16 " +
                         std::to_string(s.kv_bytes_per_token(2))),
              std::string::npos);
    EXPECT_EQ(count_lines_starting(r.out, "  blk."), 9 * 5);
    // The embedding starts right after the 28-byte header.
    std::istringstream in(r.out.substr(r.out.find("  token_embd.weight")));
    std::string name, type, s0, s1;
    uint64_t bytes, offset;
    in >> name >> type >> s0 >> s1 >> bytes >> offset;
    EXPECT_EQ(offset, 28u);
    EXPECT_EQ(bytes, 512u * 64u * 4u);
}

TEST(CliInfo, StoriesGGUFUntied) {
    // The GGUF conversion stores output.weight separately: decode reads it plus one embedding row.
    const Shape s{64, 5, 172, 8, 4, 512};
    const int64_t params = s.L * s.matrix_elems_per_layer() + s.norm_elems() + 2 * s.vocab * s.d;
    RunResult r = ridge({"info", "-m", kStoriesGGUF});
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("tied_output: no"), std::string::npos);
    EXPECT_EQ(field(r.out, "parameters"), params);
    EXPECT_EQ(field(r.out, "decode bytes per token"), 4 * (params - s.vocab * s.d) + 4 * s.d);
}

TEST(CliInfo, BadInput) {
    auto expect_one_line_error = [](const RunResult& r, const std::string& needle) {
        EXPECT_NE(r.rc, 0);
        EXPECT_EQ(r.err.rfind("ridge: ", 0), 0u) << r.err;
        ASSERT_FALSE(r.err.empty());
        EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // exactly one line
        EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
        EXPECT_EQ(r.out, "");
    };
    const std::string missing = ::testing::TempDir() + "no-such-model.gguf";
    expect_one_line_error(ridge({"info", "-m", missing}), missing);

    const std::string data = cli_test::read_file(kStoriesGGUF);
    const std::string cut = cli_test::scratch("cut-stories.gguf");
    std::ofstream(cut, std::ios::binary).write(data.data(), 12000);
    expect_one_line_error(ridge({"info", "-m", cut}), cut);

    const std::string bin = cli_test::read_file(kBin);
    const std::string cutbin = cli_test::scratch("cut-stories.bin");
    std::ofstream(cutbin, std::ios::binary).write(bin.data(), std::streamsize(bin.size() - 100));
    expect_one_line_error(ridge({"info", "-m", cutbin}), cutbin);

    RunResult r = ridge({"info"});  // -m is required: CLI11 reports it
    EXPECT_NE(r.rc, 0);
}

// The plan of every matrix: SmolLM2's Q4_1 layers and Q8_0 output have the integer kernel (16-bit
// input) below the integer threshold (40 rows; 112 where that kernel runs on zmm registers, and
// there the integer GEMM from it); the F32 stories260K takes f32 rows and Eigen's GEMM from 22 rows.
TEST(CliInfo, PrintsThePlanOfEveryMatrix) {
    const RunResult s = ridge({"info", "-m", kSmol});
    ASSERT_EQ(s.rc, 0) << s.err;
    EXPECT_NE(s.out.find("kernels (planned at load"), std::string::npos) << s.out;
    std::smatch m;
    const std::regex layers("  q,k,v,o,gate,up,down Q4_1: rows v4_int \\(int16 input, (ymm|zmm)[^)]*\\); tiled "
                            "(v6_packed|v7_int_packed \\(int16 input\\)) from ([0-9]+) rows\n");
    ASSERT_TRUE(std::regex_search(s.out, m, layers)) << s.out;
    // The threshold of that form of the kernel; the integer GEMM where the build has AVX-512.
    EXPECT_EQ(m[3].str(), m[1].str() == "zmm" ? "112" : "40");
    EXPECT_EQ(m[2].str(), m[1].str() == "zmm" ? "v7_int_packed (int16 input)" : "v6_packed");
    EXPECT_NE(s.out.find("  output Q8_0: rows v4_int (int16 input, " + m[1].str()), std::string::npos) << s.out;
    const RunResult b = ridge({"info", "-m", kStoriesGGUF});
    ASSERT_EQ(b.rc, 0) << b.err;
    EXPECT_NE(b.out.find("  q,k,v,o,gate,up,down F32: rows v3_simd; tiled v2_eigen from 22 rows\n"), std::string::npos)
        << b.out;
}
