// The pure parts of `ridge serve`: OpenAI request bodies parsed and checked field by field, ChatML
// prompts, response and chunk bodies, server-sent events and the Prometheus /metrics text.
#include "tools/serve_api.h"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

#include "weights/error.h"
#include "weights/mapped_file.h"

namespace ridge::serve {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& message) { throw ApiError(400, "invalid_request_error", message); }

// A field's JSON type for messages: "a string", "an array", ...
std::string type_of(const json& v) {
    switch (v.type()) {
        case json::value_t::null: return "null";
        case json::value_t::object: return "an object";
        case json::value_t::array: return "an array";
        case json::value_t::string: return "a string";
        case json::value_t::boolean: return "a boolean";
        case json::value_t::number_integer:
        case json::value_t::number_unsigned: return "an integer";
        case json::value_t::number_float: return "a number";
        default: return "a value";
    }
}

// The field if present and not null.
const json* field(const json& body, const char* name) {
    const auto it = body.find(name);
    if (it == body.end() || it->is_null()) return nullptr;
    return &*it;
}

double number_field(const json& v, const char* name) {
    if (!v.is_number()) bad(std::string("'") + name + "' must be a number, not " + type_of(v));
    const double x = v.get<double>();
    if (!std::isfinite(x)) bad(std::string("'") + name + "' must be finite");
    return x;
}

// An integer field, clamped into int64 (a huge unsigned value reads as INT64_MAX).
int64_t integer_field(const json& v, const char* name) {
    if (!v.is_number_integer()) bad(std::string("'") + name + "' must be an integer, not " + type_of(v));
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
        return std::numeric_limits<int64_t>::max();
    return v.get<int64_t>();
}

bool bool_field(const json& v, const char* name) {
    if (!v.is_boolean()) bad(std::string("'") + name + "' must be a boolean, not " + type_of(v));
    return v.get<bool>();
}

std::string fmt(double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
}

// "content": a string, or OpenAI's array of content parts of which only {"type": "text"} ones are read.
std::string message_content(const json& m, size_t i) {
    const std::string where = "messages[" + std::to_string(i) + "].content";
    const auto it = m.find("content");
    if (it == m.end() || it->is_null()) return "";
    if (it->is_string()) return it->get<std::string>();
    if (!it->is_array()) bad("'" + where + "' must be a string or an array of content parts, not " + type_of(*it));
    std::string text;
    for (size_t p = 0; p < it->size(); ++p) {
        const json& part = (*it)[p];
        const std::string pw = where + "[" + std::to_string(p) + "]";
        if (!part.is_object()) bad("'" + pw + "' must be an object, not " + type_of(part));
        const auto type = part.find("type");
        if (type == part.end() || !type->is_string() || *type != "text")
            bad("'" + pw + "': only content parts of type \"text\" are supported");
        const auto t = part.find("text");
        if (t == part.end() || !t->is_string()) bad("'" + pw + ".text' must be a string");
        text += t->get<std::string>();
    }
    return text;
}

}  // namespace

