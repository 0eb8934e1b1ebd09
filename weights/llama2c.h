// Loader for llama2.c checkpoints (`.bin`): a 7-int32 header (dim, hidden_dim, n_layers, n_heads,
// n_kv_heads, vocab_size, seq_len; vocab_size < 0 means a separate classifier follows), then f32
// arrays in a fixed order. Exposed as a ModelFile with GGUF tensor names and shapes.
#pragma once
#include <memory>
#include <string>

#include "weights/model_file.h"

namespace ridge {

// Maps and validates the checkpoint (sizes must match the file size exactly); ridge::Error
// naming the file otherwise.
std::unique_ptr<ModelFile> open_llama2c(const std::string& path);

}  // namespace ridge
