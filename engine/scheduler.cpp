// Scheduler: the queue, admission against the KV block pool, one forward() per step over every
// running sequence's decode row and whole prompt chunks, sampling, callbacks, retirement.
#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "weights/error.h"

namespace ridge {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::Length: return "length";
        case FinishReason::Stop: return "stop";
        case FinishReason::ContextFull: return "context";
        case FinishReason::Cancelled: return "cancelled";
    }
    return "?";
}

struct Scheduler::Request {
    int64_t id = 0;
    RequestParams params;
    RequestCallbacks cb;
    Sampler sampler;
    std::vector<int32_t> history;  // prompt + generated tokens (the repetition penalty looks at them)
    int lifetime = 0;              // most tokens it will ever hold in the cache
    int reserved = 0;              // KV blocks it may add while admitted (its lifetime's, less shared ones)
    int appended = 0;              // of those, blocks added so far
    int seq = -1;                  // KV cache sequence, once admitted
    int fed = 0;                   // tokens in the cache
    int generated = 0;             // tokens emitted
    int32_t next = -1;             // sampled, emitted, not yet fed (this step's decode row)
    int64_t logits_row = -1;       // this step's row in ws.logits, or -1
    bool cancelled = false;
    bool done = false;

    Request(RequestParams p, RequestCallbacks c) : params(std::move(p)), cb(std::move(c)), sampler(params.sampling) {}
    int prompt_len() const { return int(params.prompt.size()); }
    bool prefilling() const { return fed < prompt_len(); }
};

Scheduler::Scheduler(const Engine& engine, const Tokenizer* tokenizer, const SchedulerOptions& opt)
    : engine_(engine),
      tok_(tokenizer),
      opt_(opt),
      cache_(engine.config(), opt.n_ctx, opt.kv_type, KVCache::kDefaultBlockSize,
             opt.kv_tokens > 0 ? opt.kv_tokens : opt.n_ctx * std::max(opt.max_batch, 1), engine.on_gpu()) {
    if (opt.max_batch < 1) throw Error("scheduler: --max-batch " + std::to_string(opt.max_batch) + " must be at least 1");
    if (opt.chunk < 1 || opt.step_rows < 1)
        throw Error("scheduler: prefill chunk " + std::to_string(opt.chunk) + " and step rows " +
                    std::to_string(opt.step_rows) + " must be positive");
    if (opt.n_ctx > engine.config().n_ctx_train && engine.config().n_ctx_train > 0)
        throw Error("scheduler: context " + std::to_string(opt.n_ctx) + " is longer than the model's " +
                    std::to_string(engine.config().n_ctx_train));
    if (opt.prefix_cache) prefix_ = std::make_unique<PrefixCache>(opt.chunk, cache_.block_size());
    stats_.kv_blocks_total = cache_.n_blocks();
}

Scheduler::~Scheduler() = default;

int Scheduler::blocks_for(int tokens) const { return (tokens + cache_.block_size() - 1) / cache_.block_size(); }

int64_t Scheduler::submit(RequestParams params, RequestCallbacks callbacks) {
    const int n = int(params.prompt.size());
    if (n == 0) throw Error("request: the prompt is empty");
    if (n > opt_.n_ctx)
        throw Error("request: the prompt has " + std::to_string(n) + " tokens, more than the context of " +
                    std::to_string(opt_.n_ctx));
    for (int32_t t : params.prompt)
        if (t < 0 || t >= engine_.config().n_vocab)
            throw Error("request: token id " + std::to_string(t) + " is outside the vocabulary (0.." +
                        std::to_string(engine_.config().n_vocab - 1) + ")");
    validate(params.sampling);
    if (params.logprobs < -1 || params.logprobs > kMaxTopLogprobs)
        throw Error("request: logprobs " + std::to_string(params.logprobs) + " is outside -1.." + std::to_string(kMaxTopLogprobs));
    auto r = std::make_unique<Request>(std::move(params), std::move(callbacks));
    // The cache holds the prompt and every generated token but the last (which is never fed).
    const int64_t want = r->params.max_new < 0 ? int64_t(opt_.n_ctx) : int64_t(n) + r->params.max_new;
    r->lifetime = int(std::min<int64_t>(want, opt_.n_ctx));
    r->reserved = blocks_for(r->lifetime);
    if (r->reserved > cache_.n_blocks())
        throw Error("request: it may need " + std::to_string(r->lifetime) + " tokens of KV cache, the pool holds " +
                    std::to_string(int64_t(cache_.n_blocks()) * cache_.block_size()));
    std::lock_guard<std::mutex> lock(mu_);
    r->id = next_id_++;
    const int64_t id = r->id;
    inbox_.push_back(std::move(r));
    stats_.requests_submitted++;
    stats_.waiting = int(inbox_.size());
    cv_.notify_all();
    return id;
}

