// Weight element types as numbered by GGUF (ggml_type), with their block geometry.
// A row of n elements of type t occupies n / block_elems(t) * block_bytes(t) bytes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ridge {

enum class DType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, BF16 = 30,
};

// Elements per block (1 for float types, 32 for Q*_0/_1, 256 for K-quants).
int64_t block_elems(DType t);
// Bytes per block.
size_t block_bytes(DType t);
// Bytes of a row of n elements; n must be a multiple of block_elems(t).
inline size_t row_bytes(DType t, int64_t n) { return size_t(n / block_elems(t)) * block_bytes(t); }
// "Q4_1", "F32", ...
std::string_view dtype_name(DType t);
// The types ridge can load and dequantize; nullopt for anything else (including unknown numbers).
std::optional<DType> dtype_from_u32(uint32_t v);
std::optional<DType> dtype_from_name(std::string_view name);  // case-insensitive "q4_1"

}  // namespace ridge
