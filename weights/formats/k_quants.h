// The K-quants Q4_K, Q5_K and Q6_K, ggml's super-blocks of 256 elements with per-sub-block scales:
// the block layouts, every decoder of them (scalar and device, RIDGE_HD; the integer decoders of
// matmul v4_int_k with their scalar twins) and the reference quantizers, together, as in q4.h.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "weights/formats/floats.h"
#include "weights/formats/simd.h"
#include "weights/hd.h"

namespace ridge {

constexpr int QK_K = 256;        // elements per K-quant super-block
constexpr int K_SCALE_SIZE = 12; // bytes of packed 6-bit scales and mins in Q4_K / Q5_K

// Q4_K: 256 elements in 8 sub-blocks of 32, each with a 6-bit scale sc and min mn;
// y = (d*sc) * q - (dmin*mn). Chunk c (64 elements) takes the low nibbles of qs[32c..32c+32)
// for sub-block 2c and the high nibbles for sub-block 2c+1.
struct block_q4_K {
    uint16_t d;                     // f16 super-block scale of the scales
    uint16_t dmin;                  // f16 super-block scale of the mins
    uint8_t scales[K_SCALE_SIZE];   // 8 scales + 8 mins, 6 bits each (see q4k_scale_min)
    uint8_t qs[QK_K / 2];           // (128) nibbles
};
// Q5_K: Q4_K plus a fifth bit: element l of sub-block j takes bit j of qh[l].
struct block_q5_K {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];           // (32) high bits
    uint8_t qs[QK_K / 2];           // (128) low nibbles, as Q4_K
};
// Q6_K: 256 elements in 16 sub-blocks of 16 with int8 scales; q = 6 bits - 32; y = (d*sc) * q.
// Half h (128 elements): element 32k + l (k = 0..3, l = 0..31) takes nibble (k >= 2) of
// ql[64h + 32(k&1) + l] and bits 2k..2k+1 of qh[32h + l].
struct block_q6_K {
    uint8_t ql[QK_K / 2];       // (128) low 4 bits
    uint8_t qh[QK_K / 4];       // (64) high 2 bits
    int8_t scales[QK_K / 16];   // (16) sub-block scales
    uint16_t d;                 // f16 super-block scale
};

static_assert(sizeof(block_q4_K) == 144, "Q4_K block is 144 bytes");
static_assert(sizeof(block_q5_K) == 176, "Q5_K block is 176 bytes");
static_assert(sizeof(block_q6_K) == 210, "Q6_K block is 210 bytes");

