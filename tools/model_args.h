// ModelArgs: how every subcommand names its model: `-m FILE` (GGUF or llama2.c .bin, with
// `--tokenizer FILE` for the latter) or `--synthetic NAME [--synthetic-type T] [--synthetic-seed S]`,
// a model of a real shape with seeded random weights built in memory (see weights/synthetic.h).
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "weights/model_file.h"

namespace ridge::cli {

struct ModelArgs {
    std::string path;             // -m
    std::string tokenizer_path;   // --tokenizer (llama2.c checkpoints)
    std::string synthetic;        // --synthetic NAME (smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3-8b)
    std::string synthetic_type = "q4_0";  // --synthetic-type q4_0|q8_0|f16|bf16|f32 (also q4_1|q5_0|q5_1)
    uint64_t synthetic_seed = 1;  // --synthetic-seed
    bool exact = false;           // --exact: RunOptions::exact (f32 activations in every matmul)
    std::string device = "cpu";   // --device cpu|cuda: where the model runs
    bool no_graph = false;        // --no-graph: GPU decode steps launch kernel by kernel (no CUDA graph)
    bool profile = false;         // --profile: on a GPU, time every op (RunOptions::profile)
    int n_gpu_layers = -1;        // -ngl N (llama.cpp's flag): 0 = the CPU, N > 0 = the whole model on CUDA
    bool synthetic_type_given = false;  // set while parsing: --synthetic-type was on the command line
    bool synthetic_seed_given = false;  // set while parsing: --synthetic-seed was on the command line

    // Adds -m, --tokenizer, --synthetic, --synthetic-type, --synthetic-seed to `cmd`, bound to
    // this object's fields: it must stay where it is (inside the command's shared state) while
    // `cmd` parses.
    void add_options(CLI::App* cmd, bool with_tokenizer = true);
    // Adds --exact and --device (for the commands that run the model).
    void add_exact_option(CLI::App* cmd);
    // --exact, --device and --no-graph as the options an Engine runs a model with (ridge::Error
    // for --no-graph without --device cuda). The Engine says when there is no usable GPU.
    RunOptions run_options() const;
    bool on_gpu() const { return device == "cuda" || n_gpu_layers > 0; }
    // Opens the model; ridge::Error when neither or both of -m / --synthetic are given.
    std::unique_ptr<ModelFile> open() const;
    // The model's tokenizer: from the GGUF, from --tokenizer for a llama2.c checkpoint, or a
    // byte-level stand-in for synthetic models. ridge::Error when none can be had, or when its size
    // is not the model's vocabulary.
    std::unique_ptr<Tokenizer> open_tokenizer(const ModelFile& model) const;
    // The context to run with: -c when given (ridge::Error past the model's trained context), else the
    // model's context capped at `fallback` (4096 where the file gives none).
    static int context_size(const Config& c, bool set, int requested, int fallback);

    // ridge::Error unless exactly one of -m / --synthetic is given, and --synthetic-type /
    // --synthetic-seed only with --synthetic, --tokenizer only with -m. open() checks this first.
    void validate() const;
    // The tokenizer alone, without loading weights (ridge tokenize): a GGUF file's metadata (any
    // architecture, vocabulary-only files too), --tokenizer with the vocabulary size from the
    // GGUF token list or the llama2.c header, or the byte stand-in sized by the synthetic shape.
    std::unique_ptr<Tokenizer> open_tokenizer() const;
};

}  // namespace ridge::cli
