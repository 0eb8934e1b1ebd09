// Embedding, RMSNorm, RoPE, softmax, SwiGLU and residual add (see ops.h): each scalar twin first,
// then the version the engine calls.
#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/cpu/simd.h"
#include "weights/error.h"
#include "weights/quant.h"

namespace ridge::cpu {

// ---- embedding lookup -------------------------------------------------------------------

namespace {
void check_token(const TensorView& table, int32_t tok, int64_t row) {
    if (tok < 0 || tok >= table.ne(1))
        throw Error("embed: token id " + std::to_string(tok) + " at row " + std::to_string(row) +
                    " is outside the vocabulary [0, " + std::to_string(table.ne(1)) + ") of '" +
                    table.name + "'");
}
}  // namespace

Cost embed_v0_scalar(const TensorView& table, const int32_t* tokens, int64_t m, float* out) {
    const int64_t d = table.ne(0);
    for (int64_t i = 0; i < m; i++) {
        check_token(table, tokens[i], i);
        dequantize_row(table.type, table.row(tokens[i]), out + i * d, d);
    }
    return embed_cost(table, m);
}

Cost embed_v1_omp(const TensorView& table, const int32_t* tokens, int64_t m, float* out) {
    const int64_t d = table.ne(0);
    for (int64_t i = 0; i < m; i++) check_token(table, tokens[i], i);  // throw outside the team
    parallel_for(m, double(m * d) >= kParallelMinWork,
                 [&](int64_t i) { dequantize_row(table.type, table.row(tokens[i]), out + i * d, d); });
    return embed_cost(table, m);
}

// ---- RMSNorm ------------------------------------------------------------------------------

Cost rmsnorm_v0_scalar(const float* x, const float* w, int64_t m, int64_t d, float eps, float* y) {
    for (int64_t i = 0; i < m; i++) {
        const float* x_row = x + i * d;  // (d)
        float* y_row = y + i * d;        // (d)
        double sum_sq = 0.0;
        for (int64_t c = 0; c < d; c++) sum_sq += double(x_row[c]) * double(x_row[c]);
        const double inv_rms = 1.0 / std::sqrt(sum_sq / double(d) + double(eps));
        for (int64_t c = 0; c < d; c++) y_row[c] = float(double(w[c]) * (double(x_row[c]) * inv_rms));
    }
    return rmsnorm_cost(m, d);
}

Cost rmsnorm_v1_omp(const float* x, const float* w, int64_t m, int64_t d, float eps, float* y) {
    parallel_for(m, double(m * d) >= kParallelMinWork, [&](int64_t i) {
        const float* x_row = x + i * d;  // (d)
        float* y_row = y + i * d;        // (d)
        float sum_sq = 0.0f;
#pragma omp simd reduction(+ : sum_sq)
        for (int64_t c = 0; c < d; c++) sum_sq += x_row[c] * x_row[c];
        const float inv_rms = 1.0f / std::sqrt(sum_sq / float(d) + eps);
#pragma omp simd
        for (int64_t c = 0; c < d; c++) y_row[c] = w[c] * (x_row[c] * inv_rms);
    });
    return rmsnorm_cost(m, d);
}

// ---- rotary position embedding ----------------------------------------------------------------

namespace {
void check_rope(const RopeParams& p) {
    if (p.rope_dim <= 0 || p.rope_dim % 2 != 0 || p.rope_dim > p.head_dim)
        throw Error("rope: rope_dim " + std::to_string(p.rope_dim) + " must be even, positive and <= head_dim " +
                    std::to_string(p.head_dim));
}
// Rotates every head of one row by the precomputed cos/sin of its position.
inline void rope_row(float* x_row, int n_heads, const RopeParams& p, const float* cos_t, const float* sin_t) {
    const int n_pairs = p.rope_dim / 2;
    for (int h = 0; h < n_heads; h++) {
        float* head = x_row + int64_t(h) * p.head_dim;  // (head_dim)
        for (int i = 0; i < n_pairs; i++) {
            int ia, ib;
            rope_pair(p.style, i, p.rope_dim, &ia, &ib);
            const float a = head[ia], b = head[ib];
            head[ia] = a * cos_t[i] - b * sin_t[i];
            head[ib] = a * sin_t[i] + b * cos_t[i];
        }
    }
}
}  // namespace

Cost rope_v0_scalar(float* x, const int32_t* pos, int64_t m, int n_heads, const RopeParams& p) {
    check_rope(p);
    const int n_pairs = p.rope_dim / 2;
    for (int64_t r = 0; r < m; r++) {
        for (int h = 0; h < n_heads; h++) {
            float* head = x + (r * n_heads + h) * p.head_dim;  // (head_dim)
            for (int i = 0; i < n_pairs; i++) {
                const double t = rope_angle(pos[r], i, p.rope_dim, p.freq_base);
                int ia, ib;
                rope_pair(p.style, i, p.rope_dim, &ia, &ib);
                const double a = head[ia], b = head[ib];
                head[ia] = float(a * std::cos(t) - b * std::sin(t));
                head[ib] = float(a * std::sin(t) + b * std::cos(t));
            }
        }
    }
    return rope_cost(m, n_heads, p);
}

void rope_table(const int32_t* pos, int64_t m, const RopeParams& p, RopeTable& t) {
    check_rope(p);
    const int n_pairs = p.rope_dim / 2;
    t.p = p;
    t.m = m;
    t.cos_t.resize(size_t(m * n_pairs));
    t.sin_t.resize(size_t(m * n_pairs));
    for (int64_t r = 0; r < m; r++)
        for (int i = 0; i < n_pairs; i++) {
            const double a = rope_angle(pos[r], i, p.rope_dim, p.freq_base);
            t.cos_t[size_t(r * n_pairs + i)] = float(std::cos(a));
            t.sin_t[size_t(r * n_pairs + i)] = float(std::sin(a));
        }
}

Cost rope_with_table(float* x, const RopeTable& t, int n_heads) {
    const RopeParams& p = t.p;
    const int n_pairs = p.rope_dim / 2;
    const int64_t row_len = int64_t(n_heads) * p.head_dim;
    parallel_for(t.m, double(t.m) * n_heads * p.rope_dim >= kParallelMinWork, [&](int64_t r) {
        rope_row(x + r * row_len, n_heads, p, t.cos_t.data() + r * n_pairs, t.sin_t.data() + r * n_pairs);
    });
    return rope_cost(t.m, n_heads, p);
}

Cost rope_v1_omp(float* x, const int32_t* pos, int64_t m, int n_heads, const RopeParams& p) {
    RopeTable t;
    rope_table(pos, m, p, t);
    return rope_with_table(x, t, n_heads);
}

// ---- softmax ----------------------------------------------------------------------------

Cost softmax_v0_scalar(float* x, int64_t n) {
    double max_x = x[0];
    for (int64_t c = 1; c < n; c++) max_x = std::max(max_x, double(x[c]));
    double sum = 0.0;
    std::vector<double> e(static_cast<size_t>(n));  // (n) exp(x - max)
    for (int64_t c = 0; c < n; c++) {
        e[c] = std::exp(double(x[c]) - max_x);
        sum += e[c];
    }
    for (int64_t c = 0; c < n; c++) x[c] = float(e[c] / sum);
    return softmax_cost(n);
}

Cost softmax_v1(float* x, int64_t n) {
    float max_x = x[0];
    for (int64_t c = 1; c < n; c++) max_x = std::max(max_x, x[c]);
    double sum = 0.0;  // a double sum keeps long rows (a vocabulary) accurate to ~1e-7
#if RIDGE_CPU_SIMD
    // simd::exp8, 8 at a time; the last partial vector through a padded copy (as swiglu).
    __m256d sum4 = _mm256_setzero_pd();
    for (int64_t c = 0; c < n; c += 8) {
        const int64_t len = std::min<int64_t>(8, n - c);
        float x8[8] = {};
        std::copy(x + c, x + c + len, x8);
        const __m256 e = simd::exp8(_mm256_sub_ps(_mm256_loadu_ps(x8), _mm256_set1_ps(max_x)));
        if (len == 8) {
            _mm256_storeu_ps(x + c, e);
            sum4 = _mm256_add_pd(sum4, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(e)),
                                                      _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1))));
        } else {
            _mm256_storeu_ps(x8, e);
            for (int64_t j = 0; j < len; j++) x[c + j] = x8[j], sum += x8[j];
        }
    }
    double s4[4];
    _mm256_storeu_pd(s4, sum4);
    sum += (s4[0] + s4[1]) + (s4[2] + s4[3]);
