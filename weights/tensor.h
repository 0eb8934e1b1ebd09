// TensorView: a typed, shaped, read-only view into weight bytes (usually the mmapped file).
// Shapes follow GGUF order: shape[0] is the fastest-varying dimension (a row's length),
// so a linear layer W with n outputs and k inputs has shape {k, n} and n rows of k elements.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "weights/types.h"

namespace ridge {

struct TensorView {
    std::string name;
    DType type = DType::F32;
    std::vector<int64_t> shape;   // GGUF order: {ne0, ne1, ...}
    const uint8_t* data = nullptr;
    size_t nbytes = 0;

    int64_t n_elements() const {
        int64_t n = 1;
        for (int64_t d : shape) n *= d;
        return n;
    }
    int64_t ne(int i) const { return i < int(shape.size()) ? shape[i] : 1; }
    // Row r (of shape[0] elements) of a 2-D or higher tensor.
    const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes(type, shape[0]); }
};

std::string shape_str(const std::vector<int64_t>& shape);  // "[576, 49152]"

// Lookup shared by GGUFFile and ModelFile: the tensor named `name` in `tensors`, or nullptr.
const TensorView* find_tensor(const std::vector<TensorView>& tensors, std::string_view name);
// The named tensor with one of `types` and exactly `shape`; else ridge::Error
// "<path>: tensor '<name>' has type Q4_1, expected F32 or F16" (or shape, or "not found").
const TensorView& require_tensor(const std::vector<TensorView>& tensors, const std::string& path,
                                 std::string_view name, std::initializer_list<DType> types,
                                 const std::vector<int64_t>& shape);

}  // namespace ridge
