// Config: a Llama model's hyperparameters, read from GGUF `llama.*` metadata or from the
// 7-int header of a llama2.c checkpoint. Every size name used by the engine is defined here.
#pragma once
#include <cstdint>
#include <string>

namespace ridge {

class GGUFFile;

enum class RopeStyle { Norm, Neox };  // Norm: pairs (2i, 2i+1) as GGUF llama; Neox: (i, i + d/2)

struct Config {
    std::string arch = "llama";
    int n_embd = 0;          // d, embedding length
    int n_layers = 0;        // block count
    int n_ff = 0;            // feed-forward (hidden) length
    int n_heads = 0;         // query heads
    int n_kv_heads = 0;      // key/value heads (GQA: n_heads % n_kv_heads == 0)
    int head_dim = 0;        // n_embd / n_heads, or the GGUF's attention.key_length
    int n_vocab = 0;
    int n_ctx_train = 0;     // context length the model was trained for
    int rope_dim = 0;        // dimensions rotated per head (<= head_dim)
    float rope_freq_base = 10000.0f;
    RopeStyle rope_style = RopeStyle::Norm;
    float norm_eps = 1e-5f;  // RMSNorm epsilon
    bool tied_output = false;  // logits through token_embd (no output.weight)

    int q_dim() const { return n_heads * head_dim; }     // width of Q
    int kv_dim() const { return n_kv_heads * head_dim; } // width of K and V
};

// The architectures ridge runs: Llama's layer, and Qwen2's (q/k/v biases) and Qwen3's (RMSNorm of
// each query and key head) variants of it.
inline constexpr const char* kSupportedArchs = "llama, qwen2, qwen3";
inline bool arch_supported(const std::string& arch) { return arch == "llama" || arch == "qwen2" || arch == "qwen3"; }

// From `<arch>.*` keys (general.architecture must be one of kSupportedArchs); ridge::Error naming
// the file and key for anything missing or inconsistent.
Config config_from_gguf(const GGUFFile& f);

}  // namespace ridge
