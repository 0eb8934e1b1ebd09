// The K-quant reference quantizers declared in weights/formats/k_quants.h: ggml's
// quantize_row_q{4,5,6}_K_ref, the same float32 operations in the same order, so that the bytes are
// llama-quantize's (tests/test_weights_kquant.cpp compares every tensor of five of its runs).
// Built with -ffp-contract=off (CMakeLists.txt): a fused multiply-add rounds once where ggml
// rounds twice, and a code or scale then differs now and then.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "weights/formats/k_quants.h"

namespace ridge {

namespace {

// Round to nearest, ties to even, through the float's mantissa (ggml's nearest_int): exact for
// |v| < 2^22; beyond that (a row holding inf or NaN) some int, which the callers clamp.
int nearest_int(float v) {
    const float shifted = v + 12582912.f;  // 1.5 * 2^23: the integer lands in the low mantissa bits
    int32_t bits;
    std::memcpy(&bits, &shifted, 4);
    return (bits & 0x007fffff) - 0x00400000;
}

int clamp_int(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Fits 32 values as scale * L + min, L in 0..nmax and min <= 0, lowering the error weighted by w:
// a first fit from the range, then nstep + 1 trial scales (nmax + rmin + rdelta * is over the
// range), each refined by weighted least squares, the best kept. Writes L; returns the scale and
// sets *neg_min = -min. (ggml's make_qkx2_quants, squared error.)
float fit_scale_min(const float* x, const float* w, int nmax, float rmin, float rdelta, int nstep,
                           uint8_t* L, float* neg_min) {
    constexpr int n = 32;
    float lo = x[0], hi = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *neg_min = -lo;
        return 0.f;
    }
    float iscale = float(nmax) / (hi - lo);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        L[i] = uint8_t(clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax));
        float diff = scale * float(L[i]) + lo - x[i];
        diff = diff * diff;
        best_error += w[i] * diff;
    }
    uint8_t trial[n];
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * float(is) + float(nmax)) / (hi - lo);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * (x[i] - lo)), 0, nmax);
            trial[i] = uint8_t(l);
            const float wl = w[i] * float(l);
            sum_l += wl;
            sum_l2 += wl * float(l);
            sum_xl += wl * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (!(D > 0)) continue;
        float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        if (this_min > 0) {
            this_min = 0;
            this_scale = sum_xl / sum_l2;
        }
        float error = 0;
        for (int i = 0; i < n; i++) {
            float diff = this_scale * float(trial[i]) + this_min - x[i];
            diff = diff * diff;
            error += w[i] * diff;
        }
        if (error < best_error) {
            std::memcpy(L, trial, n);
            best_error = error;
            scale = this_scale;
            lo = this_min;
        }
    }
    *neg_min = -lo;
    return scale;
}

// Fits 16 values as scale * (L - 32), L in 0..63, lowering the error weighted by x^2: the scale
// that maps the value of largest magnitude to -32, then 18 trial scales around it, each refined by
// least squares, the best kept. Writes L; returns the scale (0 for an all-zero group). (ggml's
// make_qx_quants with nmax 32 and rmse_type 1.)
float fit_scale_signed(const float* x, int8_t* L) {
    constexpr int n = 16, nmax = 32;
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    // The weighted sums of a trial scale (codes l in -nmax..nmax-1, weights x^2).
    auto sums = [&](float iscale, float& sumlx, float& suml2) {
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            const int l = clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1);
            const float w = x[i] * x[i];
            sumlx += w * x[i] * float(l);
            suml2 += w * float(l) * float(l);
        }
    };
    auto codes = [&](float iscale) {
        for (int i = 0; i < n; i++) L[i] = int8_t(nmax + clamp_int(nearest_int(iscale * x[i]), -nmax, nmax - 1));
    };
    float iscale = float(-nmax) / max;
    float sumlx, suml2;
    sums(iscale, sumlx, suml2);
    codes(iscale);
    float scale = suml2 != 0 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(float(nmax) + 0.1f * float(is)) / max;
        sums(iscale, sumlx, suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            codes(iscale);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

// Q4_K / Q5_K: 8 sub-blocks fitted with fit_scale_min (weights sqrt(mean x^2) + |x|), their scales
// and mins quantized to 6 bits against the largest of each, then every code chosen again against
// the scale and min as stored. Returns the codes in L (256); fills d, dmin and scales.
template <class Block>
void fit_q45_K(const float* x, Block& b, int nmax, float rmin, int nstep, uint8_t* L) {
    float scales[QK_K / 32], mins[QK_K / 32], w[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < QK_K / 32; j++) {
        const float* xj = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xj[l] * xj[l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; l++) w[l] = av_x + std::fabs(xj[l]);
        scales[j] = fit_scale_min(xj, w, nmax, rmin, 0.1f, nstep, L + 32 * j, &mins[j]);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < QK_K / 32; j++) {  // the packing q4k_scale_min reads
        uint8_t ls = uint8_t(nearest_int(inv_scale * scales[j]));
        uint8_t lm = uint8_t(nearest_int(inv_min * mins[j]));
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            b.scales[j] = ls;
            b.scales[j + 4] = lm;
        } else {
            b.scales[j + 4] = uint8_t((ls & 0x0f) | ((lm & 0x0f) << 4));
            b.scales[j - 4] |= uint8_t((ls >> 4) << 6);
            b.scales[j] |= uint8_t((lm >> 4) << 6);
        }
    }
    b.d = fp32_to_fp16(max_scale / 63.f);
    b.dmin = fp32_to_fp16(max_min / 63.f);
    for (int j = 0; j < QK_K / 32; j++) {
        uint8_t sc, mn;
        q4k_scale_min(j, b.scales, &sc, &mn);
        const float d = fp16_to_fp32(b.d) * float(sc);
        if (d == 0) continue;  // the fitted codes stay
        const float dm = fp16_to_fp32(b.dmin) * float(mn);
        for (int l = 0; l < 32; l++) L[32 * j + l] = uint8_t(clamp_int(nearest_int((x[32 * j + l] + dm) / d), 0, nmax));
    }
}

}  // namespace

