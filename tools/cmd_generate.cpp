// `ridge generate` and `ridge chat`: load a model and its tokenizer, then either continue a prompt
// (stdout: exactly the prompt followed by the generated text, streamed) or hold a multi-turn
// ChatML conversation whose history stays in the KV cache. Load info and statistics go to stderr.
#include <omp.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "measure/bench.h"
#include "measure/ceilings.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "tokenizer/tokenizer.h"
#include "tools/commands.h"
#include "tools/line_editor.h"
#include "tools/model_args.h"
#include "tools/serve_api.h"
#include "weights/error.h"
#include "weights/mapped_file.h"
#include "weights/model_file.h"

namespace ridge::cli {

namespace {

// Options shared by generate and chat.
struct GenerateOptions {
    ModelArgs model;             // -m FILE [--tokenizer FILE] or --synthetic NAME
    int threads = 0;             // 0 = OpenMP's default
    bool threads_set = false;
    int n_ctx = 0;               // 0 = min(model context, 4096)
    bool n_ctx_set = false;
    int n_predict = -1;          // -1 = until end of generation or context
    std::string kv_type = "f32";
    std::string sampler = "ridge";
    std::string dump_dir;
    int max_rows = 256;
    SamplerParams sp;
    bool seed_set = false;
    std::vector<std::string> stop;  // --stop: the text ends just before the first of these
    bool warmup = true;             // --no-warmup: time the first pass cold
};

void add_common_options(CLI::App* cmd, GenerateOptions& o) {
    o.model.add_options(cmd);
    o.model.add_exact_option(cmd);
    cmd->add_flag("!--no-warmup", o.warmup, "no untimed warm-up pass before the timed ones (the first is then cold)");
    cmd->add_option("-t,--threads", o.threads, "CPU threads (default: all)")->each([&o](const std::string&) {
        o.threads_set = true;
    });
    cmd->add_option("-c,--ctx-size", o.n_ctx, "context size in tokens (default: the model's, at most 4096)")
        ->each([&o](const std::string&) { o.n_ctx_set = true; });
    cmd->add_option("--kv-type", o.kv_type, "KV cache element type: f32 or f16")->capture_default_str();
    cmd->add_option("--temp", o.sp.temperature, "temperature; 0 = greedy")->capture_default_str();
    cmd->add_option("--top-k", o.sp.top_k, "keep the k most likely tokens; 0 = off")->capture_default_str();
    cmd->add_option("--top-p", o.sp.top_p, "nucleus sampling mass in (0, 1]; 1 = off")->capture_default_str();
    cmd->add_option("--min-p", o.sp.min_p, "drop tokens below min-p times the top probability; 0 = off")
        ->capture_default_str();
    cmd->add_option("--repeat-penalty", o.sp.repeat_penalty, "penalty for recently seen tokens; 1 = off")
        ->capture_default_str();
    cmd->add_option("--presence-penalty", o.sp.presence_penalty, "subtracted from every recent token's logit; 0 = off")
        ->capture_default_str();
    cmd->add_option("--frequency-penalty", o.sp.frequency_penalty,
                    "subtracted from a recent token's logit per occurrence; 0 = off")
        ->capture_default_str();
    cmd->add_option("--repeat-last-n", o.sp.repeat_last_n, "how many recent tokens the penalties see")
        ->capture_default_str();
    cmd->add_option("--seed", o.sp.seed, "random seed (default: from the clock, printed on stderr)")
        ->each([&o](const std::string&) { o.seed_set = true; });
    cmd->add_option("--sampler", o.sampler,
                    "ridge (penalty, temperature, top-k, top-p, min-p) or llama2c (run.c's temperature + top-p)")
        ->capture_default_str();
    cmd->add_option("-b,--batch", o.max_rows, "most prompt tokens per forward pass")->capture_default_str();
    cmd->add_option("--stop", o.stop, "end the text just before this string (repeatable)")
        ->each([](const std::string& v) {
            if (v.empty()) throw CLI::ValidationError("--stop", "the stop string is empty");
        });
    cmd->add_option("--dump-dir", o.dump_dir, "debug: write named intermediates as raw f32 files here");
}

// Everything a run needs, loaded and checked.
struct Loaded {
    std::unique_ptr<ModelFile> file;
    Model model;
    std::unique_ptr<Engine> engine;  // the model with its plan (--exact, --device)
    std::unique_ptr<Tokenizer> tok;
    std::unique_ptr<Dumper> dump;
    std::unique_ptr<Session> session;
    int n_ctx = 0;
};

void check_options(GenerateOptions& o) {
    if (o.threads_set && o.threads <= 0) throw Error("-t/--threads " + std::to_string(o.threads) + " must be >= 1");
    if (o.n_ctx_set && o.n_ctx <= 0) throw Error("-c/--ctx-size " + std::to_string(o.n_ctx) + " must be >= 1");
    if (o.kv_type != "f32" && o.kv_type != "f16") throw Error("--kv-type '" + o.kv_type + "' must be f32 or f16");
    if (o.sampler == "ridge")
        o.sp.kind = SamplerKind::Ridge;
    else if (o.sampler == "llama2c")
        o.sp.kind = SamplerKind::Llama2c;
    else
        throw Error("--sampler '" + o.sampler + "' must be ridge or llama2c");
    if (o.max_rows <= 0) throw Error("-b/--batch " + std::to_string(o.max_rows) + " must be >= 1");
    if (o.n_predict < -1) throw Error("-n " + std::to_string(o.n_predict) + " must be >= 0 (or -1: no limit)");
    if (!o.seed_set) o.sp.seed = uint64_t(std::chrono::system_clock::now().time_since_epoch().count());
    validate(o.sp);
}

Loaded load(const GenerateOptions& o) {
    Loaded L;
    if (o.threads_set) omp_set_num_threads(o.threads);
    L.file = o.model.open();
    L.model = Model::from_file(*L.file);
    L.engine = std::make_unique<Engine>(L.model, o.model.run_options());
    const Config& c = L.model.config;
    L.tok = o.model.open_tokenizer(*L.file);
    L.n_ctx = ModelArgs::context_size(c, o.n_ctx_set, o.n_ctx, 4096);
    if (!o.dump_dir.empty()) L.dump = std::make_unique<Dumper>(o.dump_dir);
    SessionOptions so;
    so.n_ctx = L.n_ctx;
    so.kv_type = o.kv_type == "f16" ? DType::F16 : DType::F32;
    so.max_rows = o.max_rows;
    so.dump = L.dump.get();
    L.session = std::make_unique<Session>(*L.engine, so);

    return L;
}

// Load information on stderr, printed once the input has been checked (errors stay one line).
void print_load_info(const GenerateOptions& o, const Loaded& L) {
    const Config& c = L.model.config;
    std::fprintf(stderr, "ridge: %s: %s, %d layers, d %d, %d heads (%d kv), ff %d, vocab %d, %.1fM params, "
                         "%.1f MB of weights per token\n",
                 L.file->path().c_str(), c.arch.c_str(), c.n_layers, c.n_embd, c.n_heads, c.n_kv_heads, c.n_ff,
                 c.n_vocab, double(L.model.n_params()) / 1e6, L.model.weight_bytes_per_token() / 1e6);
    std::fprintf(stderr, "ridge: context %d tokens, KV cache %s %.1f MB; %d threads; sampler %s, temp %g, top-k %d, "
                         "top-p %g, min-p %g, repeat-penalty %g, seed %llu\n",
                 L.n_ctx, o.kv_type.c_str(), double(L.session->cache().bytes()) / 1e6, omp_get_max_threads(),
                 o.sampler.c_str(), o.sp.temperature, o.sp.top_k, o.sp.top_p, o.sp.min_p, o.sp.repeat_penalty,
                 (unsigned long long)o.sp.seed);
}

void emit(const std::string& text) {
    if (text.empty()) return;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
}

const char* stop_text(StopReason r) {
    switch (r) {
        case StopReason::Length: return "token limit";
        case StopReason::EndOfGeneration: return "end of generation";
        case StopReason::ContextFull: return "context full";
        case StopReason::Caller: return "stop string";
    }
    return "?";
}

// " | decode 1.06 MB/token, 18.20 GB/s, 90.4% of bound (18909.6 tokens/s at 20.0 GB/s)": the bytes a
// decode step streams from memory (weights + KV cache, from the session's counters), times the
// decode tokens/s, and that speed as a share of the roofline bound, min(peak, I * bandwidth) /
// FLOPs per token, from the ceilings `ridge probe` saved for this thread count. Only loads them:
// measuring takes seconds, so without a saved probe the line says how to get one. Empty when
// no token was decoded.
std::string decode_roofline(const Session& s) {
    const PhaseStats& d = s.decode_stats;
    const OpRecord total = d.counters.total();
    if (d.tokens == 0 || total.calls == 0) return "";
    const int threads = omp_get_max_threads();
    const bool gpu = s.engine().on_gpu();
    const std::string path = gpu ? gpu_ceilings_path() : default_ceilings_path(threads);
    std::optional<Ceilings> ceil;
    std::string missing = gpu ? " (run `ridge probe --device cuda` for % of bound)" : " (run `ridge probe` for % of bound)";
    try {
        ceil = load_ceilings(path);
    } catch (const Error& e) {  // a malformed file: say so on its own line, keep the statistics
        std::fprintf(stderr, "ridge: %s\n", e.what());
    }
    if (ceil && gpu != (ceil->device == "cuda")) ceil.reset();
    if (ceil && !gpu && ceil->threads != threads) {
        missing = " (the saved probe is for " + std::to_string(ceil->threads) + " threads: run `ridge probe -t " +
                  std::to_string(threads) + "` for % of bound)";
        ceil.reset();
    }
    const PhaseReport r = phase_report(total.cost, d.tokens, d.tokens_per_second(), ceil ? &*ceil : nullptr);
    char buf[256];
    std::snprintf(buf, sizeof buf, " | decode %.2f MB/token, %.2f GB/s", r.bytes_per_token / 1e6, r.achieved_gbs);
    std::string line = buf;
    if (!r.has_bound) return line + missing;
    std::snprintf(buf, sizeof buf, ", %.1f%% of bound (%.1f tokens/s at %.1f GB/s)", r.percent_of_bound,
                  r.bound_tokens_per_second, ceil->bandwidth_gbs);
    return line + buf;
}

// ---- generate -------------------------------------------------------------------------------

// -e: llama.cpp's escapes (\n \t \r \\ \" \'); any other backslash stays as it is.
std::string unescape(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); i++) {
        if (s[i] != '\\' || i + 1 == s.size()) {
            out += s[i];
            continue;
        }
        switch (s[++i]) {
            case 'n': out += '\n'; break;
            case 't': out += '\t'; break;
            case 'r': out += '\r'; break;
            case '\\': out += '\\'; break;
            case '"': out += '"'; break;
            case '\'': out += '\''; break;
            default: out += '\\', out += s[i];
        }
    }
    return out;
}