// ---- scalar decode, host and device ----------------------------------------------------------

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block. Bytes 0-3 hold the low
// 6 bits of scales 0-3 (top 2 bits: high bits of scale j+4), bytes 4-7 the same for mins,
// bytes 8-11 the low nibbles of scales 4-7 (low half) and mins 4-7 (high half).
RIDGE_HD inline void q4k_scale_min(int j, const uint8_t* s, uint8_t* sc, uint8_t* mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = uint8_t((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
        *mn = uint8_t((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

// Sub-block j (elements 32j..32j+32) of a Q4_K block into y (32).
RIDGE_HD inline void q4_K_sub_block(const block_q4_K& b, int j, float* y) {
    uint8_t sc, mn;
    q4k_scale_min(j, b.scales, &sc, &mn);
    const float dj = fp16_to_fp32(b.d) * float(sc), mj = fp16_to_fp32(b.dmin) * float(mn);
    const uint8_t* q = b.qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; l++) {
        const float t = dj * float((q[l] >> shift) & 0x0f);
        y[l] = t - mj;
    }
}
// Element e (0..255) of a Q4_K block.
RIDGE_HD inline float q4_K_element(const block_q4_K& b, int e) {
    const int j = e / 32, l = e % 32;  // sub-block j, element l
    uint8_t sc, mn;
    q4k_scale_min(j, b.scales, &sc, &mn);
    const float dj = fp16_to_fp32(b.d) * float(sc), mj = fp16_to_fp32(b.dmin) * float(mn);
    const float t = dj * float((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0x0f);
    return t - mj;
}

// The 6-bit code (0..63, before the offset of 32) of element e of a Q6_K block.
RIDGE_HD inline int q6_K_code(const block_q6_K& b, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lo = (b.ql[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0f;
    const uint8_t hi = (b.qh[32 * h + l] >> (2 * k)) & 0x03;
    return int(lo | (hi << 4));
}
// Elements 32s..32s+32 of a Q6_K block into y (32): two groups of 16, each with its scale.
RIDGE_HD inline void q6_K_chunk(const block_q6_K& b, int s, float* y) {
    const float d = fp16_to_fp32(b.d);
    const float ds0 = d * float(b.scales[2 * s]), ds1 = d * float(b.scales[2 * s + 1]);
    for (int l = 0; l < 32; l++) y[l] = (l < 16 ? ds0 : ds1) * float(q6_K_code(b, 32 * s + l) - 32);
}
// Element e (0..255) of a Q6_K block.
RIDGE_HD inline float q6_K_element(const block_q6_K& b, int e) {
    const float ds = fp16_to_fp32(b.d) * float(b.scales[e / 16]);
    return ds * float(q6_K_code(b, e) - 32);
}

// y (256)
RIDGE_HD inline void dequant_block(const block_q4_K& b, float* y) {
    for (int j = 0; j < QK_K / 32; j++) q4_K_sub_block(b, j, y + 32 * j);
}

// y (256)
RIDGE_HD inline void dequant_block(const block_q5_K& b, float* y) {
    const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, mn;
        q4k_scale_min(j, b.scales, &sc, &mn);
        const float dj = d * float(sc), mj = dmin * float(mn);
        const uint8_t* q = b.qs + 32 * (j / 2);
        const int shift = 4 * (j % 2);
        for (int l = 0; l < 32; l++) {
            const uint32_t v = ((q[l] >> shift) & 0x0f) | (((b.qh[l] >> j) & 1) << 4);
            const float t = dj * float(v);
            y[32 * j + l] = t - mj;
        }
    }
}

// y (256)
RIDGE_HD inline void dequant_block(const block_q6_K& b, float* y) {
    for (int s = 0; s < QK_K / 32; s++) q6_K_chunk(b, s, y + 32 * s);
}

// ---- reference quantizers (ggml's, without an importance matrix) -----------------------------
// What llama-quantize writes when it is given no importance matrix, byte for byte: the same
// float32 operations in the same order. Defined once, in weights/k_quants.cpp, which is built with
// -ffp-contract=off: ggml builds its quantizers without -march flags, so nothing is fused into an
// FMA there, while GCC fuses C++ (ISO mode or not) wherever FMA exists, and differently in each
// place an inline copy would land.
// x (256) -> one block.
void quantize_block(const float* x, block_q4_K& b);
void quantize_block(const float* x, block_q5_K& b);
void quantize_block(const float* x, block_q6_K& b);

// ---- the integer kernels' scalar twins -------------------------------------------------------
// A super-block against the 8 blocks of 32 integer activations it meets (Act: q[32] codes, their
// scale d and their sum; kernels/cpu/matmul.h's ActBlock): the exact integer sums in int64,
// scaled and summed in double. Codes in element order, as dequant_block.

// Q4_K (or Q5_K) super-block `blk` against its 8 activation blocks x[0..8).
template <class Block, class Act>
inline double dot_q4_K(const Block& blk, const Act* x) {  // x: (8) blocks
    const double d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    double acc = 0.0;
    for (int j = 0; j < QK_K / 32; j++) {  // sub-block j: elements 32j..32j+32 = ActBlock j
        uint8_t sc, mn;
        q4k_scale_min(j, blk.scales, &sc, &mn);
        const uint8_t* q = blk.qs + 32 * (j / 2);  // low nibbles for even j, high for odd
        const int shift = 4 * (j % 2);
        int64_t isum = 0;
        for (int l = 0; l < 32; l++) {
            int code = (q[l] >> shift) & 0x0f;
            if constexpr (std::is_same_v<Block, block_q5_K>) code |= ((blk.qh[l] >> j) & 1) << 4;
            isum += int64_t(code) * int64_t(x[j].q[l]);
        }
        acc += d * double(sc) * double(x[j].d) * double(isum) - dmin * double(mn) * double(x[j].sum);
    }
    return acc;
}

// Q6_K super-block against its 8 activation blocks: 16 groups of 16 elements, each with an int8 scale.
template <class Act>
inline double dot_q6_K(const block_q6_K& blk, const Act* x) {  // x: (8) blocks
    const double d = fp16_to_fp32(blk.d);
    double acc = 0.0;
    for (int g = 0; g < QK_K / 16; g++) {  // group g: elements 16g..16g+16, half of ActBlock g/2
        int64_t isum = 0;
        for (int t = 0; t < 16; t++) {
            const int e = 16 * g + t;
            isum += int64_t(q6_K_code(blk, e) - 32) * int64_t(x[g / 2].q[e % 32]);
        }
        acc += d * double(blk.scales[g]) * double(x[g / 2].d) * double(isum);
    }
    return acc;
}

#if RIDGE_FORMAT_SIMD
// ---- integer decoders (matmul v4_int_k) --------------------------------------------------------
// Lane order. Unpacking 32 bytes (elements 0..31) against zero gives int16 vectors holding
// elements [0..7 | 16..23] and [8..15 | 24..31]; madd then leaves elements 0..15 in int32 lanes
// 0-3 and 16..31 in lanes 4-7 (Q6_K's two groups of an ActBlock, each with its own scale).
// X is rearranged once per call to the same order, so no weight byte crosses a 128-bit lane.

// Integer dot products with simd::dot_add_i16: |a| <= 32, |b| <= 32767, so a lane of one ActBlock
// (4 products) stays below 2^22.
// x (XRow, the kernel's type): q, the activations' codes in lane order; d and sum, each block's
// scale and sum, contiguous.

// The decoders' integer steps on one weight row (KRowsYmm: the row's 32 bytes in a ymm) or on two
// side by side (KRowsZmm: row a's bytes in the low 256 bits of a zmm, row b's in the high 256).
// Every step works lane by lane or within 128-bit lanes, so each half of a zmm holds what the ymm
// holds for its row. load(at) takes at(r), the address of row r's 32 bytes.
struct KRowsYmm {
    using I = __m256i;
    template <class At>
    static I load(At at) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(0))); }
    static I bytes(char v) { return _mm256_set1_epi8(v); }
    static I words(short v) { return _mm256_set1_epi16(v); }
    static I zero() { return _mm256_setzero_si256(); }
    static I and_(I a, I b) { return _mm256_and_si256(a, b); }
    static I or_(I a, I b) { return _mm256_or_si256(a, b); }
    static I sub16(I a, I b) { return _mm256_sub_epi16(a, b); }
    template <int N> static I srli16(I v) { return _mm256_srli_epi16(v, N); }
    template <int N> static I slli16(I v) { return _mm256_slli_epi16(v, N); }
    static I unpacklo8(I a, I b) { return _mm256_unpacklo_epi8(a, b); }
    static I unpackhi8(I a, I b) { return _mm256_unpackhi_epi8(a, b); }
};

#if RIDGE_FORMAT_ZMM
struct KRowsZmm {
    using I = __m512i;
    template <class At>
    static I load(At at) {
        const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(0)));
        return _mm512_inserti64x4(_mm512_castsi256_si512(a), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at(1))), 1);
    }
    static I bytes(char v) { return _mm512_set1_epi8(v); }
    static I words(short v) { return _mm512_set1_epi16(v); }
    static I zero() { return _mm512_setzero_si512(); }
    static I and_(I a, I b) { return _mm512_and_si512(a, b); }
    static I or_(I a, I b) { return _mm512_or_si512(a, b); }
    static I sub16(I a, I b) { return _mm512_sub_epi16(a, b); }
    template <int N> static I srli16(I v) { return _mm512_srli_epi16(v, N); }
    template <int N> static I slli16(I v) { return _mm512_slli_epi16(v, N); }
    static I unpacklo8(I a, I b) { return _mm512_unpacklo_epi8(a, b); }
    static I unpackhi8(I a, I b) { return _mm512_unpackhi_epi8(a, b); }
};

