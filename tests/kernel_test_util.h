// Helpers shared by the kernel and engine tests: seeded random inputs, random weight matrices of
// any loadable type, the `atol + rtol*|ref|` closeness check used against scalar twins, and the
// check that an integer kernel gives a row of X alone what it gives that row in a batch.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/f16.h"
#include "kernels/cpu/matmul.h"
#include "weights/quant.h"
#include "weights/tensor.h"
#include "weights/types.h"

namespace ridge::test {

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// Expects |got - ref| <= atol + rtol*|ref| element-wise; reports the first few misses.
inline void expect_close(const float* got, const float* ref, size_t n, double atol, double rtol,
                         const std::string& what) {
    int misses = 0;
    for (size_t i = 0; i < n; i++) {
        const double tol = atol + rtol * std::fabs(double(ref[i]));
        if (!(std::fabs(double(got[i]) - double(ref[i])) <= tol)) {
            if (++misses <= 5)
                ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << ref[i]
                              << " (tol " << tol << ")";
        }
    }
    EXPECT_EQ(misses, 0) << what << ": " << misses << " of " << n << " elements out of tolerance";
}

// A weight matrix with n rows of k elements of type t, built from seeded random values: the simple
// formats go through quantize_row; K-quant blocks get random bytes with sane f16 scale fields.
struct OwnedWeight {
    std::vector<uint8_t> bytes;
    TensorView view;
};

inline void put_f16(uint8_t* p, float v) {
    const uint16_t h = cpu::f32_to_f16(v);
    std::memcpy(p, &h, 2);
}

inline OwnedWeight random_weight(DType t, int64_t n, int64_t k, uint32_t seed) {
    OwnedWeight w;
    const size_t rb = row_bytes(t, k);
    w.bytes.resize(rb * size_t(n));
    const std::vector<float> vals = random_floats(size_t(n * k), seed);
    std::mt19937 rng(seed ^ 0x9e3779b9u);
    switch (t) {
        case DType::Q4_K:
        case DType::Q5_K:
        case DType::Q6_K: {
            for (uint8_t& b : w.bytes) b = uint8_t(rng());
            const size_t bb = block_bytes(t);
            std::uniform_real_distribution<float> scale(0.001f, 0.02f);
            for (size_t off = 0; off < w.bytes.size(); off += bb) {
                if (t == DType::Q6_K) {
                    put_f16(&w.bytes[off + bb - 2], scale(rng));  // d at the end of the block
                } else {
                    put_f16(&w.bytes[off], scale(rng));      // d
                    put_f16(&w.bytes[off + 2], scale(rng));  // dmin
                }
            }
            break;
        }
        default:
            for (int64_t r = 0; r < n; r++) quantize_row(t, vals.data() + r * k, w.bytes.data() + size_t(r) * rb, k);
    }
    w.view.name = std::string("random_") + std::string(dtype_name(t));
    w.view.type = t;
    w.view.shape = {k, n};
    w.view.data = w.bytes.data();
    w.view.nbytes = w.bytes.size();
    return w;
}

// For an integer-input kernel (matmul_v4_int, matmul_v4_int_k): each of X's m rows (m x k) quantized
// and multiplied alone gives, bit for bit, its row of the product with all m rows at once.
inline void expect_rows_alone_as_in_batch(const TensorView& W, const std::vector<float>& X, int64_t m, int64_t k,
                                          cpu::Cost (*matmul)(const TensorView&, const cpu::QuantizedRows&, float*)) {
    const int64_t n = W.ne(1);
    cpu::QuantizedRows all;
    cpu::quantize_rows(X.data(), m, k, all);
    std::vector<float> batch(size_t(m * n));
    matmul(W, all, batch.data());
    for (int64_t i = 0; i < m; i++) {
        cpu::QuantizedRows one;
        cpu::quantize_rows(X.data() + i * k, 1, k, one);
        std::vector<float> y(size_t(n), -99.0f);
        matmul(W, one, y.data());
        for (int64_t j = 0; j < n; j++)
            ASSERT_EQ(y[size_t(j)], batch[size_t(i * n + j)])
                << dtype_name(W.type) << " n=" << n << " row " << i << " output " << j;
    }
}

// For an integer-input kernel in a given form (matmul_v4_int_as, matmul_v4_int_k_as): the m rows of X
// (m x k, row 3 set to zeros for the signed zeros) multiplied all at once, in order and shuffled
// (row i of the shuffle is row (29 i + 7) % m), give each row memcmp-equal to the same row alone.
inline void expect_any_order_as_alone(const TensorView& W, std::vector<float> X, int64_t m, int64_t k, cpu::IntForm form,
                                      cpu::Cost (*matmul)(const TensorView&, const cpu::QuantizedRows&, float*, cpu::IntForm)) {
    const int64_t n = W.ne(1);
    if (m > 3) std::fill_n(X.begin() + 3 * k, k, 0.0f);
    std::vector<int64_t> order(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; i++) order[size_t(i)] = (i * 29 + 7) % m;
    std::vector<float> X_shuffled(X.size());
    for (int64_t i = 0; i < m; i++) std::copy_n(X.data() + order[size_t(i)] * k, k, X_shuffled.data() + i * k);
    auto run = [&](const float* x, int64_t rows) {
        cpu::QuantizedRows q;
        cpu::quantize_rows(x, rows, k, q);
        std::vector<float> y(size_t(rows * n), -99.0f);
        matmul(W, q, y.data(), form);
        return y;
    };
    const std::vector<float> batch = run(X.data(), m), shuffled = run(X_shuffled.data(), m);
    for (int64_t i = 0; i < m; i++) {
        const std::vector<float> alone = run(X.data() + order[size_t(i)] * k, 1);
        const std::string where = std::string(dtype_name(W.type)) + (form == cpu::IntForm::ymm ? " ymm" : " zmm") +
                                  " k=" + std::to_string(k) + " n=" + std::to_string(n) + " m=" + std::to_string(m) +
                                  " row " + std::to_string(order[size_t(i)]);
        ASSERT_EQ(std::memcmp(alone.data(), batch.data() + order[size_t(i)] * n, sizeof(float) * size_t(n)), 0)
            << where << " (in the batch)";
        ASSERT_EQ(std::memcmp(alone.data(), shuffled.data() + i * n, sizeof(float) * size_t(n)), 0)
            << where << " (shuffled, at " << i << ")";
    }
}

// matmul_v7_int_packed in the signature expect_any_order_as_alone takes (it has one form).
inline cpu::Cost v7_int_packed_as(const TensorView& W, const cpu::QuantizedRows& X, float* Y, cpu::IntForm) {
    return cpu::matmul_v7_int_packed(W, X, Y);
}

inline const std::vector<DType>& all_weight_types() {
    static const std::vector<DType> types = {DType::F32,  DType::F16,  DType::BF16, DType::Q8_0,
                                             DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                                             DType::Q4_K, DType::Q5_K, DType::Q6_K};
    return types;
}

}  // namespace ridge::test
