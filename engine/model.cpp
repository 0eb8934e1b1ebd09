// Model::from_file: the GGUF-named tensors of a Llama-style model (llama, qwen2, qwen3), checked for
// type and shape.
#include "engine/model.h"

#include <algorithm>
#include <string>

#include "weights/error.h"

namespace ridge {

namespace {
// Types a linear layer or the embedding may have: everything dequantize_row knows.
const std::initializer_list<DType> kLinearTypes = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                                   DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                                   DType::Q4_K, DType::Q5_K, DType::Q6_K};
}  // namespace

Model Model::from_file(const ModelFile& file) {
    const Config& c = file.config();
    if (!arch_supported(c.arch))
        throw Error(file.path() + ": architecture '" + c.arch + "' is not supported (ridge runs " + kSupportedArchs + ")");
    if (c.n_embd <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.n_ff <= 0 ||
        c.n_vocab <= 0 || c.head_dim <= 0 || c.n_heads % c.n_kv_heads != 0)
        throw Error(file.path() + ": inconsistent model sizes (n_embd " + std::to_string(c.n_embd) + ", n_heads " +
                    std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) + ", head_dim " +
                    std::to_string(c.head_dim) + ")");
    const int64_t d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_ff = c.n_ff, n_vocab = c.n_vocab;

    Model m;
    m.config = c;
    m.token_embd = &file.require("token_embd.weight", kLinearTypes, {d, n_vocab});
    m.output_norm = &file.require("output_norm.weight", {DType::F32}, {d});
    if (c.tied_output || file.find("output.weight") == nullptr) {
        m.output = m.token_embd;
        m.config.tied_output = true;
    } else {
        m.output = &file.require("output.weight", kLinearTypes, {d, n_vocab});
    }
    m.layers.resize(size_t(c.n_layers));
    for (int l = 0; l < c.n_layers; l++) {
        const std::string p = "blk." + std::to_string(l) + ".";
        LayerWeights& L = m.layers[size_t(l)];
        L.attn_norm = &file.require(p + "attn_norm.weight", {DType::F32}, {d});
        L.attn_q = &file.require(p + "attn_q.weight", kLinearTypes, {d, q_dim});
        L.attn_k = &file.require(p + "attn_k.weight", kLinearTypes, {d, kv_dim});
        L.attn_v = &file.require(p + "attn_v.weight", kLinearTypes, {d, kv_dim});
        L.attn_output = &file.require(p + "attn_output.weight", kLinearTypes, {q_dim, d});
        L.ffn_norm = &file.require(p + "ffn_norm.weight", {DType::F32}, {d});
        L.ffn_gate = &file.require(p + "ffn_gate.weight", kLinearTypes, {d, n_ff});
        L.ffn_up = &file.require(p + "ffn_up.weight", kLinearTypes, {d, n_ff});
        L.ffn_down = &file.require(p + "ffn_down.weight", kLinearTypes, {n_ff, d});
        // Qwen2 has q/k/v biases and Qwen3 per-head q/k norms (required there, as llama.cpp has
        // them); any model that carries them gets them.
        auto optional = [&](const std::string& name, int64_t n, bool required) -> const TensorView* {
            if (!required && file.find(p + name) == nullptr) return nullptr;
            return &file.require(p + name, {DType::F32}, {n});
        };
        const bool qwen2 = c.arch == "qwen2", qwen3 = c.arch == "qwen3";
        L.attn_q_bias = optional("attn_q.bias", q_dim, qwen2);
        L.attn_k_bias = optional("attn_k.bias", kv_dim, qwen2);
        L.attn_v_bias = optional("attn_v.bias", kv_dim, qwen2);
        L.attn_q_norm = optional("attn_q_norm.weight", c.head_dim, qwen3);
        L.attn_k_norm = optional("attn_k_norm.weight", c.head_dim, qwen3);
        for (const TensorView* w : {L.attn_q, L.attn_k, L.attn_v, L.attn_output, L.ffn_gate, L.ffn_up, L.ffn_down})
            if (w->ne(0) % block_elems(w->type) != 0)
                throw Error(file.path() + ": tensor '" + w->name + "' rows of " + std::to_string(w->ne(0)) +
                            " are not whole " + std::string(dtype_name(w->type)) + " blocks");
    }
    return m;
}

double Model::weight_bytes_per_token() const {
    double bytes = double(output->nbytes) + double(output_norm->nbytes);
    bytes += double(row_bytes(token_embd->type, token_embd->ne(0)));
    for (const LayerWeights& L : layers)
        for (const TensorView* w : L.all())
            if (w != nullptr) bytes += double(w->nbytes);
    return bytes;
}

int64_t Model::n_params() const {
    int64_t n = token_embd->n_elements() + output_norm->n_elements();
    if (output != token_embd) n += output->n_elements();
    for (const LayerWeights& L : layers)
        for (const TensorView* w : L.all())
            if (w != nullptr) n += w->n_elements();
    return n;
}

}  // namespace ridge
