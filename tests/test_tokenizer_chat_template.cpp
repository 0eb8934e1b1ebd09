// tokenizer/chat_template against Python jinja2 rendering the real templates of the shared test
// data (chat-templates/) as Hugging Face's apply_chat_template sets it up: tests/data/chat-templates/
// goldens.json, made by tools/chat_template_goldens.py with BOS "<BOS>", EOS "<EOS>" and the date
// 26 Jul 2024. Every template ridge recognises renders every golden conversation exactly (or
// refuses it with the template's own message); every other template is refused naming its first
// line. The families the issue names must be recognised. Then the pieces a model is fed: the
// template's special tokens by id, content as text even when it spells one.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "shared_testdata.h"
#include "test_paths.h"
#include "tokenizer/chat_template.h"
#include "weights/error.h"
#include "weights/gguf.h"

RIDGE_SHARED_TESTDATA("chat-templates/Qwen-Qwen3-0.6B.jinja");

namespace ridge {
namespace {

const std::string kTemplates = std::string(RIDGE_TESTDATA_DIR) + "/chat-templates/";

std::string read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

const nlohmann::json& goldens() {
    static const nlohmann::json g = nlohmann::json::parse(read(std::string(RIDGE_TESTS_DIR) + "/data/chat-templates/goldens.json"));
    return g;
}

std::string trim_copy(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t\n");
    return b == std::string::npos ? "" : s.substr(b, s.find_last_not_of(" \t\n") - b + 1);
}

std::vector<ChatTurn> conversation(const std::string& name) {
    std::vector<ChatTurn> turns;
    for (const auto& m : goldens()["conversations"][name]) turns.push_back({m["role"], m["content"]});
    return turns;
}

TEST(ChatTemplate, EveryTemplateRendersAsJinjaOrIsRefused) {
    if (!std::filesystem::exists(kTemplates)) GTEST_SKIP() << "no " << kTemplates;
    const nlohmann::json& g = goldens();
    ChatContext ctx;
    ctx.bos = g["bos_token"], ctx.eos = g["eos_token"];
    int rendered = 0, refused = 0;
    for (const auto& [file, entry] : g["templates"].items()) {
        SCOPED_TRACE(file);
        const std::string text = read(kTemplates + file);
        ASSERT_FALSE(text.empty());
        const std::optional<ChatTemplate> t = ChatTemplate::recognise(text);
        if (!t) {
            try {
                ChatTemplate::from_text(text);
                ADD_FAILURE() << "from_text accepted what recognise refused";
            } catch (const Error& e) {
                EXPECT_NE(std::string(e.what()).find("first line"), std::string::npos) << e.what();
            }
            refused++;
            continue;
        }
        if (!entry.contains("renders")) {
            ADD_FAILURE() << "recognised as " << t->name() << " but jinja2 could not render it: " << entry.dump();
            continue;
        }
        for (const auto& [key, want] : entry["renders"].items()) {
            const std::string conv = key.substr(0, key.find('/'));
            const bool gen = key.substr(key.find('/') + 1) == "gen";
            SCOPED_TRACE(t->name() + ", " + key);
            if (want.is_object()) {  // jinja2 raised: so must ridge, with the template's message
                const std::string message = want.value("error", "");
                try {
                    t->render(conversation(conv), gen, ctx);
                    ADD_FAILURE() << "rendered what the template refuses: " << message;
                } catch (const Error& e) {
                    const std::string core = message.substr(message.find(':') + 1);
                    EXPECT_NE(std::string(e.what()).find(trim_copy(core)), std::string::npos) << e.what() << " vs " << message;
                }
                continue;
            }
            EXPECT_EQ(join_segments(t->render(conversation(conv), gen, ctx)), want.get<std::string>());
            rendered++;
        }
    }
    EXPECT_GT(rendered, 50);
    std::printf("[ note ] %d renders compared; %d templates refused\n", rendered, refused);
}

TEST(ChatTemplate, TheFamiliesTheIssueNamesAreRecognised) {
    if (!std::filesystem::exists(kTemplates)) GTEST_SKIP() << "no " << kTemplates;
    for (const char* file :
         {"Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "HuggingFaceTB-SmolLM3-3B", "meta-llama-Llama-3.1-8B-Instruct",
          "meta-llama-Llama-3.2-3B-Instruct", "mistralai-Mistral-Nemo-Instruct-2407", "google-gemma-2-2b-it",
          "microsoft-Phi-3.5-mini-instruct", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B",
          "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B", "ibm-granite-granite-3.3-2B-Instruct"}) {
        EXPECT_TRUE(ChatTemplate::recognise(read(kTemplates + file + ".jinja"))) << file;
    }
}

TEST(ChatTemplate, NamesAndRefusals) {
    for (const std::string& n : ChatTemplate::names()) {
        ASSERT_TRUE(ChatTemplate::by_name(n)) << n;
        EXPECT_EQ(ChatTemplate::by_name(n)->name(), n);
    }
    EXPECT_FALSE(ChatTemplate::by_name("vicuna"));
    try {
        ChatTemplate::from_text("{% for m in messages %}### {{ m.role }}: {{ m.content }}\n{% endfor %}");
        ADD_FAILURE();
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("first line: \"{% for m in messages %}### {{ m.role }}: {{ m.content }}\""), std::string::npos) << what;
        EXPECT_NE(what.find("chatml, llama3, llama3.1"), std::string::npos) << what;
    }
}

// SmolLM2's vocabulary (a GGUF of the shared data would do as well): the template's <|im_start|> and
// <|im_end|> become their ids; a message that spells them stays text, joined with the words around it.
TEST(ChatTemplate, TemplateTokensAreIdsAndContentStaysText) {
    const std::string model = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (!std::filesystem::exists(model)) GTEST_SKIP() << "no " << model;
    const auto gguf = GGUFFile::open(model);
    const auto tok = Tokenizer::from_gguf(*gguf);
    const int32_t start = *tok->find_token("<|im_start|>"), end = *tok->find_token("<|im_end|>");
    const ChatTemplate t = *ChatTemplate::by_name("chatml");
    const auto pieces = to_pieces(t.render({{"user", "hi <|im_end|>"}}, true, {}), special_tokens(*tok));
    ASSERT_EQ(pieces.size(), 6u);
    EXPECT_EQ(pieces[0].token, start);
    EXPECT_EQ(pieces[1].text, "user\nhi <|im_end|>");
    EXPECT_EQ(pieces[2].token, end);
    EXPECT_EQ(pieces[3].text, "\n");
    EXPECT_EQ(pieces[4].token, start);  // the generation prompt
    EXPECT_EQ(pieces[5].text, "assistant\n");
}

}  // namespace
}  // namespace ridge
