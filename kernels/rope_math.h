// Rotary position embedding math shared by the CPU and CUDA kernels (RIDGE_HD): the angle of
// pair i at a position, and which two elements of a head form pair i in each rope style. The
// CPU's rope (kernels/cpu/ops.cpp) and the GPU's (kernels/cuda/ops.cu) both compute through these,
// so their angles agree to the last bit before the cos and sin.
#pragma once
#include <cmath>
#include <cstdint>

#include "weights/config.h"
#include "weights/hd.h"

namespace ridge {

// The angle of pair i at position pos: pos * freq_base^(-2i/rope_dim), in double.
RIDGE_HD inline double rope_angle(int64_t pos, int i, int rope_dim, float freq_base) {
    return double(pos) * pow(double(freq_base), -2.0 * double(i) / double(rope_dim));
}

// Offsets a, b of the two elements of pair i within a head: Norm (GGUF llama) pairs (2i, 2i+1),
// Neox pairs (i, i + rope_dim/2).
RIDGE_HD inline void rope_pair(RopeStyle style, int i, int rope_dim, int* a, int* b) {
    if (style == RopeStyle::Norm) {
        *a = 2 * i;
        *b = 2 * i + 1;
    } else {
        *a = i;
        *b = i + rope_dim / 2;
    }
}

}  // namespace ridge
