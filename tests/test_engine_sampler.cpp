// Sampler: the xorshift RNG's first outputs (worked out by hand from its definition), greedy and
// the filters (top-k, top-p, min-p, repetition penalty) on small hand-made logits, seeded
// repeatability, draw frequencies against softmax probabilities, and the parameter checks.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/sampler.h"
#include "weights/error.h"

namespace ridge {
namespace {

TEST(Rng, XorshiftFirstOutputs) {
    // state ^= state >> 12; ^= << 25; ^= >> 27; out = (state * 0x2545F4914F6CDD1D) >> 32, from seed 42.
    Rng r(42);
    EXPECT_EQ(r.next_u32(), 1456360119u);
    EXPECT_EQ(r.next_u32(), 3359763283u);
    Rng f(42);
    EXPECT_FLOAT_EQ(f.next_f32(), float(1456360119u >> 8) / 16777216.0f);
}

SamplerParams greedy() {
    SamplerParams p;
    p.temperature = 0.0f;
    return p;
}

TEST(Sampler, GreedyTakesTheArgmaxAndTheFirstOnTies) {
    const std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
    Sampler s(greedy());
    EXPECT_EQ(s.sample(logits.data(), 4, {}), 1);
    SamplerParams l2 = greedy();
    l2.kind = SamplerKind::Llama2c;
    Sampler s2(l2);
    EXPECT_EQ(s2.sample(logits.data(), 4, {}), 1);
}

TEST(Sampler, ArgmaxSkipsNaNWhereverItStands) {  // the rule cuda::argmax follows too
    const float nan = std::nanf("");
    const std::vector<float> first = {nan, 1.0f, 2.0f, 2.0f}, middle = {0.5f, nan, -1.0f}, all = {nan, nan};
    EXPECT_EQ(argmax(first.data(), 4), 2);
    EXPECT_EQ(argmax(middle.data(), 3), 0);
    EXPECT_EQ(argmax(all.data(), 2), 0);
}

TEST(Sampler, FiltersThatLeaveOneTokenAreGreedy) {
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 1.9f, -3.0f};
    for (int which = 0; which < 3; which++) {
        SamplerParams p;
        p.temperature = 1.0f;
        p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
        if (which == 0) p.top_k = 1;
        if (which == 1) p.top_p = 0.01f;
        if (which == 2) p.min_p = 1.0f;
        Sampler s(p);
        for (int i = 0; i < 50; i++) ASSERT_EQ(s.sample(logits.data(), 5, {}), 1) << "filter " << which;
    }
}

TEST(Sampler, TopKAndMinPKeepOnlyTheirSets) {
    // probabilities ~ e^[2, 1.9, 1, 0.5, -3]: min-p 0.3 keeps tokens with p >= 0.3 p_max: ids 1, 3, 0
    // (e^-1 = 0.37 >= 0.3; e^-1.5 = 0.22 < 0.3).
    const std::vector<float> logits = {1.0f, 2.0f, 0.5f, 1.9f, -3.0f};
    SamplerParams p;
    p.temperature = 1.0f, p.top_p = 1.0f, p.min_p = 0.0f, p.top_k = 2;
    Sampler k2(p);
    std::map<int, int> seen;
    for (int i = 0; i < 500; i++) seen[k2.sample(logits.data(), 5, {})]++;
    EXPECT_EQ(seen.size(), 2u);
    EXPECT_GT(seen[1], 0);
    EXPECT_GT(seen[3], 0);
    p.top_k = 0, p.min_p = 0.3f;
    Sampler mp(p);
    seen.clear();
    for (int i = 0; i < 2000; i++) seen[mp.sample(logits.data(), 5, {})]++;
    EXPECT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen.count(2), 0u);
    EXPECT_EQ(seen.count(4), 0u);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
    // p = [0.5, 0.3, 0.2] (logits are their logs): top-p 0.75 keeps {0, 1}; top-p 0.8 keeps {0, 1}
    // (0.5 + 0.3 reaches 0.8); top-p 0.81 keeps all three.
    const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    auto support = [&](float top_p) {
        SamplerParams p;
        p.temperature = 1.0f, p.top_k = 0, p.min_p = 0.0f, p.top_p = top_p;
        Sampler s(p);
        std::map<int, int> seen;
        for (int i = 0; i < 3000; i++) seen[s.sample(logits.data(), 3, {})]++;
        return seen.size();
    };
    EXPECT_EQ(support(0.75f), 2u);
    EXPECT_EQ(support(0.81f), 3u);
}

TEST(Sampler, DrawFrequenciesFollowTheTemperedSoftmax) {
    // logits [0, ln 2, ln 3] at temperature 1 -> p = [1/6, 2/6, 3/6]; at temperature 2 the logits
    // halve -> p ~ [1, sqrt 2, sqrt 3] / (1 + 1.414 + 1.732).
    const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(3.0f)};
    for (float temp : {1.0f, 2.0f}) {
        SamplerParams p;
        p.temperature = temp, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f, p.seed = 7;
        Sampler s(p);
        const int n = 60000;
        std::vector<int> count(3);
        for (int i = 0; i < n; i++) count[size_t(s.sample(logits.data(), 3, {}))]++;
        double w[3], sum = 0;
        for (int i = 0; i < 3; i++) sum += w[i] = std::exp(double(logits[size_t(i)]) / temp);
        for (int i = 0; i < 3; i++) EXPECT_NEAR(double(count[size_t(i)]) / n, w[i] / sum, 0.01) << "temp " << temp;
    }
}

