// Paged-KV store and causal grouped-query attention (see attention.h): the scalar twin first,
// then the OpenMP version the engine calls.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Dense>

#include "kernels/cpu/f16.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/simd.h"
#include "weights/error.h"

namespace ridge::cpu {

namespace {

size_t elem_bytes(DType t) {
    switch (t) {
        case DType::F32: return 4;
        case DType::F16: return 2;
        default:
            throw Error("KV cache: element type " + std::string(dtype_name(t)) + " is not F32 or F16");
    }
}

void check_shape(const KVLayer& kv, const AttentionShape& s) {
    if (s.n_kv_heads <= 0 || s.n_heads % s.n_kv_heads != 0 || s.n_kv_heads * s.head_dim != kv.kv_dim)
        throw Error("attention: n_heads " + std::to_string(s.n_heads) + ", n_kv_heads " +
                    std::to_string(s.n_kv_heads) + ", head_dim " + std::to_string(s.head_dim) +
                    " do not fit kv_dim " + std::to_string(kv.kv_dim));
}

// dst[0..n) = the n elements at element offset `off` of slot `slot` in a K or V pool. Halves go
// through f16.h's scalar f16_to_f32 in the scalar twin (kScalar), through F16C 8 at a time in the
// others (the same floats: every half is one exactly).
template <bool kScalar = false>
inline void load_kv(const uint8_t* pool, DType type, int64_t slot, int kv_dim, int off, int n, float* dst) {
    if (type == DType::F32) {
        const float* src = reinterpret_cast<const float*>(pool) + slot * kv_dim + off;
        std::copy(src, src + n, dst);
        return;
    }
    const uint16_t* src = reinterpret_cast<const uint16_t*>(pool) + slot * kv_dim + off;
#if RIDGE_CPU_SIMD
    if constexpr (!kScalar) {
        simd::f16_to_f32_row(src, dst, n);
        return;
    }
#endif
    for (int c = 0; c < n; c++) dst[c] = f16_to_f32(src[c]);
}

// dst[0..n) = src[0..n) as halves, rounded to nearest even: through F16C 8 at a time where the
// build has it, else f16.h's f32_to_f16 (the same bits, tested).
inline void store_f16(const float* src, uint16_t* dst, int n) {
#if RIDGE_CPU_SIMD
    simd::f32_to_f16_row(src, dst, n);
#else
    for (int c = 0; c < n; c++) dst[c] = f32_to_f16(src[c]);
#endif
}

// Calls f(j, slot) for the keys j = 0 .. n_keys-1 of a row in order, with one block-table lookup
// (and one division) per KV block instead of per key.
template <class F>
inline void for_each_key(const AttentionRow& row, int block_size, F&& f) {
    for (int32_t j0 = 0; j0 < row.n_keys; j0 += block_size) {
        const int64_t base = int64_t(row.block_table[j0 / block_size]) * block_size;
        const int32_t end = std::min(row.n_keys, j0 + block_size);
        for (int32_t j = j0; j < end; j++) f(j, base + (j - j0));
    }
}

AttentionCost attention_cost_rows(const AttentionRow* rows, int64_t m, const KVLayer& kv, const AttentionShape& s) {
    double n_keys = 0;
    for (int64_t i = 0; i < m; i++) n_keys += rows[i].n_keys;
    return attention_cost(m, n_keys, kv.kv_dim, kv.type, s);
}

void check_rows(const AttentionRow* rows, int64_t m, const KVLayer& kv) {
    for (int64_t i = 0; i < m; i++)
        if (rows[i].n_keys < 1 || rows[i].block_table == nullptr)
            throw Error("attention: row " + std::to_string(i) + " has " + std::to_string(rows[i].n_keys) +
                        " keys or no block table");
}

// ---- v4's GEMM: C (m, n) = A (m, k) . B (k, n) with B packed in panels of kTileN columns ----
// B's panel p is a (k, kTileN) row-major block at Bp + p * panel_stride, zeros past n: one or two
// cache lines per row and one stream per panel (B read in place with a stride of 2^j bytes would
// map its rows onto a few L1 sets). A and C are row-major with strides lda and ldc, A read in place.
// 6 x kTileN register tiles (as matmul_packed.cpp's v6; kTileN 16, or 32 in zmm registers where
// the build has AVX-512): per c, two vectors from the panel, six broadcasts from A's rows, twelve
// FMAs; each element of C one FMA chain over c in order. One thread: attention's tasks are
// already parallel.
#if RIDGE_CPU_SIMD
using simd::Vec;
constexpr int kTileM = 6, kTileN = 2 * Vec::kLanes;
#else
constexpr int kTileM = 6, kTileN = 16;
#endif

// The tile of C at c whose A rows are a[0..6): rows [0, rows) x columns [0, cols) are written.
inline void gemm_tile(const float* const* a, const float* b, int64_t k, float* c, int64_t ldc, int rows, int cols) {
#if RIDGE_CPU_SIMD
    Vec::T acc[kTileM][2];
    for (int r = 0; r < kTileM; r++) acc[r][0] = acc[r][1] = Vec::zero();
    for (int64_t e = 0; e < k; e++) {
        const Vec::T w0 = Vec::load(b + e * kTileN), w1 = Vec::load(b + e * kTileN + Vec::kLanes);
        for (int r = 0; r < kTileM; r++) {
            const Vec::T x = Vec::broadcast(a[r] + e);
            acc[r][0] = Vec::fma(x, w0, acc[r][0]);
            acc[r][1] = Vec::fma(x, w1, acc[r][1]);
        }
    }
    if (rows == kTileM && cols == kTileN) {
        for (int r = 0; r < kTileM; r++) {
            Vec::store(c + r * ldc, acc[r][0]);
            Vec::store(c + r * ldc + Vec::kLanes, acc[r][1]);
        }
        return;
    }
    float out[kTileM][kTileN];  // fixed indices keep acc in registers (see matmul_packed.cpp)
    for (int r = 0; r < kTileM; r++) {
        Vec::store(out[r], acc[r][0]);
        Vec::store(out[r] + Vec::kLanes, acc[r][1]);
    }
    for (int r = 0; r < rows; r++) std::copy(out[r], out[r] + cols, c + r * ldc);
#else
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < cols; j++) {
            float acc = 0.0f;
            for (int64_t e = 0; e < k; e++) acc = std::fma(a[r][e], b[e * kTileN + j], acc);
            c[r * ldc + j] = acc;
        }
#endif
}

void gemm_panels(const float* A, int64_t lda, const float* Bp, int64_t panel_stride, float* C, int64_t ldc, int64_t m,
                 int64_t n, int64_t k) {
    for (int64_t j0 = 0; j0 < n; j0 += kTileN) {
        const float* b = Bp + (j0 / kTileN) * panel_stride;
        const int cols = int(std::min<int64_t>(kTileN, n - j0));
        for (int64_t i0 = 0; i0 < m; i0 += kTileM) {
            const int rows = int(std::min<int64_t>(kTileM, m - i0));
            const float* a[kTileM];
            for (int r = 0; r < kTileM; r++) a[r] = A + (i0 + std::min(r, rows - 1)) * lda;  // short tile: repeats
            gemm_tile(a, b, k, C + i0 * ldc + j0, ldc, rows, cols);
        }
    }
}

// x[j] <- e^(scale * (x[j] - mx)) for j < n; returns their sum. With simd::exp8 where the build
// has it: whole groups of 8 in place, summed lane by lane, the last n % 8 through a buffer.
// The softmax of both attention paths (decode's per block, v4's per stacked row).
float exp_shifted(float* x, int n, float mx, float scale = 1.0f) {
#if RIDGE_CPU_SIMD
    const __m256 m8 = _mm256_set1_ps(mx), s8 = _mm256_set1_ps(scale);
    __m256 acc = _mm256_setzero_ps();
    int j = 0;
    for (; j + 8 <= n; j += 8) {
        const __m256 e = simd::exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), m8), s8));
        _mm256_storeu_ps(x + j, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = simd::hsum8(acc);
    if (j < n) {
        float v[8] = {};
        std::copy(x + j, x + n, v);
        _mm256_storeu_ps(v, simd::exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(v), m8), s8)));
        for (int t = 0; j + t < n; t++) x[j + t] = v[t], sum += v[t];
    }
    return sum;
