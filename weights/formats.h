// Every weight format ridge reads, one header per family (weights/formats/): each holds its block
// layout and all the code that knows its bits (the scalar decode that host and device share, the
// SIMD float and integer decoders of kernels/cpu, the reference quantizer). Kernels own the loops
// and call these; weights/quant.h and weights/types.h dispatch on DType. Adding a format is a
// header here plus that dispatch.
#pragma once

#include "weights/formats/floats.h"    // F32, F16, BF16 (and the f16 conversions every format uses)
#include "weights/formats/k_quants.h"  // Q4_K, Q5_K, Q6_K
#include "weights/formats/q4.h"        // Q4_0, Q4_1
#include "weights/formats/q5.h"        // Q5_0, Q5_1
#include "weights/formats/q8.h"        // Q8_0
