// ModelStats: sizes that follow from a loaded model alone: parameter count, bytes per weight
// type, the weight bytes one decode step must read (the memory-bound cost of a token), and
// KV cache bytes per token. Used by `ridge info` and by the roofline accounting.
#pragma once
#include <cstdint>
#include <vector>

#include "weights/model_file.h"

namespace ridge {

struct TypeStats {
    DType type = DType::F32;
    int64_t n_tensors = 0;
    int64_t n_elements = 0;
    uint64_t bytes = 0;
};

struct ModelStats {
    int64_t n_params = 0;            // elements of every tensor in the file
    uint64_t weight_bytes = 0;       // bytes of every tensor in the file
    std::vector<TypeStats> by_type;  // one entry per type present, in GGUF type-number order
    // Weight bytes read by one decode step (one token): every tensor once, except the token
    // embedding table, of which only one row is read, unless it is also the output head (tied),
    // in which case it is read whole as the head plus the one row for the embedding lookup.
    uint64_t decode_bytes_per_token = 0;
    uint64_t embedding_row_bytes = 0;   // one row of token_embd.weight
    uint64_t output_head_bytes = 0;     // output.weight, or token_embd.weight when tied
    // KV cache: 2 (K and V) * n_layers * n_kv_heads * head_dim * bytes per value.
    uint64_t kv_bytes_per_token_f32 = 0;
    uint64_t kv_bytes_per_token_f16 = 0;
};

// ridge::Error naming the file if token_embd.weight is missing (or output.weight when untied).
ModelStats compute_stats(const ModelFile& m);

}  // namespace ridge