void run_generate(GenerateOptions& o, const std::string& prompt) {
    check_options(o);
    Loaded L = load(o);
    Session& s = *L.session;
    const Tokenizer& tok = *L.tok;

    std::vector<int32_t> ids = tok.encode(prompt, tok.add_bos_default(), /*parse_special=*/true);
    if (ids.empty()) {  // an empty prompt starts from BOS alone
        if (tok.bos_id() < 0) throw Error("the prompt is empty and the tokenizer has no BOS token to start from");
        ids.push_back(tok.bos_id());
    }
    const int n_prompt = int(ids.size());
    if (n_prompt > L.n_ctx)
        throw Error("the prompt is " + std::to_string(n_prompt) + " tokens, longer than the context of " +
                    std::to_string(L.n_ctx) + " (-c)");
    if (o.n_predict >= 0 && int64_t(n_prompt) + o.n_predict > L.n_ctx)
        throw Error("the prompt (" + std::to_string(n_prompt) + " tokens) plus -n " + std::to_string(o.n_predict) +
                    " passes the context of " + std::to_string(L.n_ctx) + " (-c)");

    print_load_info(o, L);
    emit(prompt);
    StreamDecoder decoder(tok);
    for (int32_t id : ids) decoder.push(id);  // so the first generated piece sees the right previous token

    Sampler sampler(o.sp);
    if (o.warmup && o.dump_dir.empty() && !ids.empty()) s.warm_up(ids[0]);  // dumps are the real pass's only
    const int seq = s.cache().new_sequence();
    GenerateResult res;
    if (o.n_predict != 0) {
        const float* logits = s.prefill(seq, ids);
        std::vector<int32_t> history = ids;
        serve::StopMatcher stop(o.stop);
        res = generate(s, seq, sampler, tok, logits, history, o.n_predict, [&](int32_t id) {
            emit(stop.push(decoder.push(id)));
            return !stop.stopped();
        });
        if (!stop.stopped()) emit(stop.push(decoder.flush()) + stop.flush());
    }
    // In a terminal stdout and stderr share the screen: the statistics start on a line of their own
    // (stdout itself stays exactly the prompt and the text).
    if (isatty(STDOUT_FILENO) && isatty(STDERR_FILENO)) {
        std::fflush(stdout);
        std::fputc('\n', stderr);
    }
    if (res.stop == StopReason::ContextFull)
        std::fprintf(stderr, "ridge: stopped at the end of the context (%d tokens)\n", L.n_ctx);
    std::fprintf(stderr,
                 "ridge: prompt %d tokens, %.1f tokens/s prefill | generated %d tokens, %.1f tokens/s decode (%s)%s\n",
                 n_prompt, s.prefill_stats.tokens_per_second(), res.n_generated, s.decode_stats.tokens_per_second(),
                 stop_text(res.stop), decode_roofline(s).c_str());
}

