// `ridge serve`: an OpenAI-compatible HTTP server (cpp-httplib) over the continuous-batching
// Scheduler. HTTP handlers run on httplib's thread pool: they parse, tokenize, submit and then wait
// on a per-request Channel; one engine thread loops wait_for_work() / step(), and the scheduler's
// callbacks (on that thread) only push into the Channel. SIGINT/SIGTERM shut it down cleanly.
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "measure/ceilings.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/model_args.h"
#include "tools/serve_api.h"
#include "tools/serve_guard.h"
#include "weights/error.h"
#include "weights/model_file.h"

namespace ridge::cli {

namespace {

using json = nlohmann::json;
using serve::ApiError;

struct ServeOptions {
    ModelArgs model;
    std::string host = "127.0.0.1";
    int port = 8080;             // 0: any free port (the one chosen is printed)
    int max_batch = 8;           // most sequences decoding together
    int n_ctx = 0;               // most tokens per sequence; 0 = min(model context, 2048)
    bool n_ctx_set = false;
    int kv_tokens = 0;           // KV pool, shared by all sequences; 0 = n_ctx * max_batch
    std::string kv_type = "f32";
    bool prefix_cache = true;    // share the KV of whole prompt chunks between requests (scheduler.h)
    int threads = 0;             // OpenMP threads of the engine thread; 0 = OpenMP's default
    bool threads_set = false;
    int http_threads = 64;       // httplib's pool: each open request holds one
    int n_predict = 256;         // max_tokens when a request gives none; -1 = until the end or the context
    std::string alias;           // the model's name in the API (default: the file name without .gguf)
    bool probe = true;           // measure the ceilings at start when none are saved (as bench does)
    std::string api_key;         // when set, every route but /health wants "Authorization: Bearer KEY"
    std::string cors_origin;     // when set, browsers from this origin ("*": any) may call the API
    double shutdown_grace = 5;   // seconds open requests get to finish after SIGINT/SIGTERM
    double read_deadline = 30;   // seconds a connection has to send its whole request
    std::string chat_template;   // --chat-template NAME: a family instead of the model's template
    std::string chat_template_file;  // --chat-template-file: a Jinja template's text
    SamplerParams sp;            // defaults for requests' sampling fields
};

// One request's hand-off from the engine thread (producer) to its HTTP handler (consumer).
struct Channel {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<int32_t> tokens;          // generated, not yet taken by the handler
    std::deque<TokenLogprob> logprobs;   // theirs, one each, when the request asked for logprobs
    TokenLogprob next_logprob;           // on_logprob's, until on_token queues it (engine thread only)
    bool done = false;
    FinishReason reason = FinishReason::Length;
    int n_generated = 0;
    std::atomic<bool> abandoned{false};  // the handler is gone: on_token returns false

    // Waits up to `timeout` for tokens or the end; moves the tokens into `out`. True when done.
    bool take(std::vector<int32_t>& out, std::chrono::milliseconds timeout, std::vector<TokenLogprob>* lps = nullptr) {
        std::unique_lock lk(mu);
        cv.wait_for(lk, timeout, [&] { return done || !tokens.empty(); });
        out.assign(tokens.begin(), tokens.end());
        tokens.clear();
        if (lps != nullptr) lps->assign(logprobs.begin(), logprobs.end());
        logprobs.clear();
        return done;
    }
};

// Everything the handlers share.
struct Server {
    ServeOptions opt;
    std::unique_ptr<ModelFile> file;
    Model model;
    std::unique_ptr<Engine> engine;  // the model with its plan (--exact, --device)
    std::unique_ptr<Tokenizer> tok;
    std::unique_ptr<Scheduler> sched;
    int n_ctx = 0;
    std::string model_name;
    int64_t started = 0;             // Unix seconds
    std::optional<serve::ChatSetup> chat;  // the chat template (serve::chat_setup); none: no_chat says why
    std::string no_chat;
    size_t longest_token = 1;        // bytes of the longest token text (serve::prompt_cannot_fit)
    double bandwidth_gbs = 0;        // for ridge_decode_percent_of_bound
    std::string no_bound_reason;

    std::atomic<int64_t> next_id{1};
    std::atomic<int64_t> http_requests{0};
    std::atomic<int64_t> http_errors{0};
    std::unique_ptr<serve::ConnectionGuard> guard;  // slow and idle connections (serve_guard.h)
    // Parsing a body costs a few times its size (the JSON, the strings taken from it, the tokens):
    // bodies over kLargeBody are parsed one at a time, so that several at once cost the server
    // their raw bytes and one parse, not several parses.
    static constexpr size_t kLargeBody = size_t(1) << 20;
    std::mutex large_body_mu;
    std::atomic<bool> engine_failed{false};

    std::mutex active_mu;            // guards active, shutting_down
    std::set<int64_t> active;        // scheduler ids of requests still open
    bool shutting_down = false;

