// v6_packed (see matmul.h): prefill as a hand-written GEMM, Y (m, n) = X (m, k) . W^T.
//
//   X is packed once per call into panels of kMr = 6 rows, column by column (xp[c*6 + r]).
//   OpenMP hands out W's panels of kNr = 16 rows (32 where the build has AVX-512) one at a time,
//   as threads come free (a static split leaves the quicker core of a shared machine waiting);
//   each panel is dequantized once, packed the same way (wp[c*kNr + j]) and multiplied by every X
//   panel with a 6 x kNr register tile: per column c, two vectors of 8 (16) weights, six broadcast
//   activations, twelve FMAs into twelve accumulators (the 12 independent chains keep both FMA
//   units busy through their latency). The zmm tile is much the faster where the build has
//   AVX-512 (docs/measurements/source-comment-history.md).
//
// Every output element is a single FMA chain over c = 0 .. k-1 in order, so its rounding does not
// depend on m, on the panel it falls in, or on the other rows: unlike a library GEMM, whose blocking
// changes with the sizes.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"

namespace ridge::cpu {

namespace {

#if RIDGE_CPU_SIMD
using simd::Vec;
constexpr int kNr = 2 * Vec::kLanes;  // weight rows per panel (register tile width: two vectors)
#else
constexpr int kNr = 16;
#endif
constexpr int kMr = 6;  // rows of X per panel (register tile height)
// Columns of k per slice: a slice of the packed weights is kNr * kKc floats, 32 KiB with AVX-512,
// within the 48 KiB L1 of the machines measured (docs/measurements/).
constexpr int64_t kKc = 256;

// X rows [i0, i0 + kMr) -> xp (k, kMr): xp[c * kMr + r] = X[i0 + r][c], rows past m as zeros.
void pack_x(const float* X, int64_t m, int64_t k, int64_t i0, float* xp) {
    for (int r = 0; r < kMr; r++) {
        const float* x = X + (i0 + r) * k;
        for (int64_t c = 0; c < k; c++) xp[c * kMr + r] = i0 + r < m ? x[c] : 0.0f;
    }
}

// rows (<= kNr) f32 weight rows w (rows, k) -> wp (k, kNr): wp[c * kNr + j] = w[j][c], zeros past rows.
void pack_w(const float* w, int64_t rows, int64_t k, float* wp) {
    for (int64_t j = 0; j < kNr; j++)
        for (int64_t c = 0; c < k; c++) wp[c * kNr + j] = j < rows ? w[j * k + c] : 0.0f;
}

#if RIDGE_CPU_SIMD
// acc[r][j] += sum_c xp[c][r] * wp[c][j] over c = 0 .. kc-1 in order (xp and wp with row strides
// kMr and kNr), for the whole kMr x kNr tile; acc (kMr, kNr) is read first unless `first`, in
// which case the chains start from zero. A stored f32 reloaded is the same value, so a chain
// taken in several calls rounds as one call over all of k.
// Cost: 2 * kMr * kNr * kc FLOPs; reads kc columns of both panels (in L1).
inline void tile(const float* xp, const float* wp, int64_t kc, float* acc_mem, bool first) {
    Vec::T acc[kMr][2];
    for (int r = 0; r < kMr; r++) {
        acc[r][0] = first ? Vec::zero() : Vec::load(acc_mem + r * kNr);
        acc[r][1] = first ? Vec::zero() : Vec::load(acc_mem + r * kNr + Vec::kLanes);
    }
    for (int64_t c = 0; c < kc; c++) {
        const Vec::T w0 = Vec::load(wp + c * kNr), w1 = Vec::load(wp + c * kNr + Vec::kLanes);
        for (int r = 0; r < kMr; r++) {
            const Vec::T x = Vec::broadcast(xp + c * kMr + r);
            acc[r][0] = Vec::fma(x, w0, acc[r][0]);
            acc[r][1] = Vec::fma(x, w1, acc[r][1]);
        }
    }
    for (int r = 0; r < kMr; r++) {
        Vec::store(acc_mem + r * kNr, acc[r][0]);
        Vec::store(acc_mem + r * kNr + Vec::kLanes, acc[r][1]);
    }
}
#else
// The same arithmetic without AVX2: one fmaf chain per element over c in order.
inline void tile(const float* xp, const float* wp, int64_t kc, float* acc_mem, bool first) {
    for (int r = 0; r < kMr; r++)
        for (int j = 0; j < kNr; j++) {
            float acc = first ? 0.0f : acc_mem[r * kNr + j];
            for (int64_t c = 0; c < kc; c++) acc = std::fma(xp[c * kMr + r], wp[c * kNr + j], acc);
            acc_mem[r * kNr + j] = acc;
        }
}
#endif

}  // namespace

Cost matmul_v6_packed(const TensorView& W, const float* X, int64_t m, float* Y) {
    const Dims d = check_weight(W, "matmul_v6_packed");
    const int64_t k = d.k, n = d.n;
    const int64_t x_panels = (m + kMr - 1) / kMr, w_panels = (n + kNr - 1) / kNr;
    // The packed X is shared by the threads; kept between calls so a prompt chunk's matmuls do not
    // each map and fault in a few MB.
    static thread_local std::vector<float> xp;
    if (xp.size() < size_t(x_panels * kMr * k)) xp.resize(size_t(x_panels * kMr * k));
    float* xp_data = xp.data();
    const double work = double(m) * double(n) * double(k);
#pragma omp parallel if (work >= kParallelMinWork)
    {
#pragma omp for schedule(static)
        for (int64_t p = 0; p < x_panels; p++) pack_x(X, m, k, p * kMr, xp_data + p * kMr * k);
        // (the implicit barrier: every X panel is packed before any tile reads it)
        std::vector<float> w_rows(W.type == DType::F32 ? 0 : size_t(kNr * k));  // (kNr, k) dequantized
        std::vector<float> wp(size_t(kNr * k));                                  // (k, kNr) packed
        std::vector<float> acc(size_t(x_panels * kMr * kNr));                    // Y's (m, kNr) panel
#pragma omp for schedule(dynamic)
        for (int64_t q = 0; q < w_panels; q++) {
            const int64_t j0 = q * kNr, rows = std::min<int64_t>(kNr, n - j0);
            const float* w = reinterpret_cast<const float*>(W.row(j0));
            if (W.type != DType::F32) {
                dequantize_rows(W, j0, rows, k, w_rows.data());
                w = w_rows.data();
            }
            pack_w(w, rows, k, wp.data());
            // k in slices of kKc columns: a slice of the packed panel (kNr x kKc floats) stays in
            // L1 while every X panel passes over it, the tiles' running sums waiting in acc.
            for (int64_t c0 = 0; c0 < k; c0 += kKc) {
                const int64_t kc = std::min<int64_t>(kKc, k - c0);
                for (int64_t p = 0; p < x_panels; p++)
                    tile(xp_data + p * kMr * k + c0 * kMr, wp.data() + c0 * kNr, kc, acc.data() + p * kMr * kNr,
                         c0 == 0);
            }
            for (int64_t p = 0; p < x_panels; p++) {
                const int64_t i0 = p * kMr, x_rows = std::min<int64_t>(kMr, m - i0);
                for (int64_t r = 0; r < x_rows; r++) {
                    const float* a = acc.data() + (p * kMr + r) * kNr;
                    std::copy(a, a + rows, Y + (i0 + r) * n + j0);
                }
            }
        }
    }
    return matmul_cost(W, m);
}

}  // namespace ridge::cpu