#else
    float sum = 0.0f;
    for (int j = 0; j < n; j++) x[j] = std::exp(scale * (x[j] - mx)), sum += x[j];
    return sum;
#endif
}

// v4's softmax, unnormalized: row[0, n) <- e^(scale * (row - max)), zeros in [n, n_zero); returns
// the sum of the exponentials, by which the caller divides the row's output once (head_dim
// divisions, not n).
float softmax_numerators(float* row, int32_t n, int32_t n_zero, float scale) {
    float mx = row[0];
    int32_t j = 0;
#if RIDGE_CPU_SIMD
    __m256 mx8 = _mm256_set1_ps(row[0]);
    for (; j + 8 <= n; j += 8) mx8 = _mm256_max_ps(mx8, _mm256_loadu_ps(row + j));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mx8);
    for (float l : lanes) mx = std::max(mx, l);
#endif
    for (; j < n; j++) mx = std::max(mx, row[j]);
    const float sum = exp_shifted(row, n, mx, scale);
    std::fill(row + n, row + n_zero, 0.0f);
    return sum;
}

}  // namespace

Cost kv_store(const KVLayer& kv, const float* k, const float* v, const int64_t* slots, int64_t m) {
    (void)elem_bytes(kv.type);  // ridge::Error for a type other than F32 or F16, before any write
    for (int64_t i = 0; i < m; i++) {
        if (slots[i] < 0 || slots[i] >= kv.n_slots)
            throw Error("kv_store: slot " + std::to_string(slots[i]) + " of row " + std::to_string(i) +
                        " is outside the cache's " + std::to_string(kv.n_slots) + " slots");
        const float* k_row = k + i * kv.kv_dim;  // (kv_dim)
        const float* v_row = v + i * kv.kv_dim;  // (kv_dim)
        if (kv.type == DType::F32) {
            std::copy(k_row, k_row + kv.kv_dim, reinterpret_cast<float*>(kv.k) + slots[i] * kv.kv_dim);
            std::copy(v_row, v_row + kv.kv_dim, reinterpret_cast<float*>(kv.v) + slots[i] * kv.kv_dim);
        } else {
            uint16_t* k_dst = reinterpret_cast<uint16_t*>(kv.k) + slots[i] * kv.kv_dim;
            uint16_t* v_dst = reinterpret_cast<uint16_t*>(kv.v) + slots[i] * kv.kv_dim;
            store_f16(k_row, k_dst, kv.kv_dim);
            store_f16(v_row, v_dst, kv.kv_dim);
        }
    }
    return kv_store_cost(m, kv.kv_dim, kv.type);
}

