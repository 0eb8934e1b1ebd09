// The CPU kernels' shared pieces: Cost (kernels/types.h: the floating-point work and memory traffic
// of one kernel call, returned by every kernel so the engine can sum it per op, layer and phase) and
// parallel_for, the OpenMP loop the kernels use.
#pragma once
#include <cstdint>

#include "kernels/types.h"

namespace ridge::cpu {

using ridge::Cost;  // kernels/types.h

// Work (in multiply-adds or element updates) below which a kernel stays on one thread: starting
// an OpenMP team costs microseconds, more than a tiny model's whole layer.
inline constexpr double kParallelMinWork = 32768;

// body(i) for i in [0, n): an OpenMP static loop when `parallel`, else a plain loop on the calling
// thread. Not `#pragma omp parallel for if (...)`: a region its `if` turns serial still builds a
// team of one, about 0.5 us with GCC's libgomp (measured on 2 cores), and a decode step of SmolLM2
// runs about 400 small ops (norms, adds, quantizations of one row) that take less than that.
template <class Body>
inline void parallel_for(int64_t n, bool parallel, Body&& body) {
    if (!parallel || n < 2) {
        for (int64_t i = 0; i < n; i++) body(i);
        return;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) body(i);
}

}  // namespace ridge::cpu
