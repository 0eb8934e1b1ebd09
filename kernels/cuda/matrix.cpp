// Packing weight matrices into the CUDA kernels' layouts (matrix.h) and copying them to the device.
#include "kernels/cuda/matrix.h"

#include <cstring>
#include <vector>

#include "weights/error.h"
#include "weights/tensor.h"

namespace ridge::cuda {

bool supports(DType t) {
    switch (t) {
        case DType::F32:
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q4_K:
        case DType::Q6_K: return true;
        default: return false;
    }
}

namespace {
size_t align256(size_t x) { return (x + 255) / 256 * 256; }
}  // namespace

MatrixLayout matrix_layout(DType t, int64_t n, int64_t k) {
    MatrixLayout l;
    if (is_split(t)) {
        const size_t blocks = size_t(n) * size_t(k / 32);
        l.codes = 0;
        l.d = align256(blocks * size_t(split_code_bytes(t)));
        l.mins = align256(l.d + blocks * 2);
        l.total = t == DType::Q4_1 ? l.mins + blocks * 2 : l.mins;
    } else {
        l.rows = 0;
        l.total = size_t(n) * row_bytes(t, k);
    }
    return l;
}

Matrix pack_matrix(const TensorView& W, uint8_t* out, const uint8_t* base) {
    if (!supports(W.type))
        throw Error("tensor '" + W.name + "': " + std::string(dtype_name(W.type)) +
                    " weights are not supported by the CUDA kernels (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)");
    if (W.shape.size() != 2 || W.ne(0) % block_elems(W.type) != 0)
        throw Error("tensor '" + W.name + "' of shape " + shape_str(W.shape) +
                    " is not a matrix of whole blocks for the CUDA kernels");
    Matrix m;
    m.type = W.type;
    m.k = W.ne(0);
    m.n = W.ne(1);
    const MatrixLayout l = matrix_layout(W.type, m.n, m.k);
    if (W.nbytes < size_t(m.n) * row_bytes(W.type, m.k))
        throw Error("tensor '" + W.name + "' has " + std::to_string(W.nbytes) + " bytes, fewer than its shape needs");
    if (!is_split(W.type)) {
        std::memcpy(out, W.data, l.total);
        m.rows = base;
        return m;
    }
    const int64_t blocks = m.n * (m.k / 32);
    const int cb = split_code_bytes(W.type);
    const size_t bb = block_bytes(W.type);
    uint8_t* codes = out + l.codes;
    uint8_t* d = out + l.d;
    uint8_t* mins = out + l.mins;
    for (int64_t b = 0; b < blocks; b++) {  // blocks in file order: row by row, 32 elements each
        const uint8_t* blk = W.data + size_t(b) * bb;
        std::memcpy(d + b * 2, blk, 2);  // every split type starts with its f16 d
        if (W.type == DType::Q4_1) {
            std::memcpy(mins + b * 2, blk + 2, 2);
            std::memcpy(codes + b * cb, blk + 4, size_t(cb));
        } else {
            std::memcpy(codes + b * cb, blk + 2, size_t(cb));
        }
    }
    m.codes = base + l.codes;
    m.d = reinterpret_cast<const uint16_t*>(base + l.d);
    m.mins = W.type == DType::Q4_1 ? reinterpret_cast<const uint16_t*>(base + l.mins) : nullptr;
    return m;
}

DeviceMatrix upload_matrix(const TensorView& W) {
    if (W.shape.size() != 2 || !supports(W.type)) pack_matrix(W, nullptr, nullptr);  // throws the error
    const MatrixLayout l = matrix_layout(W.type, W.ne(1), W.ne(0));
    std::vector<uint8_t> host(l.total);
    DeviceMatrix dm;
    dm.storage = DeviceBuffer(l.total);
    dm.view = pack_matrix(W, host.data(), dm.storage.as<uint8_t>());
    dm.storage.upload(host.data(), l.total);
    return dm;
}

}  // namespace ridge::cuda