// add2's helpers: 8 floats or 16 codes of X in both halves; lane j of each half in all 8 lanes of
// that half.
inline __m512 both_halves(const float* p) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(p)); }
inline __m512i both_halves(const int16_t* p) {
    return _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 lane_of_halves(__m512 v, int j) {
    const __m512i half = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 8, 8, 8, 8);
    return _mm512_permutexvar_ps(_mm512_add_epi32(half, _mm512_set1_epi32(j)), v);
}
// k_block_dot for two rows: the same int32 sums, per half (integer sums are exact in any order).
inline __m512i k_block_dot2(__m512i a, __m512i b, const int16_t* xq) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(_mm512_madd_epi16(a, both_halves(xq)), b, both_halves(xq + 16));
#else
    return _mm512_add_epi32(_mm512_madd_epi16(a, both_halves(xq)), _mm512_madd_epi16(b, both_halves(xq + 16)));
#endif
}
#endif  // RIDGE_FORMAT_ZMM

// The int32 lanes of one block of 32 activations: weight codes (a, b) in lane order times x's 32
// codes at xq (in lane order too).
inline __m256i k_block_dot(__m256i a, __m256i b, const int16_t* xq) {
    const __m256i* x = reinterpret_cast<const __m256i*>(xq);
    return simd::dot_add_i16(simd::dot_add_i16(_mm256_setzero_si256(), a, _mm256_loadu_si256(x)), b, _mm256_loadu_si256(x + 1));
}

