// `ridge template`: a conversation file rendered by a real template file exactly as Python jinja2
// renders it (tests/data/chat-templates/goldens.json, tools/chat_template_goldens.py), SmolLM2's own
// template from the model, and one-line errors for what it cannot do; `ridge chat` takes a family
// by name and refuses an unknown one.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("chat-templates/Qwen-Qwen3-0.6B.jinja");

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

// "/clear" starts again (the context holds only the new turn), "/exit" ends the chat before the
// lines after it.
TEST(CliChat, ClearAndExitCommands) {
    if (!std::filesystem::exists(kSmol)) GTEST_SKIP() << "no " << kSmol;
    const auto r = ridge({"chat", "-m", kSmol, "--temp", "0", "-n", "4"}, {},
                         "Hello there, how are you today?\n/clear\nHi\n/exit\nNever read\n");
    EXPECT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.err.find("[conversation cleared]"), std::string::npos) << r.err;
    // Two replies of at most 4 tokens: the summary counts the second conversation only.
    const auto alone = ridge({"chat", "-m", kSmol, "--temp", "0", "-n", "4"}, {}, "Hi\n");
    const std::regex summary(R"(ridge: (\d+) tokens in the context)");
    std::smatch a, b;
    ASSERT_TRUE(std::regex_search(r.err, a, summary)) << r.err;
    ASSERT_TRUE(std::regex_search(alone.err, b, summary)) << alone.err;
    EXPECT_EQ(a[1], b[1]);
    EXPECT_EQ(r.out.substr(r.out.find('\n') + 1), alone.out);  // the reply after /clear is the one alone
}

// Ctrl-C during a reply stops it and keeps the chat: the next line gets its answer, and the end
// of the input ends the chat with its summary (exit 0). Run with pipes: SIGINT is sent once the
// first reply has begun to arrive (the test's limits are generous; nothing is timed).
TEST(CliChat, CtrlCStopsTheReplyAndKeepsTheChat) {
    if (!std::filesystem::exists(kSmol)) GTEST_SKIP() << "no " << kSmol;
    int in[2], out[2];
    ASSERT_EQ(::pipe(in), 0);
    ASSERT_EQ(::pipe(out), 0);
    const std::string err_path = cli_test::scratch("chat_err.txt");
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(in[0], 0), ::dup2(out[1], 1);
        const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(err, 2);
        ::close(in[1]), ::close(out[0]);
        ::setenv("OMP_NUM_THREADS", "2", 1);
        ::execl(RIDGE_BINARY, RIDGE_BINARY, "chat", "-m", kSmol.c_str(), "--temp", "0", "-n", "2000", "-c", "4096",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::close(in[0]), ::close(out[1]);
    const std::string first = "Write a very long story about a lighthouse keeper.\n";
    ASSERT_EQ(::write(in[1], first.data(), first.size()), ssize_t(first.size()));
    std::string got;
    char buf[4096];
    auto read_some = [&](int timeout_ms) {
        pollfd p{out[0], POLLIN, 0};
        if (::poll(&p, 1, timeout_ms) <= 0) return false;
        const ssize_t n = ::read(out[0], buf, sizeof buf);
        if (n <= 0) return false;
        got.append(buf, size_t(n));
        return true;
    };
    while (got.size() < 20 && read_some(60000)) {
    }
    ASSERT_GE(got.size(), 20u) << "the first reply did not begin";
    ::kill(pid, SIGINT);
    // The interrupted reply ends with a newline; then the next turn.
    const std::string second = "Thank you. What is 2+2?\n";
    ASSERT_EQ(::write(in[1], second.data(), second.size()), ssize_t(second.size()));
    ::close(in[1]);
    while (read_some(120000)) {
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(out[0]);
    const std::string err = cli_test::read_file(err_path);
    ASSERT_TRUE(WIFEXITED(status)) << err;
    EXPECT_EQ(WEXITSTATUS(status), 0) << err;
    EXPECT_NE(err.find("[reply interrupted"), std::string::npos) << err;
    EXPECT_NE(err.find("tokens in the context"), std::string::npos) << err;  // the summary
    // Two replies: the cut one and the next, each ending with a newline.
    const size_t nl = got.find('\n');
    ASSERT_NE(nl, std::string::npos) << got;
    EXPECT_GT(got.size(), nl + 2) << "no answer after the interrupted one: " << got;
}

}  // namespace
