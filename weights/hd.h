// RIDGE_HD marks a function that host and device code both compile: __host__ __device__ under
// nvcc, nothing under the host compiler. Headers of such shared math (weights/formats/,
// kernels/rope_math.h, kernels/cuda/matrix.h) include this one.
#pragma once

#if defined(__CUDACC__)
#define RIDGE_HD __host__ __device__
#else
#define RIDGE_HD
#endif
