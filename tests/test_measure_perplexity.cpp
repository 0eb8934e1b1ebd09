// Perplexity (measure/perplexity.h) against a count made independently: every window decoded one
// token at a time through a Session, the NLL of each scored position summed by hand; BOS written
// over each window's first token; KL divergence on hand-worked distributions; the --kl-base file
// round trip; bad options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "measure/perplexity.h"
#include "engine/session.h"
#include "engine_test_util.h"
#include "tokenizer/tokenizer.h"
#include "weights/error.h"
#include "weights/gguf.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/expected/run_t0_n256.txt");

namespace ridge {
namespace {

const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";
const std::string kText = std::string(RIDGE_TESTDATA_DIR) + "/llama2c-stories260K/expected/run_t0_n256.txt";

std::vector<int32_t> text_tokens() {
    std::ifstream f(kText, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    const test::Loaded& l = test::load(kStories);
    return Tokenizer::from_gguf(*l.file->gguf())->encode(ss.str(), /*add_bos=*/true, false);
}

// The NLL sum the definition gives: window w = tokens [w*n, (w+1)*n), first token replaced by bos
// when bos >= 0, decoded one token at a time from an empty cache; positions n/2 .. n-2 predict
// the token after them.
double nll_by_hand(const Engine& m, const std::vector<int32_t>& tokens, int n, int windows, int32_t bos, int64_t& scored) {
    double sum = 0;
    scored = 0;
    for (int w = 0; w < windows; w++) {
        SessionOptions so;
        so.n_ctx = n;
        Session s(m, so);
        const int seq = s.cache().new_sequence();
        for (int p = 0; p < n - 1; p++) {
            const int32_t tok = (p == 0 && bos >= 0) ? bos : tokens[size_t(w * n + p)];
            const float* logits = s.decode(seq, tok);
            if (p < n / 2) continue;
            double mx = -1e300, z = 0;
            for (int v = 0; v < m.config().n_vocab; v++) mx = std::max(mx, double(logits[v]));
            for (int v = 0; v < m.config().n_vocab; v++) z += std::exp(double(logits[v]) - mx);
            sum += mx + std::log(z) - double(logits[tokens[size_t(w * n + p + 1)]]);
            scored++;
        }
    }
    return sum;
}

TEST(Perplexity, EqualsTheDefinitionWorkedOutTokenByToken) {
    const Engine& m = test::load(kStories).engine();
    const std::vector<int32_t> tokens = text_tokens();
    ASSERT_GE(tokens.size(), 128u);
    for (int32_t bos : {-1, 1}) {
        PerplexityOptions o;
        o.n_ctx = 64;
        o.batch = 24;  // windows run in uneven chunks: 24, 24, 16
        o.bos = bos;
        const int windows = int(tokens.size()) / 64;
        int calls = 0;
        const PerplexityResult r = perplexity(m, tokens, o, {}, [&](const PerplexityResult& so_far, int total) {
            EXPECT_EQ(so_far.windows, ++calls);
            EXPECT_EQ(total, windows);
        });
        int64_t scored = 0;
        const double nll = nll_by_hand(m, tokens, 64, windows, bos, scored);
        EXPECT_EQ(r.windows, windows);
        EXPECT_EQ(r.scored, scored);
        EXPECT_EQ(r.scored, int64_t(windows) * 31);  // positions 32..62 of each window
        EXPECT_NEAR(r.nll_sum, nll, 1e-6 * nll) << "bos " << bos;
        EXPECT_NEAR(r.ppl(), std::exp(nll / double(scored)), 1e-6 * r.ppl());
        EXPECT_GT(r.ppl_error(), 0.0);
    }
}

TEST(Perplexity, RowsComeInOrderWithTheirNextToken) {
    const Engine& m = test::load(kStories).engine();
    const std::vector<int32_t> tokens = text_tokens();
    PerplexityOptions o;
    o.n_ctx = 32;
    o.max_windows = 2;
    std::vector<std::pair<int, int>> seen;
    perplexity(m, tokens, o, [&](const ScoredRow& r) {
        EXPECT_EQ(r.next, tokens[size_t(r.window * 32 + r.pos + 1)]);
        seen.emplace_back(r.window, r.pos);
    });
    ASSERT_EQ(seen.size(), 2u * 15);
    EXPECT_EQ(seen.front(), std::make_pair(0, 16));
    EXPECT_EQ(seen[14], std::make_pair(0, 30));
    EXPECT_EQ(seen.back(), std::make_pair(1, 30));
}

TEST(Perplexity, ErrorEstimateByHand) {
    // NLLs 1 and 3: mean 2, variance 1, standard error of the mean sqrt(1 / 1) = 1 -> ppl e^2 +/- e^2.
    PerplexityResult r;
    r.scored = 2;
    r.nll_sum = 4;
    r.nll2_sum = 10;
    EXPECT_DOUBLE_EQ(r.ppl(), std::exp(2.0));
    EXPECT_DOUBLE_EQ(r.ppl_error(), std::exp(2.0));
}

TEST(Perplexity, BadOptionsAndShortTextThrow) {
    const Engine& m = test::load(kStories).engine();  // n_ctx_train 512
    const std::vector<int32_t> tokens = text_tokens();
    auto with = [](int n_ctx, int batch = 128, int windows = 0) {
        PerplexityOptions o;
        o.n_ctx = n_ctx;
        o.batch = batch;
        o.max_windows = windows;
        return o;
    };
    EXPECT_THROW(perplexity(m, tokens, with(63)), Error);    // odd
    EXPECT_THROW(perplexity(m, tokens, with(2)), Error);     // too small
    EXPECT_THROW(perplexity(m, tokens, with(1024)), Error);  // above the training context
    EXPECT_THROW(perplexity(m, tokens, with(64, 0)), Error);
    EXPECT_THROW(perplexity(m, tokens, with(64, 128, -1)), Error);
    const std::vector<int32_t> few(tokens.begin(), tokens.begin() + 40);
    EXPECT_THROW(perplexity(m, few, with(64)), Error);  // not one whole window
}

TEST(KLDivergence, HandWorked) {
    // P = (1/2, 1/2), Q = (9/10, 1/10): KL = 1/2 ln(5/9) + 1/2 ln(5) = 0.5108...
    const float p[2] = {0.0f, 0.0f};
    const float q[2] = {std::log(9.0f), 0.0f};
    EXPECT_NEAR(kl_divergence_logits(p, q, 2), 0.5 * std::log(5.0 / 9.0) + 0.5 * std::log(5.0), 1e-6);
    EXPECT_DOUBLE_EQ(kl_divergence_logits(p, p, 2), 0.0);
    // log_softmax by hand: logits (0, ln 3) -> probabilities (1/4, 3/4).
    const float l[2] = {0.0f, std::log(3.0f)};
    float out[2];
    log_softmax(l, 2, out);
    EXPECT_NEAR(out[0], std::log(0.25), 1e-6);
    EXPECT_NEAR(out[1], std::log(0.75), 1e-6);

    KLStats s;
    float lp[2], lq[2];
    log_softmax(p, 2, lp);
    log_softmax(q, 2, lq);
    s.add(lq, lq, 2);  // same distribution, same top-1
    s.add(lq, lp, 2);  // P ties: max_element takes the first, the same token 0 as Q's
    const float r[2] = {0.0f, 5.0f};
    float lr[2];
    log_softmax(r, 2, lr);
    s.add(lq, lr, 2);  // top-1 differs
    EXPECT_EQ(s.n, 3);
    EXPECT_EQ(s.agree, 2);
    EXPECT_NEAR(s.top1_agreement(), 2.0 / 3.0, 1e-12);
    EXPECT_GT(s.kl_max, 0.0);
}

TEST(KLBase, RoundTripAndChecks) {
    const std::string path = ::testing::TempDir() + "ridge_kl_base.bin";
    const std::vector<int32_t> toks = {5, 6, 7};
    KLHeader h{4, 32, 2, tokens_hash(toks)};
    const float a[4] = {-1, -2, -3, -4}, b[4] = {-0.5f, -1.5f, -2.5f, -3.5f};
    {
        KLBaseWriter w(path, h);
        w.add(a);
        w.add(b);
        w.finish();
    }
    KLBaseReader r(path);
    EXPECT_EQ(r.header().n_vocab, 4u);
    EXPECT_EQ(r.header().n_ctx, 32u);
    EXPECT_EQ(r.header().windows, 2u);
    EXPECT_EQ(r.header().tokens_hash, h.tokens_hash);
    float got[4];
    r.next(got);
    EXPECT_EQ(std::vector<float>(got, got + 4), std::vector<float>(a, a + 4));
    r.next(got);
    EXPECT_EQ(std::vector<float>(got, got + 4), std::vector<float>(b, b + 4));
    EXPECT_THROW(r.next(got), Error);  // past the end
    EXPECT_NE(tokens_hash(toks), tokens_hash(std::vector<int32_t>{5, 6, 8}));
    // Not a KL base.
    std::FILE* fp = std::fopen(path.c_str(), "wb");
    std::fputs("GGUF and more", fp);
    std::fclose(fp);
    EXPECT_THROW(KLBaseReader bad(path), Error);
    std::remove(path.c_str());
    EXPECT_THROW(KLBaseReader missing(path), Error);
}

}  // namespace
}  // namespace ridge
