// `ridge bench-serve`: a load generator for a running `ridge serve`. At each concurrency level C,
// C client threads send streaming /v1/completions requests back to back; it reports requests/s,
// output tokens/s, time to first token and time per output token (median and p99).
// --multi-turn N instead holds one chat of N turns, each request the whole conversation so far,
// and reports each turn's prompt tokens, the prompt tokens the server took from its prefix cache
// (from /metrics) and the time to first token.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "tools/commands.h"
#include "tools/serve_api.h"
#include "weights/error.h"

namespace ridge::cli {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchServeOptions {
    std::string host = "127.0.0.1";
    int port = 8080;
    std::vector<int> concurrency = {1, 4, 16};
    int requests = 0;      // per level; 0 = max(8, 4 * C)
    int max_tokens = 32;
    std::string prompt = "The three most useful things to know about the moon are";
    float temperature = 0.0f;
    bool json_out = false;
    int multi_turn = 0;    // > 0: one chat of this many turns instead of the levels
};

// One streamed request as the client saw it.
struct Sample {
    bool ok = false;
    std::string error;
    double ttft = 0;       // seconds from sending to the first chunk with text
    double total = 0;      // seconds from sending to [DONE]
    int tokens = 0;        // completion_tokens from the usage chunk
    double tpot() const { return tokens > 1 ? (total - ttft) / (tokens - 1) : 0; }
};

// One streamed request (a completion, or a chat when body has "messages"); `text` gets the
// generated text and `prompt_tokens` the usage's.
Sample send_streamed(const BenchServeOptions& o, json body, std::string* text = nullptr, int* prompt_tokens = nullptr) {
    Sample s;
    httplib::Client cli(o.host, o.port);
    cli.set_read_timeout(600);
    const bool chat = body.contains("messages");
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    httplib::Request req;
    req.method = "POST";
    req.path = chat ? "/v1/chat/completions" : "/v1/completions";
    req.set_header("Content-Type", "application/json");
    req.body = serve::dump(body);
    serve::SseParser parser;
    bool first = true, done = false;
    std::string error;
    const Clock::time_point t0 = Clock::now();
    req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        for (const std::string& ev : parser.feed(std::string_view(data, len))) {
            if (ev == "[DONE]") {
                done = true;
                continue;
            }
            const json j = json::parse(ev, nullptr, false);
            if (j.is_discarded() || !j.is_object()) continue;
            if (j.contains("error")) error = j["error"].value("message", "error");
            if (j.contains("usage") && j["usage"].is_object()) {
                s.tokens = j["usage"].value("completion_tokens", 0);
                if (prompt_tokens) *prompt_tokens = j["usage"].value("prompt_tokens", 0);
            }
            if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
            const json& c = j["choices"][0];
            std::string piece;
            if (chat && c.contains("delta") && c["delta"].is_object()) piece = c["delta"].value("content", std::string());
            if (!chat) piece = c.value("text", std::string());
            if (text) *text += piece;
            if (first && !piece.empty()) {
                s.ttft = std::chrono::duration<double>(Clock::now() - t0).count();
                first = false;
            }
        }
        return true;
    };
    const httplib::Result res = cli.send(req);
    s.total = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!res) {
        s.error = "no response: " + httplib::to_string(res.error());
    } else if (res->status != 200) {
        s.error = "HTTP " + std::to_string(res->status) + " " + res->body;
    } else if (!error.empty()) {
        s.error = error;
    } else if (!done) {
        s.error = "the stream ended without [DONE]";
    } else {
        s.ok = true;
        if (first) s.ttft = s.total;  // no text at all
    }
    return s;
}

Sample one_request(const BenchServeOptions& o, int index) {
    return send_streamed(o, {{"prompt", o.prompt}, {"max_tokens", o.max_tokens}, {"temperature", o.temperature}, {"seed", index}});
}