// The 12 packed bytes of Q4_K / Q5_K scales and mins (u32 words u0, u1, u2 of each 128-bit lane;
// word 3 is ignored) -> 16 bytes: scales 0..7, then mins 0..7 (q4k_scale_min's values, one byte
// each). Word by word: u0 & 63, (u2 & 15) | (u0 >> 6) << 4, u1 & 63, (u2 >> 4 & 15) | (u1 >> 6) << 4,
// each the two words of one shuffle, shifted and masked, bytes in place (llama.cpp's unpacking).
// Two blocks at once, one per 128-bit lane (one block: the low lane).
inline __m256i k_scale_min_bytes(__m256i u) {
    const __m256i p = _mm256_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0)), q = _mm256_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));
    const __m256i low = _mm256_and_si256(_mm256_srlv_epi32(p, _mm256_setr_epi32(0, 0, 0, 4, 0, 0, 0, 4)),
                                         _mm256_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f,
                                                           0x3f3f3f3f, 0x0f0f0f0f));
    const __m256i high = _mm256_and_si256(_mm256_srli_epi32(q, 2), _mm256_setr_epi32(0, 0x30303030, 0, 0x30303030, 0, 0x30303030, 0, 0x30303030));
    return _mm256_or_si256(low, high);
}

// One decoder per type: super-block s of a row, added to acc[i] for the M rows of X (lane sums
// are y's contributions; the caller adds the 8 lanes at the end); add2, where the build has
// AVX-512, the same for two rows a and b at once, each acc[i] holding a's 8 lanes in its low half
// and b's in its high half: every lane takes add()'s operations on add()'s values, so the caller's
// sum of each half's 8 lanes is add()'s result for that row bit for bit; and the same super-block
// decoded to memory for the kernel that holds the rows of X in its lanes (decode). Q5_K is Q4_K
// with a fifth bit per code: chunk c's low nibbles (sub-block 2c) take bit 2c of their element's
// qh byte, its high nibbles bit 2c + 1, moved to bit 4 by a shift of qh (shifted 2 further each
// chunk) and a mask.
//
// decode's layout, per super-block: codes (256) sub-block j's 32 codes at 32j in lane order (the
// int16 vectors add() multiplies, one after the other); scale (16) the f32 scale of lanes 0-3
// (2j) and of lanes 4-7 (2j + 1) of sub-block j's int32 products; mn (8) Q4_K's and Q5_K's
// dmin * m_j (Q6_K has none). Every value is the one add() computes, so a kernel that repeats
// add()'s operations per lane on them gets add()'s results bit for bit.
template <class BlockType>
struct IntQ4_K {
    using Block = BlockType;
    static constexpr int kSub = QK_K / 32;  // blocks of 32 activations per super-block
    static constexpr bool kFive = std::is_same_v<Block, block_q5_K>;
    static constexpr bool kHasMin = true;
    // The 16 bytes from a block's scales: its 12 packed bytes and 4 of the codes after them.
    static __m128i scale_bytes(const Block& blk) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk.scales)); }
    // d * sc_j and dmin * m_j of the 8 sub-blocks j, as f32 lanes j.
    static void scales(const Block& blk, __m256& sc, __m256& mn) {
        const __m128i u = _mm256_castsi256_si128(k_scale_min_bytes(_mm256_castsi128_si256(scale_bytes(blk))));
        sc = _mm256_mul_ps(_mm256_set1_ps(simd::f16(blk.d)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u)));
        mn = _mm256_mul_ps(_mm256_set1_ps(simd::f16(blk.dmin)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(u, 8))));
    }
