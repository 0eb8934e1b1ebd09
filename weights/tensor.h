// TensorView: a typed, shaped, read-only view into weight bytes (usually the mmapped file).
// Shapes follow GGUF order: shape[0] is the fastest-varying dimension (a row's length),
// so a linear layer W with n outputs and k inputs has shape {k, n} and n rows of k elements.
#pragma once
#include <cstdint>
#include <string>
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

}  // namespace ridge