// The q-quantile by nearest rank (q in [0, 1]) of the samples; 0 when there are none.
double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t rank = size_t(std::ceil(q * double(v.size())));
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// A counter from the server's /metrics text; -1 when absent (an old server, or a key required).
double metric_value(const BenchServeOptions& o, const std::string& name) {
    httplib::Client cli(o.host, o.port);
    const httplib::Result r = cli.Get("/metrics");
    if (!r || r->status != 200) return -1;
    std::istringstream in(r->body);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(name + " ", 0) == 0) return std::atof(line.c_str() + name.size() + 1);
    return -1;
}

// One chat of o.multi_turn turns: the user says o.prompt (with the turn's number), the answer joins
// the conversation, and every turn sends the whole of it.
void run_multi_turn(const BenchServeOptions& o) {
    json messages = json::array({{{"role", "system"}, {"content", "You are a helpful assistant. Answer briefly."}}});
    json turns = json::array();
    if (!o.json_out)
        std::printf("%5s %14s %14s %10s %10s\n", "turn", "prompt_tokens", "reused_tokens", "ttft", "tokens");
    std::vector<double> ttft;
    for (int t = 1; t <= o.multi_turn; t++) {
        messages.push_back({{"role", "user"}, {"content", o.prompt + " (question " + std::to_string(t) + ")"}});
        const double reused_before = metric_value(o, "ridge_prompt_tokens_reused_total");
        std::string text;
        int prompt_tokens = 0;
        const Sample s = send_streamed(o, {{"messages", messages}, {"max_tokens", o.max_tokens}, {"temperature", o.temperature}},
                                       &text, &prompt_tokens);
        if (!s.ok) throw Error("turn " + std::to_string(t) + " failed: " + s.error);
        const double reused_after = metric_value(o, "ridge_prompt_tokens_reused_total");
        const double reused = reused_before >= 0 && reused_after >= 0 ? reused_after - reused_before : -1;
        messages.push_back({{"role", "assistant"}, {"content", text}});
        ttft.push_back(s.ttft);
        if (o.json_out) {
            turns.push_back({{"turn", t}, {"prompt_tokens", prompt_tokens}, {"reused_tokens", reused},
                             {"ttft_ms", 1e3 * s.ttft}, {"completion_tokens", s.tokens}});
        } else {
            std::printf("%5d %14d %14.0f %8.1fms %10d\n", t, prompt_tokens, reused, 1e3 * s.ttft, s.tokens);
            std::fflush(stdout);
        }
    }
    if (o.json_out)
        std::printf("%s\n", json({{"max_tokens", o.max_tokens}, {"turns", turns}, {"ttft_ms_median", 1e3 * quantile(ttft, 0.5)}})
                                .dump(2)
                                .c_str());
    else
        std::printf("median time to first token %.1f ms\n", 1e3 * quantile(ttft, 0.5));
}