#if RIDGE_FORMAT_ZMM
    // The same for rows a (lanes 0-7) and b (lanes 8-15) at once: scales() lane for lane.
    static void scales2(const Block& a, const Block& b, __m512& sc, __m512& mn) {
        const __m256i u = k_scale_min_bytes(_mm256_inserti128_si256(_mm256_castsi128_si256(scale_bytes(a)), scale_bytes(b), 1));
        const __m256i q = _mm256_permute4x64_epi64(u, _MM_SHUFFLE(3, 1, 2, 0));  // a's scales, b's, a's mins, b's
        uint32_t da, db;  // d and dmin, adjacent f16s
        std::memcpy(&da, &a.d, 4), std::memcpy(&db, &b.d, 4);
        const __m512 dd = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_unpacklo_epi32(_mm_cvtsi32_si128(int(da)), _mm_cvtsi32_si128(int(db)))));
        const __m512 d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2), dd);
        const __m512 dmin = _mm512_permutexvar_ps(_mm512_setr_epi32(1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3), dd);
        sc = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q))));
        mn = _mm512_mul_ps(dmin, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1))));
    }
#endif
    // Chunk c's 64 codes of the rows blk[0..V rows) in lane order: sub-block 2c in (q[0], q[1]),
    // 2c + 1 in (q[2], q[3]); qh (Q5_K, from first_high_bits) moves on to the next chunk's bits.
    template <class V>
    static typename V::I first_high_bits([[maybe_unused]] const Block* const* blk) {
        if constexpr (kFive) return V::load([&](int r) { return blk[r]->qh; });
        return V::zero();
    }
    template <class V>
    static void chunk(const Block* const* blk, int c, [[maybe_unused]] typename V::I& qh, typename V::I* q) {
        using I = typename V::I;
        const I m4 = V::bytes(0x0f), zero = V::zero();
        const I v = V::load([&](int r) { return blk[r]->qs + 32 * c; });
        I lo = V::and_(v, m4), hi = V::and_(V::template srli16<4>(v), m4);
        if constexpr (kFive) {
            const I b4 = V::bytes(0x10);
            lo = V::or_(lo, V::and_(V::template slli16<4>(qh), b4));
            hi = V::or_(hi, V::and_(V::template slli16<3>(qh), b4));
            qh = V::template srli16<2>(qh);
        }
        q[0] = V::unpacklo8(lo, zero), q[1] = V::unpackhi8(lo, zero);
        q[2] = V::unpacklo8(hi, zero), q[3] = V::unpackhi8(hi, zero);
    }
    template <int M, class XRow>
    static void add(const Block& blk, const XRow* x, int64_t s, __m256* acc) {
        __m256 sc, mn;
        scales(blk, sc, mn);
        alignas(32) float scale[M][kSub];  // d * sc_j * d_x,j, broadcast from memory (no shuffle)
        for (int i = 0; i < M; i++) {
            _mm256_store_ps(scale[i], _mm256_mul_ps(sc, _mm256_loadu_ps(x[i].d + s * kSub)));
            acc[i] = _mm256_fnmadd_ps(mn, _mm256_loadu_ps(x[i].sum + s * kSub), acc[i]);  // - dmin m_j sum_j
        }
        const Block* rows[1] = {&blk};
        __m256i qh = first_high_bits<KRowsYmm>(rows);
        for (int c = 0; c < 4; c++) {  // 32 bytes: sub-block 2c in the low nibbles, 2c+1 in the high
            __m256i q[4];
            chunk<KRowsYmm>(rows, c, qh, q);
            for (int i = 0; i < M; i++) {
                const int16_t* xq = x[i].q + (s * kSub + 2 * c) * 32;
                const __m256 p0 = _mm256_cvtepi32_ps(k_block_dot(q[0], q[1], xq));
                const __m256 p1 = _mm256_cvtepi32_ps(k_block_dot(q[2], q[3], xq + 32));
                acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[i][2 * c]), p0, acc[i]);
                acc[i] = _mm256_fmadd_ps(_mm256_broadcast_ss(&scale[i][2 * c + 1]), p1, acc[i]);
            }
        }
    }
