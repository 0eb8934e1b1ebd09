// Model: a Llama model's weights and config as a plain struct of typed tensor views into the mapped file,
// each looked up by its GGUF name with the expected types and shape (a mismatch names the tensor,
// what was expected and what was found). The views live as long as the ModelFile they came from.
// How the model runs (kernels, device) is not here: see Engine (engine/engine.h).
#pragma once
#include <cstdint>
#include <vector>

#include "weights/config.h"
#include "weights/model_file.h"
#include "weights/tensor.h"

namespace ridge {

// One transformer block. Linear weights are (outputs, inputs) matrices: GGUF shape {inputs, outputs}.
struct LayerWeights {
    const TensorView* attn_norm = nullptr;    // (d) F32
    const TensorView* attn_q = nullptr;       // (q_dim, d)
    const TensorView* attn_k = nullptr;       // (kv_dim, d)
    const TensorView* attn_v = nullptr;       // (kv_dim, d)
    const TensorView* attn_output = nullptr;  // (d, q_dim)
    const TensorView* ffn_norm = nullptr;     // (d) F32
    const TensorView* ffn_gate = nullptr;     // (n_ff, d)
    const TensorView* ffn_up = nullptr;       // (n_ff, d)
    const TensorView* ffn_down = nullptr;     // (d, n_ff)
    // Qwen2's biases of q, k and v (y = W x + b); nullptr where the model has none.
    const TensorView* attn_q_bias = nullptr;  // (q_dim) F32
    const TensorView* attn_k_bias = nullptr;  // (kv_dim) F32
    const TensorView* attn_v_bias = nullptr;  // (kv_dim) F32
    // Qwen3's RMSNorm weights of each query and key head, applied before RoPE; nullptr where none.
    const TensorView* attn_q_norm = nullptr;  // (head_dim) F32
    const TensorView* attn_k_norm = nullptr;  // (head_dim) F32

    // Every tensor of the layer, those the model lacks as nullptr.
    std::vector<const TensorView*> all() const {
        return {attn_norm, attn_q,      attn_k,      attn_v,      attn_output, ffn_norm,   ffn_gate,
                ffn_up,    ffn_down,    attn_q_bias, attn_k_bias, attn_v_bias, attn_q_norm, attn_k_norm};
    }
};

struct Model {
    Config config;
    const TensorView* token_embd = nullptr;   // (n_vocab, d) any loadable type
    const TensorView* output_norm = nullptr;  // (d) F32
    const TensorView* output = nullptr;       // (n_vocab, d); token_embd itself when tied
    std::vector<LayerWeights> layers;         // (n_layers)
    // Looks every tensor up in `file` (which must outlive the Model); ridge::Error naming the
    // file and tensor for anything missing or of the wrong type or shape.
    static Model from_file(const ModelFile& file);

    // Bytes of weights one decode token reads: every linear layer once, the output matrix, the
    // norms and one embedding row.
    double weight_bytes_per_token() const;
    int64_t n_params() const;
};

// Norm weights as plain floats (the views are F32 by construction).
inline const float* f32_data(const TensorView* t) { return reinterpret_cast<const float*>(t->data); }

}  // namespace ridge