TEST(Sampler, SameSeedSameDraws) {
    std::vector<float> logits(100);
    for (int i = 0; i < 100; i++) logits[size_t(i)] = std::sin(float(i));
    SamplerParams p;
    p.temperature = 1.5f, p.seed = 1234;
    Sampler a(p), b(p);
    p.seed = 1235;
    Sampler c(p);
    int same_ab = 0, same_ac = 0;
    for (int i = 0; i < 200; i++) {
        const int32_t x = a.sample(logits.data(), 100, {}), y = b.sample(logits.data(), 100, {}),
                      z = c.sample(logits.data(), 100, {});
        same_ab += x == y;
        same_ac += x == z;
    }
    EXPECT_EQ(same_ab, 200);
    EXPECT_LT(same_ac, 200);
}

TEST(Sampler, RepetitionPenaltyDemotesRecentTokens) {
    // Token 0 leads 2.0 vs 1.5; penalty 2 halves it to 1.0 when it is recent -> token 1 wins.
    // A negative logit is multiplied: -1 -> -2.
    const std::vector<float> logits = {2.0f, 1.5f, -1.0f};
    SamplerParams p = greedy();
    p.repeat_penalty = 2.0f;
    Sampler s(p);
    const std::vector<int32_t> recent = {0};
    EXPECT_EQ(s.sample(logits.data(), 3, {}), 0);
    EXPECT_EQ(s.sample(logits.data(), 3, recent), 1);
    p.repeat_last_n = 1;  // only the last token counts
    Sampler last1(p);
    const std::vector<int32_t> older = {0, 2};
    EXPECT_EQ(last1.sample(logits.data(), 3, older), 0);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesSubtractFromRecentTokens) {
    // Token 0 leads 2.0 vs 1.5 vs 1.2; it occurred twice, token 1 once.
    const std::vector<float> logits = {2.0f, 1.5f, 1.2f};
    const std::vector<int32_t> recent = {0, 1, 0};
    SamplerParams p = greedy();
    p.presence_penalty = 0.6f;  // 2.0 - 0.6 = 1.4, 1.5 - 0.6 = 0.9: token 0 still leads
    EXPECT_EQ(Sampler(p).sample(logits.data(), 3, recent), 0);
    p.presence_penalty = 0.0f;
    p.frequency_penalty = 0.3f;  // token 0: 2.0 - 2 x 0.3 = 1.4; token 1: 1.5 - 0.3 = 1.2: token 0
    EXPECT_EQ(Sampler(p).sample(logits.data(), 3, recent), 0);
    p.frequency_penalty = 0.5f;  // 2.0 - 1.0 = 1.0, 1.5 - 0.5 = 1.0, 1.2: token 2 leads
    EXPECT_EQ(Sampler(p).sample(logits.data(), 3, recent), 2);
    p.frequency_penalty = -0.5f;  // negative: encourages them
    EXPECT_EQ(Sampler(p).sample(logits.data(), 3, {}), 0);
    p.repeat_last_n = 1;  // only the last 0 counts: 2.0 + 0.5 vs 1.5
    EXPECT_EQ(Sampler(p).sample(logits.data(), 3, recent), 0);
}

TEST(Sampler, RejectsBadParameters) {
    auto bad = [](auto set) {
        SamplerParams p;
        set(p);
        EXPECT_THROW(validate(p), Error);
        EXPECT_THROW(Sampler{p}, Error);
    };
    bad([](SamplerParams& p) { p.temperature = -0.1f; });
    bad([](SamplerParams& p) { p.temperature = NAN; });
    bad([](SamplerParams& p) { p.top_k = -1; });
    bad([](SamplerParams& p) { p.top_p = 0.0f; });
    bad([](SamplerParams& p) { p.top_p = 1.5f; });
    bad([](SamplerParams& p) { p.min_p = -0.5f; });
    bad([](SamplerParams& p) { p.repeat_penalty = 0.0f; });
    bad([](SamplerParams& p) { p.presence_penalty = 2.5f; });
    bad([](SamplerParams& p) { p.frequency_penalty = NAN; });
    SamplerParams ok;
    ok.top_p = 1.0f;
    EXPECT_NO_THROW(validate(ok));
}

// Hand-worked: logits (0, ln 3, ln 3 - 10, 0) have Z = 1 + 3 + 3e-10 + 1, so log p = (0, ln 3,
// ln 3 - 10, 0) - ln Z; the top three are id 1, then ids 0 and 3 (equal: the lower id first).
TEST(TokenLogprob, LogSoftmaxOfTheRawLogitsAndTheTopInOrder) {
    const float ln3 = std::log(3.0f);
    const float logits[4] = {0.0f, ln3, ln3 - 10.0f, 0.0f};
    const double z = 1.0 + 3.0 + 3.0 * std::exp(-10.0) + 1.0;
    const TokenLogprob r = token_logprob(logits, 4, 0, 3);
    EXPECT_EQ(r.token, 0);
    EXPECT_NEAR(r.logprob, -std::log(z), 1e-6);
    ASSERT_EQ(r.top.size(), 3u);
    EXPECT_EQ(r.top[0].first, 1);
    EXPECT_NEAR(r.top[0].second, std::log(3.0 / z), 1e-6);
    EXPECT_EQ(r.top[1].first, 0);  // ties: the lower id first
    EXPECT_EQ(r.top[2].first, 3);
    EXPECT_EQ(r.top[1].second, r.top[2].second);
    EXPECT_TRUE(token_logprob(logits, 4, 2, 0).top.empty());
    EXPECT_NEAR(token_logprob(logits, 4, 2, 0).logprob, std::log(3.0 * std::exp(-10.0) / z), 1e-5);
    EXPECT_THROW(token_logprob(logits, 4, 4, 1), Error);
    EXPECT_THROW(token_logprob(logits, 4, 0, kMaxTopLogprobs + 1), Error);
}

}  // namespace
}  // namespace ridge