CompletionRequest parse_completion_request(std::string_view body, bool chat, const SamplerParams& defaults,
                                           uint64_t seed) {
    const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) bad("the request body is not valid JSON");
    if (!j.is_object()) bad("the request body must be a JSON object, not " + type_of(j));

    CompletionRequest r;
    r.chat = chat;
    r.sampling = defaults;
    r.sampling.seed = seed;
    if (const json* v = field(j, "model")) {
        if (!v->is_string()) bad("'model' must be a string, not " + type_of(*v));
        r.model = v->get<std::string>();
    }

    if (chat) {
        const json* msgs = field(j, "messages");
        if (!msgs) bad("'messages' is required");
        if (!msgs->is_array()) bad("'messages' must be an array, not " + type_of(*msgs));
        if (msgs->empty()) bad("'messages' must not be empty");
        for (size_t i = 0; i < msgs->size(); ++i) {
            const json& m = (*msgs)[i];
            if (!m.is_object()) bad("'messages[" + std::to_string(i) + "]' must be an object, not " + type_of(m));
            const auto role = m.find("role");
            if (role == m.end() || !role->is_string())
                bad("'messages[" + std::to_string(i) + "].role' must be a string");
            std::string rs = role->get<std::string>();
            if (rs == "developer") rs = "system";
            if (rs != "system" && rs != "user" && rs != "assistant")
                bad("'messages[" + std::to_string(i) + "].role' is '" + rs + "': must be system, user or assistant");
            r.messages.push_back({rs, message_content(m, i)});
        }
    } else {
        const json* p = field(j, "prompt");
        if (!p) bad("'prompt' is required");
        if (p->is_array() && p->size() == 1 && (*p)[0].is_string())
            r.prompt = (*p)[0].get<std::string>();
        else if (p->is_string())
            r.prompt = p->get<std::string>();
        else
            bad("'prompt' must be a string, not " + type_of(*p));
        if (const json* v = field(j, "parse_special")) {
            if (!v->is_boolean()) bad("'parse_special' must be true or false, not " + type_of(*v));
            r.parse_special = v->get<bool>();
        }
    }

    const json* mt = field(j, "max_tokens");
    if (!mt && chat) mt = field(j, "max_completion_tokens");
    if (mt) {
        const int64_t n = integer_field(*mt, "max_tokens");
        if (n < 1) bad("'max_tokens' is " + std::to_string(n) + ": must be >= 1");
        r.max_tokens = int(std::min<int64_t>(n, std::numeric_limits<int>::max()));
    }
    if (const json* v = field(j, "temperature")) {
        const double t = number_field(*v, "temperature");
        if (t < 0) bad("'temperature' is " + fmt(t) + ": must be >= 0");
        r.sampling.temperature = float(t);
    }
    if (const json* v = field(j, "top_p")) {
        const double p = number_field(*v, "top_p");
        if (!(p > 0 && p <= 1)) bad("'top_p' is " + fmt(p) + ": must be in (0, 1]");
        r.sampling.top_p = float(p);
    }
    if (const json* v = field(j, "min_p")) {
        const double p = number_field(*v, "min_p");
        if (!(p >= 0 && p <= 1)) bad("'min_p' is " + fmt(p) + ": must be in [0, 1]");
        r.sampling.min_p = float(p);
    }
    if (const json* v = field(j, "top_k")) {
        const int64_t k = integer_field(*v, "top_k");
        if (k < 0) bad("'top_k' is " + std::to_string(k) + ": must be >= 0 (0 turns it off)");
        r.sampling.top_k = int(std::min<int64_t>(k, std::numeric_limits<int>::max()));
    }
    if (const json* v = field(j, "repeat_penalty")) {
        const double p = number_field(*v, "repeat_penalty");
        if (!(p > 0) || p > 1e6) bad("'repeat_penalty' is " + fmt(p) + ": must be > 0 (1 turns it off)");
        r.sampling.repeat_penalty = float(p);
    }
    if (const json* v = field(j, "seed")) {
        const int64_t s = integer_field(*v, "seed");
        if (s >= 0) r.sampling.seed = uint64_t(s);
    }
    if (const json* v = field(j, "stream")) r.stream = bool_field(*v, "stream");
    if (const json* v = field(j, "stream_options")) {
        if (!v->is_object()) bad("'stream_options' must be an object, not " + type_of(*v));
        if (const json* u = field(*v, "include_usage")) r.include_usage = bool_field(*u, "stream_options.include_usage");
    }
    if (const json* v = field(j, "n")) {
        const int64_t n = integer_field(*v, "n");
        if (n != 1) bad("'n' is " + std::to_string(n) + ": only one choice per request is supported");
    }
    // "stop": a string or up to 4 (null, "" and [] mean none). A field that would change what the
    // answer means and is not implemented is refused, never ignored.
    if (const json* v = field(j, "stop")) {
        if (v->is_string()) {
            if (!v->get<std::string>().empty()) r.stop.push_back(v->get<std::string>());
        } else if (v->is_array()) {
            if (v->size() > 4) bad("'stop' has " + std::to_string(v->size()) + " strings: at most 4");
            for (size_t i = 0; i < v->size(); i++) {
                if (!(*v)[i].is_string() || (*v)[i].get<std::string>().empty())
                    bad("'stop[" + std::to_string(i) + "]' must be a non-empty string");
                r.stop.push_back((*v)[i].get<std::string>());
            }
        } else {
            bad("'stop' must be a string or an array of strings, not " + type_of(*v));
        }
    }
    for (const char* name : {"tools", "functions", "grammar", "json_schema", "logit_bias"}) {
        const json* v = field(j, name);
        if (v && !((v->is_array() || v->is_object()) && v->empty()))
            bad("'" + std::string(name) + "' is not supported");
    }
    if (const json* v = field(j, "tool_choice"))
        if (!(v->is_string() && v->get<std::string>() == "none")) bad("'tool_choice' is not supported");
    if (const json* v = field(j, "response_format")) {
        const json* type = v->is_object() ? field(*v, "type") : nullptr;
        if (!(type && type->is_string() && type->get<std::string>() == "text"))
            bad("'response_format' other than {\"type\": \"text\"} is not supported");
    }
    if (const json* v = field(j, "echo"))
        if (bool_field(*v, "echo")) bad("'echo' is not supported");
    if (const json* v = field(j, "suffix"))
        if (!(v->is_string() && v->get<std::string>().empty())) bad("'suffix' is not supported");
    for (const auto& [name, to] : {std::pair{"presence_penalty", &r.sampling.presence_penalty},
                                   std::pair{"frequency_penalty", &r.sampling.frequency_penalty}})
        if (const json* v = field(j, name)) {
            const double x = number_field(*v, name);
            if (!(x >= -2 && x <= 2)) bad("'" + std::string(name) + "' is " + fmt(x) + ": must be in [-2, 2]");
            *to = float(x);
        }
    if (const json* v = field(j, "best_of"))
        if (integer_field(*v, "best_of") != 1) bad("'best_of' is not supported");
    // logprobs: chat "logprobs": true and "top_logprobs": 0..20; completions "logprobs": 0..5.
    const json* lp = field(j, "logprobs");
    const json* top = field(j, "top_logprobs");
    if (chat) {
        const bool on = lp != nullptr && bool_field(*lp, "logprobs");
        const int64_t n = top != nullptr ? integer_field(*top, "top_logprobs") : 0;
        if (n < 0 || n > kMaxTopLogprobs) bad("'top_logprobs' " + std::to_string(n) + " is outside 0..20");
        if (top != nullptr && !on) bad("'top_logprobs' needs 'logprobs': true");
        r.logprobs = on ? int(n) : -1;
    } else {
        if (top != nullptr) bad("'top_logprobs' is a chat field; /v1/completions takes 'logprobs': 0..5");
        if (lp != nullptr && !(lp->is_boolean() && !lp->get<bool>())) {
            const int64_t n = integer_field(*lp, "logprobs");
            if (n < 0 || n > 5) bad("'logprobs' " + std::to_string(n) + " is outside 0..5");
            r.logprobs = int(n);
        }
    }
    try {
        validate(r.sampling);  // the engine's own checks, in case they are stricter than the ones above
    } catch (const Error& e) {
        bad(e.what());
    }
    return r;
}

