// Tensor lookup by name with type and shape checks, shared by GGUFFile and ModelFile.
// A mismatch names the file, the tensor, what was expected and what was found.
#include <algorithm>

#include "weights/error.h"
#include "weights/tensor.h"

namespace ridge {

const TensorView* find_tensor(const std::vector<TensorView>& tensors, std::string_view name) {
    for (const TensorView& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

const TensorView& require_tensor(const std::vector<TensorView>& tensors, const std::string& path,
                                 std::string_view name, std::initializer_list<DType> types,
                                 const std::vector<int64_t>& shape) {
    const TensorView* t = find_tensor(tensors, name);
    if (!t) throw Error(path + ": tensor '" + std::string(name) + "' not found");
    if (std::find(types.begin(), types.end(), t->type) == types.end()) {
        std::string expected;
        for (DType d : types) expected += (expected.empty() ? "" : " or ") + std::string(dtype_name(d));
        throw Error(path + ": tensor '" + t->name + "' has type " + std::string(dtype_name(t->type)) +
                    ", expected " + expected);
    }
    if (t->shape != shape)
        throw Error(path + ": tensor '" + t->name + "' has shape " + shape_str(t->shape) + ", expected " +
                    shape_str(shape));
    return *t;
}

}  // namespace ridge
