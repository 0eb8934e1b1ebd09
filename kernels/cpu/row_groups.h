// The loop the row-exact matmul kernels (v3_simd, v4_int, v4_int_k) run over a share of output
// rows: kRows weight rows at a time, so that each decoded weight block serves several rows of X,
// and for each group of weight rows the rows of X kXRows at a time.
#pragma once
#include <algorithm>
#include <cstdint>

namespace ridge::cpu {

// Output rows [j_begin, j_end) of Y (m, n). row(j) is weight row j's bytes; dot.template
// operator()<R, M>(w, i, y, y_stride) computes weight rows w[0..R) against rows i .. i+M-1 of X
// into y (row i of Y at y, row i+1 at y + y_stride). Whole groups take <kRows, kXRows> and a last
// odd row of X <kRows, 1>. A short last group of weight rows goes one by one, <1, 1>; or, with
// kPad, as a whole group whose missing rows repeat its last one, into scratch (for kernels whose
// arithmetic per output is only the same when every group is whole).
template <int kRows, int kXRows, bool kPad = false, class Row, class Dot>
inline void for_row_groups(int64_t j_begin, int64_t j_end, int64_t m, int64_t n, float* Y, Row&& row, Dot&& dot) {
    for (int64_t j0 = j_begin; j0 < j_end; j0 += kRows) {
        const int64_t rows = std::min<int64_t>(kRows, j_end - j0);
        const uint8_t* w[kRows];
        for (int64_t r = 0; r < kRows; r++) w[r] = r < rows ? row(j0 + r) : w[rows - 1];
        for (int64_t i = 0; i < m; i += kXRows) {
            const int64_t xr = std::min<int64_t>(kXRows, m - i);
            float* y = Y + i * n + j0;
            if (rows == kRows && xr == kXRows) {
                dot.template operator()<kRows, kXRows>(w, i, y, n);
            } else if (rows == kRows) {
                for (int64_t ii = 0; ii < xr; ii++) dot.template operator()<kRows, 1>(w, i + ii, y + ii * n, n);
            } else if constexpr (kPad) {
                float tmp[kXRows * kRows];
                for (int64_t ii = 0; ii < xr; ii++) {
                    dot.template operator()<kRows, 1>(w, i + ii, tmp + ii * kRows, int64_t(kRows));
                    for (int64_t r = 0; r < rows; r++) y[ii * n + r] = tmp[ii * kRows + r];
                }
            } else {
                for (int64_t r = 0; r < rows; r++)
                    for (int64_t ii = 0; ii < xr; ii++) dot.template operator()<1, 1>(w + r, i + ii, y + ii * n + r, n);
            }
        }
    }
}

}  // namespace ridge::cpu
