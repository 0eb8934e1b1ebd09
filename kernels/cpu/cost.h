// Cost: the floating-point work and memory traffic of one kernel call, returned by every kernel
// so the engine can sum it per op, per layer and per phase (design habit 4: costs are code).
// Conventions: a fused multiply-add counts as 2 FLOPs; bytes are the bytes the kernel must read
// and write at least once (weights in their stored format, activations as f32).
#pragma once

namespace ridge::cpu {

struct Cost {
    double flops = 0;  // floating-point operations
    double bytes = 0;  // bytes read + written

    Cost& operator+=(const Cost& o) {
        flops += o.flops;
        bytes += o.bytes;
        return *this;
    }
    friend Cost operator+(Cost a, const Cost& b) { return a += b; }
    // Arithmetic intensity I = FLOPs / byte (0 when nothing moved).
    double intensity() const { return bytes > 0 ? flops / bytes : 0.0; }
};

// Work (in multiply-adds or element updates) below which a kernel stays on one thread: starting
// an OpenMP team costs microseconds, more than a tiny model's whole layer.
inline constexpr double kParallelMinWork = 32768;

}  // namespace ridge::cpu
