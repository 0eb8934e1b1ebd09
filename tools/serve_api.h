// The pure parts of `ridge serve`'s OpenAI-compatible HTTP API: request bodies parsed and checked
// into plain structs (ApiError, a 4xx status with an OpenAI-style error type, for anything wrong),
// ChatML prompts built from chat messages, response bodies, server-sent-event chunks and the
// Prometheus /metrics text. No sockets and no threads here: tests/test_cli_serve_parse.cpp tests them.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

#include "engine/sampler.h"
#include "engine/scheduler.h"

namespace ridge::serve {

// A request the server refuses: HTTP status (400, 404, 413, 503, ...), OpenAI's error type
// ("invalid_request_error", "not_found_error", ...) and a one-line message naming the field.
struct ApiError : std::runtime_error {
    ApiError(int status, std::string type, const std::string& message)
        : std::runtime_error(message), status(status), type(std::move(type)) {}
    int status;
    std::string type;
};

struct ChatMessage {
    std::string role;     // "system", "user" or "assistant" ("developer" is read as "system")
    std::string content;  // a string, or the text parts of an array of content parts, joined
};

// One POST /v1/completions or /v1/chat/completions body.
struct CompletionRequest {
    bool chat = false;
    std::string prompt;                 // /v1/completions: "prompt" (a string, or an array of one string)
    std::vector<std::string> stop;      // "stop": up to 4 strings; the answer ends before the first
    bool parse_special = false;         // /v1/completions: "parse_special", special-token texts in the
                                        // prompt become their tokens (llama.cpp's server field)
    std::vector<ChatMessage> messages;  // /v1/chat/completions: "messages", not empty
    std::optional<int> max_tokens;      // "max_tokens" (chat: or "max_completion_tokens"), >= 1; absent: the default
    SamplerParams sampling;             // the server's defaults, overridden by the body's fields
    bool stream = false;                // "stream"
    bool include_usage = false;         // "stream_options": {"include_usage": true}: a last chunk with usage
    std::string model;                  // "model", echoed back (the server has one model)
    int logprobs = -1;                  // chat "logprobs": true with "top_logprobs" (0..20), completions
                                        // "logprobs" (0..5): the top count; -1: none
};

// Parses and checks a body: JSON syntax, every known field's type and range (temperature >= 0,
// top_p in (0, 1], min_p in [0, 1], top_k >= 0, repeat_penalty > 0, max_tokens >= 1, n == 1,
// no "stop"). `defaults` are the server's sampling options; `seed` is used when the body gives
// none (or a negative one). Unknown fields are ignored, as OpenAI clients send many.
// ApiError 400 for anything wrong.
CompletionRequest parse_completion_request(std::string_view body, bool chat, const SamplerParams& defaults,
                                           uint64_t seed);

// POST /tokenize (llama.cpp's shape): {"content": TEXT, "add_special": false, "parse_special": false}
// -> {"tokens": [ids]}; POST /detokenize: {"tokens": [ids]} -> {"content": TEXT}. ApiError 400 for
// a bad body.
struct TokenizeRequest {
    std::string content;
    bool add_special = false;    // BOS, where the vocabulary adds it
    bool parse_special = false;  // special-token texts become their tokens
};
TokenizeRequest parse_tokenize_request(std::string_view body);
// The ids, each checked against n_vocab.
std::vector<int32_t> parse_detokenize_request(std::string_view body, int n_vocab);

// The chat template for a model (chat and serve): --chat-template NAME, else the text of
// --chat-template-file, else the model's tokenizer.chat_template, else ChatML when the vocabulary
// has <|im_start|> and <|im_end|> (SmolLM2's own template is ChatML). The context: the model's BOS
// and EOS texts (a template file with no model: its family's standard ones), the date
// strftime_now gives (`date` when given, as --date, else today), ChatML's default system message
// from the template text. ridge::Error naming the template's first line and the names for one
// ridge cannot render, or saying there is none.
struct ChatSetup {
    ChatTemplate tmpl;
    ChatContext ctx;
    SpecialTokens specials;  // the model's (empty without one), for chat_prompt_ids
};
ChatSetup chat_setup(const Tokenizer* tok, const std::string& name, const std::string& file, const std::string& date);
// A conversation as the model is fed it (the template's control tokens by id, content as text).
std::vector<int32_t> chat_prompt_ids(const ChatSetup& chat, const Tokenizer& tok, const std::vector<ChatTurn>& turns,
                                     bool add_generation_prompt);

// A prompt too long to fit, found before tokenizing it (a 15 MiB prompt would otherwise become
// millions of tokens, and hundreds of MiB, only to be refused). No token stands for more bytes
// than its stored text (longest_token_bytes: byte-level symbols, "▁" and "<0xHH>" each take at
// least the bytes they decode to), so text of B bytes is at least ceil(B / longest) tokens. The
// refusal's message when that is more than max_tokens (a context of max_tokens + 1 leaves one
// token to generate), or "" when the text may fit.
size_t longest_token_bytes(const Tokenizer& tok);
std::string prompt_cannot_fit(size_t text_bytes, size_t longest_token_bytes, int max_tokens);

// Stop sequences over generated text: push() takes each new piece and returns what is safe to show,
// holding back any tail that could be the start of a stop string, so a stop string never reaches
// the output (streamed or whole). After one is found, stopped() is true and the text before it was
// the last returned. flush() returns what is held back, at the end of an answer without a stop.
class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
    std::string push(std::string_view text);
    std::string flush();
    bool stopped() const { return stopped_; }

private:
    std::vector<std::string> stops_;
    std::string held_;
    bool stopped_ = false;
};