void Scheduler::cancel(int64_t id) {
    std::unique_ptr<Request> waiting;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = std::find_if(inbox_.begin(), inbox_.end(), [&](const auto& r) { return r->id == id; });
        if (it != inbox_.end()) {
            waiting = std::move(*it);
            inbox_.erase(it);
            stats_.waiting = int(inbox_.size());
            stats_.requests_finished++;
        } else {
            cancels_.push_back(id);
            cv_.notify_all();
        }
    }
    if (waiting && waiting->cb.on_done) waiting->cb.on_done(FinishReason::Cancelled, 0);
}

bool Scheduler::wait_for_work(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return stopped_ || !inbox_.empty() || !cancels_.empty() || !running_.empty(); }) &&
           !stopped_;
}

void Scheduler::stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    cv_.notify_all();
}

bool Scheduler::stopped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopped_;
}

SchedulerStats Scheduler::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

void Scheduler::finish(Request& r, FinishReason reason) {
    if (r.done) return;
    r.done = true;
    if (r.seq >= 0) cache_.free_sequence(r.seq);
    reserved_blocks_ -= r.reserved;
    appended_blocks_ -= r.appended;
    // on_done runs at the end of the step, once the stats say the request has ended.
    if (r.cb.on_done) done_calls_.push_back([cb = std::move(r.cb.on_done), reason, n = r.generated] { cb(reason, n); });
    std::lock_guard<std::mutex> lock(mu_);
    stats_.requests_finished++;
}

void Scheduler::publish_and_call_back() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        publish_locked();
    }
    std::vector<std::function<void()>> calls;
    calls.swap(done_calls_);
    for (auto& call : calls) call();
}

// First come, first served: the oldest waiting request is admitted when a batch slot and its
// whole reservation are free; the ones behind it wait (no overtaking, so none starves). Free means
// on the free list or cached by no one else (reclaimable), less what running requests may still add.
bool Scheduler::admit_waiting() {
    bool admitted = false;
    while (int(running_.size()) < opt_.max_batch) {
        std::unique_ptr<Request> r;
        {
            std::lock_guard<std::mutex> lock(mu_);
            if (inbox_.empty()) break;
            Request& next = *inbox_.front();
            const int seq = cache_.new_sequence();
            int reused = 0;
            if (prefix_) {
                // The last prompt token is always computed: its logits give the first new token.
                const std::vector<int32_t> hit = prefix_->lookup(next.params.prompt, (next.prompt_len() - 1) / opt_.chunk);
                cache_.share(seq, hit);
                reused = int(hit.size()) * cache_.block_size();
            }
            const int own = blocks_for(next.lifetime) - reused / cache_.block_size();
            const int room = cache_.free_blocks() + (prefix_ ? prefix_->idle_blocks(cache_) : 0);
            if (reserved_blocks_ - appended_blocks_ + own > room) {
                cache_.free_sequence(seq);
                break;
            }
            r = std::move(inbox_.front());
            inbox_.pop_front();
            stats_.waiting = int(inbox_.size());
            stats_.prompt_tokens_admitted += r->prompt_len();
            stats_.prompt_tokens_reused += reused;
            r->seq = seq;
            r->fed = reused;
            r->reserved = own;
        }
        reserved_blocks_ += r->reserved;
        r->history = r->params.prompt;
        running_.push_back(std::move(r));
        admitted = true;
    }
    return admitted;
}

void Scheduler::append_blocks(Request& r, int n) {
    const int blocks = cache_.blocks_to_append(r.seq, n);
    // Admission left room for every block a running request adds: cached blocks no one holds
    // make up what the free list lacks.
    if (blocks > cache_.free_blocks() && !(prefix_ && prefix_->reclaim(cache_, blocks)))
        throw Error("scheduler: no KV block for a running request (reservation broken)");
    cache_.append(r.seq, n);
    r.appended += blocks;
    appended_blocks_ += blocks;
}