// ---- chat -------------------------------------------------------------------------------------

// Ctrl-C in a chat: set by the SIGINT handler, read and cleared by the chat loop.
std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted = true; }

struct ChatOptions {
    std::optional<std::string> system;
    std::string chat_template, chat_template_file, date;
};

void run_chat(GenerateOptions& o, const ChatOptions& co) {
    check_options(o);
    Loaded L = load(o);
    Session& s = *L.session;
    const Tokenizer& tok = *L.tok;
    const serve::ChatSetup chat = serve::chat_setup(&tok, co.chat_template, co.chat_template_file, co.date);
    print_load_info(o, L);
    std::fprintf(stderr, "ridge: chat template %s\n", chat.tmpl.name().c_str());

    Sampler sampler(o.sp);
    const int seq = s.cache().new_sequence();
    std::vector<ChatTurn> turns;
    if (co.system) turns.push_back({"system", *co.system});
    std::vector<int32_t> history;  // the tokens in the cache, then the reply's
    const bool interactive = isatty(STDIN_FILENO);
    // Ctrl-C stops a reply and keeps the conversation; at the prompt it ends the chat, as Ctrl-D and
    // "/exit" do; "/clear" starts the conversation again.
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns EINTR
    struct sigaction old_sa {};
    sigaction(SIGINT, &sa, &old_sa);
    struct Restore {
        struct sigaction sa;
        ~Restore() { sigaction(SIGINT, &sa, nullptr); }
    } restore{old_sa};
    g_interrupted = false;
    std::string line;
    LineEditor editor(STDIN_FILENO, STDERR_FILENO, g_interrupted);  // line editing and history on a terminal
    while (true) {
        const LineRead got = editor.read("> ", line);
        if (got != LineRead::Line) break;  // Ctrl-D (the end of the input) or Ctrl-C at the prompt
        if (line.empty()) continue;
        if (line == "/exit") break;
        if (line == "/clear") {  // a new conversation: the system message stays, the cache empties
            turns.resize(co.system ? 1 : 0);
            s.cache().truncate(seq, 0);
            history.clear();
            std::fprintf(stderr, "ridge: [conversation cleared]\n");
            continue;
        }
        // The whole conversation, rendered again: what the cache already holds (the longest common
        // prefix) is kept, the rest prefilled. Templates that rewrite earlier turns (Mistral moves
        // the system message to the last user turn) or a reply that tokenizes differently as text
        // cost a shorter prefix, never a wrong one. What the user typed is text, never a token.
        turns.push_back({"user", line});
        const std::vector<int32_t> ids = serve::chat_prompt_ids(chat, tok, turns, /*add_generation_prompt=*/true);
        const int cached = s.cache().length(seq);
        size_t keep = 0;
        while (keep < ids.size() && keep < size_t(cached) && keep < history.size() && ids[keep] == history[keep]) keep++;
        if (keep == ids.size()) keep--;  // at least one token to prefill, for the next logits
        if (ids.size() + 1 > size_t(L.n_ctx)) {
            std::fprintf(stderr, "ridge: the context is full (this conversation needs %zu of %d tokens); "
                                 "start a new chat or raise -c\n", ids.size() + 1, L.n_ctx);
            return;
        }
        s.cache().truncate(seq, int(keep));
        const float* logits = s.prefill(seq, std::vector<int32_t>(ids.begin() + int64_t(keep), ids.end()));
        history = ids;
        StreamDecoder decoder(tok);
        decoder.push(history.back());
        serve::StopMatcher stop(o.stop);
        std::string reply;
        g_interrupted = false;
        const GenerateResult res = generate(s, seq, sampler, tok, logits, history, o.n_predict, [&](int32_t id) {
            const std::string piece = stop.push(decoder.push(id));
            reply += piece;
            emit(piece);
            return !stop.stopped() && !g_interrupted;
        });
        const bool interrupted = g_interrupted.exchange(false);
        if (!stop.stopped()) {
            const std::string tail = stop.push(decoder.flush()) + stop.flush();
            reply += tail;
            emit(tail);
        }
        emit("\n");
        if (interrupted) std::fprintf(stderr, "ridge: [reply interrupted; Ctrl-C at the prompt or Ctrl-D ends the chat]\n");
        else if (res.stop == StopReason::Length)
            std::fprintf(stderr, "ridge: [the reply stopped at -n %d tokens]\n", o.n_predict);
        history.resize(std::min(history.size(), size_t(s.cache().length(seq))));  // what the cache holds
        turns.push_back({"assistant", reply});
        if (res.stop == StopReason::ContextFull) {
            std::fprintf(stderr, "ridge: the context is full (%d tokens); start a new chat or raise -c\n", L.n_ctx);
            return;
        }
    }
    if (interactive) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "ridge: %lld tokens in the context; prefill %.1f tokens/s, decode %.1f tokens/s\n",
                 (long long)s.cache().length(seq), s.prefill_stats.tokens_per_second(), s.decode_stats.tokens_per_second());
}

}  // namespace

