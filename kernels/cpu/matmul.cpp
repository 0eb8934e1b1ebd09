// Linear-layer kernels (see matmul.h): the scalar reference, the OpenMP row-parallel version that
// dequantizes one weight row at a time, and the Eigen path for f32 weights.
#include "kernels/cpu/matmul.h"

#include <Eigen/Dense>

#include "weights/error.h"
#include "weights/quant.h"

namespace ridge::cpu {

namespace {

struct Dims {
    int64_t k;  // row length (inputs)
    int64_t n;  // rows (outputs)
};

Dims check_weight(const TensorView& W, const char* who) {
    if (W.shape.empty() || W.shape.size() > 2 || W.data == nullptr)
        throw Error(std::string(who) + ": weight '" + W.name + "' must be a 2-D tensor, has shape " +
                    shape_str(W.shape));
    const Dims d{W.ne(0), W.ne(1)};
    if (d.k % block_elems(W.type) != 0)
        throw Error(std::string(who) + ": weight '" + W.name + "' row length " + std::to_string(d.k) +
                    " is not a multiple of the " + std::string(dtype_name(W.type)) + " block size " +
                    std::to_string(block_elems(W.type)));
    return d;
}

// sum a[i]*b[i] in f32; the loop is written so the compiler vectorizes it.
inline float dot_f32(const float* a, const float* b, int64_t n) {
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

bool any_loadable(DType t) { return can_dequantize(t); }
bool only_f32(DType t) { return t == DType::F32; }

}  // namespace

Cost matmul_cost(const TensorView& W, int64_t m) {
    const double k = double(W.ne(0)), n = double(W.ne(1));
    Cost c;
    c.flops = 2.0 * double(m) * n * k;
    c.weight_bytes = n * double(row_bytes(W.type, W.ne(0)));  // W once, in its stored format
    c.act_read = 4.0 * double(m) * k;                          // X
    c.act_written = 4.0 * double(m) * n;                       // Y
    return c;
}

// v0: the plain reference. One thread; the row is dequantized with the weights/ reference
// decoder and every dot product is accumulated in double.
Cost matmul_v0_scalar(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v0_scalar");
    std::vector<float> w_row(static_cast<size_t>(d.k));  // (k) one dequantized weight row
    for (int64_t j = 0; j < d.n; j++) {
        dequantize_row(W.type, W.row(j), w_row.data(), d.k);
        for (int64_t i = 0; i < m; i++) {
            double acc = 0.0;
            for (int64_t c = 0; c < d.k; c++) acc += double(X[i * d.k + c]) * double(w_row[c]);
            Y[i * d.n + j] = float(acc);
        }
    }
    return matmul_cost(W, m);
}

// v1: output rows split across OpenMP threads. F32 rows are used in place; any other type is
// dequantized once per row into the thread's buffer and reused for all m input rows.
Cost matmul_v1_rows(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v1_rows");
    const bool is_f32 = W.type == DType::F32;
    const double work = double(m) * double(d.n) * double(d.k);  // multiply-adds
#pragma omp parallel if (work >= kParallelMinWork)
    {
        std::vector<float> w_buf(is_f32 ? 0 : size_t(d.k));  // (k) this thread's dequantized row
#pragma omp for schedule(static)
        for (int64_t j = 0; j < d.n; j++) {
            const float* w_row;  // (k)
            if (is_f32) {
                w_row = reinterpret_cast<const float*>(W.row(j));
            } else {
                dequantize_row(W.type, W.row(j), w_buf.data(), d.k);
                w_row = w_buf.data();
            }
            for (int64_t i = 0; i < m; i++) Y[i * d.n + j] = dot_f32(X + i * d.k, w_row, d.k);
        }
    }
    return matmul_cost(W, m);
}

// v2: F32 weights through Eigen, mapped without a copy: Y (m,n) = X (m,k) * W(n,k)^T.
Cost matmul_v2_eigen(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v2_eigen");
    if (W.type != DType::F32)
        throw Error("matmul_v2_eigen: weight '" + W.name + "' is " + std::string(dtype_name(W.type)) +
                    ", this variant takes F32 only");
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    Eigen::Map<const RowMajor> w(reinterpret_cast<const float*>(W.data), d.n, d.k);  // (n, k)
    Eigen::Map<const RowMajor> x(X, m, d.k);                                        // (m, k)
    Eigen::Map<RowMajor> y(Y, m, d.n);                                              // (m, n)
    if (m == 1)
        y.row(0).noalias() = (w * x.row(0).transpose()).transpose();
    else
        y.noalias() = x * w.transpose();
    return matmul_cost(W, m);
}

Cost matmul(const TensorView& W, const float* X, int64_t m, float* Y) {
    switch (W.type) {
        case DType::F32:
            return matmul_v2_eigen(W, X, m, Y);
        case DType::F16:
        case DType::BF16:
        case DType::Q8_0:
        case DType::Q4_0:
        case DType::Q4_1:
        case DType::Q5_0:
        case DType::Q5_1:
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K:
            return matmul_v1_rows(W, X, m, Y);
        default:
            throw Error("matmul: weight '" + W.name + "' has type " + std::string(dtype_name(W.type)) +
                        ", which ridge cannot multiply");
    }
}

const std::vector<MatmulVariant>& matmul_variants() {
    static const std::vector<MatmulVariant> variants = {
        {"v0_scalar", matmul_v0_scalar, any_loadable},
        {"v1_rows", matmul_v1_rows, any_loadable},
        {"v2_eigen", matmul_v2_eigen, only_f32},
    };
    return variants;
}

}  // namespace ridge::cpu