AttentionCost attention_v0_scalar(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                         const AttentionShape& s, float* out) {
    check_shape(kv, s);
    check_rows(rows, m, kv);
    const int group = s.n_heads / s.n_kv_heads;  // query heads per kv head
    const int q_dim = s.n_heads * s.head_dim;
    const double scale = 1.0 / std::sqrt(double(s.head_dim));
    std::vector<float> key(static_cast<size_t>(s.head_dim)), value(static_cast<size_t>(s.head_dim));  // (head_dim)
    std::vector<double> scores, acc(static_cast<size_t>(s.head_dim));                    // (n_keys), (head_dim)
    for (int64_t i = 0; i < m; i++) {
        const AttentionRow& row = rows[i];
        scores.assign(size_t(row.n_keys), 0.0);
        for (int h = 0; h < s.n_heads; h++) {
            const int g = h / group;
            const float* q_head = q + i * q_dim + h * s.head_dim;  // (head_dim)
            double max_score = -INFINITY;
            for (int32_t j = 0; j < row.n_keys; j++) {
                load_kv<true>(kv.k, kv.type, kv_slot(row.block_table, j, kv.block_size), kv.kv_dim,
                              g * s.head_dim, s.head_dim, key.data());
                double dot = 0.0;
                for (int c = 0; c < s.head_dim; c++) dot += double(q_head[c]) * double(key[c]);
                scores[j] = dot * scale;
                max_score = std::max(max_score, scores[j]);
            }
            double sum = 0.0;
            for (int32_t j = 0; j < row.n_keys; j++) {
                scores[j] = std::exp(scores[j] - max_score);
                sum += scores[j];
            }
            std::fill(acc.begin(), acc.end(), 0.0);
            for (int32_t j = 0; j < row.n_keys; j++) {
                load_kv<true>(kv.v, kv.type, kv_slot(row.block_table, j, kv.block_size), kv.kv_dim,
                              g * s.head_dim, s.head_dim, value.data());
                const double p = scores[j] / sum;
                for (int c = 0; c < s.head_dim; c++) acc[c] += p * double(value[c]);
            }
            float* out_head = out + i * q_dim + h * s.head_dim;  // (head_dim)
            for (int c = 0; c < s.head_dim; c++) out_head[c] = float(acc[c]);
        }
    }
    return attention_cost_rows(rows, m, kv, s);
}

