// quantize_model: rewrite a GGUF model with another weight type (`ridge quantize`). Every matrix
// (2-D or more) is dequantized row by row to f32 and re-encoded in the type quantize_plan gives it;
// 1-D tensors (norm weights) are copied unchanged; metadata is kept, with general.file_type set to
// the llama.cpp LLAMA_FTYPE of the target. One tensor at a time is read from the mmapped input and
// streamed to the output (see weights/gguf_writer.h), never the whole model in memory.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weights/types.h"

namespace ridge {

// A --type of `ridge quantize`: one weight type for every matrix, or one of llama.cpp's _M mixes.
struct QuantizeTarget {
    const char* name;  // "q4_k_m"
    DType type;        // the type of the matrices, or of most of them in a mix
    uint32_t ftype;    // llama.cpp's llama_ftype, written as general.file_type
    bool mix_m;        // llama-quantize's Q4_K_M / Q5_K_M rules (see quantize_plan)
};

// The targets: q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, q4_k_m, q5_k_m, f16, bf16, f32
// (case-insensitive); nullopt for anything else.
std::optional<QuantizeTarget> quantize_target_from_name(std::string_view name);
// The pure target of type `t`; ridge::Error for a type that is not one.
QuantizeTarget quantize_target_of(DType t);
std::string quantize_target_names();  // "q8_0, q4_0, ..., f32"

// The type each tensor of a file gets, in file order, and whether its row length forced a
// fallback. A pure target gives every matrix (2-D or more) its type and keeps 1-D tensors (norms);
// a row length that is not a multiple of the type's block falls back as llama-quantize does
// (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16 for rows not a multiple of 32; a 32-block
// type -> F16). A _M mix follows llama-quantize (tensors taken in its order: by layer, then by
// name): the output head, and the token embedding when it is also the head, Q6_K (Q8_0 when its
// rows are not a multiple of 256); attn_v and ffn_down Q6_K in the layers use_more_bits picks (the
// first and last eighth of the layers and every third between); every other matrix the target's
// type; then the same fallbacks. `block_count` is the model's layer count (<arch>.block_count).
struct QuantizePlanEntry {
    DType type = DType::F32;
    bool fell_back = false;
    DType wanted = DType::F32;  // the type before a fallback
};
struct QuantizePlanTensor {
    std::string name;
    DType type;
    std::vector<int64_t> shape;
};
std::vector<QuantizePlanEntry> quantize_plan(const std::vector<QuantizePlanTensor>& tensors, const QuantizeTarget& target,
                                             int block_count);

// What happened to one tensor, reported as each is written.
struct QuantizeTensorReport {
    size_t index = 0, count = 0;  // this is tensor index+1 of count
    std::string name;
    DType from = DType::F32, to = DType::F32;
    bool copied = false;          // bytes copied unchanged (1-D, or already of the target type)
    bool fell_back = false;       // row length not a multiple of `wanted`'s block: `to` is a fallback
    DType wanted = DType::F32;
    int64_t row_length = 0;
    uint64_t bytes_in = 0, bytes_out = 0;
};

struct QuantizeSummary {
    size_t n_tensors = 0;
    size_t n_converted = 0;       // re-encoded (dequantized and quantized again)
    size_t n_copied = 0;          // bytes copied unchanged
    size_t n_fallback = 0;        // matrices written in a fallback type (row length not a multiple of the block)
    uint64_t tensor_bytes_in = 0, tensor_bytes_out = 0;  // tensor data only
    uint64_t file_bytes_in = 0, file_bytes_out = 0;      // whole files
};

// Rewrites the GGUF file `in` as `out` with the types quantize_plan gives. ridge::Error (one line,
// naming the file and what is wrong) when `in` is missing, not a GGUF file (a llama2.c checkpoint:
// only GGUF can be rewritten), damaged, or holds a tensor that cannot be dequantized; when `out` is `in`; when `out` cannot be written. `out` appears only when
// complete (written as out.tmp, then renamed). `on_tensor`, if given, is called after each tensor.
QuantizeSummary quantize_model(const std::string& in, const std::string& out, const QuantizeTarget& target,
                               const std::function<void(const QuantizeTensorReport&)>& on_tensor = {});

}  // namespace ridge
