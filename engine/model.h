// Model: a Llama model's weights as a plain struct of typed tensor views into the mapped file,
// each looked up by its GGUF name with the expected types and shape (a mismatch names the tensor,
// what was expected and what was found). The views live as long as the ModelFile they came from.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "weights/config.h"
#include "weights/model_file.h"
#include "weights/tensor.h"

namespace ridge {

struct GpuModel;  // the weights on a CUDA device (engine/gpu.h), when the model runs there

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
};

struct Model {
    Config config;
    const TensorView* token_embd = nullptr;   // (n_vocab, d) any loadable type
    const TensorView* output_norm = nullptr;  // (d) F32
    const TensorView* output = nullptr;       // (n_vocab, d); token_embd itself when tied
    std::vector<LayerWeights> layers;         // (n_layers)
    // How the matmuls multiply. false (the default, fast): a matmul whose weights have an
    // integer kernel (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) gets its input rows
    // quantized to 16-bit integers (matmul_int.h) for decode rows and short prompts; runs of
    // tiled_min_rows() rows or more of one prompt take f32 tiles (matmul_tiled).
    // true (--exact): every matmul takes f32 activations, the reference arithmetic.
    bool exact = false;
    // Where forward() runs: nullptr on the CPU; set by to_gpu (engine/gpu.h), which uploads every
    // weight, for a model that runs on a CUDA device (f32 activations there, as under exact).
    std::shared_ptr<const GpuModel> gpu;

    // Looks every tensor up in `file` (which must outlive the Model); ridge::Error naming the
    // file and tensor for anything missing or of the wrong type or shape.
    static Model from_file(const ModelFile& file);

    // Bytes of weights one decode token reads: every linear layer once, the output matrix, the
    // norms and one embedding row.
    double weight_bytes_per_token() const;
    int64_t n_params() const;
    // The rows of one prompt from which forward() multiplies them as a tiled run (cpu::matmul_tiled)
    // rather than row by row: the largest cpu::tiled_min_rows of the layers' weight types on the
    // fast path (40 for a Q4_0/Q4_1/Q5_0/Q5_1/Q8_0 model, 22 for F16 or a K-quant one), 22 under exact.
    // On a GPU: kGpuTiledMinRows (shorter runs go through the matvec, up to 8 rows a launch).
    int64_t tiled_min_rows() const;
    static constexpr int64_t kGpuTiledMinRows = 16;
    // Whether forward() quantizes an input shared by these matmuls to 16-bit integers: on the fast
    // path, when one of them has an integer kernel, for a run of rows computed row by row
    // (int_rows, cpu::matmul_rows), or for m rows of one prompt (int_input: only below
    // tiled_min_rows()).
    bool int_rows(std::initializer_list<const TensorView*> weights) const;
    bool int_input(std::initializer_list<const TensorView*> weights, int64_t m) const;
};

// Norm weights as plain floats (the views are F32 by construction).
inline const float* f32_data(const TensorView* t) { return reinterpret_cast<const float*>(t->data); }

}  // namespace ridge