AttentionCost attention_v1_omp(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                      const AttentionShape& s, float* out) {
    check_shape(kv, s);
    check_rows(rows, m, kv);
    const int group = s.n_heads / s.n_kv_heads;
    const int q_dim = s.n_heads * s.head_dim;
    const float scale = 1.0f / std::sqrt(float(s.head_dim));
    int32_t max_keys = 0;
    for (int64_t i = 0; i < m; i++) max_keys = std::max(max_keys, rows[i].n_keys);
    const bool f32 = kv.type == DType::F32;
    const int64_t n_tasks = m * s.n_heads;  // (row, head) pairs
    double work = 0;                        // multiply-adds: q.k and p*v per key and head
    for (int64_t i = 0; i < m; i++) work += 2.0 * rows[i].n_keys * s.n_heads * s.head_dim;
#pragma omp parallel if (n_tasks > 1 && work >= kParallelMinWork)
    {
        std::vector<float> scores(static_cast<size_t>(max_keys));  // (n_keys) this task's scores, then weights
        std::vector<float> kv_buf(f32 ? 0 : size_t(s.head_dim));  // (head_dim) one converted f16 key/value
#pragma omp for schedule(dynamic, 4)
        for (int64_t task = 0; task < n_tasks; task++) {
            const int64_t i = task / s.n_heads;
            const int h = int(task % s.n_heads);
            const int g = h / group;
            const AttentionRow& row = rows[i];
            const float* q_head = q + i * q_dim + h * s.head_dim;  // (head_dim)
            for_each_key(row, kv.block_size, [&](int32_t j, int64_t slot) {
                const float* key;  // (head_dim)
                if (f32) {
                    key = reinterpret_cast<const float*>(kv.k) + slot * kv.kv_dim + g * s.head_dim;
                } else {
                    load_kv(kv.k, kv.type, slot, kv.kv_dim, g * s.head_dim, s.head_dim, kv_buf.data());
                    key = kv_buf.data();
                }
                float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
                for (int c = 0; c < s.head_dim; c++) dot += q_head[c] * key[c];
                scores[j] = dot * scale;
            });
            softmax_v1(scores.data(), row.n_keys);
            float* out_head = out + i * q_dim + h * s.head_dim;  // (head_dim)
            std::fill(out_head, out_head + s.head_dim, 0.0f);
            for_each_key(row, kv.block_size, [&](int32_t j, int64_t slot) {
                const float* value;  // (head_dim)
                if (f32) {
                    value = reinterpret_cast<const float*>(kv.v) + slot * kv.kv_dim + g * s.head_dim;
                } else {
                    load_kv(kv.v, kv.type, slot, kv.kv_dim, g * s.head_dim, s.head_dim, kv_buf.data());
                    value = kv_buf.data();
                }
                const float p = scores[j];
#pragma omp simd
                for (int c = 0; c < s.head_dim; c++) out_head[c] += p * value[c];
            });
        }
    }
    return attention_cost_rows(rows, m, kv, s);
}

namespace {
// v3_split tasks take all KV heads of a block from this many blocks on, one KV head below.
constexpr int64_t kSplitHeadsBelowBlocks = 8;

// One query head against n keys and values of one block (rows `stride` floats apart, this head's
// part at K and V): p[j] = q . K_j * scale, then r = (max p, sum e^(p - max), sum_j e^(p_j - max) V_j).
// p: (n) scratch. The generic loop first; with AVX2 and a head_dim of 64 or 128 (the common ones)
// the scores go 8 keys at a time, one accumulator each (a single dot product's 8 FMAs would wait
// on each other), their sums gathered by a horizontal-add tree, and the weighted values stay in
// registers for the whole block.
void head_partial_generic(const float* q, const float* K, const float* V, int n, int stride, int hd, float scale,
                          float* p, float* r) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        const float* key = K + int64_t(j) * stride;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int c = 0; c < hd; c++) dot += q[c] * key[c];
        p[j] = dot * scale;
        mx = std::max(mx, p[j]);
    }
    r[0] = mx;
    r[1] = exp_shifted(p, n, mx);
    float* o = r + 2;
    std::fill(o, o + hd, 0.0f);
    for (int j = 0; j < n; j++) {
        const float* value = V + int64_t(j) * stride;
        const float pj = p[j];
#pragma omp simd
        for (int c = 0; c < hd; c++) o[c] += pj * value[c];
    }
}