    // Submits unless shutting down (then ApiError 503), and registers the id for shutdown's cancel.
    int64_t submit(RequestParams p, RequestCallbacks cb) {
        std::lock_guard lk(active_mu);
        if (shutting_down) throw ApiError(503, "server_error", "the server is shutting down");
        int64_t id;
        try {
            id = sched->submit(std::move(p), std::move(cb));
        } catch (const Error& e) {
            throw ApiError(400, "invalid_request_error", e.what());
        }
        active.insert(id);
        return id;
    }
    void release(int64_t id) {
        std::lock_guard lk(active_mu);
        active.erase(id);
    }
    // Refuses new requests (503); open ones go on.
    void stop_admitting() {
        std::lock_guard lk(active_mu);
        shutting_down = true;
    }
    bool idle() {
        std::lock_guard lk(active_mu);
        return active.empty();
    }
    // Cancels every open request and refuses new ones.
    void begin_shutdown() {
        std::vector<int64_t> ids;
        {
            std::lock_guard lk(active_mu);
            shutting_down = true;
            ids.assign(active.begin(), active.end());
        }
        for (int64_t id : ids) sched->cancel(id);  // outside the lock: cancel may call on_done here
    }
};

void send_json(httplib::Response& res, int status, const json& j) {
    res.status = status;
    res.set_content(serve::dump(j) + "\n", "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) {
    send_json(res, e.status, serve::error_json(e.what(), e.type, e.status));
}

// A checked request turned into the scheduler's terms.
struct Prepared {
    serve::CompletionRequest req;
    std::vector<int32_t> ids;   // the prompt's tokens
    int max_new = 0;
};

Prepared prepare(Server& S, const std::string& body, bool chat) {
    Prepared P;
    const uint64_t seed = uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) + S.next_id.load();
    P.req = serve::parse_completion_request(body, chat, S.opt.sp, seed);
    if (chat && !S.chat) throw ApiError(400, "invalid_request_error", S.no_chat + "; /v1/completions takes a prompt as it is");
    // A prompt that cannot fit is refused before it costs a tokenization (the template's own text
    // is left out of the count: a lower bound stays a lower bound).
    size_t text_bytes = P.req.prompt.size();
    for (const serve::ChatMessage& m : P.req.messages) text_bytes += m.content.size();
    if (const std::string why = serve::prompt_cannot_fit(text_bytes, S.longest_token, S.n_ctx - 1); !why.empty())
        throw ApiError(400, "invalid_request_error", why);
    try {
        // Content is text: a chat's control tokens go in by id, its messages as text; a completion's
        // prompt parses special-token texts only when the request asks ("parse_special": true).
        if (chat) {
            std::vector<ChatTurn> turns;
            for (const serve::ChatMessage& m : P.req.messages) turns.push_back({m.role, m.content});
            P.ids = serve::chat_prompt_ids(*S.chat, *S.tok, turns, /*add_generation_prompt=*/true);
        } else
            P.ids = S.tok->encode(P.req.prompt, S.tok->add_bos_default(), P.req.parse_special);
    } catch (const Error& e) {
        throw ApiError(400, "invalid_request_error", std::string("prompt: ") + e.what());
    }
    if (P.ids.empty()) {  // an empty prompt starts from BOS alone, as `ridge generate` does
        if (S.tok->bos_id() < 0) throw ApiError(400, "invalid_request_error", "the prompt is empty");
        P.ids.push_back(S.tok->bos_id());
    }
    const int n_prompt = int(P.ids.size());
    if (n_prompt >= S.n_ctx)
        throw ApiError(400, "invalid_request_error",
                       "the prompt is " + std::to_string(n_prompt) + " tokens, too long for the context of " +
                           std::to_string(S.n_ctx) + " tokens (at most " + std::to_string(S.n_ctx - 1) +
                           " leave room to generate)");
    if (P.req.max_tokens) {
        if (int64_t(n_prompt) + *P.req.max_tokens > S.n_ctx)
            throw ApiError(400, "invalid_request_error",
                           "the prompt (" + std::to_string(n_prompt) + " tokens) plus max_tokens " +
                               std::to_string(*P.req.max_tokens) + " pass the context of " + std::to_string(S.n_ctx) +
                               " tokens");
        P.max_new = *P.req.max_tokens;
    } else {
        const int room = S.n_ctx - n_prompt;
        P.max_new = S.opt.n_predict < 0 ? room : std::min(S.opt.n_predict, room);
    }
    return P;
}

serve::ResponseInfo response_info(Server& S, bool chat) {
    serve::ResponseInfo info;
    info.chat = chat;
    info.id = std::string(chat ? "chatcmpl-" : "cmpl-") + std::to_string(S.next_id++);
    info.created = int64_t(std::time(nullptr));
    info.model = S.model_name;
    return info;
}

RequestCallbacks callbacks_for(const std::shared_ptr<Channel>& ch, bool logprobs) {
    RequestCallbacks cb;
    if (logprobs) cb.on_logprob = [ch](const TokenLogprob& lp) { ch->next_logprob = lp; };
    cb.on_token = [ch, logprobs](int32_t token) {
        if (ch->abandoned.load()) return false;
        {
            std::lock_guard lk(ch->mu);
            ch->tokens.push_back(token);
            if (logprobs) ch->logprobs.push_back(std::move(ch->next_logprob));
        }
        ch->cv.notify_one();
        return true;
    };
    cb.on_done = [ch](FinishReason reason, int n_generated) {
        {
            std::lock_guard lk(ch->mu);
            ch->done = true;
            ch->reason = reason;
            ch->n_generated = n_generated;
        }
        ch->cv.notify_one();
    };
    return cb;
}

// POST /v1/completions and /v1/chat/completions.
// One line on stderr for each request: a completion logs itself when it ends (with its tokens and
// time), httplib's logger every other request and every refused one.
void log_request(const std::string& method, const std::string& path, int status, int prompt, int generated,
                 std::chrono::steady_clock::time_point start) {
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "ridge: %s %s %d prompt %d generated %d tokens %.0f ms\n", method.c_str(), path.c_str(), status,
                 prompt, generated, ms);
}

// A request's answer as text: ids decoded (the prompt first, so the first piece gets the right
// leading space), then the stop sequences applied. Once a stop string is found, the request is
// cancelled (its KV blocks freed) and the answer ends there with finish_reason "stop".
struct AnswerText {
    const Tokenizer& tok;
    StreamDecoder decoder;
    serve::StopMatcher stop;
    int tokens = 0;  // generated tokens taken (up to and including the one that completed a stop)
    int32_t prev = -1;       // the last token, for decode_piece
    size_t text_bytes = 0;   // the answer's bytes so far, token by token (logprobs' text_offset)
    std::vector<serve::LogprobEntry> logprobs;  // the taken tokens', when asked for
    AnswerText(const Tokenizer& t, const std::vector<int32_t>& prompt, std::vector<std::string> stops)
        : tok(t), decoder(t), stop(std::move(stops)) {
        for (int32_t p : prompt) decoder.push(p);
        if (!prompt.empty()) prev = prompt.back();
    }
    // lps: the tokens' logprobs (one each), or empty when not asked for.
    std::string push(const std::vector<int32_t>& got, const std::vector<TokenLogprob>& lps = {}) {
        std::string out;
        for (size_t i = 0; i < got.size(); i++) {
            if (stop.stopped()) break;
            tokens++;
            out += stop.push(decoder.push(got[i]));
            const std::string piece = tok.decode_piece(prev, got[i]);
            if (i < lps.size()) {
                serve::LogprobEntry e{piece, lps[i].logprob, {}, text_bytes};
                for (const auto& [id, lp] : lps[i].top) e.top.emplace_back(tok.decode_piece(prev, id), lp);
                logprobs.push_back(std::move(e));
            }
            text_bytes += piece.size();
            prev = got[i];
        }
        return out;
    }
    // The logprobs taken since the last call (a stream's chunk), as its "logprobs" field.
    nlohmann::json take_logprobs(bool chat, bool asked) {
        if (!asked) return nullptr;
        const nlohmann::json j = serve::logprobs_json(chat, logprobs);
        logprobs.clear();
        return j;
    }
    std::string finish() { return stop.stopped() ? std::string() : stop.push(decoder.flush()) + stop.flush(); }
};

// Ends a request whose answer reached a stop string: its tokens stop coming, its KV blocks go back.
void end_at_stop(Server& S, Channel& ch, int64_t id) {
    ch.abandoned = true;
    S.sched->cancel(id);
}

// A response's releaser (called when it ends, written or not): a request it did not finish (the
// client left, or the server is stopping) is cancelled and its sequence freed now.
std::function<void(bool)> cancel_if_unfinished(Server* sp, std::shared_ptr<Channel> ch, std::shared_ptr<bool> finished,
                                               int64_t id, std::string what, int n_prompt,
                                               std::chrono::steady_clock::time_point start) {
    return [=](bool) {
        if (*finished) return;
        end_at_stop(*sp, *ch, id);
        sp->release(id);
        log_request("POST", what, 200, n_prompt, ch->n_generated, start);
    };
}

void handle_completion(Server& S, const httplib::Request& http_req, httplib::Response& res, bool chat) {
    const auto start = std::chrono::steady_clock::now();
    const std::string path = http_req.path;
    std::unique_lock<std::mutex> large(S.large_body_mu, std::defer_lock);
    if (http_req.body.size() > Server::kLargeBody) large.lock();
    Prepared P = prepare(S, http_req.body, chat);
    if (large.owns_lock()) large.unlock();
    const serve::ResponseInfo info = response_info(S, chat);
    auto ch = std::make_shared<Channel>();
    RequestParams params;
    params.prompt = P.ids;
    params.sampling = P.req.sampling;
    params.max_new = P.max_new;
    params.logprobs = P.req.logprobs;
    const bool logprobs = P.req.logprobs >= 0;
    const int n_prompt = int(P.ids.size());
    const int64_t id = S.submit(std::move(params), callbacks_for(ch, logprobs));
    S.http_requests++;
    auto out = std::make_shared<AnswerText>(*S.tok, P.ids, P.req.stop);

    if (!P.req.stream) {
        // A short request is answered as it finishes, with its own status. One still generating
        // after a second is answered in chunks: its status (200) and headers first, then a space
        // each second while it runs (JSON allows leading whitespace), then the body. A space that
        // cannot be written means the client left: the request is cancelled and its KV blocks freed,
        // as a stream's are.
        auto text = std::make_shared<std::string>();
        // The whole answer once the request is done or stopped: (body, status).
        auto answer = [out, ch, text, info, n_prompt, logprobs]() -> std::pair<json, int> {
            if (out->stop.stopped())
                return {serve::completion_response(info, *text, FinishReason::Stop, n_prompt, out->tokens,
                                                   out->take_logprobs(info.chat, logprobs)),
                        200};
            if (ch->reason == FinishReason::Cancelled)
                return {serve::error_json("the request was cancelled: the server is shutting down", "server_error", 503),
                        503};
            *text += out->finish();
            return {serve::completion_response(info, *text, ch->reason, n_prompt, ch->n_generated,
                                               out->take_logprobs(info.chat, logprobs)),
                    200};
        };
        std::vector<int32_t> got;
        std::vector<TokenLogprob> lps;
        bool done = false;
        const auto short_until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        while (!done && std::chrono::steady_clock::now() < short_until) {
            done = ch->take(got, std::chrono::milliseconds(200), &lps);
            *text += out->push(got, lps);
            if (out->stop.stopped()) {
                end_at_stop(S, *ch, id);
                done = true;
            }
            if (!done && S.engine_failed) throw ApiError(500, "server_error", "the engine stopped");
        }
        if (done) {
            S.release(id);
            const auto [body, status] = answer();
            send_json(res, status, body);
            log_request("POST", path, status, n_prompt, out->tokens, start);
            return;
        }
        auto finished = std::make_shared<bool>(false);
        auto last_space = std::make_shared<std::chrono::steady_clock::time_point>(std::chrono::steady_clock::now());
        Server* sp = &S;
        res.status = 200;
        res.set_chunked_content_provider(
            "application/json",
            [sp, ch, finished, last_space, text, out, answer, id, n_prompt, path, start](size_t, httplib::DataSink& sink) {
                std::vector<int32_t> got;
                std::vector<TokenLogprob> lps;
                bool done = ch->take(got, std::chrono::milliseconds(200), &lps);
                *text += out->push(got, lps);
                if (out->stop.stopped() && !done) {
                    end_at_stop(*sp, *ch, id);
                    done = true;
                }
                if (!done && !sp->engine_failed) {
                    const auto now = std::chrono::steady_clock::now();
                    if (now - *last_space < std::chrono::seconds(1)) return true;
                    *last_space = now;
                    return sink.write(" ", 1);  // false: the client left (the releaser cancels)
                }
                *finished = true;
                sp->release(id);
                const std::string body =
                    done ? serve::dump(answer().first) : serve::dump(serve::error_json("the engine stopped", "server_error", 500));
                sink.write(body.data(), body.size());
                sink.done();
                log_request("POST", path, 200, n_prompt, out->tokens, start);
                return true;
            },
            cancel_if_unfinished(sp, ch, finished, id, path + " (client left)", n_prompt, start));
        return;
    }

    // Streaming: one chunk per batch of tokens that arrived together (less any tail that could
    // begin a stop string, held back), then the finish chunk, usage (if asked), [DONE]. A failed
    // write (the client left) cancels the request at once.
    auto first = std::make_shared<bool>(true);
    auto finished = std::make_shared<bool>(false);
    Server* sp = &S;
    const bool include_usage = P.req.include_usage;
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [sp, ch, first, finished, out, info, id, n_prompt, include_usage, logprobs, path, start](size_t,
                                                                                                 httplib::DataSink& sink) {
            auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
            if (*first && info.chat) {
                *first = false;
                if (!write(serve::sse_event(serve::completion_chunk(info, "", std::nullopt, /*first=*/true))))
                    return false;
            }
            std::vector<int32_t> got;
            std::vector<TokenLogprob> lps;
            bool done = ch->take(got, std::chrono::milliseconds(200), &lps);
            std::string text = out->push(got, lps);
            const bool stopped = out->stop.stopped();
            if (stopped && !done) end_at_stop(*sp, *ch, id);
            done = done || stopped;
            if (done && !stopped && ch->reason != FinishReason::Cancelled) text += out->finish();
            if (!text.empty() && !write(serve::sse_event(serve::completion_chunk(info, text, std::nullopt, false,
                                                                                  out->take_logprobs(info.chat, logprobs)))))
                return false;
            if (!done) return sink.is_writable() && !sp->engine_failed;
            *finished = true;
            sp->release(id);
            const int generated = stopped ? out->tokens : ch->n_generated;
            if (!stopped && ch->reason == FinishReason::Cancelled) {
                write(serve::sse_event(serve::error_json("the request was cancelled: the server is shutting down",
                                                         "server_error", 503)));
            } else {
                // The finish chunk carries the logprobs of tokens whose text never came out (a held tail).
                json rest = nullptr;
                if (logprobs && !out->logprobs.empty()) rest = out->take_logprobs(info.chat, logprobs);
                write(serve::sse_event(
                    serve::completion_chunk(info, "", stopped ? FinishReason::Stop : ch->reason, false, rest)));
                if (include_usage) write(serve::sse_event(serve::usage_chunk(info, n_prompt, generated)));
            }
            write(std::string(serve::kSseDone));
            sink.done();
            log_request("POST", path + " (stream)", 200, n_prompt, generated, start);
            return true;
        },
        cancel_if_unfinished(sp, ch, finished, id, path + " (stream, client left)", n_prompt, start));
}

