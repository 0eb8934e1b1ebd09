// ModelArgs: the -m / --synthetic options every subcommand shares, the checks on how they combine,
// and the choice of tokenizer for each kind of model (GGUF metadata, llama2.c tokenizer.bin, or
// the byte stand-in of a synthetic model).
#include "tools/model_args.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "engine/gpu.h"
#include "tokenizer/byte_tokenizer.h"
#include "weights/error.h"
#include "weights/gguf.h"
#include "weights/synthetic.h"

namespace ridge::cli {

namespace {

// Whether the file starts with the "GGUF" magic (else ModelFile::open takes it for a llama2.c
// checkpoint); ridge::Error naming the file when it cannot be opened.
bool starts_with_gguf_magic(const std::string& path) {
    std::FILE* fp = std::fopen(path.c_str(), "rb");
    if (!fp) throw Error(path + ": cannot open: " + std::strerror(errno));
    char magic[4] = {};
    const size_t got = std::fread(magic, 1, 4, fp);
    std::fclose(fp);
    return got == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

void ModelArgs::add_options(CLI::App* cmd, bool with_tokenizer) {
    cmd->add_option("-m,--model", path, "model file: GGUF, or a llama2.c checkpoint (.bin) with --tokenizer");
    if (with_tokenizer)
        cmd->add_option("--tokenizer", tokenizer_path, "llama2.c tokenizer.bin (needed for llama2.c checkpoints)");
    cmd->add_option("--synthetic", synthetic,
                    "instead of -m: a model of a real shape with seeded random weights, built in memory (" +
                        synthetic_names() + "); its text is meaningless, its speed is real");
    cmd->add_option("--synthetic-type", synthetic_type, "weight type of a synthetic model: " + synthetic_type_names())
        ->capture_default_str()
        ->each([this](const std::string&) { synthetic_type_given = true; });
    cmd->add_option("--synthetic-seed", synthetic_seed, "seed of a synthetic model's weights")
        ->capture_default_str()
        ->each([this](const std::string&) { synthetic_seed_given = true; });
}

void ModelArgs::add_exact_option(CLI::App* cmd) {
    cmd->add_flag("--exact", exact,
                  "f32 activations in every matmul (the reference arithmetic); by default Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 "
                  "and K-quant matmuls take their input quantized to 16-bit integers");
    cmd->add_option("--device", device, "where the model runs: cpu, or cuda (an NVIDIA GPU; f32 activations)")
        ->check(CLI::IsMember({"cpu", "cuda"}));
    cmd->add_option("--n-gpu-layers", n_gpu_layers,
                    "-ngl N, llama.cpp's flag: 0 runs on the CPU, any N > 0 the whole model on CUDA (as --device cuda)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_flag("--no-graph", no_graph, "with --device cuda: launch each decode step kernel by kernel, not as a CUDA graph");
    cmd->add_flag("--profile", profile,
                  "with --device cuda: time every op (drains the GPU after each; no CUDA graph); without it a GPU "
                  "run counts every op's FLOPs and bytes but times only whole steps");
}

RunOptions ModelArgs::run_options() const {
    if (n_gpu_layers == 0 && device == "cuda") throw Error("-ngl 0 (the CPU) and --device cuda disagree: pass one of them");
    if (n_gpu_layers > 0 && device != "cuda" && gpu::available())  // without a GPU: the Engine's one-line error
        std::fprintf(stderr, "ridge: -ngl %d: ridge runs the whole model on CUDA (--device cuda) or none of it\n",
                     n_gpu_layers);
    if (no_graph && !on_gpu()) throw Error("--no-graph is for --device cuda");
    if (profile && !on_gpu()) throw Error("--profile is for --device cuda (on the CPU every counted op is timed)");
    RunOptions opt;
    opt.exact = exact;
    opt.device = on_gpu() ? Device::Cuda : Device::Cpu;
    opt.graph = !no_graph;
    opt.profile = profile;
    return opt;
}

void ModelArgs::validate() const {
    if (path.empty() && synthetic.empty())
        throw Error("no model given: pass -m/--model FILE or --synthetic NAME (" + synthetic_names() + ")");
    if (!path.empty() && !synthetic.empty())
        throw Error("-m/--model and --synthetic both given: pass one of them");
    if (synthetic.empty() && (synthetic_type_given || synthetic_seed_given))
        throw Error(std::string(synthetic_type_given ? "--synthetic-type" : "--synthetic-seed") +
                    " applies to --synthetic models only");
    if (!synthetic.empty() && !tokenizer_path.empty())
        throw Error("--tokenizer applies to llama2.c checkpoints; a --synthetic model has its own byte tokenizer");
}

std::unique_ptr<ModelFile> ModelArgs::open() const {
    validate();
    if (!synthetic.empty())
        return make_synthetic_model(synthetic, synthetic_type_from_name(synthetic_type), synthetic_seed);
    return ModelFile::open(path);
}

std::unique_ptr<Tokenizer> ModelArgs::open_tokenizer(const ModelFile& model) const {
    const int n_vocab = model.config().n_vocab;
    std::unique_ptr<Tokenizer> tok;
    if (model.format() == ModelFormat::Synthetic)
        tok = make_byte_tokenizer(n_vocab);
    else if (!tokenizer_path.empty())
        tok = Tokenizer::from_llama2c(tokenizer_path, n_vocab);
    else if (model.gguf())
        tok = Tokenizer::from_gguf(*model.gguf());
    else
        throw Error(model.path() + ": a llama2.c checkpoint carries no vocabulary: pass --tokenizer tokenizer.bin");
    if (tok->n_vocab() != n_vocab)
        throw Error("tokenizer has " + std::to_string(tok->n_vocab()) + " tokens but the model's vocabulary is " +
                    std::to_string(n_vocab));
    return tok;
}

int ModelArgs::context_size(const Config& c, bool set, int requested, int fallback) {
    const int model_max = c.n_ctx_train > 0 ? c.n_ctx_train : 4096;
    if (set && requested > model_max)
        throw Error("-c/--ctx-size " + std::to_string(requested) + " is past the model's context of " +
                    std::to_string(model_max));
    return set ? requested : std::min(model_max, fallback);
}

std::unique_ptr<Tokenizer> ModelArgs::open_tokenizer() const {
    validate();
    if (!synthetic.empty()) {
        synthetic_type_from_name(synthetic_type);  // the same errors as open() would give
        return make_byte_tokenizer(synthetic_config(synthetic).n_vocab);
    }
    // A GGUF file: its metadata alone (no llama config needed, so vocabulary-only files work).
    std::unique_ptr<GGUFFile> gguf;
    if (starts_with_gguf_magic(path)) gguf = GGUFFile::open(path);
    if (gguf && tokenizer_path.empty()) return Tokenizer::from_gguf(*gguf);
    if (gguf) {
        if (!gguf->has("tokenizer.ggml.tokens"))
            throw Error(path + ": --tokenizer needs the vocabulary size, and this GGUF file has no "
                        "'tokenizer.ggml.tokens' to take it from");
        return Tokenizer::from_llama2c(tokenizer_path, int(gguf->get_string_array("tokenizer.ggml.tokens").size()));
    }
    const std::unique_ptr<ModelFile> model = ModelFile::open(path);  // llama2.c: maps and checks the header
    return open_tokenizer(*model);
}

}  // namespace ridge::cli
