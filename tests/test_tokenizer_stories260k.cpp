// stories260K's 512-token SentencePiece-style vocabulary against Hugging Face tokenizers: every
// string of tests/data/tokenizer/stories260k_hf.jsonl (tools/gen_tokenizer_goldens.py, with BOS,
// special tokens as text) through the GGUF "llama" path and through the llama2.c tok512.bin.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/tok512.bin");

namespace {

const std::string kData = RIDGE_TESTDATA_DIR;
const std::string kGoldens = std::string(RIDGE_TESTS_DIR) + "/data/tokenizer/stories260k_hf.jsonl";

struct Golden {
    std::string text;
    std::vector<int32_t> ids;
};

std::vector<Golden> load_goldens() {
    std::ifstream in(kGoldens);
    if (!in) throw std::runtime_error("cannot open " + kGoldens);
    std::vector<Golden> out;
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
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

void expect_all_match(const ridge::Tokenizer& tok, const char* which) {
    const auto goldens = load_goldens();
    ASSERT_GT(goldens.size(), 300u);
    int mismatches = 0;
    for (const Golden& g : goldens) {
        const auto ids = tok.encode(g.text, /*add_bos=*/true, /*parse_special=*/false);
        if (ids != g.ids) {
            ++mismatches;
            ADD_FAILURE() << which << ": \"" << g.text << "\"\n  HF    " << ids_str(g.ids) << "\n  ridge " << ids_str(ids);
        }
    }
    EXPECT_EQ(mismatches, 0) << "of " << goldens.size();
}

TEST(Stories260k, GgufMatchesHuggingFace) {
    auto f = ridge::GGUFFile::open(kData + "/gguf-stories260K/stories260K.gguf");
    auto tok = ridge::Tokenizer::from_gguf(*f);
    expect_all_match(*tok, "stories260K.gguf");
}

TEST(Stories260k, Llama2cBinMatchesHuggingFace) {
    auto tok = ridge::Tokenizer::from_llama2c(kData + "/llama2c-stories260K/tok512.bin", 512);
    expect_all_match(*tok, "tok512.bin");
}

}  // namespace