void handle_metrics(Server& S, httplib::Response& res) {
    serve::MetricsInput m;
    m.stats = S.sched->stats();
    m.max_batch = S.opt.max_batch;
    m.http_requests = S.http_requests.load();
    m.http_errors = S.http_errors.load();
    const serve::ConnectionGuard::Stats g = S.guard->stats();
    m.connections_reading = g.reading;
    m.connections_cut_deadline = g.cut_deadline;
    m.connections_cut_cap = g.cut_cap;
    m.bandwidth_gbs = S.bandwidth_gbs;
    m.no_bound_reason = S.no_bound_reason;
    res.status = 200;
    res.set_content(serve::metrics_text(m), "text/plain; version=0.0.4; charset=utf-8");
}

// The ceilings for ridge_decode_percent_of_bound: saved ones, or measured now as `ridge bench`
// does (unless --no-probe). On failure the metric is left out, with the reason in /metrics.
void find_ceilings(Server& S, int threads) {
    if (S.engine->on_gpu()) {  // the GPU's ceilings: saved, or measured now unless --no-probe
        try {
            std::optional<Ceilings> c = load_ceilings(gpu_ceilings_path());
            if ((!c || c->device != "cuda") && S.opt.probe) c = gpu_ceilings_for();
            if (c && c->device == "cuda") {
                S.bandwidth_gbs = c->bandwidth_gbs;
                return;
            }
            S.no_bound_reason = "no GPU ceilings saved in " + gpu_ceilings_path() + " (run `ridge probe --device cuda`)";
        } catch (const Error& e) {
            S.no_bound_reason = std::string("ceilings unavailable: ") + e.what();
        }
        return;
    }
    const std::string path = default_ceilings_path(threads);
    try {
        std::optional<Ceilings> c = load_ceilings(path);
        if ((!c || c->threads != threads) && S.opt.probe) {
            std::fprintf(stderr, "ridge: no ceilings saved for %d threads (%s): measuring them now, as `ridge probe` does\n",
                         threads, path.c_str());
            c = ceilings_for(threads);
        }
        if (c && c->threads == threads && c->bandwidth_gbs > 0) {
            S.bandwidth_gbs = c->bandwidth_gbs;
            return;
        }
        S.no_bound_reason = "no ceilings saved for " + std::to_string(threads) + " threads in " + path +
                            " (run `ridge probe -t " + std::to_string(threads) + "`)";
    } catch (const Error& e) {
        S.no_bound_reason = std::string("ceilings unavailable: ") + e.what();
    }
}

