// Block geometry and names of the GGUF weight types ridge understands.
#include "weights/types.h"

#include <cctype>
#include <string>

#include "weights/tensor.h"

namespace ridge {

namespace {
struct TypeInfo {
    DType type;
    const char* name;
    int64_t block_elems;
    size_t block_bytes;
};
// Block layouts (bytes): F16/BF16 2 per element; Q4_0 = f16 d + 16 nibbles; Q4_1 = f16 d, m +
// 16; Q5_0 = d + 4 high bits + 16; Q5_1 = d, m + 4 + 16; Q8_0 = d + 32 int8; Q8_1 = f32 d, s +
// 32; K-quants are 256-element super-blocks (see weights/formats/).
constexpr TypeInfo kTypes[] = {
    {DType::F32, "F32", 1, 4},       {DType::F16, "F16", 1, 2},       {DType::BF16, "BF16", 1, 2},
    {DType::Q4_0, "Q4_0", 32, 18},   {DType::Q4_1, "Q4_1", 32, 20},   {DType::Q5_0, "Q5_0", 32, 22},
    {DType::Q5_1, "Q5_1", 32, 24},   {DType::Q8_0, "Q8_0", 32, 34},   {DType::Q8_1, "Q8_1", 32, 40},
    {DType::Q2_K, "Q2_K", 256, 84},  {DType::Q3_K, "Q3_K", 256, 110}, {DType::Q4_K, "Q4_K", 256, 144},
    {DType::Q5_K, "Q5_K", 256, 176}, {DType::Q6_K, "Q6_K", 256, 210}, {DType::Q8_K, "Q8_K", 256, 292},
};

const TypeInfo& info(DType t) {
    for (const TypeInfo& ti : kTypes)
        if (ti.type == t) return ti;
    return kTypes[0];  // unreachable for values made by dtype_from_u32
}
}  // namespace

int64_t block_elems(DType t) { return info(t).block_elems; }
size_t block_bytes(DType t) { return info(t).block_bytes; }
std::string_view dtype_name(DType t) { return info(t).name; }

std::optional<DType> dtype_from_u32(uint32_t v) {
    for (const TypeInfo& ti : kTypes)
        if (uint32_t(ti.type) == v) return ti.type;
    return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) {
    for (const TypeInfo& ti : kTypes) {
        std::string_view n = ti.name;
        if (n.size() != name.size()) continue;
        bool eq = true;
        for (size_t i = 0; i < n.size(); i++)
            if (std::toupper((unsigned char)name[i]) != n[i]) eq = false;
        if (eq) return ti.type;
    }
    return std::nullopt;
}

std::string shape_str(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

}  // namespace ridge
