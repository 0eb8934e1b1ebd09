// `ridge template`: a conversation rendered by a chat template, printed exactly (no newline added):
// the model's template (-m), or a Jinja file's (--chat-template-file, with its family's standard
// BOS/EOS when no model is given), or a family by name (--chat-template). What `ridge chat` and
// `ridge serve` feed the model, as text: compare it with what Hugging Face renders.
//   ridge template -m MODEL --messages CONVERSATION.json [--no-generation-prompt] [--date "26 Jul 2024"]
// CONVERSATION.json: an OpenAI-style array of {"role", "content"} (content: a string).
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "tools/commands.h"
#include "tools/model_args.h"
#include "tools/serve_api.h"
#include "weights/error.h"
#include "weights/mapped_file.h"

namespace ridge::cli {

namespace {

struct TemplateOptions {
    ModelArgs model;
    std::string chat_template, chat_template_file, messages_path, date;
    bool no_generation_prompt = false;
};

std::vector<ChatTurn> read_conversation(const std::string& path) {
    const std::string text = read_whole_file(path, "conversation", size_t(64) << 20);
    const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw Error(path + ": not JSON");
    const nlohmann::json& messages = j.is_object() && j.contains("messages") ? j["messages"] : j;
    if (!messages.is_array()) throw Error(path + ": expected an array of {\"role\", \"content\"} (or {\"messages\": [...]})");
    std::vector<ChatTurn> turns;
    for (size_t i = 0; i < messages.size(); i++) {
        const nlohmann::json& m = messages[i];
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
            !m["content"].is_string())
            throw Error(path + ": message " + std::to_string(i) + " is not {\"role\": string, \"content\": string}");
        turns.push_back({m["role"], m["content"]});
    }
    return turns;
}

void run_template(const TemplateOptions& o) {
    if (o.messages_path.empty()) throw Error("--messages FILE is required");
    std::unique_ptr<Tokenizer> tok;
    if (!o.model.path.empty() || !o.model.synthetic.empty()) tok = o.model.open_tokenizer();
    else if (o.chat_template.empty() && o.chat_template_file.empty())
        throw Error("give -m MODEL, --chat-template-file FILE or --chat-template NAME");
    const serve::ChatSetup chat = serve::chat_setup(tok.get(), o.chat_template, o.chat_template_file, o.date);
    const std::string text = join_segments(chat.tmpl.render(read_conversation(o.messages_path), !o.no_generation_prompt, chat.ctx));
    std::fwrite(text.data(), 1, text.size(), stdout);
}

}  // namespace

void register_template(CLI::App& app) {
    auto o = std::make_shared<TemplateOptions>();
    CLI::App* cmd = app.add_subcommand("template", "print a conversation as the model's chat template renders it");
    o->model.add_options(cmd);
    cmd->add_option("--chat-template", o->chat_template, "a family by name instead of the model's template");
    cmd->add_option("--chat-template-file", o->chat_template_file, "a Jinja chat template to recognise")
        ->excludes("--chat-template");
    cmd->add_option("--messages", o->messages_path, "the conversation: a JSON array of {\"role\", \"content\"}");
    cmd->add_flag("--no-generation-prompt", o->no_generation_prompt, "end after the last message (no assistant header)");
    cmd->add_option("--date", o->date, "the date the template is told (\"26 Jul 2024\"; default: today)");
    cmd->callback([o] { run_template(*o); });
}

}  // namespace ridge::cli
