// `ridge quantize -m IN.gguf -o OUT.gguf --type T`: rewrites a GGUF model with its matrices in
// another weight type, or one of llama.cpp's Q4_K_M / Q5_K_M mixes (weights/quantize_model.h).
// `ridge quantize --synthetic NAME --type T -o OUT.gguf --vocab-from V.gguf` writes a synthetic
// model as a file instead, so that llama.cpp runs exactly the shapes ridge does.
// Stderr gets a note per tensor that had to fall back to another type, one line per tensor with
// -v, and a closing summary.
#include <omp.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "tools/commands.h"
#include "weights/error.h"
#include "weights/gguf.h"
#include "weights/quantize_model.h"
#include "weights/synthetic.h"

namespace ridge::cli {

namespace {

struct QuantizeArgs {
    std::string in, out, type, synthetic, vocab_from;
    uint64_t seed = 1;  // --synthetic-seed, as every command's
    int threads = 0;  // 0: OpenMP's default
    bool verbose = false;
    bool force = false;             // overwrite an existing output
    bool allow_requantize = false;  // re-encode weights that are already quantized
};

// --synthetic NAME: the synthetic model written as a GGUF file llama.cpp loads too, with the
// vocabulary of --vocab-from (weights/synthetic.h).
void write_synthetic(const QuantizeArgs& a) {
    if (!a.in.empty()) throw Error("-m/--model and --synthetic both given: pass one of them");
    if (a.out.empty()) throw Error("no output file: pass -o/--output OUT.gguf");
    if (a.type.empty()) throw Error("no weight type: pass --type (" + synthetic_type_names() + ")");
    if (a.vocab_from.empty())
        throw Error("--synthetic needs --vocab-from FILE.gguf, a GGUF file whose vocabulary the model takes");
    const DType type = synthetic_type_from_name(a.type);
    if (a.threads > 0) omp_set_num_threads(a.threads);
    if (!a.force && std::filesystem::exists(a.out)) throw Error(a.out + " exists: pass --force to overwrite it");
    const SyntheticFileSummary s = write_synthetic_gguf(a.synthetic, type, a.seed, a.vocab_from, a.out);
    std::fprintf(stderr, "wrote %s: synthetic %s, %s, vocabulary of %d tokens from %s, %.2f MB\n", a.out.c_str(),
                 a.synthetic.c_str(), std::string(dtype_name(type)).c_str(), s.config.n_vocab, a.vocab_from.c_str(),
                 double(s.file_bytes) / 1e6);
}

void run_quantize(const QuantizeArgs& a) {
    if (!a.synthetic.empty()) return write_synthetic(a);
    if (!a.vocab_from.empty()) throw Error("--vocab-from applies to --synthetic models only");
    if (a.in.empty()) throw Error("no input model: pass -m/--model IN.gguf");
    if (a.out.empty()) throw Error("no output file: pass -o/--output OUT.gguf");
    if (a.type.empty()) throw Error("no target type: pass --type (" + quantize_target_names() + ")");
    const std::optional<QuantizeTarget> target = quantize_target_from_name(a.type);
    if (!target) throw Error("unknown --type '" + a.type + "' (choose one of " + quantize_target_names() + ")");
    if (a.threads > 0) omp_set_num_threads(a.threads);
    // As llama-quantize: an existing output is kept unless asked, and quantized weights are not
    // quantized again unless asked (each rounding adds error; nothing is gained in quality).
    if (!a.force && std::filesystem::exists(a.out) && std::filesystem::absolute(a.out) != std::filesystem::absolute(a.in))
        throw Error(a.out + " exists: pass --force to overwrite it");
    if (!a.allow_requantize && std::filesystem::is_regular_file(a.in)) {
        std::unique_ptr<GGUFFile> in;
        try {
            in = GGUFFile::open(a.in);
        } catch (const Error&) {
            // not a GGUF file: quantize_model says so below
        }
        if (in)
            for (const TensorView& t : in->tensors())
                if (block_elems(t.type) > 1)
                    throw Error(a.in + " already holds quantized weights ('" + t.name + "' is " +
                                std::string(dtype_name(t.type)) +
                                "): quantizing them again adds rounding error and gains nothing; pass "
                                "--allow-requantize to do it anyway");
    }

    auto report = [&](const QuantizeTensorReport& r) {
        if (r.fell_back)
            std::fprintf(stderr, "ridge: note: tensor '%s' row length %lld is not a multiple of the %s block size "
                                 "%lld: written as %s\n",
                         r.name.c_str(), static_cast<long long>(r.row_length),
                         std::string(dtype_name(r.wanted)).c_str(), static_cast<long long>(block_elems(r.wanted)),
                         std::string(dtype_name(r.to)).c_str());
        if (a.verbose)
            std::fprintf(stderr, "[%zu/%zu] %-28s %-5s -> %-5s %s %10.3f MB -> %10.3f MB\n", r.index + 1, r.count,
                         r.name.c_str(), std::string(dtype_name(r.from)).c_str(), std::string(dtype_name(r.to)).c_str(),
                         r.copied ? "copied " : "encoded", double(r.bytes_in) / 1e6, double(r.bytes_out) / 1e6);
    };
    const QuantizeSummary s = quantize_model(a.in, a.out, *target, report);
    const std::string fallback = s.n_fallback ? ", " + std::to_string(s.n_fallback) + " in a fallback type" : "";
    std::fprintf(stderr, "wrote %s: %zu tensors (%zu re-encoded, %zu copied%s), %.2f MB -> %.2f MB\n", a.out.c_str(),
                 s.n_tensors, s.n_converted, s.n_copied, fallback.c_str(), double(s.file_bytes_in) / 1e6,
                 double(s.file_bytes_out) / 1e6);
}

}  // namespace

void register_quantize(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("quantize", "Rewrite a GGUF model with another weight type");
    auto a = std::make_shared<QuantizeArgs>();
    cmd->add_option("-m,--model", a->in, "input model (GGUF)");
    cmd->add_option("-o,--output", a->out, "output GGUF file (written as OUT.tmp, renamed when complete)");
    cmd->add_option("--type", a->type, "weight type of the matrices: " + quantize_target_names() +
                                           " (norm weights stay as they are)");
    cmd->add_option("-t,--threads", a->threads, "CPU threads (default: all)");
    cmd->add_flag("-v,--verbose", a->verbose, "one line per tensor on stderr");
    cmd->add_flag("--force", a->force, "overwrite OUT when it exists");
    cmd->add_flag("--allow-requantize", a->allow_requantize,
                  "re-encode an input whose weights are already quantized (each rounding adds error)");
    cmd->add_option("--synthetic", a->synthetic,
                    "instead of -m: write a synthetic model (" + synthetic_names() + ") of --type (" +
                        synthetic_type_names() + ") with the vocabulary of --vocab-from");
    cmd->add_option("--vocab-from", a->vocab_from, "with --synthetic: the GGUF file whose tokenizer the model takes");
    cmd->add_option("--synthetic-seed", a->seed, "with --synthetic: seed of the weights")->capture_default_str();
    cmd->callback([a] { run_quantize(*a); });
}

}  // namespace ridge::cli
