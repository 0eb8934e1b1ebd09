// Scheduler: continuous batching. Many requests share one model and one paged KV cache; each
// step() is one forward() over a batch that holds one decode row for every running sequence plus
// whole prefill chunks of newly admitted ones. New requests are admitted between steps, finished
// or cancelled ones are retired (their KV blocks freed) at once.
//
// KV memory: a request is admitted only when the pool can hold its whole lifetime, prompt plus
// max_new tokens (capped at n_ctx); those blocks are reserved until it ends. A running sequence
// therefore never runs out of cache and nothing it holds is ever evicted; while the pool is full
// new requests wait in the queue, first come first served.
//
// Prefix caching (prefix_cache.h, on unless SchedulerOptions::prefix_cache is false): the whole
// prompt chunks a request computes stay cached after it ends; a new request takes the cached
// chunks its prompt starts with (all but its last prompt token's chunk) instead of computing
// them, and reserves only the blocks it will add. Cached chunks no request holds count as free
// space: they are dropped, least recently used first, when a request needs their blocks.
//
// Exactness: prompts are cut into chunks that start at multiples of `chunk` whatever else runs,
// and forward() computes every row from its own sequence alone (batch-invariant kernels, see
// forward.h), so at temperature 0 a request's tokens are the same in any batch as alone.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/counters.h"
#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "engine/prefix_cache.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace ridge {

struct SchedulerOptions {
    int n_ctx = 2048;            // most tokens one sequence may hold (prompt + generated)
    int kv_tokens = 0;           // KV pool size in tokens, shared by all sequences (0: n_ctx * max_batch)
    DType kv_type = DType::F32;  // F32 or F16
    int max_batch = 8;           // most sequences running (admitted) at once
    int chunk = 256;             // prefill chunk: rows [c * chunk, (c + 1) * chunk) of a prompt go together
    int step_rows = 512;         // soft budget of rows per step: decode rows always run, then whole
                                 // prefill chunks while they fit (at least one when nothing else runs)
    bool count = true;           // forward() gets counters (FLOPs, bytes, time per op)
    bool prefix_cache = true;    // keep and share whole prompt chunks; chunk must then be a multiple of
                                 // the KV block size (KVCache::kDefaultBlockSize)
};

struct RequestParams {
    std::vector<int32_t> prompt;  // token ids, not empty, shorter than n_ctx
    SamplerParams sampling;       // validated on submit
    int max_new = 128;            // tokens to generate; < 0: until the context is full
    int logprobs = -1;            // >= 0: on_logprob gets each emitted token's, with this many top ones
};

enum class FinishReason {
    Length,      // max_new tokens generated
    Stop,        // an end-of-generation token (or BOS) was sampled; it is not emitted
    ContextFull, // the sequence reached n_ctx
    Cancelled,   // cancel() or on_token returned false
};
const char* finish_reason_name(FinishReason r);  // "length", "stop", "context", "cancelled"

struct RequestCallbacks {
    // Each generated token, on the thread that runs step(); return false to cancel the request
    // (its sequence is freed at once). May be empty.
    std::function<bool(int32_t token)> on_token;
    // With RequestParams::logprobs >= 0: each emitted token's log-probability (token_logprob), on
    // the same thread, just before its on_token. May be empty.
    std::function<void(const TokenLogprob& lp)> on_logprob;
    // The logits (n_vocab floats) each token is sampled from, on the same thread, before sampling.
    // May be empty.
    std::function<void(const float* logits, int n_vocab)> on_logits;
    // Exactly once, on the thread that runs step(), at the end of the step that retired the request
    // (after stats() reflects it), or in cancel() for a request still waiting: the reason and the
    // number of tokens emitted. May be empty.
    std::function<void(FinishReason reason, int n_generated)> on_done;
};