#if RIDGE_FORMAT_ZMM
    template <int M, class XRow>
    static void add2(const Block& a, const Block& b, const XRow* x, int64_t s, __m512* acc) {
        __m512 sc, mn;
        scales2(a, b, sc, mn);
        __m512 scale[M];  // lanes j and 8 + j: d * sc_j * d_x,j of rows a and b
        for (int i = 0; i < M; i++) {
            scale[i] = _mm512_mul_ps(sc, both_halves(x[i].d + s * kSub));
            acc[i] = _mm512_fnmadd_ps(mn, both_halves(x[i].sum + s * kSub), acc[i]);
        }
        const Block* rows[2] = {&a, &b};
        __m512i qh = first_high_bits<KRowsZmm>(rows);
        for (int c = 0; c < 4; c++) {
            __m512i q[4];
            chunk<KRowsZmm>(rows, c, qh, q);
            for (int i = 0; i < M; i++) {
                const int16_t* xq = x[i].q + (s * kSub + 2 * c) * 32;
                const __m512 p0 = _mm512_cvtepi32_ps(k_block_dot2(q[0], q[1], xq));
                const __m512 p1 = _mm512_cvtepi32_ps(k_block_dot2(q[2], q[3], xq + 32));
                acc[i] = _mm512_fmadd_ps(lane_of_halves(scale[i], 2 * c), p0, acc[i]);
                acc[i] = _mm512_fmadd_ps(lane_of_halves(scale[i], 2 * c + 1), p1, acc[i]);
            }
        }
    }
#endif
    static void decode(const Block& blk, int16_t* codes, float* scale, float* mn) {
        __m256 sc, mv;
        scales(blk, sc, mv);
        alignas(32) float s8[kSub];
        _mm256_store_ps(s8, sc);
        _mm256_storeu_ps(mn, mv);
        for (int j = 0; j < kSub; j++) scale[2 * j] = scale[2 * j + 1] = s8[j];
        const Block* rows[1] = {&blk};
        __m256i qh = first_high_bits<KRowsYmm>(rows);
        for (int c = 0; c < 4; c++) {
            __m256i q[4];
            chunk<KRowsYmm>(rows, c, qh, q);
            for (int t = 0; t < 4; t++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 64 * c + 16 * t), q[t]);
        }
    }
};

struct IntQ6_K {
    using Block = block_q6_K;
    static constexpr int kSub = QK_K / 32;
    static constexpr bool kHasMin = false;
    // d * sc_g of half h's 8 groups g (of 16 elements), as f32 lanes.
    static __m256 scales(const block_q6_K& blk, int h) {
        return _mm256_mul_ps(_mm256_set1_ps(simd::f16(blk.d)),
                             _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(blk.scales + 8 * h)))));
    }
#if RIDGE_FORMAT_ZMM
    // scales(a, h) in lanes 0-7 and scales(b, h) in lanes 8-15 of sc[h], for both halves at once.
    static void scales2(const block_q6_K& a, const block_q6_K& b, __m512* sc) {
        const __m128i sa = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.scales));
        const __m128i sb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        const __m128 dd = _mm_cvtph_ps(_mm_unpacklo_epi16(_mm_cvtsi32_si128(a.d), _mm_cvtsi32_si128(b.d)));  // d of a, of b
        const __m512 d = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), _mm512_castps128_ps512(dd));
        sc[0] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_unpacklo_epi64(sa, sb))));
        sc[1] = _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_unpackhi_epi64(sa, sb))));
    }