std::string model_name_of(const ServeOptions& o) {
    if (!o.alias.empty()) return o.alias;
    if (!o.model.synthetic.empty()) return "synthetic-" + o.model.synthetic + "-" + o.model.synthetic_type;
    std::filesystem::path p(o.model.path);
    return p.extension() == ".gguf" ? p.stem().string() : p.filename().string();
}

void check_options(ServeOptions& o) {
    if (o.threads_set && o.threads <= 0) throw Error("-t/--threads " + std::to_string(o.threads) + " must be >= 1");
    if (o.n_ctx_set && o.n_ctx <= 1) throw Error("-c/--ctx-size " + std::to_string(o.n_ctx) + " must be >= 2");
    if (o.kv_type != "f32" && o.kv_type != "f16") throw Error("--kv-type '" + o.kv_type + "' must be f32 or f16");
    if (o.max_batch < 1) throw Error("--max-batch " + std::to_string(o.max_batch) + " must be >= 1");
    if (o.kv_tokens < 0) throw Error("--kv-tokens " + std::to_string(o.kv_tokens) + " must be >= 0");
    if (o.port < 0 || o.port > 65535) throw Error("--port " + std::to_string(o.port) + " must be in 0..65535");
    if (o.http_threads < 1) throw Error("--http-threads " + std::to_string(o.http_threads) + " must be >= 1");
    if (o.n_predict < -1 || o.n_predict == 0)
        throw Error("-n/--n-predict " + std::to_string(o.n_predict) + " must be >= 1 (or -1: until the context is full)");
    validate(o.sp);
}