// A snapshot for /metrics and batch tests.
struct SchedulerStats {
    int running = 0;                // admitted sequences (prefilling or decoding)
    int waiting = 0;                // queued, not admitted
    int kv_blocks_used = 0;         // blocks running requests have added (their own; shared ones are cached)
    int kv_blocks_reserved = 0;     // blocks running requests may add in all (>= used)
    int kv_blocks_total = 0;
    int kv_blocks_cached = 0;       // blocks the prefix cache holds (some also held by requests)
    int kv_blocks_cached_idle = 0;  // of those, blocks no request holds: free space, kept until needed
    int64_t prompt_tokens_admitted = 0;  // prompt tokens of admitted requests
    int64_t prompt_tokens_reused = 0;    // of those, tokens taken from the prefix cache (not computed)
    int last_step_rows = 0;         // rows of the last forward()
    int last_step_sequences = 0;    // sequences in the last forward()
    int64_t steps = 0;
    int64_t requests_submitted = 0;
    int64_t requests_finished = 0;  // any reason, cancellations included
    int64_t tokens_prefilled = 0;
    int64_t tokens_generated = 0;
    // Steps that hold only decode rows, apart (their speed is the decode speed a client sees;
    // steps with prompt rows are counted as prefill steps):
    int64_t decode_steps = 0;
    int64_t decode_step_tokens = 0;     // rows of those steps
    double decode_step_seconds = 0;     // their wall time
    double decode_step_bytes = 0;       // their memory bytes (weights + KV), from the counters
    double prefill_step_seconds = 0;    // wall time of the other steps
    // decode tokens/s over the decode-only steps, and their achieved GB/s (0 before any)
    double decode_tokens_per_second() const { return decode_step_seconds > 0 ? decode_step_tokens / decode_step_seconds : 0; }
    double decode_gbs() const { return decode_step_seconds > 0 ? decode_step_bytes / decode_step_seconds * 1e-9 : 0; }
};

class Scheduler {
public:
    // tokenizer may be nullptr: then only max_new and the context end a request.
    Scheduler(const Engine& engine, const Tokenizer* tokenizer, const SchedulerOptions& opt);
    ~Scheduler();  // requests still queued or running end without on_done
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;

    // Thread-safe. Checks the request (prompt length, token ids, sampling, that it could ever fit
    // the pool) and queues it; ridge::Error with one line naming the problem otherwise.
    int64_t submit(RequestParams params, RequestCallbacks callbacks);
    // Thread-safe. A waiting request ends at once; a running one is retired at the next step.
    void cancel(int64_t id);

    // Runs one step on the calling thread (one thread only): retires cancelled requests, admits
    // waiting ones, builds the batch, runs forward(), samples, calls back, retires finished ones.
    // Returns false when there was nothing to do.
    bool step();
    void run_until_idle();  // step() until nothing runs or waits
    // For the stepping thread: blocks until work is queued or running, stop() is called, or the
    // timeout passes; true when there is work (and no stop).
    bool wait_for_work(std::chrono::milliseconds timeout);
    void stop();            // wakes wait_for_work for good (server shutdown)
    bool stopped() const;

    SchedulerStats stats() const;  // thread-safe
    const SchedulerOptions& options() const { return opt_; }
    const Engine& engine() const { return engine_; }
    const Model& model() const { return engine_.model(); }
    const Counters& counters() const { return counters_; }  // all steps, stepping thread only
    const KVCache& cache() const { return cache_; }          // stepping thread only

private:
    struct Request;
    bool admit_waiting();
    void finish(Request& r, FinishReason reason);
    int blocks_for(int tokens) const;
    void publish_locked();  // running / KV figures into stats_ (mu_ held)
    void publish_and_call_back();  // publish, then the on_done calls of requests that ended

    const Engine& engine_;
    const Tokenizer* tok_;
    SchedulerOptions opt_;
    KVCache cache_;
    Workspace ws_;
    Batch batch_;
    Counters counters_;
    Counters step_counters_;

    mutable std::mutex mu_;          // guards inbox_, cancels_, stats_, stopped_
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Request>> inbox_;  // submitted, not yet admitted
    std::vector<int64_t> cancels_;
    SchedulerStats stats_;
    bool stopped_ = false;
    int64_t next_id_ = 1;

    std::vector<std::unique_ptr<Request>> running_;  // stepping thread only
    std::unique_ptr<PrefixCache> prefix_;            // stepping thread only; null when off
    int reserved_blocks_ = 0;   // blocks the running requests may add in all
    int appended_blocks_ = 0;   // of those, blocks they have added
    void append_blocks(Request& r, int n);
    std::vector<std::pair<Request*, int>> chunks_done_;  // this step's whole prompt chunks (request, c)  // cache_.append(r.seq, n), reclaiming cached blocks if needed
    std::vector<std::function<void()>> done_calls_;  // on_done calls waiting for the step's end
};

}  // namespace ridge
