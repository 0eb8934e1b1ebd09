// Session: chunked feeding of token sequences through forward(), with per-phase timing and costs.
#include "engine/session.h"

#include <chrono>
#include <string>

#include "weights/error.h"

namespace ridge {

Session::Session(const Engine& engine, const SessionOptions& opt)
    : engine_(engine),
      opt_(opt),
      cache_(engine.config(), opt.n_ctx, opt.kv_type, KVCache::kDefaultBlockSize, 0, engine.on_gpu()) {
    if (opt_.max_rows <= 0) throw Error("session: max_rows must be positive");
}

const float* Session::prefill(int seq, std::span<const int32_t> tokens) { return feed(seq, tokens, prefill_stats); }

const float* Session::decode(int seq, int32_t token) { return feed(seq, std::span<const int32_t>(&token, 1), decode_stats); }

void Session::warm_up(int32_t token) {
    if (cache_.free_blocks() == 0) return;
    const int seq = cache_.new_sequence();
    decode(seq, token);
    cache_.free_sequence(seq);
    prefill_stats = {};
    decode_stats = {};
}

const float* Session::feed(int seq, std::span<const int32_t> tokens, PhaseStats& stats) {
    if (tokens.empty()) throw Error("session: nothing to feed");
    const int n = int(tokens.size());
    if (int64_t(cache_.length(seq)) + n > cache_.n_ctx())
        throw Error("context full: " + std::to_string(cache_.length(seq)) + " tokens in the context plus " +
                    std::to_string(n) + " new ones pass its size " + std::to_string(cache_.n_ctx()));
    for (int32_t t : tokens)
        if (t < 0 || t >= engine_.config().n_vocab)
            throw Error("token id " + std::to_string(t) + " is outside the vocabulary of " +
                        std::to_string(engine_.config().n_vocab));
    for (int start = 0; start < n; start += opt_.max_rows) {
        const int rows = std::min(opt_.max_rows, n - start);
        const int first_pos = cache_.append(seq, rows);
        batch_.clear();
        for (int i = 0; i < rows; i++)
            batch_.add(tokens[size_t(start + i)], seq, first_pos + i, start + i == n - 1);
        const auto t0 = std::chrono::steady_clock::now();
        forward(engine_, cache_, batch_, ws_, opt_.count ? &stats.counters : nullptr, opt_.dump);
        stats.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        stats.tokens += rows;
        stats.calls += 1;
    }
    return ws_.logits_row(0);
}

}  // namespace ridge