#if RIDGE_CPU_SIMD
template <int HD>
void head_partial_simd(const float* q, const float* K, const float* V, int n, int stride, float scale, float* p,
                       float* r) {
    const __m256 sc = _mm256_set1_ps(scale);
    int j = 0;
    for (; j + 8 <= n; j += 8) {  // p[j .. j+8)
        __m256 acc[8];
        for (int t = 0; t < 8; t++) acc[t] = _mm256_setzero_ps();
        for (int c = 0; c < HD; c += 8) {
            const __m256 qv = _mm256_loadu_ps(q + c);
            for (int t = 0; t < 8; t++) acc[t] = _mm256_fmadd_ps(qv, _mm256_loadu_ps(K + int64_t(j + t) * stride + c), acc[t]);
        }
        // hadd pairs twice: lanes 0-3 hold keys 0-3 (4-7 in the other operand) summed over each
        // accumulator's lower half, lanes 4-7 over its upper half; the two halves then add up.
        const __m256 s0 = _mm256_hadd_ps(_mm256_hadd_ps(acc[0], acc[1]), _mm256_hadd_ps(acc[2], acc[3]));
        const __m256 s1 = _mm256_hadd_ps(_mm256_hadd_ps(acc[4], acc[5]), _mm256_hadd_ps(acc[6], acc[7]));
        const __m256 dots = _mm256_add_ps(_mm256_permute2f128_ps(s0, s1, 0x20), _mm256_permute2f128_ps(s0, s1, 0x31));
        _mm256_storeu_ps(p + j, _mm256_mul_ps(dots, sc));
    }
    for (; j < n; j++) {  // the last n % 8 keys, one at a time
        __m256 acc = _mm256_setzero_ps();
        for (int c = 0; c < HD; c += 8)
            acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + c), _mm256_loadu_ps(K + int64_t(j) * stride + c), acc);
        p[j] = simd::hsum8(acc) * scale;
    }
    float mx = -INFINITY;
    for (int t = 0; t < n; t++) mx = std::max(mx, p[t]);
    r[0] = mx;
    r[1] = exp_shifted(p, n, mx);
    __m256 o[HD / 8];
    for (int v = 0; v < HD / 8; v++) o[v] = _mm256_setzero_ps();
    for (int t = 0; t < n; t++) {
        const __m256 pt = _mm256_set1_ps(p[t]);
        for (int v = 0; v < HD / 8; v++) o[v] = _mm256_fmadd_ps(pt, _mm256_loadu_ps(V + int64_t(t) * stride + 8 * v), o[v]);
    }
    for (int v = 0; v < HD / 8; v++) _mm256_storeu_ps(r + 2 + 8 * v, o[v]);
}
#endif

// Slice i of n of a block's keys and values (its bytes [i, i + 1) * bytes / n of each) asked for.
inline void prefetch_slice(const uint8_t* k, const uint8_t* v, size_t bytes, int i, int n) {
    for (size_t o = bytes * i / n / 64 * 64; o < bytes * (i + 1) / n; o += 64) {
        __builtin_prefetch(k + o);
        __builtin_prefetch(v + o);
    }
}

void head_partial(const float* q, const float* K, const float* V, int n, int stride, int hd, float scale, float* p,
                  float* r) {
#if RIDGE_CPU_SIMD
    if (hd == 64) return head_partial_simd<64>(q, K, V, n, stride, scale, p, r);
    if (hd == 128) return head_partial_simd<128>(q, K, V, n, stride, scale, p, r);
#endif
    head_partial_generic(q, K, V, n, stride, hd, scale, p, r);
}
}  // namespace

