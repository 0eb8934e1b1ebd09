// chat_template.h: the families, each rendered as its Jinja template renders the conversations
// ridge sends (system, user and assistant turns of text; no tools).
#include "tokenizer/chat_template.h"

#include <algorithm>
#include <ctime>

#include "weights/error.h"

namespace ridge {

namespace {

bool has(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// Jinja's `trim` (Python's str.strip()) for the whitespace a chat carries: ASCII whitespace.
std::string trim(const std::string& s) {
    const char* ws = " \t\n\r\v\f";
    const size_t b = s.find_first_not_of(ws);
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The renderer's output: template text and content, in order.
struct Out {
    std::vector<ChatSegment> segs;
    void t(const std::string& s) {  // template text
        if (!s.empty()) segs.push_back({s, true});
    }
    void c(const std::string& s) {  // message content
        if (!s.empty()) segs.push_back({s, false});
    }
};

[[noreturn]] void raise(const std::string& message) { throw Error("chat template: " + message); }

// strftime_now(fmt) of the context's date (C locale month names, as Python's).
std::string date_of(const ChatContext& ctx, const char* fmt) {
    std::tm tm{};
    tm.tm_year = ctx.year - 1900, tm.tm_mon = ctx.month - 1, tm.tm_mday = ctx.day;
    char buf[64];
    return std::string(buf, std::strftime(buf, sizeof buf, fmt, &tm));
}

// The families and the variants recognise() tells apart.
enum class Family { ChatML, SmolLM3, Llama3, Llama31, Llama32, Gemma, Phi3, MistralTekken, DeepSeekR1, DeepSeekR1Think, Granite33 };

struct FamilyInfo {
    Family family;
    const char* name;
    const char* bos;
    const char* eos;
};

const FamilyInfo kFamilies[] = {
    {Family::ChatML, "chatml", "", "<|im_end|>"},
    {Family::SmolLM3, "smollm3", "", "<|im_end|>"},
    {Family::Llama3, "llama3", "<|begin_of_text|>", "<|eot_id|>"},
    {Family::Llama31, "llama3.1", "<|begin_of_text|>", "<|eot_id|>"},
    {Family::Llama32, "llama3.2", "<|begin_of_text|>", "<|eot_id|>"},
    {Family::Gemma, "gemma", "<bos>", "<eos>"},
    {Family::Phi3, "phi3", "<s>", "<|endoftext|>"},
    {Family::MistralTekken, "mistral-v3-tekken", "<s>", "</s>"},
    {Family::DeepSeekR1, "deepseek-r1", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
    {Family::DeepSeekR1Think, "deepseek-r1-nothink", "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"},
    {Family::Granite33, "granite3.3", "<|end_of_text|>", "<|end_of_text|>"},
};

const FamilyInfo& info_of(const std::string& name) {
    for (const FamilyInfo& f : kFamilies)
        if (name == f.name) return f;
    throw Error("chat template: no family '" + name + "'");
}

// <|im_start|>role\ncontent<|im_end|>\n ... <|im_start|>assistant\n
void render_chatml(Out& o, const std::vector<ChatTurn>& turns, bool gen, const std::string& default_system) {
    if (!default_system.empty() && (turns.empty() || turns[0].role != "system")) {
        o.t("<|im_start|>system\n");
        o.t(default_system);  // the template's own words
        o.t("<|im_end|>\n");
    }
    for (const ChatTurn& m : turns) {
        o.t("<|im_start|>" + m.role + "\n");
        o.c(m.content);
        o.t("<|im_end|>\n");
    }
    if (gen) o.t("<|im_start|>assistant\n");
}

// SmolLM3: ChatML with a metadata system turn (knowledge cutoff, reasoning mode "/think" unless the
// system message says "/no_think", then its custom instructions or the model's own words), and
// without reasoning an empty <think></think> before each reply.
void render_smollm3(Out& o, const std::vector<ChatTurn>& turns, bool gen, const std::string& think_system,
                    const std::string& plain_system) {
    bool think = true;
    std::string custom;
    if (!turns.empty() && turns[0].role == "system") {
        const std::string& s = turns[0].content;
        if (s.find("/no_think") != std::string::npos) think = false;
        else if (s.find("/think") != std::string::npos) think = true;
        custom = s;
        for (const char* flag : {"/no_think", "/think"})
            for (size_t at; (at = custom.find(flag)) != std::string::npos;) custom.erase(at, std::string(flag).size());
        custom.erase(custom.find_last_not_of(" \t\n\r\v\f") + 1);  // Python's rstrip()
    }
    o.t(std::string("<|im_start|>system\n## Metadata\n\nKnowledge Cutoff Date: June 2025\nReasoning Mode: ") +
        (think ? "/think" : "/no_think") + "\n\n## Custom Instructions\n\n");
    if (!custom.empty()) {
        o.c(custom);
        o.t("\n\n");
    } else {
        o.t(think ? think_system : plain_system);
    }
    o.t("<|im_end|>\n");
    const std::string empty_think = think ? "" : "<think>\n\n</think>\n";
    for (const ChatTurn& m : turns) {
        if (m.role == "user") {
            o.t("<|im_start|>user\n");
            o.c(m.content);
            o.t("<|im_end|>\n");
        } else if (m.role == "assistant") {
            o.t("<|im_start|>assistant\n" + empty_think);
            o.c(m.content.substr(std::min(m.content.find_first_not_of('\n'), m.content.size())));  // lstrip("\n")
            o.t("<|im_end|>\n");
        }
    }
    if (gen) o.t("<|im_start|>assistant\n" + empty_think);
}

// Llama 3.1 / 3.2: BOS, a system header always (the knowledge cutoff, today's date, the system
// message trimmed), then each turn trimmed. Llama 3: each turn, the first after BOS; no system
// header of its own.
void render_llama3(Out& o, Family f, const std::vector<ChatTurn>& turns, bool gen, const ChatContext& ctx) {
    o.t(ctx.bos);
    size_t first = 0;
    if (f != Family::Llama3) {
        std::string system;
        if (!turns.empty() && turns[0].role == "system") system = trim(turns[0].content), first = 1;
        // 3.1 says 26 Jul 2024 unless date_string is passed; 3.2 asks strftime_now for today.
        const std::string date = f == Family::Llama32 || ctx.date_given ? date_of(ctx, "%d %b %Y") : "26 Jul 2024";
        o.t("<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: " + date +
            "\n\n");
        o.c(system);
        o.t("<|eot_id|>");
    }
    for (size_t i = first; i < turns.size(); i++) {
        o.t("<|start_header_id|>" + turns[i].role + "<|end_header_id|>\n\n");
        o.c(trim(turns[i].content));
        o.t("<|eot_id|>");
    }
    if (gen) o.t("<|start_header_id|>assistant<|end_header_id|>\n\n");
}

// Gemma: BOS; no system role; user/model alternating; content trimmed.
void render_gemma(Out& o, const std::vector<ChatTurn>& turns, bool gen, const ChatContext& ctx) {
    o.t(ctx.bos);
    if (!turns.empty() && turns[0].role == "system") raise("System role not supported");
    for (size_t i = 0; i < turns.size(); i++) {
        if ((turns[i].role == "user") != (i % 2 == 0))
            raise("Conversation roles must alternate user/assistant/user/assistant/...");
        o.t("<start_of_turn>" + std::string(turns[i].role == "assistant" ? "model" : turns[i].role) + "\n");
        o.c(trim(turns[i].content));
        o.t("<end_of_turn>\n");
    }
    if (gen) o.t("<start_of_turn>model\n");
}

// Phi-3: <|role|>\ncontent<|end|>\n (an empty system message left out); EOS without a generation prompt.
void render_phi3(Out& o, const std::vector<ChatTurn>& turns, bool gen, const ChatContext& ctx) {
    for (const ChatTurn& m : turns) {
        if (m.role == "system" && m.content.empty()) continue;
        if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;
        o.t("<|" + m.role + "|>\n");
        o.c(m.content);
        o.t("<|end|>\n");
    }
    o.t(gen ? std::string("<|assistant|>\n") : ctx.eos);
}

// Mistral v3 (Tekken): BOS; [INST]user[/INST]assistant</s>; the system message goes before the
// last message's text when that is the user's, and nowhere otherwise; no generation prompt.
void render_mistral(Out& o, const std::vector<ChatTurn>& turns, const ChatContext& ctx) {
    size_t first = 0;
    const std::string* system = nullptr;
    if (!turns.empty() && turns[0].role == "system") system = &turns[0].content, first = 1;
    for (size_t i = first, n = 0; i < turns.size(); i++, n++)
        if ((turns[i].role == "user") != (n % 2 == 0))
            raise("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...");
    o.t(ctx.bos);
    for (size_t i = first; i < turns.size(); i++) {
        const ChatTurn& m = turns[i];
        if (m.role == "user") {
            o.t("[INST]");
            if (i + 1 == turns.size() && system != nullptr) {
                o.c(*system);
                o.t("\n\n");
            }
            o.c(m.content);
            o.t("[/INST]");
        } else if (m.role == "assistant") {
            o.c(m.content);
            o.t(ctx.eos);
        } else {
            raise("Only user and assistant roles are supported, with the exception of an initial optional system message!");
        }
    }
}

// DeepSeek-R1: BOS, the (last) system message, then <｜User｜>text and <｜Assistant｜>reply<｜end▁of▁sentence｜>
// (a reply's reasoning, up to its last </think>, dropped); the generation prompt opens a <think>.
void render_deepseek_r1(Out& o, Family f, const std::vector<ChatTurn>& turns, bool gen, const ChatContext& ctx) {
    std::string system;
    for (const ChatTurn& m : turns)
        if (m.role == "system") system = m.content;
    o.t(ctx.bos);
    o.c(system);
    for (const ChatTurn& m : turns) {
        if (m.role == "user") {
            o.t("<｜User｜>");
            o.c(m.content);
        } else if (m.role == "assistant") {
            const size_t end = m.content.rfind("</think>");
            o.t("<｜Assistant｜>");
            o.c(end == std::string::npos ? m.content : m.content.substr(end + 8));
            o.t("<｜end▁of▁sentence｜>");
        }
    }
    if (gen) o.t(f == Family::DeepSeekR1Think ? "<｜Assistant｜><think>\n</think>" : "<｜Assistant｜><think>\n");
}

// Granite 3.3: a system turn always (the model's own words and today's date when none is given),
// then <|start_of_role|>role<|end_of_role|>content<|end_of_text|>\n each; the generation prompt
// follows the last message (none for an empty conversation).
void render_granite(Out& o, const std::vector<ChatTurn>& turns, bool gen, const ChatContext& ctx) {
    size_t first = 0;
    o.t("<|start_of_role|>system<|end_of_role|>");
    if (!turns.empty() && turns[0].role == "system") {
        o.c(turns[0].content);
        first = 1;
    } else {
        o.t("Knowledge Cutoff Date: April 2024. Today's Date: " + date_of(ctx, "%B %d, %Y") +
            ". You are Granite, developed by IBM. You are a helpful AI assistant.");
    }
    o.t("<|end_of_text|>\n");
    for (size_t i = first; i < turns.size(); i++) {
        o.t("<|start_of_role|>" + turns[i].role + "<|end_of_role|>");
        o.c(turns[i].content);
        o.t("<|end_of_text|>\n");
        if (i + 1 == turns.size() && gen) o.t("<|start_of_role|>assistant<|end_of_role|>");
    }
}

// A ChatML template's own system message for conversations without one: the text of its first
// "<|im_start|>system\n...<|im_end|>" string literal (SmolLM2's "You are a helpful AI assistant
// named SmolLM, ...", Qwen2.5's "You are Qwen, ..."), the newline written either way.
std::string chatml_default_system(std::string_view t) {
    const std::string_view open = "<|im_start|>system";
    for (size_t at = t.find(open); at != std::string_view::npos; at = t.find(open, at + 1)) {
        size_t b = at + open.size();
        if (t.compare(b, 2, "\\n") == 0) b += 2;
        else if (t.compare(b, 1, "\n") == 0) b += 1;
        else continue;
        const size_t e = t.find("<|im_end|>", b);
        if (e == std::string_view::npos) break;
        const std::string_view body = t.substr(b, e - b);
        if (!body.empty() && body.find_first_of("'\"+{}\\") == std::string_view::npos) return std::string(body);
    }
    return "";
}

// The Jinja string literal that follows `after` in t ("...", with \n, \" and \\ escapes), or nullopt.
std::optional<std::string> literal_after(std::string_view t, std::string_view after) {
    size_t at = t.find(after);
    if (at == std::string_view::npos) return std::nullopt;
    at = t.find('"', at + after.size());
    if (at == std::string_view::npos) return std::nullopt;
    std::string s;
    for (size_t i = at + 1; i < t.size(); i++) {
        if (t[i] == '"') return s;
        if (t[i] == '\\' && i + 1 < t.size()) {
            const char c = t[++i];
            s += c == 'n' ? '\n' : c == 't' ? '\t' : c;
        } else {
            s += t[i];
        }
    }
    return std::nullopt;
}

std::string first_line(std::string_view text) {
    const size_t nl = text.find('\n');
    std::string line(text.substr(0, std::min<size_t>(nl == std::string_view::npos ? text.size() : nl, 100)));
    return line;
}

}  // namespace

// SmolLM3's system turn quotes its template's own words: it is rendered from a template, never by name.
bool nameable(const FamilyInfo& f) { return f.family != Family::SmolLM3; }

const std::vector<std::string>& ChatTemplate::names() {
    static const std::vector<std::string> n = [] {
        std::vector<std::string> v;
        for (const FamilyInfo& f : kFamilies)
            if (nameable(f)) v.push_back(f.name);
        return v;
    }();
    return n;
}

std::optional<ChatTemplate> ChatTemplate::by_name(std::string_view name) {
    for (const FamilyInfo& f : kFamilies)
        if (name == f.name && nameable(f)) return ChatTemplate(f.name);
    return std::nullopt;
}

// A family only for a template whose text shows it and nothing it would render differently
// (tools in the system turn, reasoning flags, a date of its own): those are refused, not guessed.
std::optional<ChatTemplate> ChatTemplate::recognise(std::string_view t) {
    if (has(t, "## Metadata") && has(t, "## Custom Instructions") && has(t, "Reasoning Mode: ")) {  // SmolLM3
        const auto think = literal_after(t, "elif reasoning_mode == \"/think\""), plain = literal_after(t, "{%- else -%}\n    {{-");
        if (think && plain && has(*think, "SmolLM") && has(*plain, "SmolLM")) return ChatTemplate("smollm3", *think, *plain);
        return std::nullopt;
    }
    if (has(t, "<|im_start|>") && has(t, "<|im_end|>")) {
        // Not plain ChatML: a BOS of its own, SmolLM3's metadata block, a generation prompt that
        // opens <think>, reasoning kept without Qwen3's last-query rule.
        if (has(t, "bos_token") || has(t, "## Metadata") || has(t, "'<think>\\n' }}") ||
            (has(t, "<think>") && !has(t, "last_query_index")))
            return std::nullopt;
        return ChatTemplate("chatml", chatml_default_system(t));
    }
    if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) {
        if (!has(t, "Cutting Knowledge Date")) return has(t, "functions") ? std::nullopt : by_name("llama3");
        if (!has(t, "tools_in_user_message")) return std::nullopt;  // not Meta's (functionary's, say)
        return by_name(has(t, "strftime_now") ? "llama3.2" : "llama3.1");
    }
    if (has(t, "<start_of_turn>") && has(t, "<end_of_turn>")) return by_name("gemma");
    if (has(t, "<|start_of_role|>") && has(t, "You are Granite, developed by IBM") && has(t, "April 2024"))
        return by_name("granite3.3");
    if (has(t, "<|assistant|>") && has(t, "<|end|>") && has(t, "<|user|>") && !has(t, "tools"))
        return by_name("phi3");
    if (has(t, "[INST]") && has(t, "[/INST]") && !has(t, "[SYSTEM_PROMPT]") && !has(t, "<<SYS>>") &&
        has(t, "system_message + \"\\n\\n\""))
        return by_name("mistral-v3-tekken");
    // DeepSeek-R1's distills: the generation prompt opens <think>; nothing after a user's text.
    if (has(t, "<｜User｜>") && has(t, "<｜Assistant｜><think>\\n") && !has(t, "<｜User｜>' + message['content'] + '<｜end"))
        return by_name(has(t, "enable_thinking") ? "deepseek-r1-nothink" : "deepseek-r1");
    return std::nullopt;
}

ChatTemplate ChatTemplate::from_text(std::string_view jinja) {
    if (auto t = recognise(jinja)) return *t;
    std::string list;
    for (const std::string& n : names()) list += (list.empty() ? "" : ", ") + n;
    throw Error("chat template not recognised (first line: \"" + first_line(jinja) +
                "\"): give --chat-template NAME, one of " + list);
}

std::string ChatTemplate::standard_bos() const { return info_of(name_).bos; }
std::string ChatTemplate::standard_eos() const { return info_of(name_).eos; }

std::vector<ChatSegment> ChatTemplate::render(const std::vector<ChatTurn>& turns, bool gen, const ChatContext& ctx) const {
    Out o;
    switch (info_of(name_).family) {
        case Family::ChatML:
            render_chatml(o, turns, gen, ctx.default_system.empty() ? default_system_ : ctx.default_system);
            break;
        case Family::SmolLM3: render_smollm3(o, turns, gen, default_system_, other_system_); break;
        case Family::Llama3:
        case Family::Llama31:
        case Family::Llama32: render_llama3(o, info_of(name_).family, turns, gen, ctx); break;
        case Family::Gemma: render_gemma(o, turns, gen, ctx); break;
        case Family::Phi3: render_phi3(o, turns, gen, ctx); break;
        case Family::MistralTekken: render_mistral(o, turns, ctx); break;
        case Family::DeepSeekR1:
        case Family::DeepSeekR1Think: render_deepseek_r1(o, info_of(name_).family, turns, gen, ctx); break;
        case Family::Granite33: render_granite(o, turns, gen, ctx); break;
    }
    return o.segs;
}

std::string join_segments(const std::vector<ChatSegment>& segments) {
    std::string s;
    for (const ChatSegment& g : segments) s += g.text;
    return s;
}

SpecialTokens special_tokens(const Tokenizer& tok) {
    SpecialTokens specials;
    for (int32_t id = 0; id < tok.n_vocab(); id++)
        if (tok.is_special(id) && !tok.token_text(id).empty()) specials.emplace_back(tok.token_text(id), id);
    std::stable_sort(specials.begin(), specials.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    return specials;
}

std::vector<PromptPiece> to_pieces(const std::vector<ChatSegment>& segments, const SpecialTokens& specials) {

    std::vector<PromptPiece> pieces;
    std::string text;  // text run so far (template words and content together, as one piece)
    auto flush = [&] {
        if (!text.empty()) pieces.push_back({-1, std::move(text)});
        text.clear();
    };
    for (const ChatSegment& g : segments) {
        if (!g.from_template) {
            text += g.text;
            continue;
        }
        for (size_t at = 0; at < g.text.size();) {
            const auto hit = std::find_if(specials.begin(), specials.end(), [&](const auto& s) {
                return g.text.compare(at, s.first.size(), s.first) == 0;
            });
            if (hit == specials.end()) {
                text += g.text[at++];
                continue;
            }
            flush();
            pieces.push_back({hit->second, ""});
            at += hit->first.size();
        }
    }
    flush();
    return pieces;
}

}  // namespace ridge
