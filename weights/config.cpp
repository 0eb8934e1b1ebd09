// config_from_gguf: the hyperparameters of a Llama-style model (llama, qwen2, qwen3) from its GGUF
// `<arch>.*` metadata, with the defaults llama.cpp uses for absent optional keys, and checks that
// the sizes divide as the forward needs.
#include "weights/config.h"

#include <cmath>
#include <limits>

#include "weights/error.h"
#include "weights/gguf.h"

namespace ridge {

namespace {

// A positive int from an integer key (required when dflt < 0).
int get_int(const GGUFFile& f, const std::string& key, int64_t dflt = -1) {
    if (!f.has(key)) {
        if (dflt < 0) throw Error(f.path() + ": metadata key '" + key + "' is missing");
        return int(dflt);
    }
    uint64_t v = f.get_u64(key);
    if (v == 0 || v > uint64_t(std::numeric_limits<int32_t>::max()))
        throw Error(f.path() + ": metadata key '" + key + "' is " + std::to_string(v) + ", expected a positive 32-bit value");
    return int(v);
}

}  // namespace

Config config_from_gguf(const GGUFFile& f) {
    const std::string arch = f.get_string("general.architecture");
    if (!arch_supported(arch))
        throw Error(f.path() + ": general.architecture is '" + arch + "', ridge supports " + std::string(kSupportedArchs));
    const std::string p = arch + ".";
    Config c;
    c.arch = arch;
    c.n_embd = get_int(f, p + "embedding_length");
    c.n_layers = get_int(f, p + "block_count");
    c.n_ff = get_int(f, p + "feed_forward_length");
    c.n_heads = get_int(f, p + "attention.head_count");
    c.n_kv_heads = get_int(f, p + "attention.head_count_kv", c.n_heads);
    c.n_ctx_train = get_int(f, p + "context_length");
    // The head dimension: attention.key_length when given (Qwen3's heads are wider than
    // embedding_length / head_count), else embedding_length / head_count.
    if (f.has(p + "attention.key_length")) {
        c.head_dim = get_int(f, p + "attention.key_length");
        const int value_length = get_int(f, p + "attention.value_length", c.head_dim);
        if (value_length != c.head_dim)
            throw Error(f.path() + ": " + p + "attention.value_length " + std::to_string(value_length) + " differs from " +
                        p + "attention.key_length " + std::to_string(c.head_dim) + " (unsupported)");
    } else {
        if (c.n_embd % c.n_heads != 0)
            throw Error(f.path() + ": " + p + "embedding_length " + std::to_string(c.n_embd) +
                        " is not a multiple of " + p + "attention.head_count " + std::to_string(c.n_heads));
        c.head_dim = c.n_embd / c.n_heads;
    }
    if (c.n_heads % c.n_kv_heads != 0)
        throw Error(f.path() + ": " + p + "attention.head_count " + std::to_string(c.n_heads) +
                    " is not a multiple of " + p + "attention.head_count_kv " + std::to_string(c.n_kv_heads));
    c.rope_dim = get_int(f, p + "rope.dimension_count", c.head_dim);
    if (c.rope_dim > c.head_dim || c.rope_dim % 2 != 0)
        throw Error(f.path() + ": " + p + "rope.dimension_count " + std::to_string(c.rope_dim) +
                    " must be even and at most the head dimension " + std::to_string(c.head_dim));
    c.rope_freq_base = float(f.get_f64_or(p + "rope.freq_base", 10000.0));
    if (!(c.rope_freq_base > 0) || !std::isfinite(c.rope_freq_base))
        throw Error(f.path() + ": " + p + "rope.freq_base " + std::to_string(c.rope_freq_base) + " is not a positive number");
    // GGUF llama stores Q/K permuted for adjacent-pair rotation; Qwen's converter keeps Hugging
    // Face's order, which rotates dims i and i + rope_dim/2 (llama.cpp's NEOX rope type).
    c.rope_style = arch == "llama" ? RopeStyle::Norm : RopeStyle::Neox;
    c.norm_eps = float(f.get_f64_or(p + "attention.layer_norm_rms_epsilon", 1e-5));
    if (!(c.norm_eps > 0) || !std::isfinite(c.norm_eps))
        throw Error(f.path() + ": " + p + "attention.layer_norm_rms_epsilon " + std::to_string(c.norm_eps) +
                    " is not a positive number");
    if (f.has(p + "vocab_size")) {
        c.n_vocab = get_int(f, p + "vocab_size");
    } else if (f.has("tokenizer.ggml.tokens")) {
        size_t n = f.get_string_array("tokenizer.ggml.tokens").size();
        if (n == 0 || n > size_t(std::numeric_limits<int32_t>::max()))
            throw Error(f.path() + ": tokenizer.ggml.tokens has " + std::to_string(n) + " entries");
        c.n_vocab = int(n);
    } else if (const TensorView* e = f.find("token_embd.weight"); e && e->shape.size() == 2 &&
                                                                  e->shape[1] <= std::numeric_limits<int32_t>::max()) {
        c.n_vocab = int(e->shape[1]);
    } else {
        throw Error(f.path() + ": cannot tell the vocabulary size (no " + p +
                    "vocab_size, tokenizer.ggml.tokens or token_embd.weight)");
    }
    c.tied_output = f.find("output.weight") == nullptr;
    return c;
}

}  // namespace ridge
