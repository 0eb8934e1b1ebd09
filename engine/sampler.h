// Sampling the next token from logits: greedy (temperature 0), temperature, top-k, top-p, min-p
// and a repetition penalty, driven by a seeded RNG of ridge's own so --seed repeats. A second
// mode reproduces llama2.c's run.c sampler (its xorshift RNG, coin and top-p) step for step.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace ridge {

// xorshift64* generator: state ^= state >> 12, << 25, >> 27, then the high 32 bits of
// state * 0x2545F4914F6CDD1D (the generator llama2.c's run.c uses, seeded with the raw seed).
class Rng {
public:
    explicit Rng(uint64_t seed) : state_(seed) {}
    uint32_t next_u32();
    float next_f32();  // in [0, 1): the top 24 bits of next_u32() / 2^24
    uint64_t state() const { return state_; }

private:
    uint64_t state_;
};

enum class SamplerKind {
    Ridge,    // repetition penalty, temperature, top-k, top-p, min-p, then one draw
    Llama2c,  // run.c: greedy at temperature 0, else softmax(logits / T), then top-p (or the full
              // distribution when top_p is outside (0, 1)) with one coin per step
};

struct SamplerParams {
    SamplerKind kind = SamplerKind::Ridge;
    float temperature = 0.8f;    // 0 = greedy (argmax, lowest id on ties)
    int top_k = 40;              // keep the k most likely tokens; 0 = off
    float top_p = 0.95f;         // keep the smallest set whose probability reaches top_p; 1 = off
    float min_p = 0.05f;         // drop tokens below min_p * (the top probability); 0 = off
    float repeat_penalty = 1.0f; // divide positive / multiply negative logits of recent tokens; 1 = off
    float presence_penalty = 0;  // subtracted once from the logit of every recent token; 0 = off
    float frequency_penalty = 0; // subtracted from a recent token's logit once per time it occurs; 0 = off
    int repeat_last_n = 64;      // how many recent tokens the penalties look at
    uint64_t seed = 42;
};

// Throws ridge::Error (one line naming the option and value) for out-of-range parameters.
void validate(const SamplerParams& p);

// A token's log-probability under the model's own distribution (log-softmax of the raw logits,
// before any penalty, temperature or truncation: what OpenAI's and llama.cpp's servers report),
// and the top_n most likely tokens with theirs, most likely first (ties: the lower id).
struct TokenLogprob {
    int32_t token = -1;
    float logprob = 0;
    std::vector<std::pair<int32_t, float>> top;  // (id, logprob)
};
inline constexpr int kMaxTopLogprobs = 20;
// ridge::Error for a token outside [0, n_vocab) or top_n outside [0, kMaxTopLogprobs].
TokenLogprob token_logprob(const float* logits, int n_vocab, int32_t token, int top_n);

class Sampler {
public:
    explicit Sampler(const SamplerParams& p);
    // Picks the next id from logits (n_vocab) given the tokens so far (for the repetition penalty).
    int32_t sample(const float* logits, int n_vocab, std::span<const int32_t> history);
    const SamplerParams& params() const { return params_; }

private:
    int32_t sample_ridge(const float* logits, int n_vocab, std::span<const int32_t> history);
    int32_t sample_llama2c(const float* logits, int n_vocab);

    SamplerParams params_;
    Rng rng_;
    std::vector<float> work_;  // (n_vocab) adjusted logits / probabilities
    std::vector<std::pair<float, int32_t>> cand_;  // (n_vocab) (probability, id) candidates
};

// Index of the largest value (the first one on ties; NaN never wins; 0 when every value is NaN),
// the rule cuda::argmax follows too.
int32_t argmax(const float* x, int n);

}  // namespace ridge