#else
    for (int64_t c = 0; c < n; c++) {
        x[c] = std::exp(x[c] - max_x);
        sum += x[c];
    }
#endif
    const float inv_sum = float(1.0 / sum);
    for (int64_t c = 0; c < n; c++) x[c] *= inv_sum;
    return softmax_cost(n);
}

// ---- SwiGLU -------------------------------------------------------------------------------

Cost swiglu_v0_scalar(const float* gate, const float* up, int64_t n, float* out) {
    for (int64_t c = 0; c < n; c++) {
        const double g = gate[c];
        out[c] = float(g / (1.0 + std::exp(-g)) * double(up[c]));
    }
    return swiglu_cost(n);
}

Cost swiglu_v1_omp(const float* gate, const float* up, int64_t n, float* out) {
#if RIDGE_CPU_SIMD
    // 8 elements at a time with simd::exp8; the last partial vector goes through a zero-padded copy,
    // so every element gets the same arithmetic wherever it falls.
    const int64_t nv = (n + 7) / 8;
    parallel_for(nv, double(n) >= kParallelMinWork, [&](int64_t v) {
        const int64_t c = v * 8, len = std::min<int64_t>(8, n - c);
        float g8[8] = {}, u8[8] = {}, o8[8];
        const bool whole = len == 8;
        if (!whole) std::copy(gate + c, gate + c + len, g8), std::copy(up + c, up + c + len, u8);
        const __m256 g = _mm256_loadu_ps(whole ? gate + c : g8), u = _mm256_loadu_ps(whole ? up + c : u8);
        const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), simd::exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
        _mm256_storeu_ps(whole ? out + c : o8, _mm256_mul_ps(silu, u));
        if (!whole) std::copy(o8, o8 + len, out + c);
    });
#else
    parallel_for(n, double(n) >= kParallelMinWork, [&](int64_t c) {
        const float g = gate[c];
        out[c] = g / (1.0f + std::exp(-g)) * up[c];
    });
#endif
    return swiglu_cost(n);
}

// ---- residual add -----------------------------------------------------------------------------

Cost add_v0_scalar(float* x, const float* y, int64_t n) {
    for (int64_t c = 0; c < n; c++) x[c] += y[c];
    return add_cost(n);
}

Cost add_bias_v0_scalar(float* x, const float* b, int64_t m, int64_t n) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = 0; c < n; c++) x[i * n + c] += b[c];
    return add_bias_cost(m, n);
}

Cost add_v1_omp(float* x, const float* y, int64_t n) {
    constexpr int64_t kChunk = 1024;  // elements per task, a vectorized loop each
    parallel_for((n + kChunk - 1) / kChunk, double(n) >= 4 * kParallelMinWork, [&](int64_t t) {
        const int64_t end = std::min(n, (t + 1) * kChunk);
        for (int64_t c = t * kChunk; c < end; c++) x[c] += y[c];
    });
    return add_cost(n);
}

}  // namespace ridge::cpu
