// The GGUF weight types by number and by name (see types.h).
#include "weights/types.h"

#include <cctype>
#include <string>

#include "weights/tensor.h"

namespace ridge {

std::optional<DType> dtype_from_u32(uint32_t v) {
    for (const TypeInfo& ti : kTypeInfo)
        if (uint32_t(ti.type) == v) return ti.type;
    return std::nullopt;
}

std::optional<DType> dtype_from_name(std::string_view name) {
    for (const TypeInfo& ti : kTypeInfo) {
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