void run_serve(ServeOptions& o) {
    check_options(o);
    // Signals: SIGINT/SIGTERM are taken by one thread with sigtimedwait, so every thread started
    // from here on (OpenMP's, httplib's, the engine's) inherits them blocked. A client that hangs
    // up must not kill the server with SIGPIPE.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    Server S;
    S.opt = o;
    S.file = o.model.open();
    S.model = Model::from_file(*S.file);
    S.engine = std::make_unique<Engine>(S.model, o.model.run_options());
    const Config& c = S.model.config;
    S.tok = o.model.open_tokenizer(*S.file);
    S.n_ctx = ModelArgs::context_size(c, o.n_ctx_set, o.n_ctx, 2048);
    if (o.kv_tokens > 0 && o.kv_tokens < S.n_ctx)
        throw Error("--kv-tokens " + std::to_string(o.kv_tokens) + " is less than the context of " +
                    std::to_string(S.n_ctx) + " (-c): one full sequence must fit");
    try {
        S.chat = serve::chat_setup(S.tok.get(), o.chat_template, o.chat_template_file, "");
    } catch (const Error& e) {
        if (!o.chat_template.empty() || !o.chat_template_file.empty()) throw;  // asked for: a start-up error
        S.no_chat = e.what();
        std::fprintf(stderr, "ridge: warning: /v1/chat/completions is off: %s\n", e.what());
    }
    S.longest_token = serve::longest_token_bytes(*S.tok);
    S.model_name = model_name_of(o);
    S.started = int64_t(std::time(nullptr));

    SchedulerOptions so;
    so.n_ctx = S.n_ctx;
    so.kv_tokens = o.kv_tokens;
    so.kv_type = o.kv_type == "f16" ? DType::F16 : DType::F32;
    so.max_batch = o.max_batch;
    so.prefix_cache = o.prefix_cache;
    S.sched = std::make_unique<Scheduler>(*S.engine, S.tok.get(), so);

    httplib::Server http;
    // Every connection a worker; at most three quarters of them reading a request, each for at most
    // --read-deadline seconds (serve_guard.h). One request a connection, so that a connection's
    // deadline is its request's (a kept-alive connection could send its second request slowly).
    int port = o.port;  // the bound port, read by the task queue when connections arrive
    const int pool = o.http_threads;
    S.guard = std::make_unique<serve::ConnectionGuard>(o.read_deadline, std::max(1, pool - pool / 4));
    http.new_task_queue = [&S, pool, &port] { return S.guard->task_queue(size_t(pool), &port); };
    http.set_keep_alive_max_count(1);
    http.set_payload_max_length(size_t(16) << 20);  // max_body below
    http.set_read_timeout(30);
    // httplib's default also sets SO_REUSEPORT, which would let a second server share the port
    // silently; SO_REUSEADDR alone still allows a quick restart. The socket is kept to raise the
    // listen backlog after binding.
    socket_t listen_sock = INVALID_SOCKET;
    http.set_socket_options([&listen_sock](socket_t sock) {
        int yes = 1;
        setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        listen_sock = sock;
    });
    http.set_write_timeout(30);

    // Before any route reads a body: the API key, and a Content-Length that no body could match
    // (httplib would wait for bytes that never come).
    const size_t max_body = size_t(16) << 20;
    http.set_pre_routing_handler([&S, &o, max_body](const httplib::Request& req, httplib::Response& res) {
        // The headers are in; with no body to come, so is the request.
        const bool body_follows = req.has_header("Transfer-Encoding") ||
                                  (req.has_header("Content-Length") && req.get_header_value("Content-Length") != "0");
        if (!body_follows) S.guard->request_read(serve::ConnectionGuard::current());
        if (!o.cors_origin.empty()) {  // on every answer; a preflight is answered here, before the key
            res.set_header("Access-Control-Allow-Origin", o.cors_origin);
            res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
            res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            if (req.method == "OPTIONS") {
                res.status = 204;
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        if (!o.api_key.empty() && req.path != "/health" &&
            !serve::bearer_matches(req.get_header_value("Authorization"), o.api_key)) {
            send_json(res, 401, serve::error_json("invalid or missing API key: send the header 'Authorization: Bearer KEY'",
                                                  "authentication_error", 401));
            return httplib::Server::HandlerResponse::Handled;
        }
        if (req.has_header("Content-Length")) {
            const std::string problem = serve::content_length_problem(req.get_header_value("Content-Length"), max_body);
            if (!problem.empty()) {
                    res.set_header("Connection", "close");
                send_json(res, 400, serve::error_json(problem, "invalid_request_error", 400));
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });

    auto guarded = [&S](auto&& body) {
        return [&S, body](const httplib::Request& req, httplib::Response& res) {
            S.guard->request_read(serve::ConnectionGuard::current());  // the body is in too
            try {
                body(req, res);
            } catch (const ApiError& e) {
                send_error(res, e);
            }
        };
    };
    http.Post("/v1/completions", guarded([&S](const httplib::Request& req, httplib::Response& res) {
                  handle_completion(S, req, res, /*chat=*/false);
              }));
    http.Post("/v1/chat/completions", guarded([&S](const httplib::Request& req, httplib::Response& res) {
                  handle_completion(S, req, res, /*chat=*/true);
              }));
    http.Post("/tokenize", guarded([&S](const httplib::Request& req, httplib::Response& res) {
                  std::unique_lock<std::mutex> large(S.large_body_mu, std::defer_lock);
                  if (req.body.size() > Server::kLargeBody) large.lock();
                  const serve::TokenizeRequest t = serve::parse_tokenize_request(req.body);
                  std::vector<int32_t> ids;
                  try {
                      ids = S.tok->encode(t.content, t.add_special && S.tok->add_bos_default(), t.parse_special);
                  } catch (const Error& e) {
                      throw ApiError(400, "invalid_request_error", std::string("content: ") + e.what());
                  }
                  send_json(res, 200, {{"tokens", ids}});
              }));
    http.Post("/detokenize", guarded([&S](const httplib::Request& req, httplib::Response& res) {
                  const std::vector<int32_t> ids = serve::parse_detokenize_request(req.body, S.tok->n_vocab());
                  StreamDecoder d(*S.tok);
                  std::string text;
                  for (int32_t id : ids) text += d.push(id);
                  send_json(res, 200, {{"content", text + d.flush()}});
              }));
    http.Get("/v1/models", [&S](const httplib::Request&, httplib::Response& res) {
        send_json(res, 200, serve::models_json(S.model_name, S.started, S.n_ctx));
    });
    http.Get("/health", [&S](const httplib::Request&, httplib::Response& res) {
        if (S.engine_failed) {
            send_json(res, 500, {{"status", "error"}});
            return;
        }
        const SchedulerStats st = S.sched->stats();
        send_json(res, 200, {{"status", "ok"}, {"requests_running", st.running}, {"requests_waiting", st.waiting}});
    });
    http.Get("/metrics", [&S](const httplib::Request&, httplib::Response& res) { handle_metrics(S, res); });
    // One line per request (a completion that was answered logs itself, with its tokens and time).
    http.set_logger([](const httplib::Request& req, const httplib::Response& res) {
        const bool completion = req.path == "/v1/completions" || req.path == "/v1/chat/completions";
        if (completion && res.status == 200) return;
        std::fprintf(stderr, "ridge: %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
    });
    // Every error status gets a JSON body: unknown routes (404), methods, httplib's own refusals.
    http.set_error_handler(httplib::Server::HandlerWithResponse([&S](const httplib::Request& req, httplib::Response& res) {
        S.http_errors++;
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string type = "invalid_request_error", message = "HTTP error " + std::to_string(res.status);
        if (res.status == 404) {
            type = "not_found_error";
            message = "no route for " + req.method + " " + req.path;
        } else if (res.status == 413) {
            message = "the request body is too large";
        } else if (res.status == 400) {
            message = "malformed HTTP request";
        } else if (res.status >= 500) {
            type = "server_error";
        }
        send_json(res, res.status, serve::error_json(message, type, res.status));
        return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal error";
        try {
            std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = std::string("internal error: ") + e.what();
        } catch (...) {
        }
        send_json(res, 500, serve::error_json(what, "server_error", 500));
    });

    if (port == 0) {
        port = http.bind_to_any_port(o.host);
        if (port < 0) throw Error("cannot listen on " + o.host + " (any port)");
    } else if (!http.bind_to_port(o.host, port)) {
        throw Error("cannot listen on " + o.host + ":" + std::to_string(port) + " (in use, or not an address here)");
    }
    // httplib listens with a backlog of 5: a burst of clients connecting at once would overflow
    // it and see their connections stall for seconds (then be dropped by the keep-alive timeout).
    // listen() again on the bound socket only raises the backlog.
    if (listen_sock != INVALID_SOCKET) ::listen(listen_sock, SOMAXCONN);
    if (o.threads_set) omp_set_num_threads(o.threads);
    const int threads = omp_get_max_threads();
    find_ceilings(S, threads);  // after binding, so that a taken port is reported at once

    // The engine thread: the only caller of step(). OpenMP's thread count is per thread, so it
    // is set again here.
    std::atomic<bool> quit{false};
    std::thread engine([&S, &o, &quit, &http] {
        if (o.threads_set) omp_set_num_threads(o.threads);
        try {
            while (!S.sched->stopped()) {
                if (S.sched->wait_for_work(std::chrono::milliseconds(200))) S.sched->step();
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "ridge: engine stopped: %s\n", e.what());
            S.engine_failed = true;
            quit = true;
            http.stop();
        }
    });
    // The signal thread: on SIGINT/SIGTERM, cancel what is open and stop listening.
    std::thread signals([&S, &quit, &http, &stop_signals] {
        const timespec tick{0, 200 * 1000 * 1000};
        while (!quit) {
            const int sig = sigtimedwait(&stop_signals, nullptr, &tick);
            if (sig == SIGINT || sig == SIGTERM) {
                // No new requests; the open ones get the grace period to finish (a second signal
                // ends it), then whatever is left is cancelled: a stream gets an error event and
                // [DONE], never a cut mid-event.
                std::fprintf(stderr, "ridge: %s: shutting down (open requests get %.0f s to finish)\n",
                             sig == SIGINT ? "SIGINT" : "SIGTERM", S.opt.shutdown_grace);
                S.stop_admitting();
                const auto until = std::chrono::steady_clock::now() +
                                   std::chrono::duration<double>(std::max(0.0, S.opt.shutdown_grace));
                while (!S.idle() && std::chrono::steady_clock::now() < until) {
                    const int again = sigtimedwait(&stop_signals, nullptr, &tick);
                    if (again == SIGINT || again == SIGTERM) break;
                }
                S.begin_shutdown();
                // The cancelled requests write their last event (a stream's error and [DONE], a 503)
                // before the server stops: a stopping cpp-httplib ends a chunked response where it
                // stands, without its last chunk. Each is done once released, within a step or two.
                const auto drained = std::chrono::steady_clock::now() + std::chrono::seconds(5);
                while (!S.idle() && std::chrono::steady_clock::now() < drained) sigtimedwait(&stop_signals, nullptr, &tick);
                http.stop();
                return;
            }
        }
    });

    std::fprintf(stderr,
                 "ridge: %s: %s, %.1fM params; context %d tokens, batch %d, KV pool %d tokens %s; %d threads\n",
                 S.file->path().c_str(), c.arch.c_str(), double(S.model.n_params()) / 1e6, S.n_ctx, o.max_batch,
                 o.kv_tokens > 0 ? o.kv_tokens : S.n_ctx * o.max_batch, o.kv_type.c_str(), threads);
    S.guard->start_watchdog();
    std::fprintf(stderr, "ridge: listening on http://%s:%d\n", o.host.c_str(), port);
    if (o.api_key.empty() && !serve::is_loopback_host(o.host))
        std::fprintf(stderr, "ridge: warning: listening beyond this machine (%s) with no API key: anyone who can reach "
                             "the port can use the model; set --api-key or RIDGE_API_KEY\n", o.host.c_str());
    std::fflush(stderr);
    http.listen_after_bind();  // returns after http.stop(), once the handlers have finished

    S.begin_shutdown();        // in case listening ended some other way
    quit = true;
    signals.join();
    S.sched->stop();
    engine.join();
    const SchedulerStats st = S.sched->stats();
    std::fprintf(stderr, "ridge: served %lld requests, %lld prompt tokens, %lld generated tokens\n",
                 (long long)st.requests_finished, (long long)st.tokens_prefilled, (long long)st.tokens_generated);
    if (S.engine_failed) throw Error("the engine thread failed (see above)");
}

}  // namespace

void register_serve(CLI::App& app) {
    auto o = std::make_shared<ServeOptions>();
    CLI::App* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server with continuous batching");
    o->model.add_options(cmd);
    o->model.add_exact_option(cmd);
    cmd->add_option("--host", o->host, "address to listen on")->capture_default_str();
    cmd->add_option("--port", o->port, "port to listen on (0: any free port; the one chosen is printed)")
        ->capture_default_str();
    cmd->add_option("--max-batch", o->max_batch, "most sequences running at once")->capture_default_str();
    cmd->add_option("-c,--ctx-size", o->n_ctx, "most tokens per sequence (default: the model's, at most 2048)")
        ->each([o](const std::string&) { o->n_ctx_set = true; });
    cmd->add_option("--kv-tokens", o->kv_tokens, "KV cache pool shared by all sequences, in tokens (0: ctx * max-batch)")
        ->capture_default_str();
    cmd->add_option("--kv-type", o->kv_type, "KV cache element type: f32 or f16")->capture_default_str();
    cmd->add_flag("!--no-prefix-cache", o->prefix_cache,
                  "do not keep the KV of whole prompt chunks for later requests with the same start");
    cmd->add_option("-t,--threads", o->threads, "CPU threads (default: all)")->each([o](const std::string&) {
        o->threads_set = true;
    });
    cmd->add_option("--http-threads", o->http_threads, "HTTP worker threads (each open request holds one)")
        ->capture_default_str();
    cmd->add_option("-n,--n-predict", o->n_predict,
                    "max_tokens for requests that give none (-1: until the end of the reply or the context)")
        ->capture_default_str();
    cmd->add_option("--alias", o->alias, "the model's name in the API (default: the file name)");
    cmd->add_option("--api-key", o->api_key,
                    "require 'Authorization: Bearer KEY' on every route but /health (also from RIDGE_API_KEY)")
        ->envname("RIDGE_API_KEY");
    cmd->add_option("--shutdown-grace", o->shutdown_grace,
                    "seconds open requests get to finish after SIGINT/SIGTERM (a second signal ends it)")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 3600.0));
    cmd->add_option("--chat-template", o->chat_template, "render chats as this family (default: the model's template)");
    cmd->add_option("--chat-template-file", o->chat_template_file, "the chat template (Jinja) to recognise, instead of the model's")
        ->excludes("--chat-template");
    cmd->add_option("--read-deadline", o->read_deadline,
                    "seconds a connection has to send its whole request (headers and body) before a 408")
        ->capture_default_str()
        ->check(CLI::Range(0.1, 3600.0));
    cmd->add_option("--cors-origin", o->cors_origin,
                    "let browser pages from this origin call the API (\"*\": any); answers preflight requests");
    cmd->add_flag("!--no-probe", o->probe, "do not measure the ceilings when none are saved (no % of bound then)");
    cmd->add_option("--temp", o->sp.temperature, "default temperature; 0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", o->sp.top_k, "default top-k; 0 = off")->capture_default_str();
    cmd->add_option("--top-p", o->sp.top_p, "default top-p in (0, 1]; 1 = off")->capture_default_str();
    cmd->add_option("--min-p", o->sp.min_p, "default min-p; 0 = off")->capture_default_str();
    cmd->add_option("--repeat-penalty", o->sp.repeat_penalty, "default repeat penalty; 1 = off")->capture_default_str();
    cmd->add_option("--presence-penalty", o->sp.presence_penalty, "default presence penalty; 0 = off")
        ->capture_default_str();
    cmd->add_option("--frequency-penalty", o->sp.frequency_penalty, "default frequency penalty; 0 = off")
        ->capture_default_str();
    cmd->add_option("--repeat-last-n", o->sp.repeat_last_n, "how many recent tokens the penalty sees")
        ->capture_default_str();
    cmd->callback([o]() { run_serve(*o); });
}

}  // namespace ridge::cli