void run_bench_serve(const BenchServeOptions& o) {
    if (o.concurrency.empty()) throw Error("-C/--concurrency: give at least one level");
    for (int c : o.concurrency)
        if (c < 1) throw Error("-C/--concurrency " + std::to_string(c) + " must be >= 1");
    if (o.max_tokens < 1) throw Error("-n/--max-tokens " + std::to_string(o.max_tokens) + " must be >= 1");
    if (o.multi_turn < 0 || o.multi_turn > 1000)
        throw Error("--multi-turn " + std::to_string(o.multi_turn) + " must be 1 to 1000 turns (0, the default, runs the concurrency levels)");
    if (o.requests < 0) throw Error("-r/--requests " + std::to_string(o.requests) + " must be >= 0");
    {
        httplib::Client cli(o.host, o.port);
        const httplib::Result h = cli.Get("/health");
        if (!h || h->status != 200)
            throw Error("no healthy ridge server at http://" + o.host + ":" + std::to_string(o.port) +
                        " (start one with `ridge serve`)");
    }
    if (o.multi_turn > 0) return run_multi_turn(o);
    json levels = json::array();
    if (!o.json_out)
        std::printf("%5s %8s %8s %9s %10s %10s %10s %10s %7s\n", "conc", "requests", "req/s", "tok/s", "ttft_med",
                    "ttft_p99", "tpot_med", "tpot_p99", "failed");
    for (int c : o.concurrency) {
        const int n = o.requests > 0 ? o.requests : std::max(8, 4 * c);
        std::vector<Sample> samples(size_t(n), Sample{});
        std::atomic<int> next{0};
        const Clock::time_point t0 = Clock::now();
        std::vector<std::thread> threads;
        for (int t = 0; t < c; ++t)
            threads.emplace_back([&] {
                for (int i; (i = next++) < n;) samples[size_t(i)] = one_request(o, i);
            });
        for (std::thread& t : threads) t.join();
        const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
        std::vector<double> ttft, tpot;
        int failed = 0, tokens = 0;
        std::string first_error;
        for (const Sample& s : samples) {
            if (!s.ok) {
                if (failed++ == 0) first_error = s.error;
                continue;
            }
            ttft.push_back(s.ttft);
            if (s.tokens > 1) tpot.push_back(s.tpot());
            tokens += s.tokens;
        }
        const double rps = (n - failed) / wall, tps = tokens / wall;
        if (o.json_out) {
            levels.push_back({{"concurrency", c},
                              {"requests", n},
                              {"failed", failed},
                              {"seconds", wall},
                              {"requests_per_second", rps},
                              {"output_tokens_per_second", tps},
                              {"ttft_ms", {{"median", 1e3 * quantile(ttft, 0.5)}, {"p99", 1e3 * quantile(ttft, 0.99)}}},
                              {"tpot_ms", {{"median", 1e3 * quantile(tpot, 0.5)}, {"p99", 1e3 * quantile(tpot, 0.99)}}}});
        } else {
            std::printf("%5d %8d %8.2f %9.1f %8.1fms %8.1fms %8.1fms %8.1fms %7d\n", c, n, rps, tps,
                        1e3 * quantile(ttft, 0.5), 1e3 * quantile(ttft, 0.99), 1e3 * quantile(tpot, 0.5),
                        1e3 * quantile(tpot, 0.99), failed);
            std::fflush(stdout);
        }
        if (failed > 0) std::fprintf(stderr, "ridge: %d of %d requests failed; the first: %s\n", failed, n, first_error.c_str());
    }
    if (o.json_out)
        std::printf("%s\n", json({{"max_tokens", o.max_tokens}, {"prompt", o.prompt}, {"levels", levels}}).dump(2).c_str());
}

}  // namespace

void register_bench_serve(CLI::App& app) {
    auto o = std::make_shared<BenchServeOptions>();
    CLI::App* cmd = app.add_subcommand(
        "bench-serve", "load-test a running `ridge serve`: requests/s, time to first token, time per output token");
    cmd->add_option("--host", o->host, "server address")->capture_default_str();
    cmd->add_option("--port", o->port, "server port")->capture_default_str();
    cmd->add_option("-C,--concurrency", o->concurrency, "concurrency levels (clients sending back to back)")
        ->delimiter(',')
        ->capture_default_str();
    cmd->add_option("-r,--requests", o->requests, "requests per level (0: max(8, 4 x concurrency))")
        ->capture_default_str();
    cmd->add_option("-n,--max-tokens", o->max_tokens, "max_tokens of each request")->capture_default_str();
    cmd->add_option("-p,--prompt", o->prompt, "the prompt of every request");
    cmd->add_option("--temp", o->temperature, "temperature of every request")->capture_default_str();
    cmd->add_option("--multi-turn", o->multi_turn,
                    "instead of the levels: one chat of this many turns, each sending the whole conversation "
                    "(time to first token per turn, and the prompt tokens the prefix cache gave)");
    cmd->add_flag("--json", o->json_out, "print the results as JSON");
    cmd->callback([o]() { run_bench_serve(*o); });
}

}  // namespace ridge::cli
