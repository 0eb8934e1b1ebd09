// `ridge perplexity`: perplexity of a model over a text file in windows of -c tokens, scored as
// llama.cpp's llama-perplexity does (measure/perplexity.h), with progress on standard error. With
// --kl-base FILE it also saves every scored position's log-probabilities; with --kl FILE it
// compares this run against such a file: mean KL divergence and top-1 agreement.
#include <omp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model.h"
#include "measure/perplexity.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "tools/commands.h"
#include "tools/model_args.h"
#include "weights/error.h"
#include "weights/mapped_file.h"

namespace ridge::cli {

namespace {

struct PerplexityCommand {
    ModelArgs model;
    std::string text_path;
    PerplexityOptions opt;
    int threads = 0;
    bool threads_set = false;
    std::string kl_base, kl;
};

std::string read_text(const std::string& path) {
    std::string bytes = read_whole_file(path, "text file");
    utf8::require_valid(bytes, path);
    return bytes;
}

void run(PerplexityCommand& cmd) {
    if (cmd.threads_set && cmd.threads < 1) throw Error("-t/--threads " + std::to_string(cmd.threads) + " must be >= 1");
    if (!cmd.kl_base.empty() && !cmd.kl.empty()) throw Error("--kl-base and --kl both given: save a base, or compare to one");
    if (cmd.threads_set) omp_set_num_threads(cmd.threads);
    const std::string text = read_text(cmd.text_path);
    const std::unique_ptr<ModelFile> file = cmd.model.open();
    const Model model = Model::from_file(*file);
    const Engine engine(model, cmd.model.run_options());
    const std::unique_ptr<Tokenizer> tok = cmd.model.open_tokenizer(*file);
    const bool add_bos = tok->add_bos_default() && tok->bos_id() >= 0;
    const std::vector<int32_t> tokens = tok->encode(text, add_bos, /*parse_special=*/false);
    cmd.opt.bos = add_bos ? tok->bos_id() : -1;
    const int n_vocab = model.config.n_vocab;

    const int windows = perplexity_windows(engine, int64_t(tokens.size()), cmd.opt);
    KLHeader header{uint32_t(n_vocab), uint32_t(cmd.opt.n_ctx), uint32_t(windows), tokens_hash(tokens)};
    std::unique_ptr<KLBaseWriter> writer;
    std::unique_ptr<KLBaseReader> reader;
    if (!cmd.kl.empty()) {
        reader = std::make_unique<KLBaseReader>(cmd.kl);
        const KLHeader& b = reader->header();
        if (b.n_vocab != header.n_vocab || b.n_ctx != header.n_ctx || b.windows != header.windows ||
            b.tokens_hash != header.tokens_hash)
            throw Error(cmd.kl + ": the KL base was made from another text, vocabulary or -c/--chunks (base: " +
                        std::to_string(b.windows) + " windows of " + std::to_string(b.n_ctx) + ", vocabulary " +
                        std::to_string(b.n_vocab) + ")");
    }
    if (!cmd.kl_base.empty()) writer = std::make_unique<KLBaseWriter>(cmd.kl_base, header);
    std::fprintf(stderr, "perplexity: %zu tokens, %d windows of %d, scoring the last %d positions of each, %d threads%s\n",
                 tokens.size(), windows, cmd.opt.n_ctx, cmd.opt.n_ctx / 2 - 1, omp_get_max_threads(),
                 engine.exact() ? ", --exact" : "");

    std::vector<float> log_p(static_cast<size_t>(n_vocab)), log_base(static_cast<size_t>(n_vocab));
    KLStats kl;
    auto on_row = [&](const ScoredRow& r) {
        if (!writer && !reader) return;
        log_softmax(r.logits, n_vocab, log_p.data());
        if (writer) writer->add(log_p.data());
        if (reader) {
            reader->next(log_base.data());
            kl.add(log_base.data(), log_p.data(), n_vocab);
        }
    };
    auto on_window = [&](const PerplexityResult& res, int total) {
        std::fprintf(stderr, "[%d/%d] perplexity %.4f, %.1f tokens/s%s\n", res.windows, total, res.ppl(),
                     double(res.windows) * cmd.opt.n_ctx / res.seconds,
                     reader ? (", mean KL " + std::to_string(kl.mean_kl())).c_str() : "");
    };
    const PerplexityResult res = perplexity(engine, tokens, cmd.opt, on_row, on_window);
    if (writer) {
        writer->finish();
        std::printf("saved the log-probabilities of %lld positions to %s\n", (long long)res.scored, cmd.kl_base.c_str());
    }
    if (reader)
        std::printf("against %s: mean KL divergence %.6g (max %.6g), top-1 agreement %.2f%% over %lld positions\n",
                    cmd.kl.c_str(), kl.mean_kl(), kl.kl_max, 100.0 * kl.top1_agreement(), (long long)kl.n);
    std::printf("perplexity %.4f ± %.4f over %lld tokens in %d windows of %d\n", res.ppl(), res.ppl_error(),
                (long long)res.scored, res.windows, cmd.opt.n_ctx);
}

}  // namespace

void register_perplexity(CLI::App& app) {
    auto cmd = std::make_shared<PerplexityCommand>();
    CLI::App* sub = app.add_subcommand("perplexity", "perplexity over a text file (llama-perplexity's method), and KL "
                                                     "divergence against a saved run");
    cmd->model.add_options(sub);
    cmd->model.add_exact_option(sub);
    sub->add_option("-f,--file", cmd->text_path, "UTF-8 text file")->required();
    sub->add_option("-c,--ctx-size", cmd->opt.n_ctx, "tokens per window; the second half of each is scored")
        ->capture_default_str();
    sub->add_option("-b,--batch", cmd->opt.batch, "rows per forward pass")->capture_default_str();
    sub->add_option("--chunks", cmd->opt.max_windows, "at most this many windows (0: all)")->capture_default_str();
    sub->add_option("-t,--threads", cmd->threads, "CPU threads (default: all)")->each([c = cmd.get()](const std::string&) {
        c->threads_set = true;
    });
    sub->add_option("--kl-base", cmd->kl_base, "save every scored position's log-probabilities to FILE "
                                               "(n_vocab floats each: 192 KiB a position for SmolLM2)");
    sub->add_option("--kl", cmd->kl, "compare against a --kl-base FILE of the same text: mean KL divergence and "
                                     "top-1 agreement");
    sub->callback([cmd] { run(*cmd); });
}

}  // namespace ridge::cli