// Q4_K: codes 0..15; chunk c (64 elements) in qs[32c..32c+32), low nibbles then high.
void quantize_block(const float* x, block_q4_K& b) {
    uint8_t L[QK_K];
    fit_q45_K(x, b, 15, -1.f, 20, L);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) b.qs[32 * c + l] = uint8_t(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

// Q5_K: codes 0..31; the low 4 bits as Q4_K, bit 4 of sub-block j's element l in bit j of qh[l].
void quantize_block(const float* x, block_q5_K& b) {
    uint8_t L[QK_K];
    fit_q45_K(x, b, 31, -0.5f, 15, L);
    std::memset(b.qh, 0, sizeof b.qh);
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
            if (lo > 15) b.qh[l] |= uint8_t(1 << (2 * c));
            if (hi > 15) b.qh[l] |= uint8_t(2 << (2 * c));
            b.qs[32 * c + l] = uint8_t((lo & 0x0f) | ((hi & 0x0f) << 4));
        }
}

// Q6_K: 16 groups fitted with fit_scale_signed, their scales quantized to int8 against the
// largest in magnitude (which maps to -128), then every code chosen again against the stored scale.
void quantize_block(const float* x, block_q6_K& b) {
    int8_t L[QK_K];
    float scales[QK_K / 16];
    float max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < QK_K / 16; g++) {
        scales[g] = fit_scale_signed(x + 16 * g, L + 16 * g);
        const float a = std::fabs(scales[g]);
        if (a > max_abs_scale) {
            max_abs_scale = a;
            max_scale = scales[g];
        }
    }
    if (max_abs_scale < 1e-15f) {  // all (nearly) zero: a zero block
        std::memset(&b, 0, sizeof b);
        return;
    }
    const float iscale = -128.f / max_scale;
    b.d = fp32_to_fp16(1 / iscale);
    for (int g = 0; g < QK_K / 16; g++) {
        const int s = nearest_int(iscale * scales[g]);
        b.scales[g] = int8_t(s < 127 ? s : 127);
    }
    for (int g = 0; g < QK_K / 16; g++) {
        const float d = fp16_to_fp32(b.d) * float(b.scales[g]);
        if (d == 0) continue;
        for (int i = 0; i < 16; i++) L[16 * g + i] = int8_t(clamp_int(nearest_int(x[16 * g + i] / d), -32, 31) + 32);
    }
    for (int h = 0; h < 2; h++)  // the layout q6_K_code reads
        for (int l = 0; l < 32; l++) {
            const int8_t* Lh = L + 128 * h;
            b.ql[64 * h + l] = uint8_t((Lh[l] & 0x0f) | ((Lh[l + 64] & 0x0f) << 4));
            b.ql[64 * h + 32 + l] = uint8_t((Lh[l + 32] & 0x0f) | ((Lh[l + 96] & 0x0f) << 4));
            b.qh[32 * h + l] = uint8_t((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
        }
}


}  // namespace ridge
