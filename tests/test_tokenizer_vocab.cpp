// Exactness against llama.cpp: every llama.cpp tokenizer test vocabulary in the shared test data
// that has its .gguf is loaded, and each string of its .inp must give exactly the ids of its .out
// (llama.cpp's test-tokenizer-0: no BOS, special tokens not parsed). One test case per vocabulary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("llamacpp-vocab/ggml-vocab-llama-bpe.gguf", "llamacpp-vocab/ggml-vocab-qwen2.gguf", "llamacpp-vocab/ggml-vocab-llama-spm.gguf");

namespace {

const std::string kVocabDir = std::string(RIDGE_TESTDATA_DIR) + "/llamacpp-vocab/";

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot open " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// Test strings of a .inp file: separated by "\n__ggml_vocab_test__\n", which also ends the file.
std::vector<std::string> read_inputs(const std::string& path) {
    const std::string text = read_file(path);
    const std::string sep = "\n__ggml_vocab_test__\n";
    std::vector<std::string> out;
    size_t begin = 0;
    while (begin < text.size()) {
        size_t end = text.find(sep, begin);
        if (end == std::string::npos) end = text.size();
        out.push_back(text.substr(begin, end - begin));
        begin = end == text.size() ? end : end + sep.size();
    }
    return out;
}

// Expected ids of a .out file: one line per test string.
std::vector<std::vector<int32_t>> read_outputs(const std::string& path) {
    std::istringstream in(read_file(path));
    std::vector<std::vector<int32_t>> out;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ids(line);
        std::vector<int32_t> row;
        int32_t id;
        while (ids >> id) row.push_back(id);
        out.push_back(row);
    }
    return out;
}

std::string escaped(const std::string& s) {
    std::string out;
    for (unsigned char c : s) {
        if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else out += char(c);
    }
    return out;
}

std::string ids_str(const std::vector<int32_t>& ids) {
    std::ostringstream out;
    out << "[";
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << ids[i];
    out << "]";
    return out.str();
}

class LlamaCppVocab : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppVocab, MatchesLlamaCppTokenIds) {
    const std::string base = kVocabDir + "ggml-vocab-" + GetParam() + ".gguf";
    ASSERT_TRUE(std::filesystem::exists(base)) << base;
    auto gguf = ridge::GGUFFile::open(base);
    auto tok = ridge::Tokenizer::from_gguf(*gguf);
    const auto inputs = read_inputs(base + ".inp");
    const auto expected = read_outputs(base + ".out");
    ASSERT_EQ(inputs.size(), expected.size()) << base;
    ASSERT_GT(inputs.size(), 40u);

    int mismatches = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
        const auto ids = tok->encode(inputs[i], /*add_bos=*/false, /*parse_special=*/false);
        if (ids != expected[i]) {
            ++mismatches;
            ADD_FAILURE() << GetParam() << " test " << i << ": \"" << escaped(inputs[i]) << "\"\n  expected "
                          << ids_str(expected[i]) << "\n  got      " << ids_str(ids);
        }
    }
    EXPECT_EQ(mismatches, 0) << "of " << inputs.size() << " strings";
}

INSTANTIATE_TEST_SUITE_P(AllWithGguf, LlamaCppVocab,
                         testing::Values("llama-spm", "phi-3", "gpt-2", "starcoder", "refact", "deepseek-coder", "mpt",
                                         "llama-bpe", "qwen2", "deepseek-llm"),
                         [](const testing::TestParamInfo<std::string>& info) {
                             std::string name = info.param;
                             for (char& c : name)
                                 if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                             return name;
                         });

}  // namespace
