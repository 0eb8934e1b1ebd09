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

// Each type's name and block geometry.
struct TypeInfo {
    DType type;
    const char* name;
    int64_t block_elems;
    size_t block_bytes;
};
// Block layouts (bytes): F16/BF16 2 per element; Q4_0 = f16 d + 16 nibbles; Q4_1 = f16 d, m +
// 16; Q5_0 = d + 4 high bits + 16; Q5_1 = d, m + 4 + 16; Q8_0 = d + 32 int8; Q8_1 = f32 d, s +
// 32; K-quants are 256-element super-blocks (see weights/formats/).
inline constexpr TypeInfo kTypeInfo[] = {
    {DType::F32, "F32", 1, 4},       {DType::F16, "F16", 1, 2},       {DType::BF16, "BF16", 1, 2},
    {DType::Q4_0, "Q4_0", 32, 18},   {DType::Q4_1, "Q4_1", 32, 20},   {DType::Q5_0, "Q5_0", 32, 22},
    {DType::Q5_1, "Q5_1", 32, 24},   {DType::Q8_0, "Q8_0", 32, 34},   {DType::Q8_1, "Q8_1", 32, 40},
    {DType::Q2_K, "Q2_K", 256, 84},  {DType::Q3_K, "Q3_K", 256, 110}, {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176}, {DType::Q6_K, "Q6_K", 256, 210}, {DType::Q8_K, "Q8_K", 256, 292},
};

constexpr const TypeInfo& type_info(DType t) {
    for (const TypeInfo& ti : kTypeInfo)
        if (ti.type == t) return ti;
    return kTypeInfo[0];  // unreachable for values made by dtype_from_u32
}

// Elements per block (1 for float types, 32 for Q*_0/_1, 256 for K-quants).
constexpr int64_t block_elems(DType t) { return type_info(t).block_elems; }
// Bytes per block.
constexpr size_t block_bytes(DType t) { return type_info(t).block_bytes; }
// Bytes of a row of n elements; n must be a multiple of block_elems(t).
inline size_t row_bytes(DType t, int64_t n) { return size_t(n / block_elems(t)) * block_bytes(t); }
// "Q4_1", "F32", ...
constexpr std::string_view dtype_name(DType t) { return type_info(t).name; }
// The types ridge can load and dequantize; nullopt for anything else (including unknown numbers).
std::optional<DType> dtype_from_u32(uint32_t v);
std::optional<DType> dtype_from_name(std::string_view name);  // case-insensitive "q4_1"

}  // namespace ridge
