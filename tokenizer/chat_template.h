// Chat templates, rendered natively. A model's `tokenizer.chat_template` is Jinja; ridge does not
// run Jinja. It recognises the template's family from the template text (as llama.cpp's built-in
// list does) and renders that family in C++, byte for byte what Hugging Face's apply_chat_template
// renders for the conversations a chat or the server sends (roles system, user and assistant, text
// content); tests hold every family to Python jinja2's output on the real templates.
//
// A rendered prompt is a list of segments: the template's own text (its control tokens and the
// words around them) and the messages' content. Only the template's segments may become control
// tokens when the prompt is tokenized (to_pieces); content is always text, so a message that spells
// "<|im_end|>" cannot end its turn.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ridge {

struct ChatTurn {
    std::string role;     // "system", "user" or "assistant"
    std::string content;  // text
};

// What a render needs beyond the conversation.
struct ChatContext {
    std::string bos, eos;              // the model's BOS and EOS texts ("" when it has none)
    int year = 2024, month = 7, day = 26;  // the date strftime_now formats (the caller: today)
    bool date_given = false;               // --date given: also sets date_string, as when passed to HF
    std::string default_system;        // ChatML: a default system message, instead of the template's own
};

struct ChatSegment {
    std::string text;
    bool from_template = true;  // false: a message's content
};

class ChatTemplate {
public:
    // The families, by the names --chat-template takes.
    static const std::vector<std::string>& names();
    // The family of a template text, or nullopt when ridge cannot render it exactly.
    static std::optional<ChatTemplate> recognise(std::string_view jinja);
    // By name; nullopt for an unknown one.
    static std::optional<ChatTemplate> by_name(std::string_view name);
    // recognise(), else ridge::Error naming the template's first line and the names that exist.
    static ChatTemplate from_text(std::string_view jinja);

    const std::string& name() const { return name_; }
    // ChatML: the system message the template gives a conversation without one ("" when none).
    const std::string& default_system() const { return default_system_; }
    // The family's standard BOS and EOS texts, for a template rendered without a model.
    std::string standard_bos() const;
    std::string standard_eos() const;

    // The prompt for `turns`, ending with the assistant's header when add_generation_prompt.
    // ridge::Error with the template's own message for a conversation it refuses (Gemma's system
    // role, roles that do not alternate), as Hugging Face raises it.
    std::vector<ChatSegment> render(const std::vector<ChatTurn>& turns, bool add_generation_prompt,
                                    const ChatContext& ctx) const;

private:
    explicit ChatTemplate(std::string name, std::string default_system = "", std::string other_system = "")
        : name_(std::move(name)), default_system_(std::move(default_system)), other_system_(std::move(other_system)) {}
    std::string name_;
    std::string default_system_;  // ChatML's; SmolLM3's in reasoning mode
    std::string other_system_;    // SmolLM3's without reasoning (/no_think)
};

// The segments as one string (what Jinja would print).
std::string join_segments(const std::vector<ChatSegment>& segments);
// A vocabulary's special-token texts with their ids, longest first (so that the longest wins at a
// position). Built once per tokenizer (a scan of the whole vocabulary), not per prompt.
using SpecialTokens = std::vector<std::pair<std::string, int32_t>>;
SpecialTokens special_tokens(const Tokenizer& tok);
// The segments as the model is fed them: each template segment split at the special tokens (those
// become ids; the rest is text), each content segment as text.
std::vector<PromptPiece> to_pieces(const std::vector<ChatSegment>& segments, const SpecialTokens& specials);

}  // namespace ridge
