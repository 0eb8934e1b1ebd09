// `ridge quantize` as a user runs it: stories260K rewritten to each type loads (`ridge info`),
// keeps its metadata and tokenizer (`ridge tokenize` gives the same ids), has matrices of the type
// asked (F16 where the rows do not fit the blocks) and F32 norms; the F32 rewrite generates the
// very same text; SmolLM2 rewritten to Q8_0 loads and still knows Paris; bad input gives one
// "ridge: ..." line, a non-zero exit and no output file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/stories260K.bin");

namespace {

using cli_test::expect_one_line_error;
using cli_test::ridge;
using cli_test::RunResult;
using cli_test::scratch;
using cli_test::type_row;

const std::string kData = std::string(RIDGE_TESTDATA_DIR);
const std::string kStories = kData + "/gguf-stories260K/stories260K.gguf";
const std::string kStoriesBin = kData + "/llama2c-stories260K/stories260K.bin";
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";

bool exists(const std::string& p) { return std::filesystem::exists(p); }

// name -> type from `ridge info --tensors`.
std::map<std::string, std::string> tensor_types(const std::string& info) {
    std::map<std::string, std::string> types;
    std::istringstream in(info);
    std::string line;
    bool in_table = false;
    while (std::getline(in, line)) {
        if (line == "tensors:") {
            in_table = true;
            continue;
        }
        if (!in_table) continue;
        std::istringstream ls(line);
        std::string name, type;
        if (ls >> name >> type && name != "name") types[name] = type;
    }
    return types;
}

// The "  key: value" lines of `ridge info --metadata`, without the keys in `except`.
std::vector<std::string> metadata_lines(const std::string& info, const std::vector<std::string>& except) {
    std::vector<std::string> lines;
    std::istringstream in(info);
    std::string line;
    bool in_block = false;
    while (std::getline(in, line)) {
        if (line == "metadata:") {
            in_block = true;
            continue;
        }
        if (in_block && line.rfind("  ", 0) != 0) break;
        if (!in_block) continue;
        bool skip = false;
        for (const std::string& k : except) skip |= line.rfind("  " + k + ":", 0) == 0;
        if (!skip) lines.push_back(line);
    }
    return lines;
}

RunResult quantize(const std::string& in, const std::string& out, const std::string& type) {
    return ridge({"quantize", "-m", in, "-o", out, "--type", type});
}

// The last line of stderr.
std::string last_line(const RunResult& r) {
    const auto lines = r.err_lines();
    return lines.empty() ? "" : lines.back();
}

TEST(CliQuantize, Stories260kToEveryTypeLoadsKeepsTheTokenizerAndHasTheTypeAsked) {
    const RunResult orig_info = ridge({"info", "-m", kStories, "--metadata", "--tensors"});
    ASSERT_EQ(orig_info.rc, 0) << orig_info.err;
    const std::string text = "Once upon a time, Lily saw a big red ball. \"Wow!\" she said.";
    const RunResult orig_ids = ridge({"tokenize", "-m", kStories, "-p", text, "--ids"});
    ASSERT_EQ(orig_ids.rc, 0) << orig_ids.err;
    const std::map<std::string, std::string> orig_types = tensor_types(orig_info.out);
    ASSERT_EQ(orig_types.size(), 48u);

    const std::map<std::string, std::string> ftype = {
        {"q8_0", "7"}, {"q4_0", "2"}, {"q4_1", "3"}, {"f16", "1"}, {"bf16", "32"}, {"f32", "0"}};
    for (const auto& [type, ft] : ftype) {
        const std::string out = scratch("stories." + type + ".gguf");
        const RunResult q = quantize(kStories, out, type);
        ASSERT_EQ(q.rc, 0) << type << "\n" << q.err;
        EXPECT_EQ(q.out, "") << type;
        EXPECT_EQ(last_line(q).rfind("wrote " + out + ": 48 tensors", 0), 0u) << last_line(q);
        EXPECT_FALSE(exists(out + ".tmp"));
        const bool quantized = type[0] == 'q';
        // stories260K's ffn_down rows have 172 elements: five notes, one per layer, naming the tensor.
        EXPECT_EQ(q.err_lines().size(), quantized ? 6u : 1u) << q.err;
        if (quantized) {
            EXPECT_NE(q.err.find("note: tensor 'blk.0.ffn_down.weight' row length 172"), std::string::npos) << q.err;
        }

        const RunResult info = ridge({"info", "-m", out, "--metadata", "--tensors"});
        ASSERT_EQ(info.rc, 0) << type << "\n" << info.err;
        EXPECT_NE(info.out.find("format: GGUF v3"), std::string::npos);
        EXPECT_NE(info.out.find("  general.file_type: " + ft + "\n"), std::string::npos) << type;
        EXPECT_EQ(metadata_lines(info.out, {"general.file_type", "general.quantization_version"}),
                  metadata_lines(orig_info.out, {"general.file_type", "general.quantization_version"}))
            << type;

        std::string want = type;
        for (char& c : want) c = char(std::toupper(static_cast<unsigned char>(c)));
        const std::map<std::string, std::string> types = tensor_types(info.out);
        ASSERT_EQ(types.size(), orig_types.size()) << type;
        for (const auto& [name, t] : types) {
            const bool norm = name.find("norm") != std::string::npos;
            const bool down = name.find("ffn_down") != std::string::npos;
            const std::string expected = norm ? "F32" : (down && quantized) ? "F16" : want;
            EXPECT_EQ(t, expected) << type << " " << name;
        }

        const RunResult ids = ridge({"tokenize", "-m", out, "-p", text, "--ids"});
        ASSERT_EQ(ids.rc, 0) << ids.err;
        EXPECT_EQ(ids.out, orig_ids.out) << type;

        const RunResult gen = ridge({"generate", "-m", out, "-p", "Once upon a time", "-n", "24", "--temp", "0"});
        EXPECT_EQ(gen.rc, 0) << type << "\n" << gen.err;
        EXPECT_EQ(gen.out.rfind("Once upon a time", 0), 0u) << gen.out;
        EXPECT_GT(gen.out.size(), std::string("Once upon a time").size() + 20) << gen.out;
    }
}

TEST(CliQuantize, Stories260kAsF32GeneratesTheSameTextAsTheOriginal) {
    const std::string out = scratch("stories.f32.gguf");
    const RunResult q = quantize(kStories, out, "f32");
    ASSERT_EQ(q.rc, 0) << q.err;
    for (const std::string& prompt : {std::string(""), std::string("Zoo"), std::string("Once upon a time")}) {
        const RunResult a = ridge({"generate", "-m", kStories, "-p", prompt, "-n", "96", "--temp", "0"});
        const RunResult b = ridge({"generate", "-m", out, "-p", prompt, "-n", "96", "--temp", "0"});
        ASSERT_EQ(a.rc, 0) << a.err;
        ASSERT_EQ(b.rc, 0) << b.err;
        EXPECT_EQ(a.out, b.out) << "prompt '" << prompt << "'";
        EXPECT_GT(a.out.size(), 100u);
    }
}

TEST(CliQuantize, VerboseGivesOneLinePerTensor) {
    const std::string out = scratch("stories.verbose.gguf");
    const RunResult q = ridge({"quantize", "-m", kStories, "-o", out, "--type", "f16", "-v"});
    ASSERT_EQ(q.rc, 0) << q.err;
    const auto lines = q.err_lines();
    ASSERT_EQ(lines.size(), 49u) << q.err;
    EXPECT_EQ(lines[0].rfind("[1/48] token_embd.weight", 0), 0u) << lines[0];
    EXPECT_NE(lines[0].find("F32   -> F16"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("copied"), std::string::npos) << lines[1];  // output_norm.weight
}

TEST(CliQuantize, SmolLM2ToQ8_0LoadsAndStillKnowsParis) {
    if (!exists(kSmol)) GTEST_SKIP() << kSmol << " not downloaded (tools/fetch_model.sh)";
    const std::string out = scratch("smollm2.q8_0.gguf");
    // Q4_1 in: quantized weights are not quantized again unless asked.
    const RunResult refused = quantize(kSmol, out, "q8_0");
    EXPECT_EQ(refused.rc, 1);
    EXPECT_NE(refused.err.find("already holds quantized weights"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("--allow-requantize"), std::string::npos) << refused.err;
    EXPECT_FALSE(exists(out));
    const RunResult q = ridge({"quantize", "-m", kSmol, "-o", out, "--type", "q8_0", "--allow-requantize"});
    ASSERT_EQ(q.rc, 0) << q.err;
    EXPECT_EQ(q.err_lines().size(), 1u) << "no fallbacks: every SmolLM2 row is a multiple of 32\n" << q.err;

    const RunResult info = ridge({"info", "-m", out, "--metadata", "--tensors"});
    ASSERT_EQ(info.rc, 0) << info.err;
    // 30 layers x 7 matrices + the token embedding (tied output) in Q8_0; 30 x 2 + 1 norms in F32.
    EXPECT_EQ(type_row(info.out, "Q8_0").at(0), 211);
    EXPECT_EQ(type_row(info.out, "F32").at(0), 61);
    EXPECT_TRUE(type_row(info.out, "Q4_1").empty());
    for (const auto& [name, t] : tensor_types(info.out))
        EXPECT_EQ(t, name.find("norm") != std::string::npos ? "F32" : "Q8_0") << name;
    EXPECT_NE(info.out.find("  general.file_type: 7\n"), std::string::npos);
    const RunResult orig = ridge({"info", "-m", kSmol, "--metadata"});
    EXPECT_EQ(metadata_lines(info.out, {"general.file_type"}), metadata_lines(orig.out, {"general.file_type"}));

    const RunResult gen = ridge({"generate", "-m", out, "-p", "The capital of France is", "-n", "8", "--temp", "0"});
    ASSERT_EQ(gen.rc, 0) << gen.err;
    EXPECT_EQ(gen.out.rfind("The capital of France is", 0), 0u) << gen.out;
    EXPECT_NE(gen.out.find("Paris"), std::string::npos) << gen.out;
    std::filesystem::remove(out);
}

// A synthetic model as a file (weights/synthetic.h; its bytes are checked against the in-memory
// model in test_weights_synthetic): it loads with the vocabulary it was given and generates, and
// an existing output is kept unless --force.
TEST(CliQuantize, SyntheticModelAsAFileLoadsWithTheVocabularyGiven) {
    if (!exists(kSmol)) GTEST_SKIP() << kSmol << " not downloaded (tools/fetch_model.sh)";
    const std::string out = scratch("synthetic.q4_0.gguf");
    const RunResult q = ridge({"quantize", "--synthetic", "smollm2-135m", "--type", "q4_0", "-o", out, "--vocab-from",
                               kSmol, "--synthetic-seed", "7"});
    ASSERT_EQ(q.rc, 0) << q.err;
    const RunResult again = ridge({"quantize", "--synthetic", "smollm2-135m", "--type", "q4_0", "-o", out,
                                   "--vocab-from", kSmol});
    EXPECT_EQ(again.rc, 1);
    EXPECT_NE(again.err.find("exists: pass --force"), std::string::npos) << again.err;
    const RunResult info = ridge({"info", "-m", out, "--metadata"});
    ASSERT_EQ(info.rc, 0) << info.err;
    EXPECT_NE(info.out.find("n_vocab: 49152"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("  general.architecture: \"llama\"\n"), std::string::npos) << info.out;
    EXPECT_NE(info.out.find("  general.file_type: 2\n"), std::string::npos) << info.out;
    // SmolLM2's tokenizer: the same ids, and the prompt's text back whole at the start of stdout.
    const RunResult t1 = ridge({"tokenize", "-m", out, "-p", "Once upon a time, in 2024."});
    const RunResult t2 = ridge({"tokenize", "-m", kSmol, "-p", "Once upon a time, in 2024."});
    ASSERT_EQ(t1.rc, 0) << t1.err;
    EXPECT_EQ(t1.out, t2.out);
    const RunResult gen = ridge({"generate", "-m", out, "-p", "Once upon a time", "-n", "4", "--temp", "0", "--no-warmup"});
    ASSERT_EQ(gen.rc, 0) << gen.err;
    EXPECT_EQ(gen.out.rfind("Once upon a time", 0), 0u) << gen.out;
    std::filesystem::remove(out);
}

// An existing output is kept unless --force.
TEST(CliQuantize, AnExistingOutputIsKeptUnlessForced) {
    const std::string out = scratch("existing.gguf");
    std::ofstream(out) << "keep me";
    const RunResult kept = quantize(kStories, out, "q8_0");
    EXPECT_EQ(kept.rc, 1);
    EXPECT_NE(kept.err.find(out + " exists: pass --force"), std::string::npos) << kept.err;
    std::ifstream in(out);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "keep me");
    const RunResult forced = ridge({"quantize", "-m", kStories, "-o", out, "--type", "q8_0", "--force"});
    EXPECT_EQ(forced.rc, 0) << forced.err;
    EXPECT_EQ(ridge({"info", "-m", out}).rc, 0);
    std::filesystem::remove(out);
}

TEST(CliQuantize, BadInputIsOneLineAndWritesNothing) {
    const std::string out = scratch("never.gguf");
    auto nothing_written = [&] {
        EXPECT_FALSE(exists(out));
        EXPECT_FALSE(exists(out + ".tmp"));
    };
    expect_one_line_error({"quantize", "-m", kStories, "-o", out, "--type", "q3_k"}, "unknown --type 'q3_k'");
    nothing_written();
    expect_one_line_error({"quantize", "-m", kStories, "-o", out}, "no target type");
    expect_one_line_error({"quantize", "-m", kStories, "--type", "q8_0"}, "no output file");
    expect_one_line_error({"quantize", "-o", out, "--type", "q8_0"}, "no input model");
    expect_one_line_error({"quantize", "-m", "/nonexistent/model.gguf", "-o", out, "--type", "q8_0"},
                          "/nonexistent/model.gguf: cannot open");
    nothing_written();
    expect_one_line_error({"quantize", "-m", kStories, "-o", kStories, "--type", "q8_0"}, "the output is the input");
    expect_one_line_error({"quantize", "-m", kStoriesBin, "-o", out, "--type", "q8_0"}, "only GGUF files can be rewritten");
    nothing_written();
    expect_one_line_error({"quantize", "--synthetic", "smollm2-135m", "-o", out, "--type", "q8_0"},
                          "--synthetic needs --vocab-from");
    expect_one_line_error({"quantize", "--synthetic", "smollm2-135m", "-o", out, "--type", "q4_k", "--vocab-from", kStories},
                          "synthetic weight type 'q4_k' is not supported");
    expect_one_line_error({"quantize", "--synthetic", "gpt-5", "-o", out, "--type", "q8_0", "--vocab-from", kStories},
                          "gpt-5");
    expect_one_line_error({"quantize", "-m", kStories, "--synthetic", "smollm2-135m", "-o", out, "--type", "q8_0"},
                          "-m/--model and --synthetic both given");
    expect_one_line_error({"quantize", "-m", kStories, "-o", out, "--type", "q8_0", "--vocab-from", kStories},
                          "--vocab-from applies to --synthetic models only");
    // A --vocab-from that is not a GGUF file.
    expect_one_line_error({"quantize", "--synthetic", "smollm2-135m", "-o", out, "--type", "q8_0", "--vocab-from", kStoriesBin},
                          kStoriesBin);
    nothing_written();
    expect_one_line_error({"quantize", "-m", kStories, "-o", "/nonexistent-dir-for-ridge/out.gguf", "--type", "q8_0"},
                          "cannot write");

    // Truncated copies: inside the metadata and inside the tensor data.
    const std::string bytes = cli_test::read_file(kStories);
    for (const auto& [size, mention] : std::vector<std::pair<size_t, std::string>>{
             {5000, "truncated"}, {100000, "runs past the end of the file"}}) {
        const std::string cut = scratch("truncated.gguf");
        std::ofstream(cut, std::ios::binary) << bytes.substr(0, size);
        expect_one_line_error({"quantize", "-m", cut, "-o", out, "--type", "q8_0"}, mention);
        nothing_written();
    }
}

}  // namespace