// Whether an Authorization header value is "Bearer KEY" for this key (compared in constant time).
bool bearer_matches(std::string_view header, std::string_view key);
// Why a Content-Length header value cannot be a body this server reads (not a plain decimal
// number, or more than max bytes), for a 400 sent before any body is read; empty when it can.
std::string content_length_problem(std::string_view value, size_t max);
// Whether the server would listen on loopback only (127.0.0.0/8, ::1, localhost).
bool is_loopback_host(const std::string& host);

// {"error": {"message": ..., "type": ..., "code": status}}
nlohmann::json error_json(const std::string& message, const std::string& type, int status);

// JSON text that never throws: invalid UTF-8 in strings becomes U+FFFD.
std::string dump(const nlohmann::json& j);

// One server-sent event carrying JSON: "data: {...}\n\n"; the stream ends with kSseDone.
std::string sse_event(const nlohmann::json& j);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// The client side of server-sent events: feed() the bytes as they arrive, get back the payload of
// every complete event's "data:" lines (joined by "\n"), in order. Comments and other fields are
// skipped; "\r\n" line ends are accepted.
class SseParser {
public:
    std::vector<std::string> feed(std::string_view bytes);

private:
    std::string buffer_;  // bytes after the last complete line
    std::string data_;    // the data lines of the event being read
    bool has_data_ = false;
};

// OpenAI's finish_reason: "length" for max_tokens or the end of the context, "stop" for an
// end-of-generation token; cancelled requests never get a response.
const char* openai_finish_reason(FinishReason r);

// What every response and chunk of one request shares.
struct ResponseInfo {
    std::string id;        // "cmpl-7", "chatcmpl-7"
    int64_t created = 0;   // Unix seconds
    std::string model;     // the served model's name
    bool chat = false;
};

nlohmann::json usage_json(int prompt_tokens, int completion_tokens);
// The whole non-streaming response: text_completion or chat.completion, with usage.
// One generated token's log-probability as the API reports it: its bytes (decoded as the text is),
// its logprob, the top alternatives (bytes, logprob), and where its text starts in the answer.
struct LogprobEntry {
    std::string bytes;
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
    size_t text_offset = 0;
};
// A choice's "logprobs": chat {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]};
// completions {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
// A token that is part of a UTF-8 character shows U+FFFD in "token"; "bytes" has its bytes.
nlohmann::json logprobs_json(bool chat, const std::vector<LogprobEntry>& entries);

nlohmann::json completion_response(const ResponseInfo& info, const std::string& text, FinishReason reason,
                                   int prompt_tokens, int completion_tokens, const nlohmann::json& logprobs = nullptr);
// A streaming chunk: text_completion with "text", or chat.completion.chunk with a "delta"
// ({"role": "assistant"} first, then {"content": ...}, {} with the finish_reason last).
// `reason` set: the last chunk (finish_reason), otherwise finish_reason is null.
nlohmann::json completion_chunk(const ResponseInfo& info, const std::string& text, std::optional<FinishReason> reason,
                                bool first = false, const nlohmann::json& logprobs = nullptr);
// The usage chunk sent before [DONE] when stream_options.include_usage: "choices": [].
nlohmann::json usage_chunk(const ResponseInfo& info, int prompt_tokens, int completion_tokens);

// GET /v1/models: one model.
nlohmann::json models_json(const std::string& model, int64_t created, int n_ctx);

// What /metrics reports.
struct MetricsInput {
    SchedulerStats stats;
    int max_batch = 0;
    int64_t http_requests = 0;          // completions requests accepted (submitted to the scheduler)
    int64_t http_errors = 0;            // requests answered with a 4xx/5xx error
    int64_t connections_reading = 0;    // connections still sending their request
    int64_t connections_cut_deadline = 0;  // cut for not sending their request within --read-deadline
    int64_t connections_cut_cap = 0;    // cut as the oldest reader when too many were reading
    double bandwidth_gbs = 0;           // the probe's read bandwidth for the server's thread count; 0: none
    std::string no_bound_reason;        // why there is no bandwidth (a comment in the text) when 0
};
// Prometheus text exposition format (version 0.0.4): # HELP / # TYPE lines, one sample each.
// ridge_decode_percent_of_bound is the bytes the decode-only steps stream per second (weights +
// KV cache, from the counters) as a share of the probe's read bandwidth: decode is memory-bound
// (each step reads every weight once, whatever its batch), so its bound is tokens/s = bandwidth /
// bytes per step * batch. It is left out, with a comment saying why, when no ceilings are available.
std::string metrics_text(const MetricsInput& m);

}  // namespace ridge::serve
