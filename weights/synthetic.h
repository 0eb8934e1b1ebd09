// Synthetic models: the exact shapes of real Llama models (SmolLM2-135M, Llama-3.2-1B and 3B,
// Llama-3-8B) with seeded random weights built in memory, so that speed can be measured at every
// scale without downloading anything. The text they write is meaningless; the bytes each token
// streams are real. The ModelFile has the GGUF tensor names, so engine/model.cpp loads it as is.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "weights/config.h"
#include "weights/model_file.h"
#include "weights/types.h"

namespace ridge {

// One known shape, as the model's public config.json gives it.
struct SyntheticShape {
    std::string name;  // "llama-3.2-1b"
    Config config;     // n_ctx_train capped at 8192 (Llama 3.2 advertises 131072)
};

// Every known shape, smallest first: smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3-8b.
std::vector<SyntheticShape> synthetic_shapes();
// "smollm2-135m, llama-3.2-1b, llama-3.2-3b, llama-3-8b", for messages.
std::string synthetic_names();
// The config of `name`; ridge::Error listing the known names for any other.
Config synthetic_config(const std::string& name);

// The weight types a synthetic model can have (the types quantize_row writes), lower-case names
// in the order "q4_0, q4_1, q5_0, q5_1, q8_0, f16, bf16, f32".
std::string synthetic_type_names();
// The type named `name` (case-insensitive "q4_0"); ridge::Error listing the valid ones otherwise.
DType synthetic_type_from_name(const std::string& name);

// A tensor of a synthetic model before it has bytes: GGUF name, type and shape.
struct SyntheticTensor {
    std::string name;
    DType type = DType::F32;
    std::vector<int64_t> shape;  // GGUF order {row length, rows}
};
// The tensors of a Llama model of config `c` with linear layers and token embedding in `type`,
// norms in F32, in forward order: token_embd, blk.0.attn_norm ... blk.{L-1}.ffn_down,
// output_norm, then output (untied models only).
std::vector<SyntheticTensor> synthetic_tensors(const Config& c, DType type);

// Bytes make_synthetic_model allocates for `name` in `type`: every tensor (each padded to 64
// bytes) plus the pools of random blocks it tiles from (freed once the model is built).
uint64_t synthetic_model_bytes(const std::string& name, DType type);

// The most memory a synthetic model may take: MemAvailable from /proc/meminfo minus a margin of
// max(1 GiB, 10%) left for the KV cache, activations and everything else on the machine.
// UINT64_MAX when /proc/meminfo cannot be read.
uint64_t synthetic_memory_limit();

// Builds the model `name` with every weight of type `type` except the norms (F32, values
// around 1), from `seed`: the same (name, type, seed) gives the same bytes, another seed other
// bytes. Linear layers and the token embedding hold normal(0, 1/sqrt(k)) values, k the length of
// a row (the inputs of the layer), so every activation keeps a scale of about 1 through the layers.
// ridge::Error for an unknown name or unsupported type, and, before allocating anything, when
// synthetic_model_bytes exceeds `memory_limit` (naming both sizes).
//
// Speed: an 8B model is 4.6 GB even in Q4_0, and drawing and quantizing 8 billion normal values
// would take minutes. Instead a pool of random rows (kSyntheticPoolElems values) is drawn and
// quantized once per row length, and every tensor is filled by copying whole blocks from that
// pool, starting at a seeded block offset and wrapping around. The bytes repeat with the pool's
// period but are distinct memory, so a decode step still streams every byte of every tensor
// from DRAM, which is all a speed experiment needs; building the 8B Q4_0 model takes seconds.
std::unique_ptr<ModelFile> make_synthetic_model(const std::string& name, DType type, uint64_t seed,
                                                uint64_t memory_limit);
// As above with memory_limit = synthetic_memory_limit().
std::unique_ptr<ModelFile> make_synthetic_model(const std::string& name, DType type, uint64_t seed);

// The synthetic model `name` as a GGUF file `out` that llama.cpp loads too: architecture llama,
// its shape with the vocabulary of the GGUF file `vocab_from` (every tokenizer.* key copied; the
// embedding and head take its token count), weights of `type` as make_synthetic_model(name, type,
// seed) fills them, written one tensor at a time (out.tmp, renamed when complete). ridge::Error for
// an unknown name or type, a vocab_from without tokenizer.ggml.tokens, or a file that cannot be written.
struct SyntheticFileSummary {
    Config config;
    uint64_t file_bytes = 0;
};
SyntheticFileSummary write_synthetic_gguf(const std::string& name, DType type, uint64_t seed,
                                          const std::string& vocab_from, const std::string& out);

// Values drawn per distinct row length before quantizing: 2 Mi (8 MiB as F32).
constexpr int64_t kSyntheticPoolElems = int64_t(1) << 21;

}  // namespace ridge
