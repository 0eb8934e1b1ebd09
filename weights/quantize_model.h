// quantize_model: rewrite a GGUF model with another weight type (`ridge quantize`). Every matrix
// (2-D or more) is dequantized row by row to f32 and re-encoded in the target type; 1-D tensors
// (norm weights) are copied unchanged; metadata is kept, with general.file_type set to the
// llama.cpp LLAMA_FTYPE of the target. One tensor at a time is read from the mmapped input and
// streamed to the output (see weights/gguf_writer.h), never the whole model in memory.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "weights/types.h"

namespace ridge {

// The target types: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (those quantize_row can write).
// From "q8_0", "f16", ... (case-insensitive); nullopt for anything else.
std::optional<DType> quantize_target_from_name(std::string_view name);
std::string quantize_target_names();  // "q8_0, q4_0, q4_1, q5_0, q5_1, f16, bf16, f32"
// llama.cpp's llama_ftype for a file whose matrices are mostly `t` (ALL_F32 = 0, MOSTLY_F16 = 1,
// MOSTLY_Q4_0 = 2, MOSTLY_Q4_1 = 3, MOSTLY_Q8_0 = 7, MOSTLY_Q5_0 = 8, MOSTLY_Q5_1 = 9,
// MOSTLY_BF16 = 32); ridge::Error for a type that is not a target.
uint32_t llama_ftype_of(DType t);

// What happened to one tensor, reported as each is written.
struct QuantizeTensorReport {
    size_t index = 0, count = 0;  // this is tensor index+1 of count
    std::string name;
    DType from = DType::F32, to = DType::F32;
    bool copied = false;          // bytes copied unchanged (1-D, or already of the target type)
    bool fell_back = false;       // row length not a multiple of the target's block: `to` is F16
    int64_t row_length = 0;
    uint64_t bytes_in = 0, bytes_out = 0;
};

struct QuantizeSummary {
    size_t n_tensors = 0;
    size_t n_converted = 0;       // re-encoded (dequantized and quantized again)
    size_t n_copied = 0;          // bytes copied unchanged
    size_t n_fallback = 0;        // matrices written as F16 (row length not a multiple of the target's block)
    uint64_t tensor_bytes_in = 0, tensor_bytes_out = 0;  // tensor data only
    uint64_t file_bytes_in = 0, file_bytes_out = 0;      // whole files
};

// Rewrites the GGUF file `in` as `out` with matrices of type `target`. ridge::Error (one line,
// naming the file and what is wrong) when `in` is missing, not a GGUF file (a llama2.c checkpoint:
// only GGUF can be rewritten), damaged, or holds a tensor that cannot be dequantized; when `target`
// is not a target type; when `out` is `in`; when `out` cannot be written. `out` appears only when
// complete (written as out.tmp, then renamed). `on_tensor`, if given, is called after each tensor.
QuantizeSummary quantize_model(const std::string& in, const std::string& out, DType target,
                               const std::function<void(const QuantizeTensorReport&)>& on_tensor = {});

}  // namespace ridge
