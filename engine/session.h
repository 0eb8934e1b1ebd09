// Session: one model with its KV cache and workspace. Feeds tokens to sequences through
// forward() (a prompt in chunks of up to max_rows rows, a decode step as one row), and keeps the
// time, token count and per-op, per-layer FLOPs/bytes/time of each phase (prefill, decode).
#pragma once
#include <cstdint>
#include <memory>
#include <span>

#include "engine/counters.h"
#include "engine/dump.h"
#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "engine/engine.h"

namespace ridge {

struct PhaseStats {
    int64_t tokens = 0;    // rows fed
    int64_t calls = 0;     // forward() calls
    double seconds = 0;    // wall time inside forward()
    Counters counters;     // FLOPs, bytes and time per op and layer (while counting is on)
    double tokens_per_second() const { return seconds > 0 ? double(tokens) / seconds : 0.0; }
};

struct SessionOptions {
    int n_ctx = 0;               // KV cache capacity in tokens (<= the model's n_ctx_train)
    DType kv_type = DType::F32;  // F32 or F16
    int max_rows = 256;          // most rows per forward() call (longer prompts are chunked)
    Dumper* dump = nullptr;      // named intermediates, when debugging
    bool count = true;           // false: forward() gets no counters (measures what counting costs)
};

class Session {
public:
    // The engine must outlive the session.
    Session(const Engine& engine, const SessionOptions& opt);

    const Engine& engine() const { return engine_; }
    const Model& model() const { return engine_.model(); }
    KVCache& cache() { return cache_; }
    const KVCache& cache() const { return cache_; }
    int n_vocab() const { return engine_.config().n_vocab; }

    // Appends tokens to seq and returns the logits (n_vocab) of the last one. prefill() runs
    // them as (T x d) matrices in chunks; decode() runs one row. ridge::Error if the sequence
    // would pass the context (nothing is fed then).
    const float* prefill(int seq, std::span<const int32_t> tokens);
    const float* decode(int seq, int32_t token);
    // One untimed pass (a single token on a scratch sequence, freed after) so that the first timed
    // pass finds the weights in memory and the threads started, as llama.cpp's warm-up does; the
    // statistics are cleared after it. A full cache (no free block) skips it.
    void warm_up(int32_t token);

    PhaseStats prefill_stats, decode_stats;
    void set_counting(bool on) { opt_.count = on; }
    bool counting() const { return opt_.count; }

private:
    const float* feed(int seq, std::span<const int32_t> tokens, PhaseStats& stats);

    const Engine& engine_;
    SessionOptions opt_;
    KVCache cache_;
    Workspace ws_;
    Batch batch_;
};

}  // namespace ridge
