// Perplexity over a text, computed the way llama.cpp's llama-perplexity does so the two numbers
// can be compared: the tokens are cut into floor(N / n_ctx) windows of n_ctx tokens (the tail is
// dropped); each window runs from an empty KV cache, its first token replaced by BOS when the
// tokenizer adds one; only the second half is scored: the logits at positions n_ctx/2 .. n_ctx-2
// predict the tokens after them, so every scored token sees at least n_ctx/2 tokens of context.
//   PPL = exp(mean NLL), NLL = -log softmax(logits)[next token].
// Alongside, the per-position statistics that compare two runs of one model (a fast path against
// the exact one, Q4 against F16): KL divergence of the candidate's distribution from the base's,
// and whether their top-1 tokens agree.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <functional>
#include <span>
#include <vector>

#include "engine/engine.h"

namespace ridge {

struct PerplexityOptions {
    int n_ctx = 512;        // tokens per window (even, >= 4)
    int batch = 128;        // rows per forward() call within a window
    int max_windows = 0;    // 0: every whole window of the text
    int32_t bos = -1;       // the BOS id written over each window's first token; -1: none
    DType kv_type = DType::F32;
};

struct PerplexityResult {
    int windows = 0;        // windows run
    int64_t scored = 0;     // tokens scored (windows * (n_ctx/2 - 1))
    double nll_sum = 0;     // sum of -log p(next token)
    double nll2_sum = 0;    // sum of its squares (for the error estimate)
    double seconds = 0;     // wall time of the forward passes

    double ppl() const;
    // The standard error of ppl(), propagated from the NLL's standard error of the mean
    // (llama-perplexity's "+/-" figure).
    double ppl_error() const;
};

// One scored position: the window, the position in it, its logits (n_vocab) and the next token.
struct ScoredRow {
    int window;
    int pos;
    const float* logits;
    int32_t next;
};

// The windows a text of n_tokens gives under these options; ridge::Error when it has fewer than
// n_ctx tokens or the options are out of range (n_ctx above the model's training context, odd, or
// < 4; batch < 1; max_windows < 0).
int perplexity_windows(const Engine& engine, int64_t n_tokens, const PerplexityOptions& opt);

// Runs the windows of `tokens` (checked as perplexity_windows does); calls on_row for every scored position in order and on_window
// after each window (for progress).
PerplexityResult perplexity(const Engine& engine, std::span<const int32_t> tokens, const PerplexityOptions& opt,
                            const std::function<void(const ScoredRow&)>& on_row = {},
                            const std::function<void(const PerplexityResult&, int total_windows)>& on_window = {});

// A --kl-base file: the log-probabilities of every scored position of one run, for comparing
// another run over the same text. Little-endian: "RIDGEKL1", u32 n_vocab, u32 n_ctx, u32 windows,
// u64 FNV-1a hash of the tokens, then n_vocab f32 log-probabilities per scored position, in order
// (windows * (n_ctx/2 - 1) rows; 192 KiB a row for a 49152-token vocabulary).
struct KLHeader {
    uint32_t n_vocab = 0, n_ctx = 0, windows = 0;
    uint64_t tokens_hash = 0;
};
uint64_t tokens_hash(std::span<const int32_t> tokens);

class KLBaseWriter {
public:
    KLBaseWriter(const std::string& path, const KLHeader& h);  // ridge::Error when it cannot write
    ~KLBaseWriter();
    void add(const float* log_probs);  // one row of n_vocab
    void finish();                     // flushes and closes; ridge::Error on a write error
private:
    std::FILE* fp_ = nullptr;
    std::string path_;
    uint32_t n_vocab_ = 0;
};

class KLBaseReader {
public:
    explicit KLBaseReader(const std::string& path);  // reads and checks the header
    ~KLBaseReader();
    const KLHeader& header() const { return h_; }
    void next(float* log_probs);  // the next row; ridge::Error past the end or on a short file
private:
    std::FILE* fp_ = nullptr;
    std::string path_;
    KLHeader h_;
};

// Running statistics of a candidate against a base, position by position.
struct KLStats {
    int64_t n = 0, agree = 0;
    double kl_sum = 0, kl_max = 0;
    void add(const float* log_base, const float* log_cand, int n_vocab);
    double mean_kl() const { return n > 0 ? kl_sum / double(n) : 0.0; }
    double top1_agreement() const { return n > 0 ? double(agree) / double(n) : 0.0; }
};

// log softmax(logits)[i] for all i, into out (n). Computed in double, stored as float.
void log_softmax(const float* logits, int n, float* out);
// KL(P || Q) = sum_i P_i (log P_i - log Q_i) of two log-probability rows (P the base).
double kl_divergence(const float* log_p, const float* log_q, int n);
// The same from raw logits (softmax taken here).
double kl_divergence_logits(const float* p_logits, const float* q_logits, int n);

}  // namespace ridge
