// Sampler: ridge's filter chain and the llama2.c-compatible mode (see sampler.h).
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "weights/error.h"

namespace ridge {

uint32_t Rng::next_u32() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return uint32_t((state_ * 0x2545F4914F6CDD1Dull) >> 32);
}

float Rng::next_f32() { return float(next_u32() >> 8) / 16777216.0f; }

int32_t argmax(const float* x, int n) {
    int32_t best = -1;
    for (int i = 0; i < n; i++)
        if (!std::isnan(x[i]) && (best < 0 || x[i] > x[best])) best = i;
    return best < 0 ? 0 : best;
}

void validate(const SamplerParams& p) {
    if (!(p.temperature >= 0.0f) || !std::isfinite(p.temperature))
        throw Error("--temp " + std::to_string(p.temperature) + " must be a finite number >= 0");
    if (p.top_k < 0) throw Error("--top-k " + std::to_string(p.top_k) + " must be >= 0 (0 turns it off)");
    if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
        throw Error("--top-p " + std::to_string(p.top_p) + " must be in (0, 1]");
    if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) throw Error("--min-p " + std::to_string(p.min_p) + " must be in [0, 1]");
    if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
        throw Error("--repeat-penalty " + std::to_string(p.repeat_penalty) + " must be a finite number > 0");
    if (p.repeat_last_n < 0) throw Error("--repeat-last-n " + std::to_string(p.repeat_last_n) + " must be >= 0");
    if (!(p.presence_penalty >= -2.0f && p.presence_penalty <= 2.0f))
        throw Error("--presence-penalty " + std::to_string(p.presence_penalty) + " must be in [-2, 2]");
    if (!(p.frequency_penalty >= -2.0f && p.frequency_penalty <= 2.0f))
        throw Error("--frequency-penalty " + std::to_string(p.frequency_penalty) + " must be in [-2, 2]");
}

Sampler::Sampler(const SamplerParams& p) : params_(p), rng_(p.seed) { validate(p); }

TokenLogprob token_logprob(const float* logits, int n_vocab, int32_t token, int top_n) {
    if (token < 0 || token >= n_vocab) throw Error("logprobs: token " + std::to_string(token) + " is outside the vocabulary");
    if (top_n < 0 || top_n > kMaxTopLogprobs)
        throw Error("logprobs: top " + std::to_string(top_n) + " is outside 0.." + std::to_string(kMaxTopLogprobs));
    // log p_i = l_i - max - log(sum_j exp(l_j - max)), summed in double.
    float mx = -INFINITY;
    for (int i = 0; i < n_vocab; i++) mx = std::max(mx, logits[i]);
    double sum = 0;
    for (int i = 0; i < n_vocab; i++) sum += std::exp(double(logits[i]) - double(mx));
    const double log_z = double(mx) + std::log(sum);
    TokenLogprob r;
    r.token = token;
    r.logprob = float(double(logits[token]) - log_z);
    std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
    for (int i = 0; i < n_vocab; i++) ids[size_t(i)] = i;
    const auto more_likely = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    const int n = std::min(top_n, n_vocab);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), more_likely);
    for (int i = 0; i < n; i++) r.top.emplace_back(ids[size_t(i)], float(double(logits[ids[size_t(i)]]) - log_z));
    return r;
}

int32_t Sampler::sample(const float* logits, int n_vocab, std::span<const int32_t> history) {
    switch (params_.kind) {
        case SamplerKind::Ridge: return sample_ridge(logits, n_vocab, history);
        case SamplerKind::Llama2c: return sample_llama2c(logits, n_vocab);
    }
    throw Error("sampler: unknown kind");
}

