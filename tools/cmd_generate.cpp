// `ridge generate` and `ridge chat`: load a model and its tokenizer, then either continue a prompt
// (stdout: exactly the prompt followed by the generated text, streamed) or hold a multi-turn
// ChatML conversation whose history stays in the KV cache. Load info and statistics go to stderr.
#include <omp.h>
#include <unistd.h>

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
};

void add_common_options(CLI::App* cmd, GenerateOptions& o) {
    o.model.add_options(cmd);
    o.model.add_exact_option(cmd);
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
    cmd->add_option("--batch", o.max_rows, "most prompt tokens per forward pass")->capture_default_str();
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
    if (o.max_rows <= 0) throw Error("--batch " + std::to_string(o.max_rows) + " must be >= 1");
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

void run_chat(GenerateOptions& o, const std::optional<std::string>& system) {
    check_options(o);
    Loaded L = load(o);
    Session& s = *L.session;
    const Tokenizer& tok = *L.tok;
    if (!tok.find_token("<|im_start|>") || !tok.find_token("<|im_end|>"))
        throw Error(L.file->path() + ": the vocabulary has no <|im_start|>/<|im_end|> tokens; ridge chat speaks ChatML only");
    const std::string tmpl = tok.chat_template();
    if (!tmpl.empty() && tmpl.find("<|im_start|>") == std::string::npos)
        throw Error(L.file->path() + ": the chat template is not ChatML; ridge chat speaks ChatML only");
    const std::string system_text = system ? *system : serve::default_system_message(tmpl);
    const int32_t im_start = *tok.find_token("<|im_start|>"), im_end = *tok.find_token("<|im_end|>");
    print_load_info(o, L);

    Sampler sampler(o.sp);
    const int seq = s.cache().new_sequence();
    std::vector<int32_t> history;
    bool first = true;
    bool reply_open = false;  // an assistant reply is in the cache without its closing <|im_end|>
    const bool interactive = isatty(STDIN_FILENO);
    std::string line;
    while (true) {
        if (interactive) std::fprintf(stderr, "> ");
        if (!std::getline(std::cin, line)) break;
        if (line.empty()) continue;
        // The turn as pieces: ChatML's tokens by id, what the user typed as text (never a token).
        std::vector<PromptPiece> turn;
        if (reply_open) turn.push_back({im_end, {}}), turn.push_back({-1, "\n"});
        const std::vector<PromptPiece> rest = serve::chatml_pieces({{"user", line}}, first ? system_text : "", im_start, im_end);
        turn.insert(turn.end(), rest.begin(), rest.end());
        std::vector<int32_t> ids = tok.encode_pieces(turn, first && tok.add_bos_default());
        const int used = s.cache().length(seq);
        if (int64_t(used) + int64_t(ids.size()) + 1 > L.n_ctx) {
            std::fprintf(stderr, "ridge: the context is full (%d of %d tokens used, this turn needs %zu more); "
                                 "start a new chat or raise -c\n", used, L.n_ctx, ids.size() + 1);
            return;
        }
        first = false;
        const float* logits = s.prefill(seq, ids);
        history.insert(history.end(), ids.begin(), ids.end());
        StreamDecoder decoder(tok);
        if (!history.empty()) decoder.push(history.back());
        serve::StopMatcher stop(o.stop);
        const GenerateResult res = generate(s, seq, sampler, tok, logits, history, o.n_predict, [&](int32_t id) {
            emit(stop.push(decoder.push(id)));
            return !stop.stopped();
        });
        if (!stop.stopped()) emit(stop.push(decoder.flush()) + stop.flush());
        emit("\n");
        // The last sampled token is not in the cache yet: a content token must be fed before the
        // next turn's "<|im_end|>"; an end-of-generation token is replaced by that "<|im_end|>".
        if (res.unfed >= 0 && res.stop != StopReason::EndOfGeneration) {
            if (s.cache().length(seq) + 1 > L.n_ctx) {
                std::fprintf(stderr, "ridge: the context is full (%d tokens); start a new chat or raise -c\n", L.n_ctx);
                return;
            }
            s.decode(seq, res.unfed);
        }
        reply_open = true;
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
        std::optional<std::string> system;
    };
    auto c = std::make_shared<ChatArgs>();
    CLI::App* chat = app.add_subcommand("chat", "interactive multi-turn chat (ChatML); one line per message");
    add_common_options(chat, c->run);
    chat->add_option("--system", c->system, "system message (default: the chat template's own, if any)");
    chat->add_option("-n,--n-predict", c->run.n_predict, "most tokens per reply (-1: until end of reply or context)")
        ->capture_default_str();
    chat->callback([c]() { run_chat(c->run, c->system); });
}

}  // namespace ridge::cli
