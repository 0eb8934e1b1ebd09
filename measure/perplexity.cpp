// Perplexity (see perplexity.h): windows of n_ctx tokens through forward(), logits only for the
// scored second half of each window, NLL summed in double.
#include "measure/perplexity.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/forward.h"
#include "engine/kv_cache.h"
#include "weights/error.h"

namespace ridge {

double PerplexityResult::ppl() const { return scored > 0 ? std::exp(nll_sum / double(scored)) : 0.0; }

double PerplexityResult::ppl_error() const {
    if (scored < 2) return 0.0;
    const double n = double(scored), mean = nll_sum / n;
    const double var = std::max(0.0, nll2_sum / n - mean * mean);
    return ppl() * std::sqrt(var / (n - 1));  // d(exp(m)) = exp(m) dm
}

void log_softmax(const float* logits, int n, float* out) {
    const double mx = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += std::exp(double(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    for (int i = 0; i < n; i++) out[i] = float(double(logits[i]) - lse);
}

double kl_divergence(const float* log_p, const float* log_q, int n) {
    double kl = 0;
    for (int i = 0; i < n; i++) kl += std::exp(double(log_p[i])) * (double(log_p[i]) - double(log_q[i]));
    return std::max(0.0, kl);  // >= 0 in exact arithmetic; rounding can leave -1e-17
}

double kl_divergence_logits(const float* p_logits, const float* q_logits, int n) {
    std::vector<float> lp(static_cast<size_t>(n)), lq(static_cast<size_t>(n));
    log_softmax(p_logits, n, lp.data());
    log_softmax(q_logits, n, lq.data());
    return kl_divergence(lp.data(), lq.data(), n);
}

int perplexity_windows(const Engine& engine, int64_t n_tokens, const PerplexityOptions& opt) {
    const Config& c = engine.config();
    const int n_ctx = opt.n_ctx;
    if (n_ctx < 4 || n_ctx % 2 != 0) throw Error("perplexity: -c " + std::to_string(n_ctx) + " must be even and >= 4");
    if (c.n_ctx_train > 0 && n_ctx > c.n_ctx_train)
        throw Error("perplexity: -c " + std::to_string(n_ctx) + " is above the model's training context " +
                    std::to_string(c.n_ctx_train));
    if (opt.batch < 1) throw Error("perplexity: -b " + std::to_string(opt.batch) + " must be >= 1");
    if (opt.max_windows < 0) throw Error("perplexity: --chunks " + std::to_string(opt.max_windows) + " must be >= 0");
    const int available = int(n_tokens / n_ctx);
    if (available < 1)
        throw Error("perplexity: the text has " + std::to_string(n_tokens) + " tokens, fewer than one window of " +
                    std::to_string(n_ctx) + " (-c)");
    return opt.max_windows > 0 ? std::min(opt.max_windows, available) : available;
}

PerplexityResult perplexity(const Engine& engine, std::span<const int32_t> tokens, const PerplexityOptions& opt,
                            const std::function<void(const ScoredRow&)>& on_row,
                            const std::function<void(const PerplexityResult&, int)>& on_window) {
    const Config& c = engine.config();
    const int n_ctx = opt.n_ctx;
    const int windows = perplexity_windows(engine, int64_t(tokens.size()), opt);
    const int first = n_ctx / 2;  // the first position whose logits are scored

    KVCache cache(c, n_ctx, opt.kv_type, KVCache::kDefaultBlockSize, 0, engine.on_gpu());
    const int seq = cache.new_sequence();
    Workspace ws;
    Batch batch;
    PerplexityResult res;
    using Clock = std::chrono::steady_clock;
    for (int w = 0; w < windows; w++) {
        const int32_t* win = tokens.data() + int64_t(w) * n_ctx;
        cache.truncate(seq, 0);  // each window starts from an empty cache
        const Clock::time_point t0 = Clock::now();
        for (int start = 0; start < n_ctx; start += opt.batch) {
            const int rows = std::min(opt.batch, n_ctx - start);
            const int pos0 = cache.append(seq, rows);
            batch.clear();
            for (int i = 0; i < rows; i++) {
                const int p = start + i;
                const int32_t tok = (p == 0 && opt.bos >= 0) ? opt.bos : win[p];
                batch.add(tok, seq, pos0 + i, p >= first && p <= n_ctx - 2);
            }
            forward(engine, cache, batch, ws);
            int64_t r = 0;  // logits row of the next scored position
            for (int i = 0; i < rows; i++) {
                if (!batch.want_logits[size_t(i)]) continue;
                const int p = start + i;
                const float* logits = ws.logits_row(r++);
                const int32_t next = win[p + 1];
                const double mx = *std::max_element(logits, logits + c.n_vocab);
                double sum = 0;
                for (int v = 0; v < c.n_vocab; v++) sum += std::exp(double(logits[v]) - mx);
                const double nll = mx + std::log(sum) - double(logits[next]);
                res.nll_sum += nll;
                res.nll2_sum += nll * nll;
                res.scored++;
                if (on_row) on_row(ScoredRow{w, p, logits, next});
            }
        }
        res.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        res.windows++;
        if (on_window) on_window(res, windows);
    }
    return res;
}

// ---- the --kl-base file -------------------------------------------------------------------------

namespace {
constexpr char kMagic[8] = {'R', 'I', 'D', 'G', 'E', 'K', 'L', '1'};
}

uint64_t tokens_hash(std::span<const int32_t> tokens) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a over the ids' little-endian bytes
    for (int32_t t : tokens)
        for (int b = 0; b < 4; b++) {
            h ^= uint64_t((uint32_t(t) >> (8 * b)) & 0xff);
            h *= 1099511628211ull;
        }
    return h;
}

KLBaseWriter::KLBaseWriter(const std::string& path, const KLHeader& h) : path_(path), n_vocab_(h.n_vocab) {
    fp_ = std::fopen(path.c_str(), "wb");
    if (!fp_) throw Error(path + ": cannot write the KL base: " + std::strerror(errno));
    const bool ok = std::fwrite(kMagic, 1, 8, fp_) == 8 && std::fwrite(&h.n_vocab, 4, 1, fp_) == 1 &&
                    std::fwrite(&h.n_ctx, 4, 1, fp_) == 1 && std::fwrite(&h.windows, 4, 1, fp_) == 1 &&
                    std::fwrite(&h.tokens_hash, 8, 1, fp_) == 1;
    if (!ok) throw Error(path_ + ": write error");
}

KLBaseWriter::~KLBaseWriter() {
    if (fp_) std::fclose(fp_);
}

void KLBaseWriter::add(const float* log_probs) {
    if (std::fwrite(log_probs, sizeof(float), n_vocab_, fp_) != n_vocab_)
        throw Error(path_ + ": write error (disk full?)");
}

void KLBaseWriter::finish() {
    const bool ok = std::fclose(fp_) == 0;
    fp_ = nullptr;
    if (!ok) throw Error(path_ + ": write error (disk full?)");
}

KLBaseReader::KLBaseReader(const std::string& path) : path_(path) {
    fp_ = std::fopen(path.c_str(), "rb");
    if (!fp_) throw Error(path + ": cannot open the KL base: " + std::strerror(errno));
    char magic[8] = {};
    const bool ok = std::fread(magic, 1, 8, fp_) == 8 && std::memcmp(magic, kMagic, 8) == 0 &&
                    std::fread(&h_.n_vocab, 4, 1, fp_) == 1 && std::fread(&h_.n_ctx, 4, 1, fp_) == 1 &&
                    std::fread(&h_.windows, 4, 1, fp_) == 1 && std::fread(&h_.tokens_hash, 8, 1, fp_) == 1;
    if (!ok) throw Error(path + ": not a ridge KL base file (written by ridge perplexity --kl-base)");
}

KLBaseReader::~KLBaseReader() {
    if (fp_) std::fclose(fp_);
}

void KLBaseReader::next(float* log_probs) {
    if (std::fread(log_probs, sizeof(float), h_.n_vocab, fp_) != h_.n_vocab)
        throw Error(path_ + ": the KL base ends early (truncated file?)");
}

void KLStats::add(const float* log_base, const float* log_cand, int n_vocab) {
    const double kl = kl_divergence(log_base, log_cand, n_vocab);
    kl_sum += kl;
    kl_max = std::max(kl_max, kl);
    const int64_t top_base = std::max_element(log_base, log_base + n_vocab) - log_base;
    const int64_t top_cand = std::max_element(log_cand, log_cand + n_vocab) - log_cand;
    agree += top_base == top_cand ? 1 : 0;
    n++;
}

}  // namespace ridge