AttentionCost attention_v3_split(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                                 const AttentionShape& s, float* out) {
    check_shape(kv, s);
    check_rows(rows, m, kv);
    const int bs = kv.block_size, hd = s.head_dim, group = s.n_heads / s.n_kv_heads, q_dim = s.n_heads * hd;
    const float scale = 1.0f / std::sqrt(float(hd));
    const bool f32 = kv.type == DType::F32;
    const size_t block_bytes = size_t(bs) * kv.kv_dim * elem_bytes(kv.type);  // one block's keys (or values)
    // Blocks of all rows, row by row: block u of the list is block u - first[i] of row i. A task is
    // one block, all KV heads (each slot's keys read whole, in order), or, when there are few
    // blocks, one block and one KV head, so that a short context still splits across threads.
    // Either way each (block, query head) partial is computed alike.
    std::vector<int64_t> first(size_t(m) + 1, 0);
    for (int64_t i = 0; i < m; i++) first[size_t(i) + 1] = first[size_t(i)] + (rows[i].n_keys + bs - 1) / bs;
    const int64_t n_blocks = first[size_t(m)];
    auto locate = [&first](int64_t u) {  // block u of the list: (its row i, its block b in the row)
        const int64_t i = std::upper_bound(first.begin(), first.end(), u) - first.begin() - 1;
        return std::pair<int64_t, int64_t>{i, u - first[size_t(i)]};
    };
    const int heads_per_task = n_blocks >= kSplitHeadsBelowBlocks ? s.n_kv_heads : 1;
    const int64_t n_tasks = n_blocks * (s.n_kv_heads / heads_per_task);
    // Each task's partial result per head: its max score, the sum of e^(s - max), and the (hd)
    // e^(s - max)-weighted sum of values. Kept between calls (it grows with the context).
    const int64_t part = hd + 2;
    static thread_local std::vector<float> partials;  // (n_blocks, n_heads, part)
    if (partials.size() < size_t(n_blocks * s.n_heads * part)) partials.resize(size_t(n_blocks * s.n_heads * part));
    float* parts = partials.data();
    double work = 0;  // multiply-adds: q.k and p*v per key and head
    for (int64_t i = 0; i < m; i++) work += 2.0 * rows[i].n_keys * s.n_heads * hd;
#pragma omp parallel if (n_tasks > 1 && work >= kParallelMinWork)
    {
        // Per-thread scratch, kept between calls: (bs, kv_dim) converted keys and values (F16 cache)
        // and (bs) weights of one head.
        static thread_local std::vector<float> kbuf, vbuf, p;
        if (!f32 && kbuf.size() < size_t(bs) * kv.kv_dim) kbuf.resize(size_t(bs) * kv.kv_dim), vbuf.resize(kbuf.size());
        if (p.size() < size_t(bs)) p.resize(size_t(bs));
#pragma omp for schedule(static)
        for (int64_t t = 0; t < n_tasks; t++) {
            const int64_t u = t / (s.n_kv_heads / heads_per_task);  // the block, in the list of all rows' blocks
            const int g0 = int(t % (s.n_kv_heads / heads_per_task)) * heads_per_task, g1 = g0 + heads_per_task;
            const auto [i, b] = locate(u);
            const int32_t j0 = int32_t(b) * bs, n = std::min(bs, rows[i].n_keys - j0);  // keys j0 .. j0+n-1
            const int64_t slot0 = int64_t(rows[i].block_table[b]) * bs;                 // their slots: consecutive
            const float *K, *V;  // (n, kv_dim) this block's keys and values (KV head g's part at g * hd)
            if (f32) {
                K = reinterpret_cast<const float*>(kv.k) + slot0 * kv.kv_dim;
                V = reinterpret_cast<const float*>(kv.v) + slot0 * kv.kv_dim;
            } else {
                for (int j = 0; j < n; j++) {
                    const int64_t at = int64_t(j) * kv.kv_dim + g0 * hd;
                    load_kv(kv.k, kv.type, slot0 + j, kv.kv_dim, g0 * hd, (g1 - g0) * hd, kbuf.data() + at);
                    load_kv(kv.v, kv.type, slot0 + j, kv.kv_dim, g0 * hd, (g1 - g0) * hd, vbuf.data() + at);
                }
                K = kbuf.data(), V = vbuf.data();
            }
            // With whole blocks a task, the thread's next task (t + 1 under the static schedule) reads
            // the next block: its keys and values are asked for a slice before each head of this one,
            // so that they arrive while this block is computed.
            const uint8_t *next_k = nullptr, *next_v = nullptr;
            if (heads_per_task == s.n_kv_heads && t + 1 < n_tasks) {
                const auto [i1, b1] = locate(u + 1);
                const size_t at = size_t(rows[i1].block_table[b1]) * block_bytes;
                next_k = kv.k + at, next_v = kv.v + at;
            }
            const int n_h = (g1 - g0) * group;
            for (int h = g0 * group; h < g1 * group; h++) {
                const int g = h / group;
                if (next_k) prefetch_slice(next_k, next_v, block_bytes, h - g0 * group, n_h);
                float* r = parts + (u * s.n_heads + h) * part;  // max, sum, then (hd) weighted values
                head_partial(q + i * q_dim + h * hd, K + g * hd, V + g * hd, n, kv.kv_dim, hd, scale, p.data(), r);
            }
        }
        // (the implicit barrier: every block's partial is in before any row combines them)
#pragma omp for schedule(static)
        for (int64_t rh = 0; rh < m * s.n_heads; rh++) {
            const int64_t i = rh / s.n_heads;
            const int h = int(rh % s.n_heads);
            float mx = -INFINITY;
            for (int64_t t = first[size_t(i)]; t < first[size_t(i) + 1]; t++) mx = std::max(mx, parts[(t * s.n_heads + h) * part]);
            float* o = out + i * q_dim + h * hd;
            std::fill(o, o + hd, 0.0f);
            float sum = 0.0f;
            for (int64_t t = first[size_t(i)]; t < first[size_t(i) + 1]; t++) {
                const float* r = parts + (t * s.n_heads + h) * part;
                const float w = std::exp(r[0] - mx);  // this block's share, rescaled to the row's max
                sum += w * r[1];
#pragma omp simd
                for (int c = 0; c < hd; c++) o[c] += w * r[2 + c];
            }
            const float inv = 1.0f / sum;
            for (int c = 0; c < hd; c++) o[c] *= inv;
        }
    }
    return attention_cost_rows(rows, m, kv, s);
}

