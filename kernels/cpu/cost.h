// Cost: the floating-point work and memory traffic of one kernel call, returned by every kernel
// so the engine can sum it per op, per layer and per phase (design habit 4: costs are code).
// Conventions: a fused multiply-add counts as 2 FLOPs; bytes are the bytes the kernel must read
// and write at least once, kept apart by what they are: weights (in their stored format, e.g.
// Q4_1 = 20 bytes per 32 weights), activations (f32, plus small index arrays such as token ids),
// and the KV cache (in its element type: f32 4 bytes, f16 2 bytes per value).
#pragma once

namespace ridge::cpu {

struct Cost {
    double flops = 0;        // floating-point operations
    double weight_bytes = 0; // model weights read
    double act_read = 0;     // activations (and index arrays) read
    double act_written = 0;  // activations written
    double kv_read = 0;      // KV cache read
    double kv_written = 0;   // KV cache written

    // Not an aggregate on purpose: a positional {flops, bytes} from before the byte categories
    // must not compile into {flops, weight_bytes}. Set the fields by name.
    Cost() = default;

    // Everything the kernel reads and writes.
    double bytes() const { return weight_bytes + act_read + act_written + kv_read + kv_written; }
    // The roofline's bytes: what streams from memory every step (weights, KV cache). Activations
    // are left out: at these sizes they stay in cache between kernels.
    double memory_bytes() const { return weight_bytes + kv_read + kv_written; }
    // Arithmetic intensity I = FLOPs / memory_bytes() (0 when no weight or KV byte moved).
    double intensity() const { return memory_bytes() > 0 ? flops / memory_bytes() : 0.0; }

    Cost& operator+=(const Cost& o) {
        flops += o.flops;
        weight_bytes += o.weight_bytes;
        act_read += o.act_read;
        act_written += o.act_written;
        kv_read += o.kv_read;
        kv_written += o.kv_written;
        return *this;
    }
    friend Cost operator+(Cost a, const Cost& b) { return a += b; }
    // Every field times f (per-token figures: total.scale(1.0 / tokens)).
    Cost& scale(double f) {
        flops *= f, weight_bytes *= f, act_read *= f, act_written *= f, kv_read *= f, kv_written *= f;
        return *this;
    }
};

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