namespace {
json parse_object(std::string_view body) {
    const json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) bad("the request body is not valid JSON");
    if (!j.is_object()) bad("the request body must be a JSON object, not " + type_of(j));
    return j;
}
}  // namespace

TokenizeRequest parse_tokenize_request(std::string_view body) {
    const json j = parse_object(body);
    TokenizeRequest r;
    const json* c = field(j, "content");
    if (!c) bad("'content' is required");
    if (!c->is_string()) bad("'content' must be a string, not " + type_of(*c));
    r.content = c->get<std::string>();
    if (const json* v = field(j, "add_special")) r.add_special = bool_field(*v, "add_special");
    if (const json* v = field(j, "parse_special")) r.parse_special = bool_field(*v, "parse_special");
    return r;
}

std::vector<int32_t> parse_detokenize_request(std::string_view body, int n_vocab) {
    const json j = parse_object(body);
    const json* t = field(j, "tokens");
    if (!t) bad("'tokens' is required");
    if (!t->is_array()) bad("'tokens' must be an array, not " + type_of(*t));
    std::vector<int32_t> ids;
    for (size_t i = 0; i < t->size(); i++) {
        const std::string name = "tokens[" + std::to_string(i) + "]";
        const int64_t id = integer_field((*t)[i], name.c_str());
        if (id < 0 || id >= n_vocab)
            bad("'" + name + "' is " + std::to_string(id) + ": outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
        ids.push_back(int32_t(id));
    }
    return ids;
}

ChatSetup chat_setup(const Tokenizer* tok, const std::string& name, const std::string& file, const std::string& date) {
    std::string text = tok != nullptr ? tok->chat_template() : "";
    if (!file.empty()) text = read_whole_file(file, "chat template file");
    std::optional<ChatTemplate> t;
    if (!name.empty()) {
        t = ChatTemplate::by_name(name);
        if (!t) {
            std::string list;
            for (const std::string& n : ChatTemplate::names()) list += (list.empty() ? "" : ", ") + n;
            throw Error("--chat-template '" + name + "' is not one ridge renders (" + list + ")");
        }
    } else if (!text.empty()) {
        t = ChatTemplate::from_text(text);
    } else if (tok != nullptr && tok->find_token("<|im_start|>") && tok->find_token("<|im_end|>")) {
        t = ChatTemplate::by_name("chatml");
    } else {
        throw Error("the model has no chat template: give --chat-template NAME or --chat-template-file FILE");
    }
    ChatSetup s{*t, {}, tok != nullptr ? special_tokens(*tok) : SpecialTokens{}};
    if (tok != nullptr && file.empty()) {
        s.ctx.bos = tok->bos_id() >= 0 ? tok->token_text(tok->bos_id()) : "";
        s.ctx.eos = tok->eos_id() >= 0 ? tok->token_text(tok->eos_id()) : "";
    } else {
        s.ctx.bos = t->standard_bos(), s.ctx.eos = t->standard_eos();
    }
    s.ctx.date_given = !date.empty();
    std::tm tm{};
    if (s.ctx.date_given) {  // "26 Jul 2024", as llama.cpp's and Hugging Face's date_string reads
        const char* end = strptime(date.c_str(), "%d %b %Y", &tm);
        if (end == nullptr || *end != '\0') throw Error("--date '" + date + "' is not a date like \"26 Jul 2024\"");
    } else {
        const std::time_t now = std::time(nullptr);
        localtime_r(&now, &tm);
    }
    s.ctx.year = tm.tm_year + 1900, s.ctx.month = tm.tm_mon + 1, s.ctx.day = tm.tm_mday;
    return s;
}

std::vector<int32_t> chat_prompt_ids(const ChatSetup& chat, const Tokenizer& tok, const std::vector<ChatTurn>& turns,
                                     bool add_generation_prompt) {
    return tok.encode_pieces(to_pieces(chat.tmpl.render(turns, add_generation_prompt, chat.ctx), chat.specials),
                             /*add_bos=*/false);
}

size_t longest_token_bytes(const Tokenizer& tok) {
    size_t longest = 1;
    for (int32_t id = 0; id < tok.n_vocab(); id++) longest = std::max(longest, tok.token_text(id).size());
    return longest;
}

std::string prompt_cannot_fit(size_t text_bytes, size_t longest_token_bytes, int max_tokens) {
    const size_t longest = std::max<size_t>(longest_token_bytes, 1);
    const size_t at_least = text_bytes / longest + (text_bytes % longest != 0 ? 1 : 0);
    if (max_tokens < 0 || at_least <= size_t(max_tokens)) return "";
    return "the prompt is " + std::to_string(text_bytes) + " bytes, at least " + std::to_string(at_least) +
           " tokens (no token is longer than " + std::to_string(longest) + " bytes): too long for the context of " +
           std::to_string(max_tokens + 1) + " tokens";
}


std::string StopMatcher::push(std::string_view text) {
    if (stopped_) return {};
    held_.append(text);
    size_t first = std::string::npos;
    for (const std::string& s : stops_) first = std::min(first, held_.find(s));
    if (first != std::string::npos) {
        stopped_ = true;
        std::string out = held_.substr(0, first);
        held_.clear();
        return out;
    }
    size_t keep = 0;  // the longest tail of held_ that begins some stop string
    for (const std::string& s : stops_)
        for (size_t l = std::min(s.size() - 1, held_.size()); l > keep; l--)
            if (held_.compare(held_.size() - l, l, s, 0, l) == 0) {
                keep = l;
                break;
            }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopMatcher::flush() {
    std::string out;
    if (!stopped_) out.swap(held_);
    return out;
}

bool bearer_matches(std::string_view header, std::string_view key) {
    constexpr std::string_view kScheme = "Bearer ";
    if (key.empty() || header.size() != kScheme.size() + key.size() || header.substr(0, kScheme.size()) != kScheme)
        return false;
    unsigned char diff = 0;  // every byte compared, so the time says nothing of where they differ
    for (size_t i = 0; i < key.size(); i++) diff |= (unsigned char)(header[kScheme.size() + i] ^ key[i]);
    return diff == 0;
}

std::string content_length_problem(std::string_view value, size_t max) {
    if (value.empty() || value.size() > 20 || value.find_first_not_of("0123456789") != std::string_view::npos)
        return "Content-Length '" + std::string(value.substr(0, 40)) + "' is not a byte count";
    if (value.size() == 20 && value > "18446744073709551615") return "Content-Length " + std::string(value) + " is past any body";
    const unsigned long long n = std::stoull(std::string(value));
    if (n > max) return "Content-Length " + std::to_string(n) + " is past the largest body, " + std::to_string(max) + " bytes";
    return {};
}

bool is_loopback_host(const std::string& host) {
    return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

json error_json(const std::string& message, const std::string& type, int status) {
    return {{"error", {{"message", message}, {"type", type}, {"param", nullptr}, {"code", status}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string sse_event(const json& j) { return "data: " + dump(j) + "\n\n"; }

std::vector<std::string> SseParser::feed(std::string_view bytes) {
    std::vector<std::string> events;
    buffer_.append(bytes);
    size_t start = 0;
    for (size_t nl; (nl = buffer_.find('\n', start)) != std::string::npos; start = nl + 1) {
        std::string_view line(buffer_.data() + start, nl - start);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (line.empty()) {  // the end of an event
            if (has_data_) events.push_back(data_);
            data_.clear();
            has_data_ = false;
        } else if (line.substr(0, 5) == "data:") {
            line.remove_prefix(5);
            if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
            if (has_data_) data_ += '\n';
            data_.append(line);
            has_data_ = true;
        }
    }
    buffer_.erase(0, start);
    return events;
}

const char* openai_finish_reason(FinishReason r) {
    switch (r) {
        case FinishReason::Stop: return "stop";
        case FinishReason::Length:
        case FinishReason::ContextFull: return "length";
        case FinishReason::Cancelled: return "cancelled";
    }
    return "length";
}

json usage_json(int prompt_tokens, int completion_tokens) {
    return {{"prompt_tokens", prompt_tokens},
            {"completion_tokens", completion_tokens},
            {"total_tokens", prompt_tokens + completion_tokens}};
}

json logprobs_json(bool chat, const std::vector<LogprobEntry>& entries) {
    auto bytes_of = [](const std::string& s) {
        json b = json::array();
        for (unsigned char c : s) b.push_back(int(c));
        return b;
    };
    if (chat) {
        json content = json::array();
        for (const LogprobEntry& e : entries) {
            json top = json::array();
            for (const auto& [t, lp] : e.top) top.push_back({{"token", t}, {"logprob", lp}, {"bytes", bytes_of(t)}});
            content.push_back({{"token", e.bytes}, {"logprob", e.logprob}, {"bytes", bytes_of(e.bytes)}, {"top_logprobs", top}});
        }
        return {{"content", content}};
    }
    json tokens = json::array(), lps = json::array(), tops = json::array(), offsets = json::array();
    for (const LogprobEntry& e : entries) {
        tokens.push_back(e.bytes);
        lps.push_back(e.logprob);
        json top = json::object();
        for (const auto& [t, lp] : e.top) top[t] = lp;
        tops.push_back(top);
        offsets.push_back(e.text_offset);
    }
    return {{"tokens", tokens}, {"token_logprobs", lps}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json completion_response(const ResponseInfo& info, const std::string& text, FinishReason reason, int prompt_tokens,
                         int completion_tokens, const json& logprobs) {
    json choice;
    if (info.chat)
        choice = {{"index", 0},
                  {"message", {{"role", "assistant"}, {"content", text}}},
                  {"logprobs", logprobs},
                  {"finish_reason", openai_finish_reason(reason)}};
    else
        choice = {{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", openai_finish_reason(reason)}};
    return {{"id", info.id},
            {"object", info.chat ? "chat.completion" : "text_completion"},
            {"created", info.created},
            {"model", info.model},
            {"choices", json::array({choice})},
            {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

json completion_chunk(const ResponseInfo& info, const std::string& text, std::optional<FinishReason> reason,
                      bool first, const json& logprobs) {
    json choice = {{"index", 0}, {"logprobs", logprobs}};
    if (info.chat) {
        json delta = json::object();
        if (first) delta["role"] = "assistant";
        if (first || !text.empty()) delta["content"] = text;
        choice["delta"] = delta;
    } else {
        choice["text"] = text;
    }
    choice["finish_reason"] = reason ? json(openai_finish_reason(*reason)) : json(nullptr);
    return {{"id", info.id},
            {"object", info.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", info.created},
            {"model", info.model},
            {"choices", json::array({choice})}};
}

json usage_chunk(const ResponseInfo& info, int prompt_tokens, int completion_tokens) {
    return {{"id", info.id},
            {"object", info.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", info.created},
            {"model", info.model},
            {"choices", json::array()},
            {"usage", usage_json(prompt_tokens, completion_tokens)}};
}

json models_json(const std::string& model, int64_t created, int n_ctx) {
    return {{"object", "list"},
            {"data", json::array({{{"id", model},
                                   {"object", "model"},
                                   {"created", created},
                                   {"owned_by", "ridge"},
                                   {"meta", {{"n_ctx", n_ctx}}}}})}};
}

namespace {

void metric(std::string& out, const char* name, const char* type, const char* help, double value) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.17g", value);
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + buf + "\n";
}

}  // namespace

std::string metrics_text(const MetricsInput& m) {
    const SchedulerStats& s = m.stats;
    std::string out;
    metric(out, "ridge_requests_running", "gauge", "Requests admitted to the batch (prefilling or decoding).",
           s.running);
    metric(out, "ridge_requests_waiting", "gauge", "Requests queued, waiting for a batch slot or KV blocks.",
           s.waiting);
    metric(out, "ridge_requests_submitted_total", "counter", "Requests given to the scheduler.",
           double(s.requests_submitted));
    metric(out, "ridge_requests_finished_total", "counter", "Requests ended, for any reason (cancelled ones too).",
           double(s.requests_finished));
    metric(out, "ridge_http_requests_total", "counter", "Completion requests accepted by the HTTP server.",
           double(m.http_requests));
    metric(out, "ridge_http_errors_total", "counter", "Requests answered with an error status.",
           double(m.http_errors));
    metric(out, "ridge_http_connections_reading", "gauge", "Connections still sending their request.",
           double(m.connections_reading));
    metric(out, "ridge_http_connections_cut_deadline_total", "counter",
           "Connections cut (408) for not sending their request within --read-deadline.",
           double(m.connections_cut_deadline));
    metric(out, "ridge_http_connections_cut_cap_total", "counter",
           "Connections cut (503) as the oldest still sending its request when too many were.",
           double(m.connections_cut_cap));
    metric(out, "ridge_prompt_tokens_total", "counter", "Prompt tokens prefilled (computed).", double(s.tokens_prefilled));
    metric(out, "ridge_prompt_tokens_reused_total", "counter",
           "Prompt tokens taken from the prefix cache instead of computed.", double(s.prompt_tokens_reused));
    metric(out, "ridge_prefix_cache_hit_rate", "gauge",
           "Prompt tokens taken from the prefix cache / prompt tokens of admitted requests, since the start.",
           s.prompt_tokens_admitted > 0 ? double(s.prompt_tokens_reused) / double(s.prompt_tokens_admitted) : 0.0);
    metric(out, "ridge_tokens_generated_total", "counter", "Tokens generated.", double(s.tokens_generated));
    metric(out, "ridge_steps_total", "counter", "Forward passes (scheduler steps).", double(s.steps));
    metric(out, "ridge_decode_steps_total", "counter", "Steps holding only decode rows.", double(s.decode_steps));
    metric(out, "ridge_decode_seconds_total", "counter", "Wall time of the decode-only steps.", s.decode_step_seconds);
    metric(out, "ridge_prefill_seconds_total", "counter", "Wall time of the steps with prompt rows.",
           s.prefill_step_seconds);
    metric(out, "ridge_decode_tokens_per_second", "gauge",
           "Tokens per second of the decode-only steps since the server started (all sequences together).",
           s.decode_tokens_per_second());
    metric(out, "ridge_batch_size_last", "gauge", "Sequences in the last forward pass.", s.last_step_sequences);
    metric(out, "ridge_batch_rows_last", "gauge", "Rows (tokens) in the last forward pass.", s.last_step_rows);
    metric(out, "ridge_batch_size_max", "gauge", "Most sequences running at once (--max-batch).", m.max_batch);
    metric(out, "ridge_kv_blocks_used", "gauge",
           "KV cache blocks running requests have added (shared prefix blocks are counted as cached).",
           s.kv_blocks_used);
    metric(out, "ridge_kv_blocks_reserved", "gauge", "KV cache blocks running requests may add in all (>= used).",
           s.kv_blocks_reserved);
    metric(out, "ridge_kv_blocks_total", "gauge", "KV cache blocks in the pool.", s.kv_blocks_total);
    metric(out, "ridge_kv_blocks_cached", "gauge",
           "KV cache blocks the prefix cache holds (whole prompt chunks kept for later requests).", s.kv_blocks_cached);
    metric(out, "ridge_kv_blocks_cached_idle", "gauge",
           "Of those, blocks no running request holds: free space, dropped least recently used first when needed.",
           s.kv_blocks_cached_idle);
    const double decode_gbs = s.decode_gbs();
    metric(out, "ridge_decode_gbs", "gauge",
           "Bytes the decode-only steps streamed from memory (weights + KV cache) per second, GB/s.", decode_gbs);
    if (m.bandwidth_gbs > 0) {
        metric(out, "ridge_bandwidth_ceiling_gbs", "gauge", "Read bandwidth measured by `ridge probe`, GB/s.",
               m.bandwidth_gbs);
        metric(out, "ridge_decode_percent_of_bound", "gauge",
               "Decode's speed as a percentage of its bandwidth bound: ridge_decode_gbs / "
               "ridge_bandwidth_ceiling_gbs * 100.",
               100.0 * decode_gbs / m.bandwidth_gbs);
    } else {
        out += "# ridge_decode_percent_of_bound omitted: " +
               (m.no_bound_reason.empty() ? std::string("no ceilings available") : m.no_bound_reason) + "\n";
    }
    return out;
}

}  // namespace ridge::serve