namespace {
// v2's and v4's preconditions: a valid shape and rows, and the rows one chunk of one sequence.
void check_chunk(const AttentionRow* rows, int64_t m, const KVLayer& kv, const AttentionShape& s, const char* who) {
    check_shape(kv, s);
    check_rows(rows, m, kv);
    if (!attention_v2_applies(rows, m))
        throw Error(std::string(who) + ": the rows are not consecutive positions of one sequence");
}
}  // namespace

AttentionCost attention_v2_blocked(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                                   const AttentionShape& s, float* out) {
    check_chunk(rows, m, kv, s, "attention_v2_blocked");
    using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using Strided = Eigen::Map<const RowMajor, 0, Eigen::OuterStride<>>;
    constexpr int64_t kRowBlock = 64;  // query rows per GEMM
    const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, q_dim = s.n_heads * hd;
    const int32_t nk = rows[m - 1].n_keys;  // keys the last row sees (the first row sees nk - m + 1)
    const float scale = 1.0f / std::sqrt(float(hd));

    // The keys and values of the chunk's sequence, per KV head: (n_kv_heads, nk, head_dim) each.
    std::vector<float> keys(size_t(s.n_kv_heads) * nk * hd), values(keys.size());
#pragma omp parallel for schedule(static) if (double(nk) * kv.kv_dim >= kParallelMinWork)
    for (int32_t j = 0; j < nk; j++) {
        const int64_t slot = kv_slot(rows[0].block_table, j, kv.block_size);
        for (int g = 0; g < s.n_kv_heads; g++) {
            float* k_dst = keys.data() + (int64_t(g) * nk + j) * hd;
            float* v_dst = values.data() + (int64_t(g) * nk + j) * hd;
            load_kv(kv.k, kv.type, slot, kv.kv_dim, g * hd, hd, k_dst);
            load_kv(kv.v, kv.type, slot, kv.kv_dim, g * hd, hd, v_dst);
        }
    }

    const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
    const int64_t n_tasks = row_blocks * s.n_heads;  // (row block, head) pairs
#pragma omp parallel if (n_tasks > 1)
    {
        std::vector<float> scores(size_t(kRowBlock) * nk);  // (rows, keys) of this task
#pragma omp for schedule(dynamic)
        for (int64_t task = 0; task < n_tasks; task++) {
            const int h = int(task % s.n_heads), g = h / group;
            const int64_t i0 = (task / s.n_heads) * kRowBlock, rb = std::min(kRowBlock, m - i0);
            const int32_t keys_b = rows[i0 + rb - 1].n_keys;  // keys the block's last row sees
            const Strided Q(q + i0 * q_dim + int64_t(h) * hd, rb, hd, Eigen::OuterStride<>(q_dim));
            const Eigen::Map<const RowMajor> K(keys.data() + int64_t(g) * nk * hd, keys_b, hd);
            const Eigen::Map<const RowMajor> V(values.data() + int64_t(g) * nk * hd, keys_b, hd);
            Eigen::Map<RowMajor> S(scores.data(), rb, keys_b);
            S.noalias() = Q * K.transpose();
            // Row r sees keys 0 .. n_keys - 1: scaled softmax over those, zeros past them.
            for (int64_t r = 0; r < rb; r++) {
                float* row = scores.data() + r * keys_b;
                const int32_t n = rows[i0 + r].n_keys;
                for (int32_t j = 0; j < n; j++) row[j] *= scale;
                softmax_v1(row, n);
                std::fill(row + n, row + keys_b, 0.0f);
            }
            Eigen::Map<RowMajor, 0, Eigen::OuterStride<>> O(out + i0 * q_dim + int64_t(h) * hd, rb, hd,
                                                            Eigen::OuterStride<>(q_dim));
            O.noalias() = S * V;
        }
    }
    return attention_blocked_cost(m, rows[0].n_keys, kv.kv_dim, kv.type, s);
}

