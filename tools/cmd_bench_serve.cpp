// `ridge bench-serve`: a load generator for a running `ridge serve`. At each concurrency level C,
// C client threads send streaming /v1/completions requests back to back; it reports requests/s,
// output tokens/s, time to first token and time per output token (median and p99).
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

Sample one_request(const BenchServeOptions& o, int index) {
    Sample s;
    httplib::Client cli(o.host, o.port);
    cli.set_read_timeout(600);
    json body = {{"prompt", o.prompt},
                 {"max_tokens", o.max_tokens},
                 {"temperature", o.temperature},
                 {"seed", index},
                 {"stream", true},
                 {"stream_options", {{"include_usage", true}}}};
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
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
            if (j.contains("usage") && j["usage"].is_object()) s.tokens = j["usage"].value("completion_tokens", 0);
            if (first && j.contains("choices") && !j["choices"].empty() &&
                !j["choices"][0].value("text", std::string()).empty()) {
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

// The q-quantile by nearest rank (q in [0, 1]) of the samples; 0 when there are none.
double quantile(std::vector<double> v, double q) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t rank = size_t(std::ceil(q * double(v.size())));
    return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

void run_bench_serve(const BenchServeOptions& o) {
    if (o.concurrency.empty()) throw Error("-C/--concurrency: give at least one level");
    for (int c : o.concurrency)
        if (c < 1) throw Error("-C/--concurrency " + std::to_string(c) + " must be >= 1");
    if (o.max_tokens < 1) throw Error("-n/--max-tokens " + std::to_string(o.max_tokens) + " must be >= 1");
    if (o.requests < 0) throw Error("-r/--requests " + std::to_string(o.requests) + " must be >= 0");
    {
        httplib::Client cli(o.host, o.port);
        const httplib::Result h = cli.Get("/health");
        if (!h || h->status != 200)
            throw Error("no healthy ridge server at http://" + o.host + ":" + std::to_string(o.port) +
                        " (start one with `ridge serve`)");
    }
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
    cmd->add_flag("--json", o->json_out, "print the results as JSON");
    cmd->callback([o]() { run_bench_serve(*o); });
}

}  // namespace ridge::cli
