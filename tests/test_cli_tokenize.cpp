// `ridge tokenize` as a program: its ids for SmolLM2 and for stories260K (llama2.c checkpoint +
// tok512.bin) must equal the Hugging Face goldens in tests/data/tokenizer/, the table output has
// one "id<TAB>piece" line per token, and bad input gives one "ridge: ..." line and exit code 1.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("llama2c-stories260K/stories260K.bin", "llama2c-stories260K/tok512.bin");

namespace {

const std::string kRidge = RIDGE_BINARY;
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kStoriesBin = std::string(RIDGE_TESTDATA_DIR) + "/llama2c-stories260K/stories260K.bin";
const std::string kTok512 = std::string(RIDGE_TESTDATA_DIR) + "/llama2c-stories260K/tok512.bin";
const std::string kGoldenDir = std::string(RIDGE_TESTS_DIR) + "/data/tokenizer/";

struct Result {
    int exit_code;
    std::string out;  // stdout
    std::string err;  // stderr
};

// Runs ridge with `args` (already shell-quoted where needed).
Result run(const std::string& args) {
    const std::string err_path = testing::TempDir() + "ridge_" + std::to_string(::getpid()) + "_stderr.txt";
    const std::string cmd = kRidge + " " + args + " 2>" + err_path;
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) throw std::runtime_error("popen failed: " + cmd);
    std::string out;
    std::array<char, 4096> buf;
    size_t n;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    const int status = pclose(p);
    std::ifstream e(err_path);
    std::stringstream ss;
    ss << e.rdbuf();
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, ss.str()};
}

// ctest runs the cases of this file as parallel processes: each writes its own files.
std::string write_temp(const std::string& name, const std::string& contents) {
    const std::string path = testing::TempDir() + "ridge_" + std::to_string(::getpid()) + "_" + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
}

std::vector<int32_t> parse_ids(const std::string& line) {
    std::istringstream in(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (in >> id) ids.push_back(id);
    return ids;
}

struct Golden {
    std::string text;
    std::vector<int32_t> ids, ids_special;
};

std::vector<Golden> goldens(const std::string& file) {
    std::ifstream in(kGoldenDir + file);
    std::vector<Golden> out;
    std::string line;
    while (std::getline(in, line)) {
        const auto j = nlohmann::json::parse(line);
        Golden g{j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>(), {}};
        if (j.contains("ids_special")) g.ids_special = j.at("ids_special").get<std::vector<int32_t>>();
        out.push_back(g);
    }
    return out;
}

// A spread of goldens: every step-th one with some text.
std::vector<Golden> sample(const std::vector<Golden>& all, size_t step) {
    std::vector<Golden> out;
    for (size_t i = 0; i < all.size(); i += step)
        if (!all[i].text.empty()) out.push_back(all[i]);
    return out;
}

TEST(CliTokenize, SmolLM2IdsMatchHuggingFace) {
    const auto all = goldens("smollm2_hf.jsonl");
    ASSERT_GT(all.size(), 300u);
    for (const Golden& g : sample(all, 23)) {
        const std::string path = write_temp("tokenize_input.txt", g.text);
        const Result r = run("tokenize -m " + kSmol + " -f " + path + " --ids");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(parse_ids(r.out), g.ids) << g.text;  // SmolLM2 adds no BOS
        if (g.ids_special != g.ids) {
            const Result s = run("tokenize -m " + kSmol + " -f " + path + " --ids --parse-special");
            EXPECT_EQ(parse_ids(s.out), g.ids_special) << g.text;
        }
    }
}

TEST(CliTokenize, SmolLM2ChatMLWithParseSpecial) {
    const Result r = run("tokenize -m " + kSmol + " -p '<|im_start|>user\nHi<|im_end|>' --ids --parse-special");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto ids = parse_ids(r.out);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids.front(), 1);  // <|im_start|>
    EXPECT_EQ(ids.back(), 2);   // <|im_end|>
}

TEST(CliTokenize, TableHasOneLinePerToken) {
    const Result r = run("tokenize -m " + kSmol + " -p 'Hello world!\n\tok'");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const Result ids = run("tokenize -m " + kSmol + " -p 'Hello world!\n\tok' --ids");
    const auto expected = parse_ids(ids.out);
    std::istringstream lines(r.out);
    std::string line;
    size_t n = 0;
    while (std::getline(lines, line)) {
        const size_t tab = line.find('\t');
        ASSERT_NE(tab, std::string::npos) << line;
        ASSERT_LT(n, expected.size());
        EXPECT_EQ(std::stoi(line.substr(0, tab)), expected[n]) << line;
        ++n;
    }
    EXPECT_EQ(n, expected.size());
    EXPECT_NE(r.out.find("\t world\n"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("\\n"), std::string::npos) << r.out;  // the newline piece is escaped
}

TEST(CliTokenize, Stories260kCheckpointWithLlama2cTokenizer) {
    const auto all = goldens("stories260k_hf.jsonl");
    ASSERT_GT(all.size(), 300u);
    for (const Golden& g : sample(all, 41)) {
        const std::string path = write_temp("tokenize_input.txt", g.text);
        const Result r = run("tokenize -m " + kStoriesBin + " --tokenizer " + kTok512 + " -f " + path + " --ids");
        ASSERT_EQ(r.exit_code, 0) << r.err;
        EXPECT_EQ(parse_ids(r.out), g.ids) << g.text;  // with BOS, as llama2.c adds it
        const Result nb =
            run("tokenize -m " + kStoriesBin + " --tokenizer " + kTok512 + " -f " + path + " --ids --no-bos");
        EXPECT_EQ(parse_ids(nb.out), std::vector<int32_t>(g.ids.begin() + 1, g.ids.end())) << g.text;
    }
}

void expect_one_line_error(const Result& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err.rfind("ridge: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST(CliTokenize, BadInputGivesOneLineErrors) {
    expect_one_line_error(run("tokenize -m /nonexistent/model.gguf -p hi"), "/nonexistent/model.gguf");
    expect_one_line_error(run("tokenize -m " + kSmol), "exactly one of -p TEXT or -f FILE");
    const std::string ok = write_temp("tokenize_ok.txt", "hi");
    expect_one_line_error(run("tokenize -m " + kSmol + " -p hi -f " + ok), "exactly one of -p TEXT or -f FILE");
    expect_one_line_error(run("tokenize -m " + kSmol + " -f /nonexistent/text.txt"), "/nonexistent/text.txt");
    const std::string bad = write_temp("tokenize_bad_utf8.txt", "abc\xFF" "def");
    expect_one_line_error(run("tokenize -m " + kSmol + " -f " + bad), "invalid UTF-8 at byte 3");
    expect_one_line_error(run("tokenize -m " + kStoriesBin + " -p hi"), "--tokenizer");
    expect_one_line_error(run("tokenize -m " + kStoriesBin + " --tokenizer /nonexistent/tok.bin -p hi"),
                          "/nonexistent/tok.bin");
}

}  // namespace