AttentionCost attention_v4_tiled(const float* q, const AttentionRow* rows, int64_t m, const KVLayer& kv,
                                 const AttentionShape& s, float* out) {
    check_chunk(rows, m, kv, s, "attention_v4_tiled");
    constexpr int64_t kRowBlock = 64;  // query rows per task (times the group's heads)
    const int hd = s.head_dim, group = s.n_heads / s.n_kv_heads, q_dim = s.n_heads * hd;
    const int32_t nk = rows[m - 1].n_keys;               // keys the last row sees
    const int64_t ldk = (int64_t(nk) + kTileN - 1) / kTileN * kTileN;  // keys rounded up to whole panels
    const float scale = 1.0f / std::sqrt(float(hd));

    // Per KV head, in panels of 16 (gemm_panels' B): its keys transposed, panel p holding keys
    // 16p .. 16p + 15 as (head_dim, 16), zeros past nk; and its values, panel p holding dimensions
    // 16p .. 16p + 15 of every key as (nk, 16), zeros past head_dim (16 being kTileN, 32 with zmm).
    const int64_t v_panels = (hd + kTileN - 1) / kTileN;
    std::vector<float> keys_p(size_t(s.n_kv_heads) * hd * ldk, 0.0f);
    std::vector<float> values_p(size_t(s.n_kv_heads * v_panels) * nk * kTileN, 0.0f);
#pragma omp parallel if (double(nk) * kv.kv_dim >= kParallelMinWork)
    {
        std::vector<float> kv_row(static_cast<size_t>(hd));
#pragma omp for schedule(static)
        for (int32_t j = 0; j < nk; j++) {
            const int64_t slot = kv_slot(rows[0].block_table, j, kv.block_size);
            for (int g = 0; g < s.n_kv_heads; g++) {
                load_kv(kv.k, kv.type, slot, kv.kv_dim, g * hd, hd, kv_row.data());
                float* kp = keys_p.data() + (int64_t(g) * ldk + j / kTileN * kTileN) * hd + j % kTileN;
                for (int c = 0; c < hd; c++) kp[c * kTileN] = kv_row[size_t(c)];
                load_kv(kv.v, kv.type, slot, kv.kv_dim, g * hd, hd, kv_row.data());
                float* vp = values_p.data() + (int64_t(g) * v_panels * nk + j) * kTileN;
                for (int c = 0; c < hd; c++) vp[c / kTileN * nk * kTileN + c % kTileN] = kv_row[size_t(c)];
            }
        }
    }

    // A task: a block of query rows and one KV head, the group's query heads stacked head-major into
    // one (group * rb, head_dim) matrix, so both GEMMs run on all of them at once.
    const int64_t row_blocks = (m + kRowBlock - 1) / kRowBlock;
    const int64_t n_tasks = row_blocks * s.n_kv_heads;
#pragma omp parallel if (n_tasks > 1)
    {
        std::vector<float> qs(size_t(group * kRowBlock * hd)), os(qs.size());  // stacked queries, outputs
        std::vector<float> scores(size_t(group * kRowBlock * ldk));            // (stacked rows, keys)
        std::vector<float> inv_sum(size_t(group * kRowBlock));                 // 1 / each row's softmax sum
#pragma omp for schedule(dynamic)
        for (int64_t task = 0; task < n_tasks; task++) {
            const int g = int(task % s.n_kv_heads);
            const int64_t i0 = (task / s.n_kv_heads) * kRowBlock, rb = std::min(kRowBlock, m - i0), sr = group * rb;
            const int32_t keys_b = rows[i0 + rb - 1].n_keys;                     // keys the block's last row sees
            const int64_t cols = (int64_t(keys_b) + kTileN - 1) / kTileN * kTileN;  // S's columns, whole panels
            for (int hh = 0; hh < group; hh++)
                for (int64_t r = 0; r < rb; r++) {
                    const float* src = q + (i0 + r) * q_dim + int64_t(g * group + hh) * hd;
                    std::copy(src, src + hd, qs.data() + (hh * rb + r) * hd);
                }
            const float* keys_g = keys_p.data() + int64_t(g) * ldk * hd;
            gemm_panels(qs.data(), hd, keys_g, kTileN * hd, scores.data(), cols, sr, cols, hd);
            // Stacked row hh * rb + r is query row i0 + r: the numerators of a scaled softmax over
            // the keys it sees, zeros past them; each output row is divided by its sum below.
            for (int64_t t = 0; t < sr; t++)
                inv_sum[size_t(t)] = 1.0f / softmax_numerators(scores.data() + t * cols, rows[i0 + t % rb].n_keys,
                                                               keys_b, scale);
            const float* values_g = values_p.data() + int64_t(g) * v_panels * nk * kTileN;
            gemm_panels(scores.data(), cols, values_g, nk * kTileN, os.data(), hd, sr, hd, keys_b);
            for (int hh = 0; hh < group; hh++)
                for (int64_t r = 0; r < rb; r++) {
                    const float* src = os.data() + (hh * rb + r) * hd;
                    const float inv = inv_sum[size_t(hh * rb + r)];
                    float* dst = out + (i0 + r) * q_dim + int64_t(g * group + hh) * hd;
                    for (int c = 0; c < hd; c++) dst[c] = src[c] * inv;
                }
        }
    }
    return attention_blocked_cost(m, rows[0].n_keys, kv.kv_dim, kv.type, s);
}

}  // namespace ridge::cpu