bool Scheduler::step() {
    std::vector<int64_t> cancels;
    {
        std::lock_guard<std::mutex> lock(mu_);
        cancels.swap(cancels_);
    }
    for (auto& r : running_)
        if (std::find(cancels.begin(), cancels.end(), r->id) != cancels.end()) finish(*r, FinishReason::Cancelled);
    std::erase_if(running_, [](const auto& r) { return r->done; });
    admit_waiting();

    // The batch: one decode row per sequence that has a token to feed, then whole prompt chunks
    // (chunk c of a prompt is its positions [c * chunk, (c + 1) * chunk)) while the budget allows.
    batch_.clear();
    chunks_done_.clear();
    int64_t prompt_rows = 0;
    int sequences = 0;
    for (auto& r : running_) {
        r->logits_row = -1;
        if (r->prefilling() || r->next < 0) continue;
        const int pos = cache_.length(r->seq);
        append_blocks(*r, 1);  // reserved at admission
        batch_.add(r->next, r->seq, pos, true);
        r->fed++;
        r->next = -1;
        sequences++;
    }
    for (auto& r : running_) {
        if (!r->prefilling()) continue;
        const int end = std::min(r->prompt_len(), (r->fed / opt_.chunk + 1) * opt_.chunk);
        const int n = end - r->fed;
        if (batch_.size() > 0 && batch_.size() + n > opt_.step_rows) break;  // the next step takes it
        const int pos = cache_.length(r->seq);
        append_blocks(*r, n);
        for (int i = 0; i < n; i++) batch_.add(r->params.prompt[size_t(r->fed + i)], r->seq, pos + i, r->fed + i == r->prompt_len() - 1);
        if (n == opt_.chunk) chunks_done_.emplace_back(r.get(), r->fed / opt_.chunk);  // a whole chunk
        r->fed = end;
        prompt_rows += n;
        sequences++;
    }
    if (batch_.size() == 0) {
        publish_and_call_back();
        return false;
    }

    // Rows that want logits, in batch order, are rows 0.. of ws.logits.
    {
        int64_t out = 0;
        for (int64_t i = 0; i < batch_.size(); i++) {
            if (!batch_.want_logits[size_t(i)]) continue;
            for (auto& r : running_)
                if (r->seq == batch_.seq[size_t(i)]) r->logits_row = out;
            out++;
        }
    }

    using Clock = std::chrono::steady_clock;
    const Clock::time_point t0 = Clock::now();
    step_counters_.clear();
    forward(engine_, cache_, batch_, ws_, opt_.count ? &step_counters_ : nullptr);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    counters_ += step_counters_;
    if (prefix_)
        for (auto [r, c] : chunks_done_) prefix_->insert(cache_, r->seq, r->params.prompt, c);

    // Sample, emit, and retire, as generate() does for one sequence.
    int64_t generated = 0;
    for (auto& r : running_) {
        if (r->logits_row < 0) continue;
        if (r->params.max_new == 0) {
            finish(*r, FinishReason::Length);
            continue;
        }
        if (r->cb.on_logits) r->cb.on_logits(ws_.logits_row(r->logits_row), engine_.config().n_vocab);
        const int32_t tok = r->sampler.sample(ws_.logits_row(r->logits_row), engine_.config().n_vocab, r->history);
        if (tok_ && (tok_->is_end_of_generation(tok) || tok == tok_->bos_id())) {
            finish(*r, FinishReason::Stop);
            continue;
        }
        r->history.push_back(tok);
        r->generated++;
        generated++;
        if (r->params.logprobs >= 0 && r->cb.on_logprob)
            r->cb.on_logprob(token_logprob(ws_.logits_row(r->logits_row), engine_.config().n_vocab, tok, r->params.logprobs));
        if (r->cb.on_token && !r->cb.on_token(tok)) {
            finish(*r, FinishReason::Cancelled);
        } else if (r->params.max_new >= 0 && r->generated == r->params.max_new) {
            finish(*r, FinishReason::Length);
        } else if (r->fed >= opt_.n_ctx) {
            finish(*r, FinishReason::ContextFull);
        } else {
            r->next = tok;
        }
    }
    std::erase_if(running_, [](const auto& r) { return r->done; });

    {
        std::lock_guard<std::mutex> lock(mu_);
        stats_.steps++;
        stats_.last_step_rows = int(batch_.size());
        stats_.last_step_sequences = sequences;
        stats_.tokens_prefilled += prompt_rows;
        stats_.tokens_generated += generated;
        if (prompt_rows == 0) {
            stats_.decode_steps++;
            stats_.decode_step_tokens += batch_.size();
            stats_.decode_step_seconds += seconds;
            stats_.decode_step_bytes += step_counters_.total().cost.memory_bytes();
        } else {
            stats_.prefill_step_seconds += seconds;
        }
    }
    publish_and_call_back();
    return true;
}

void Scheduler::publish_locked() {
    stats_.running = int(running_.size());
    stats_.kv_blocks_reserved = reserved_blocks_;
    stats_.kv_blocks_used = appended_blocks_;
    stats_.kv_blocks_cached = prefix_ ? prefix_->cached_blocks() : 0;
    stats_.kv_blocks_cached_idle = prefix_ ? prefix_->idle_blocks(cache_) : 0;
}

void Scheduler::run_until_idle() {
    while (step()) {
    }
}

}  // namespace ridge