void register_generate(CLI::App& app) {
    // Each subcommand's options are owned by its callback, which the App keeps while it parses.
    struct GenerateArgs {
        GenerateOptions run;
        std::string prompt;
        std::string file;      // -f: the prompt from this file
        bool escapes = false;  // -e: \n, \t, \\, \" and the like in the prompt
    };
    auto g = std::make_shared<GenerateArgs>();
    CLI::App* gen = app.add_subcommand("generate", "continue a prompt; stdout: the prompt and the generated text");
    add_common_options(gen, g->run);
    gen->add_option("-p,--prompt", g->prompt, "text to continue (empty: start from BOS; -: read it from stdin)");
    gen->add_option("-f,--file", g->file, "read the prompt from this file")->excludes("-p");
    gen->add_flag("-e,--escape", g->escapes, "process escapes in the prompt (\\n \\t \\r \\\\ \\\" \\')");
    gen->add_option("-n,--n-predict", g->run.n_predict, "tokens to generate (-1: until end of text or context)")
        ->capture_default_str();
    gen->callback([g]() {
        std::string prompt = g->prompt;
        if (!g->file.empty()) prompt = read_whole_file(g->file, "prompt file");
        else if (prompt == "-") prompt = std::string(std::istreambuf_iterator<char>(std::cin), {});
        if (g->escapes) prompt = unescape(prompt);
        run_generate(g->run, prompt);
    });

    struct ChatArgs {
        GenerateOptions run;
        ChatOptions chat;
    };
    auto c = std::make_shared<ChatArgs>();
    CLI::App* chat = app.add_subcommand("chat", "interactive multi-turn chat in the model's template; one line per message");
    add_common_options(chat, c->run);
    chat->add_option("--system", c->chat.system, "system message (default: the chat template's own, if any)");
    chat->add_option("--chat-template", c->chat.chat_template, "render the chat as this family (default: the model's template)");
    chat->add_option("--chat-template-file", c->chat.chat_template_file, "the chat template (Jinja) to recognise, instead of the model's")
        ->excludes("--chat-template");
    chat->add_option("--date", c->chat.date, "the date the template is told (\"26 Jul 2024\"; default: today)");
    chat->add_option("-n,--n-predict", c->run.n_predict, "most tokens per reply (-1: until end of reply or context)")
        ->capture_default_str();
    chat->callback([c]() { run_chat(c->run, c->chat); });
}

}  // namespace ridge::cli