// Penalties (repetition, then presence and frequency) -> (greedy | temperature -> top-k -> softmax
// -> top-p -> min-p -> draw).
int32_t Sampler::sample_ridge(const float* logits, int n_vocab, std::span<const int32_t> history) {
    const SamplerParams& p = params_;
    work_.assign(logits, logits + n_vocab);
    const bool penalties = p.repeat_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
    if (penalties && p.repeat_last_n > 0) {
        // The last repeat_last_n tokens, each with how often it occurs there (llama.cpp's window).
        const size_t from = history.size() > size_t(p.repeat_last_n) ? history.size() - size_t(p.repeat_last_n) : 0;
        std::unordered_map<int32_t, int> count;
        for (size_t i = from; i < history.size(); i++) count[history[i]]++;
        for (const auto& [id, n] : count) {
            if (id < 0 || id >= n_vocab) continue;
            float& l = work_[size_t(id)];
            if (p.repeat_penalty != 1.0f) l = l > 0.0f ? l / p.repeat_penalty : l * p.repeat_penalty;
            l -= float(n) * p.frequency_penalty + p.presence_penalty;
        }
    }
    if (p.temperature == 0.0f) return argmax(work_.data(), n_vocab);

    // Candidates sorted by logit, highest first (ties: lower id first), cut to top-k.
    cand_.resize(size_t(n_vocab));
    for (int i = 0; i < n_vocab; i++) cand_[size_t(i)] = {work_[size_t(i)] / p.temperature, i};
    auto by_logit = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
        return a.first > b.first || (a.first == b.first && a.second < b.second);
    };
    size_t n = cand_.size();
    if (p.top_k > 0 && size_t(p.top_k) < n) {
        std::partial_sort(cand_.begin(), cand_.begin() + p.top_k, cand_.end(), by_logit);
        n = size_t(p.top_k);
    } else {
        std::sort(cand_.begin(), cand_.end(), by_logit);
    }
    // Softmax over the survivors (in double: the sums decide the cut-offs).
    const double max_logit = cand_[0].first;
    std::vector<double> prob(n);  // (n) probabilities of the candidates, in sorted order
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += prob[i] = std::exp(double(cand_[i].first) - max_logit);
    for (double& x : prob) x /= sum;
    // top-p: the shortest prefix whose mass reaches top_p.
    if (p.top_p < 1.0f) {
        double cum = 0.0;
        for (size_t i = 0; i < n; i++) {
            cum += prob[i];
            if (cum >= double(p.top_p)) {
                n = i + 1;
                break;
            }
        }
    }
    // min-p: drop the tail below min_p times the most likely token.
    if (p.min_p > 0.0f) {
        const double floor_p = double(p.min_p) * prob[0];
        size_t keep = 1;
        while (keep < n && prob[keep] >= floor_p) keep++;
        n = keep;
    }
    double kept = 0.0;
    for (size_t i = 0; i < n; i++) kept += prob[i];
    const double r = double(rng_.next_f32()) * kept;
    double cdf = 0.0;
    for (size_t i = 0; i < n; i++) {
        cdf += prob[i];
        if (r < cdf) return cand_[i].second;
    }
    return cand_[n - 1].second;
}

// llama2.c run.c semantics, operation for operation in f32.
int32_t Sampler::sample_llama2c(const float* logits, int n_vocab) {
    const SamplerParams& p = params_;
    if (p.temperature == 0.0f) return argmax(logits, n_vocab);
    work_.assign(logits, logits + n_vocab);
    for (float& l : work_) l /= p.temperature;
    // softmax: subtract the max, exponentiate, divide by the sum (all f32, in index order)
    float max_val = work_[0];
    for (int i = 1; i < n_vocab; i++)
        if (work_[size_t(i)] > max_val) max_val = work_[size_t(i)];
    float sum = 0.0f;
    for (float& x : work_) {
        x = std::exp(x - max_val);
        sum += x;
    }
    for (float& x : work_) x /= sum;
    const float coin = rng_.next_f32();
    if (p.top_p <= 0.0f || p.top_p >= 1.0f) {
        float cdf = 0.0f;
        for (int i = 0; i < n_vocab; i++) {
            cdf += work_[size_t(i)];
            if (coin < cdf) return i;
        }
        return n_vocab - 1;
    }
    // top-p: candidates at or above (1 - top_p) / (n - 1), sorted by probability (descending,
    // stable), cut after the cumulative probability first passes top_p.
    const float cutoff = (1.0f - p.top_p) / float(n_vocab - 1);
    cand_.clear();
    for (int i = 0; i < n_vocab; i++)
        if (work_[size_t(i)] >= cutoff) cand_.push_back({work_[size_t(i)], i});
    std::stable_sort(cand_.begin(), cand_.end(),
                     [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) { return a.first > b.first; });
    float cumulative = 0.0f;
    size_t last = cand_.size() - 1;
    for (size_t i = 0; i < cand_.size(); i++) {
        cumulative += cand_[i].first;
        if (cumulative > p.top_p) {
            last = i;
            break;
        }
    }
    const float r = coin * cumulative;
    float cdf = 0.0f;
    for (size_t i = 0; i <= last; i++) {
        cdf += cand_[i].first;
        if (r < cdf) return cand_[i].second;
    }
    return cand_[last].second;
}

}  // namespace ridge