#endif
    // Half h's 128 codes of the rows blk[0..V rows) (offset taken off) in lane order: ActBlock
    // 4h + k in (q[2k], q[2k + 1]).
    template <class V>
    static void half(const block_q6_K* const* blk, int h, typename V::I* q) {
        using I = typename V::I;
        const I m4 = V::bytes(0x0f), m2 = V::bytes(0x30), zero = V::zero(), off = V::words(32);
        const I ql0 = V::load([&](int r) { return blk[r]->ql + 64 * h; });
        const I ql1 = V::load([&](int r) { return blk[r]->ql + 64 * h + 32; });
        const I qh = V::load([&](int r) { return blk[r]->qh + 32 * h; });
        // ActBlock 4h + k takes nibble (k >= 2) of ql(k & 1) and bits 2k..2k+1 of qh, as bits 4-5.
        const I u[4] = {
            V::or_(V::and_(ql0, m4), V::and_(V::template slli16<4>(qh), m2)),
            V::or_(V::and_(ql1, m4), V::and_(V::template slli16<2>(qh), m2)),
            V::or_(V::and_(V::template srli16<4>(ql0), m4), V::and_(qh, m2)),
            V::or_(V::and_(V::template srli16<4>(ql1), m4), V::and_(V::template srli16<2>(qh), m2)),
        };
        for (int k = 0; k < 4; k++) {
            q[2 * k] = V::sub16(V::unpacklo8(u[k], zero), off);
            q[2 * k + 1] = V::sub16(V::unpackhi8(u[k], zero), off);
        }
    }
    template <int M, class XRow>
    static void add(const block_q6_K& blk, const XRow* x, int64_t s, __m256* acc) {
        const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
        const block_q6_K* rows[1] = {&blk};
        for (int h = 0; h < 2; h++) {  // half h: elements 128h..128h+128, ActBlocks 4h..4h+4, groups 8h..8h+8
            const __m256 sc = scales(blk, h);
            __m256 scale[M];  // lane g: d * sc_g * d_x of the ActBlock holding group g
            for (int i = 0; i < M; i++) {
                const __m128 dx = _mm_loadu_ps(x[i].d + s * kSub + 4 * h);
                scale[i] = _mm256_mul_ps(sc, _mm256_permutevar8x32_ps(_mm256_castps128_ps256(dx), dup));
            }
            __m256i q[8];
            half<KRowsYmm>(rows, h, q);
            for (int k = 0; k < 4; k++) {
                // Lanes 0-3 hold group 2k of this half, lanes 4-7 group 2k+1.
                const __m256i g = _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1);
                for (int i = 0; i < M; i++) {
                    const int16_t* xq = x[i].q + (s * kSub + 4 * h + k) * 32;
                    const __m256 p = _mm256_cvtepi32_ps(k_block_dot(q[2 * k], q[2 * k + 1], xq));
                    acc[i] = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(scale[i], g), p, acc[i]);
                }
            }
        }
    }
#if RIDGE_FORMAT_ZMM
    template <int M, class XRow>
    static void add2(const block_q6_K& a, const block_q6_K& b, const XRow* x, int64_t s, __m512* acc) {
        const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 0, 0, 1, 1, 2, 2, 3, 3);
        const block_q6_K* rows[2] = {&a, &b};
        __m512 sc2[2];
        scales2(a, b, sc2);
        for (int h = 0; h < 2; h++) {
            const __m512 sc = sc2[h];
            __m512 scale[M];  // lanes g and 8 + g: rows a's and b's d * sc_g * d_x
            for (int i = 0; i < M; i++) {
                const __m128 dx = _mm_loadu_ps(x[i].d + s * kSub + 4 * h);
                scale[i] = _mm512_mul_ps(sc, _mm512_permutexvar_ps(dup, _mm512_castps128_ps512(dx)));
            }
            __m512i q[8];
            half<KRowsZmm>(rows, h, q);
            for (int k = 0; k < 4; k++) {
                const __m512i g = _mm512_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 8 + 2 * k,
                                                    8 + 2 * k, 8 + 2 * k, 8 + 2 * k, 9 + 2 * k, 9 + 2 * k, 9 + 2 * k, 9 + 2 * k);
                for (int i = 0; i < M; i++) {
                    const int16_t* xq = x[i].q + (s * kSub + 4 * h + k) * 32;
                    const __m512 p = _mm512_cvtepi32_ps(k_block_dot2(q[2 * k], q[2 * k + 1], xq));
                    acc[i] = _mm512_fmadd_ps(_mm512_permutexvar_ps(g, scale[i]), p, acc[i]);
                }
            }
        }
    }
#endif
    static void decode(const block_q6_K& blk, int16_t* codes, float* scale, float* /*mn*/) {
        const block_q6_K* rows[1] = {&blk};
        for (int h = 0; h < 2; h++) {
            _mm256_storeu_ps(scale + 8 * h, scales(blk, h));  // groups 2j, 2j + 1 of ActBlock j
            __m256i q[8];
            half<KRowsYmm>(rows, h, q);
            for (int t = 0; t < 8; t++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 128 * h + 16 * t), q[t]);
        }
    }
};
#endif  // RIDGE_FORMAT_SIMD

}  // namespace ridge
