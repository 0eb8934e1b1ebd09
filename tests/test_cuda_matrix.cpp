// The CUDA kernels' weight layout and decode (kernels/cuda/matrix.h), checked on the CPU: no GPU
// needed. The packed layout read through element() and decode32() on the host gives
// dequantize_row's values for every supported type, so the device kernels that call the same
// functions start from checked math.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/cuda/matrix.h"
#include "weights/error.h"
#include "weights/quant.h"

namespace ridge {
namespace {

const DType kCudaTypes[] = {DType::F32, DType::F16, DType::BF16, DType::Q8_0,
                            DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q6_K};

struct Packed {
    std::vector<uint8_t> bytes;
    cuda::Matrix m;
};
Packed pack_on_host(const TensorView& W) {
    Packed p;
    p.bytes.resize(cuda::matrix_layout(W.type, W.ne(1), W.ne(0)).total);
    p.m = cuda::pack_matrix(W, p.bytes.data(), p.bytes.data());
    return p;
}

TEST(CudaMatrix, PackedElementsAreTheDequantizedWeights) {
    uint32_t seed = 100;
    for (DType t : kCudaTypes) {
        const int64_t k = block_elems(t) == 256 ? 512 : 96, n = 7;
        const test::OwnedWeight w = test::random_weight(t, n, k, seed++);
        const Packed p = pack_on_host(w.view);
        ASSERT_EQ(p.m.type, t);
        ASSERT_EQ(p.m.k, k);
        ASSERT_EQ(p.m.n, n);
        EXPECT_EQ(cuda::is_split(t), p.m.codes != nullptr) << dtype_name(t);
        std::vector<float> ref(static_cast<size_t>(k)), blk(32);
        for (int64_t j = 0; j < n; j++) {
            dequantize_row(t, w.view.row(j), ref.data(), k);
            for (int64_t c = 0; c < k; c++)
                ASSERT_EQ(cuda::element(p.m, j, c), ref[size_t(c)]) << dtype_name(t) << " row " << j << " col " << c;
            for (int64_t s = 0; s < k / 32; s++) {
                cuda::decode32(p.m, j, s, blk.data());
                for (int i = 0; i < 32; i++)
                    ASSERT_EQ(blk[size_t(i)], ref[size_t(32 * s + i)])
                        << dtype_name(t) << " row " << j << " block " << s << " element " << i;
            }
        }
    }
}

TEST(CudaMatrix, SplitLayoutKeepsTheBytesAndAlignsTheArrays) {
    for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q8_0}) {
        const int64_t n = 5, k = 64;
        const cuda::MatrixLayout l = cuda::matrix_layout(t, n, k);
        const size_t blocks = size_t(n * k / 32);
        EXPECT_EQ(l.d % 256, 0u);
        EXPECT_EQ(l.mins % 256, 0u);
        EXPECT_GE(l.d, blocks * size_t(cuda::split_code_bytes(t)));
        // The arrays hold exactly the file's bytes (codes, scales and for Q4_1 the minimums).
        const size_t used = blocks * size_t(cuda::split_code_bytes(t)) + blocks * 2 + (t == DType::Q4_1 ? blocks * 2 : 0);
        EXPECT_EQ(used, size_t(n) * row_bytes(t, k)) << dtype_name(t);
    }
    EXPECT_EQ(cuda::matrix_layout(DType::F16, 3, 10).total, 60u);
}

TEST(CudaMatrix, RejectsWhatTheKernelsCannotRead) {
    const test::OwnedWeight q5 = test::random_weight(DType::Q5_K, 2, 256, 7);
    std::vector<uint8_t> out(q5.bytes.size() * 2);
    try {
        cuda::pack_matrix(q5.view, out.data(), out.data());
        FAIL() << "Q5_K packed";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("Q5_K"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(q5.view.name), std::string::npos) << e.what();
    }
    test::OwnedWeight v = test::random_weight(DType::F32, 2, 8, 8);
    v.view.shape = {8, 2, 1, 1};
    v.view.shape.resize(3);
    EXPECT_THROW(cuda::pack_matrix(v.view, out.data(), out.data()), Error);
    EXPECT_FALSE(cuda::supports(DType::Q5_0));
    EXPECT_TRUE(cuda::supports(DType::Q6_K));
}

}  // namespace
}  // namespace ridge
