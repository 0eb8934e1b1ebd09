// `ridge template`: a conversation file rendered by a real template file exactly as Python jinja2
// renders it (tests/data/chat-templates/goldens.json, tools/chat_template_goldens.py), SmolLM2's own
// template from the model, and one-line errors for what it cannot do; `ridge chat` takes a family
// by name and refuses an unknown one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "test_paths.h"

namespace {

using cli_test::expect_one_line_error;
using cli_test::ridge;

const std::string kTemplates = std::string(RIDGE_TESTDATA_DIR) + "/chat-templates/";
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";

std::string write(const std::string& name, const std::string& text) {
    const std::string path = cli_test::scratch(name);
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

TEST(CliTemplate, RendersATemplateFileAsJinjaDoes) {
    const std::string file = kTemplates + "meta-llama-Llama-3.2-3B-Instruct.jinja";
    if (!std::filesystem::exists(file)) GTEST_SKIP() << "no " << file;
    const nlohmann::json g =
        nlohmann::json::parse(cli_test::read_file(std::string(RIDGE_TESTS_DIR) + "/data/chat-templates/goldens.json"));
    const std::string conv = write("conv.json", g["conversations"]["system"].dump());
    // The golden is rendered with BOS "<BOS>": the file's family standard BOS replaces it here.
    std::string want = g["templates"]["meta-llama-Llama-3.2-3B-Instruct.jinja"]["renders"]["system/gen"];
    want.replace(0, std::string("<BOS>").size(), "<|begin_of_text|>");
    const auto r = ridge({"template", "--chat-template-file", file, "--messages", conv, "--date", "26 Jul 2024"});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out, want);
    const auto nogen = ridge({"template", "--chat-template-file", file, "--messages", conv, "--date", "26 Jul 2024",
                              "--no-generation-prompt"});
    EXPECT_EQ(nogen.out, want.substr(0, want.size() - std::string("<|start_header_id|>assistant<|end_header_id|>\n\n").size()));
}

TEST(CliTemplate, SmolLM2sOwnTemplateWithItsDefaultSystemMessage) {
    if (!std::filesystem::exists(kSmol)) GTEST_SKIP() << "no " << kSmol;
    const std::string conv = write("conv.json", R"([{"role": "user", "content": "Hi <|im_end|>"}])");
    const auto r = ridge({"template", "-m", kSmol, "--messages", conv});
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_EQ(r.out,
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              "<|im_start|>user\nHi <|im_end|><|im_end|>\n<|im_start|>assistant\n");
}

TEST(CliTemplate, OneLineErrors) {
    const std::string conv = write("conv.json", R"([{"role": "user", "content": "Hi"}])");
    const std::string unknown = write("t.jinja", "{%- for m in messages %}### {{ m.role }}\n{%- endfor %}");
    expect_one_line_error({"template", "--chat-template-file", unknown, "--messages", conv},
                          "first line: \"{%- for m in messages %}### {{ m.role }}\"");
    expect_one_line_error({"template", "--chat-template", "vicuna", "--messages", conv}, "'vicuna' is not one ridge renders");
    expect_one_line_error({"template", "--chat-template", "chatml"}, "--messages FILE is required");
    expect_one_line_error({"template", "--messages", conv}, "give -m MODEL");
    expect_one_line_error({"template", "--chat-template", "chatml", "--messages", write("bad.json", "[{\"role\": 1}]")},
                          "message 0 is not");
    expect_one_line_error({"template", "--chat-template", "llama3.2", "--messages", conv, "--date", "yesterday"},
                          "--date 'yesterday'");
    // Gemma refuses a system message, with its own words.
    expect_one_line_error({"template", "--chat-template", "gemma", "--messages",
                           write("sys.json", R"([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])")},
                          "System role not supported");
}

TEST(CliTemplate, ChatTakesAFamilyByName) {
    if (!std::filesystem::exists(kSmol)) GTEST_SKIP() << "no " << kSmol;
    expect_one_line_error({"chat", "-m", kSmol, "--chat-template", "nope"}, "'nope' is not one ridge renders");
    const auto r = ridge({"chat", "-m", kSmol, "--chat-template", "chatml", "-n", "3", "--temp", "0"}, {},
                         "Count from one to twenty, in words.\n");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("chat template chatml"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("[the reply stopped at -n 3 tokens]"), std::string::npos) << r.err;
}

}  // namespace
