// Continuous batching (engine/scheduler.h): at temperature 0 every request's tokens in a batch
// (mixed prompt lengths, chunked prompts next to decode rows, requests joining and leaving) equal
// its tokens alone through Session + generate(), on SmolLM2 (fast and exact paths) and
// stories260K; KV memory is reserved per request so a full pool makes new requests wait; cancel
// frees at once; bad requests get one-line errors. Also forward()'s split into row runs.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "engine/forward.h"
#include "engine/generate.h"
#include "engine/scheduler.h"
#include "engine/session.h"
#include "kernels/cpu/matmul.h"
#include "engine_test_util.h"
#include "tokenizer/tokenizer.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf");

namespace ridge {
namespace {

const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";

struct WithTokenizer {
    const test::Loaded* loaded;
    std::unique_ptr<Tokenizer> tok;
};

const WithTokenizer& model(const std::string& path) {
    static std::map<std::string, WithTokenizer> cache;
    auto it = cache.find(path);
    if (it != cache.end()) return it->second;
    WithTokenizer w;
    w.loaded = &test::load(path);
    w.tok = Tokenizer::from_gguf(*w.loaded->file->gguf());
    return cache.emplace(path, std::move(w)).first->second;
}

// Prompts of several lengths: short ones (row-exact runs) and long ones that take several chunks.
std::vector<std::vector<int32_t>> prompts(const Tokenizer& tok, int chunk) {
    const std::vector<std::string> texts = {
        "Once upon a time",
        "The capital of France is",
        "Lily and Tom went to the park. They saw a big dog. The dog was brown and it wanted to play with "
        "a red ball. Tom threw the ball and the dog ran after it. Lily laughed and clapped her hands.",
        "Hi",
        "One day, a little bird found a shiny stone near the river. It picked up the stone and flew home "
        "to show its mother, who said",
        "Why is the sky blue?",
    };
    std::vector<std::vector<int32_t>> out;
    for (const std::string& t : texts) {
        out.push_back(tok.encode(t, tok.add_bos_default(), false));
        if (test::kSanitized && int(out.back().size()) > 2 * chunk) out.back().resize(size_t(2 * chunk));
    }
    return out;
}

// The tokens generate() emits for this prompt alone, prompts fed in chunks of `chunk` rows.
std::vector<int32_t> alone(const Engine& m, const Tokenizer& tok, const std::vector<int32_t>& prompt, int max_new,
                           int chunk, int n_ctx) {
    SessionOptions so;
    so.n_ctx = n_ctx;
    so.max_rows = chunk;
    Session s(m, so);
    const int seq = s.cache().new_sequence();
    const float* logits = s.prefill(seq, prompt);
    SamplerParams sp;
    sp.temperature = 0;
    Sampler sampler(sp);
    std::vector<int32_t> history = prompt, out;
    generate(s, seq, sampler, tok, logits, history, max_new, [&](int32_t t) {
        out.push_back(t);
        return true;
    });
    return out;
}

struct Collected {
    std::vector<int32_t> tokens;
    FinishReason reason = FinishReason::Length;
    int done_calls = 0;
};

RequestParams greedy(const std::vector<int32_t>& prompt, int max_new) {
    RequestParams p;
    p.prompt = prompt;
    p.sampling.temperature = 0;
    p.max_new = max_new;
    return p;
}

RequestCallbacks collect(Collected& c) {
    RequestCallbacks cb;
    cb.on_token = [&c](int32_t t) {
        c.tokens.push_back(t);
        return true;
    };
    cb.on_done = [&c](FinishReason r, int) {
        c.reason = r;
        c.done_calls++;
    };
    return cb;
}

// Requests join in two waves (the second while the first decodes), with different max_new so they
// leave at different steps; the step budget delays some prompt chunks to later steps.
void expect_batched_equals_alone(const Engine& m, const Tokenizer& tok, int max_batch, int kv_tokens) {
    // Chunks of Plan::tiled_min_rows + 2 rows: a prompt's whole chunks take the tiled path, its rest
    // the row-exact one, beside other sequences' decode rows.
    const int chunk = int(m.plan().tiled_min_rows) + 2, n_ctx = 256;
    const int base_new = test::kSanitized ? 4 : 20;
    const auto ps = prompts(tok, chunk);
    std::vector<int> max_new;
    for (size_t i = 0; i < ps.size(); i++) max_new.push_back(base_new + int(i % 3) * 3);

    SchedulerOptions opt;
    opt.n_ctx = n_ctx;
    opt.max_batch = max_batch;
    opt.chunk = chunk;
    opt.prefix_cache = chunk % KVCache::kDefaultBlockSize == 0;  // it needs whole blocks
    opt.step_rows = chunk + 8;  // one chunk plus decode rows: chunks wait for later steps
    opt.kv_tokens = kv_tokens;
    Scheduler sched(m, &tok, opt);
    std::vector<Collected> got(ps.size());
    const size_t first_wave = ps.size() / 2;
    for (size_t i = 0; i < first_wave; i++) sched.submit(greedy(ps[i], max_new[i]), collect(got[i]));
    int max_rows_seen = 0, max_seqs_seen = 0;
    for (int s = 0; s < 5 && sched.step(); s++) {
    }
    for (size_t i = first_wave; i < ps.size(); i++) sched.submit(greedy(ps[i], max_new[i]), collect(got[i]));
    while (sched.step()) {
        const SchedulerStats st = sched.stats();
        max_rows_seen = std::max(max_rows_seen, st.last_step_rows);
        max_seqs_seen = std::max(max_seqs_seen, st.last_step_sequences);
        EXPECT_LE(st.running, max_batch);
        EXPECT_LE(st.kv_blocks_reserved, st.kv_blocks_total);
        EXPECT_LE(st.kv_blocks_used, st.kv_blocks_reserved);
    }
    EXPECT_GT(max_seqs_seen, 1) << "the requests never shared a step";
    size_t generated = 0;
    for (size_t i = 0; i < ps.size(); i++) {
        const std::vector<int32_t> ref = alone(m, tok, ps[i], max_new[i], chunk, n_ctx);
        EXPECT_EQ(got[i].tokens, ref) << "prompt " << i << " (" << ps[i].size() << " tokens)";
        EXPECT_EQ(got[i].done_calls, 1) << "prompt " << i;
        generated += ref.size();
    }
    EXPECT_GE(generated, ps.size() * size_t(base_new) / 2);  // most did not stop at once
    const SchedulerStats st = sched.stats();
    EXPECT_EQ(st.running, 0);
    EXPECT_EQ(st.waiting, 0);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.requests_finished, int64_t(ps.size()));
}

TEST(Scheduler, BatchedEqualsAloneSmolLM2Fast) {
    const WithTokenizer& w = model(kSmol);
    expect_batched_equals_alone(w.loaded->engine(), *w.tok, 4, 0);
}

TEST(Scheduler, BatchedEqualsAloneSmolLM2Exact) {
    const WithTokenizer& w = model(kSmol);
    expect_batched_equals_alone(w.loaded->exact(), *w.tok, 4, 0);
}

TEST(Scheduler, BatchedEqualsAloneStories260K) {
    const WithTokenizer& w = model(kStories);
    expect_batched_equals_alone(w.loaded->engine(), *w.tok, 6, 0);
}

// A pool of 8 blocks (128 tokens) for requests that each reserve 3-5 blocks: at most two run at a
// time, the rest wait in order, and every one still gets its tokens.
TEST(Scheduler, FullPoolMakesRequestsWaitNotFail) {
    const WithTokenizer& w = model(kStories);
    const Engine& m = w.loaded->engine();
    const auto ps = prompts(*w.tok, 16);
    SchedulerOptions opt;
    opt.n_ctx = 256;
    opt.max_batch = 8;
    opt.chunk = 16;
    opt.kv_tokens = 128;
    Scheduler sched(m, w.tok.get(), opt);
    std::vector<Collected> got(ps.size());
    for (size_t i = 0; i < ps.size(); i++) sched.submit(greedy(ps[i], 30), collect(got[i]));
    bool saw_waiting = false;
    int most_cached = 0;
    while (sched.step()) {
        const SchedulerStats st = sched.stats();
        saw_waiting = saw_waiting || st.waiting > 0;
        most_cached = std::max(most_cached, st.kv_blocks_cached);
        EXPECT_LE(st.kv_blocks_reserved, 8);
        EXPECT_LE(st.kv_blocks_used, st.kv_blocks_reserved);
        EXPECT_LE(st.kv_blocks_used + st.kv_blocks_cached_idle, 8);
    }
    EXPECT_TRUE(saw_waiting);
    // Whole prompt chunks were cached and had to be dropped to make room for later requests.
    EXPECT_GT(most_cached, 0);
    for (size_t i = 0; i < ps.size(); i++) {
        EXPECT_EQ(got[i].done_calls, 1);
        EXPECT_EQ(got[i].tokens, alone(m, *w.tok, ps[i], 30, 16, 256)) << "prompt " << i;
    }
    EXPECT_EQ(sched.stats().kv_blocks_used, 0);
}

// Prefix caching. A long shared start, two questions after it, and a second turn of the first
// conversation (its prompt, its answer, a new question): with the cache the later requests take
// the whole chunks computed before; their tokens and every logit are bit for bit those of the same
// request in a scheduler without the cache.
struct Run {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;  // (tokens sampled, n_vocab)
};

RequestCallbacks collect_run(Run& run) {
    RequestCallbacks cb;
    cb.on_token = [&run](int32_t t) {
        run.tokens.push_back(t);
        return true;
    };
    cb.on_logits = [&run](const float* l, int n) { run.logits.emplace_back(l, l + n); };
    return cb;
}

void expect_same_bits(const Run& cached, const Run& plain, const char* what) {
    EXPECT_EQ(cached.tokens, plain.tokens) << what;
    ASSERT_EQ(cached.logits.size(), plain.logits.size()) << what;
    for (size_t i = 0; i < plain.logits.size(); i++)
        EXPECT_EQ(std::memcmp(cached.logits[i].data(), plain.logits[i].data(), plain.logits[i].size() * sizeof(float)), 0)
            << what << ": the logits of token " << i << " differ";
}

void expect_prefix_hits_exact(const Engine& m, const Tokenizer& tok) {
    const int block = KVCache::kDefaultBlockSize;
    const int chunk = int(std::max<int64_t>(m.plan().tiled_min_rows, block) + block - 1) / block * block;
    const int max_new = test::kSanitized ? 4 : 12, n_ctx = 6 * chunk;
    std::vector<int32_t> start = tok.encode(
        "You are a helpful assistant. Answer in one short sentence, plainly, and say when you do not know. "
        "Lily and Tom went to the park. They saw a big dog. The dog was brown and it wanted to play with a "
        "red ball. Tom threw the ball and the dog ran after it. Lily laughed and clapped her hands.",
        tok.add_bos_default(), false);
    while (int(start.size()) < 2 * chunk + 5) start.insert(start.end(), start.begin() + 1, start.begin() + 40);
    auto with = [&](std::vector<int32_t> a, const std::string& text) {
        const std::vector<int32_t> t = tok.encode(text, false, false);
        a.insert(a.end(), t.begin(), t.end());
        return a;
    };
    const std::vector<int32_t> pa = with(start, " Where did they go?"), pb = with(start, " What colour was the ball?");

    SchedulerOptions opt;
    opt.n_ctx = n_ctx;
    opt.max_batch = 2;
    opt.chunk = chunk;
    auto run_alone = [&](const std::vector<int32_t>& prompt) {
        SchedulerOptions o = opt;
        o.prefix_cache = false;
        Scheduler plain(m, &tok, o);
        Run r;
        plain.submit(greedy(prompt, max_new), collect_run(r));
        plain.run_until_idle();
        EXPECT_EQ(plain.stats().prompt_tokens_reused, 0);
        return r;
    };

    Scheduler sched(m, &tok, opt);
    Run a, b, c;
    sched.submit(greedy(pa, max_new), collect_run(a));
    sched.run_until_idle();
    EXPECT_EQ(sched.stats().prompt_tokens_reused, 0);
    EXPECT_EQ(sched.stats().kv_blocks_cached, int(pa.size()) / chunk * (chunk / block));
    EXPECT_EQ(sched.stats().kv_blocks_cached_idle, sched.stats().kv_blocks_cached);
    sched.submit(greedy(pb, max_new), collect_run(b));
    sched.run_until_idle();
    const int64_t hits_b = int64_t(start.size()) / chunk * chunk;  // the whole chunks of the shared start
    EXPECT_EQ(sched.stats().prompt_tokens_reused, hits_b);
    std::vector<int32_t> pc = pa;
    pc.insert(pc.end(), a.tokens.begin(), a.tokens.end());
    pc = with(pc, " And then what happened?");
    sched.submit(greedy(pc, max_new), collect_run(c));
    sched.run_until_idle();
    const int64_t hits_c = int64_t(pa.size()) / chunk * chunk;  // every whole chunk of the first turn's prompt
    EXPECT_EQ(sched.stats().prompt_tokens_reused, hits_b + hits_c);
    EXPECT_EQ(sched.stats().prompt_tokens_admitted, int64_t(pa.size() + pb.size() + pc.size()));
    EXPECT_EQ(sched.stats().kv_blocks_used, 0);
    EXPECT_GT(hits_b, 0);

    expect_same_bits(a, run_alone(pa), "first request");
    expect_same_bits(b, run_alone(pb), "same start, another question");
    expect_same_bits(c, run_alone(pc), "second turn");
    // The same prompt again takes every chunk but the one with its last token, and ends the same.
    Run again;
    const int64_t before = sched.stats().prompt_tokens_reused;
    sched.submit(greedy(pa, max_new), collect_run(again));
    sched.run_until_idle();
    EXPECT_EQ(sched.stats().prompt_tokens_reused - before, int64_t(pa.size() - 1) / chunk * chunk);
    expect_same_bits(again, a, "the first request again");
}

TEST(Scheduler, PrefixCacheHitsAreBitExactSmolLM2Fast) {
    const WithTokenizer& w = model(kSmol);
    expect_prefix_hits_exact(w.loaded->engine(), *w.tok);
}

TEST(Scheduler, PrefixCacheHitsAreBitExactSmolLM2Exact) {
    const WithTokenizer& w = model(kSmol);
    expect_prefix_hits_exact(w.loaded->exact(), *w.tok);
}

TEST(Scheduler, PrefixCacheHitsAreBitExactStories260K) {
    const WithTokenizer& w = model(kStories);
    expect_prefix_hits_exact(w.loaded->engine(), *w.tok);
}

TEST(Scheduler, CancelFreesTheSequence) {
    const WithTokenizer& w = model(kStories);
    const auto ps = prompts(*w.tok, 16);
    SchedulerOptions opt;
    opt.n_ctx = 256;
    opt.max_batch = 1;
    Scheduler sched(w.loaded->engine(), w.tok.get(), opt);

    // A client that goes away after 3 tokens.
    Collected quitter;
    RequestCallbacks cb = collect(quitter);
    cb.on_token = [&](int32_t t) {
        quitter.tokens.push_back(t);
        return quitter.tokens.size() < 3;
    };
    sched.submit(greedy(ps[0], 50), cb);
    // Waits behind it (max_batch 1), then is cancelled while waiting: done at once, no tokens.
    Collected waiting;
    const int64_t id_waiting = sched.submit(greedy(ps[1], 50), collect(waiting));
    // Cancelled by id while running.
    Collected running;
    const int64_t id_running = sched.submit(greedy(ps[3], 50), collect(running));
    sched.step();
    sched.cancel(id_waiting);
    EXPECT_EQ(waiting.done_calls, 1);
    EXPECT_EQ(waiting.reason, FinishReason::Cancelled);
    EXPECT_TRUE(waiting.tokens.empty());
    while (quitter.done_calls == 0 && sched.step()) {
    }
    EXPECT_EQ(quitter.reason, FinishReason::Cancelled);
    EXPECT_EQ(quitter.tokens.size(), 3u);
    sched.step();  // admits the third
    sched.step();
    sched.cancel(id_running);
    sched.step();
    EXPECT_EQ(running.done_calls, 1);
    EXPECT_EQ(running.reason, FinishReason::Cancelled);
    EXPECT_LT(running.tokens.size(), 50u);
    EXPECT_FALSE(sched.step());
    const SchedulerStats st = sched.stats();
    EXPECT_EQ(st.running, 0);
    EXPECT_EQ(st.kv_blocks_used, 0);
    EXPECT_EQ(st.kv_blocks_reserved, 0);
    EXPECT_EQ(st.requests_finished, 3);
}

TEST(Scheduler, StopsAtTheContextAndAtMaxNew) {
    const WithTokenizer& w = model(kStories);
    const auto ps = prompts(*w.tok, 16);
    SchedulerOptions opt;
    opt.n_ctx = 24;
    Scheduler sched(w.loaded->engine(), nullptr, opt);  // no tokenizer: no end-of-generation stop
    Collected ctx, zero;
    sched.submit(greedy(ps[0], -1), collect(ctx));
    // on_done comes once the stats show the request ended (what /metrics reads).
    RequestCallbacks zero_cb = collect(zero);
    SchedulerStats at_done;
    zero_cb.on_done = [&](FinishReason r, int) {
        zero.reason = r;
        zero.done_calls++;
        at_done = sched.stats();
    };
    sched.submit(greedy(ps[1], 0), zero_cb);
    sched.run_until_idle();
    EXPECT_EQ(at_done.requests_finished, 1);
    EXPECT_EQ(at_done.running, 1);  // the other one still runs
    EXPECT_EQ(ctx.reason, FinishReason::ContextFull);
    EXPECT_EQ(int(ps[0].size() + ctx.tokens.size()), 24 + 1);  // the last token is emitted, never fed
    EXPECT_EQ(zero.reason, FinishReason::Length);
    EXPECT_TRUE(zero.tokens.empty());
}

TEST(Scheduler, RejectsBadRequests) {
    const WithTokenizer& w = model(kStories);
    SchedulerOptions opt;
    opt.n_ctx = 32;
    opt.kv_tokens = 16;
    Scheduler sched(w.loaded->engine(), w.tok.get(), opt);
    auto message = [&](RequestParams p) {
        try {
            sched.submit(std::move(p), {});
        } catch (const Error& e) {
            return std::string(e.what());
        }
        return std::string();
    };
    EXPECT_NE(message(greedy({}, 4)).find("empty"), std::string::npos);
    EXPECT_NE(message(greedy(std::vector<int32_t>(33, 1), 4)).find("context of 32"), std::string::npos);
    EXPECT_NE(message(greedy({1, 512}, 4)).find("token id 512"), std::string::npos);
    EXPECT_NE(message(greedy({1, 2}, 20)).find("pool holds 16"), std::string::npos);
    RequestParams bad = greedy({1, 2}, 4);
    bad.sampling.temperature = -1;
    EXPECT_FALSE(message(bad).empty());
    EXPECT_EQ(sched.stats().requests_submitted, 0);
    SchedulerOptions zero = opt;
    zero.max_batch = 0;
    EXPECT_THROW(Scheduler(w.loaded->engine(), nullptr, zero), Error);
}

// forward() itself: the logits of a decode row, a short prompt and a prompt chunk computed in one
// batch are bit for bit those each gets alone (fast and exact paths, F32 and F16 caches).
TEST(Forward, RowsInABatchGetTheirLoneLogitsBitForBit) {
    const WithTokenizer& w = model(kSmol);
    const Engine &fast = w.loaded->engine(), &exact = w.loaded->exact();
    const auto ps = prompts(*w.tok, 32);
    const int64_t tiled = fast.plan().tiled_min_rows + 2;  // a tiled chunk on both paths (exact's threshold is lower)
    std::vector<int32_t> stream;                      // the prompts one after another, long enough for it
    while (int64_t(stream.size()) < 3 + tiled)
        for (const auto& p : ps) stream.insert(stream.end(), p.begin(), p.end());
    const std::vector<int32_t> b_prompt(ps[2].begin(), ps[2].begin() + 7), c(ps[4].begin(), ps[4].begin() + 5),
        a(stream.begin() + 3, stream.begin() + 3 + tiled);
    const int n_ctx = int(tiled) + 8;
    const int V = fast.config().n_vocab;
    for (const Engine* m : {&fast, &exact})
        for (DType kv : {DType::F32, DType::F16}) {
            if (test::kSanitized && (m->exact() || kv == DType::F16)) continue;  // slow there: one case
            const std::string where = std::string(m->exact() ? "exact" : "fast") + (kv == DType::F16 ? " f16" : " f32");
            // Feeds rows (token, seq, pos, wants logits) and returns the logits rows.
            auto run = [&](KVCache& cache, Workspace& ws, const Batch& batch) {
                forward(*m, cache, batch, ws);
                return std::vector<float>(ws.logits.begin(), ws.logits.begin() + ws.n_logit_rows * V);
            };
            auto prompt_rows = [](Batch& batch, const std::vector<int32_t>& ids, int seq, bool all_logits) {
                for (size_t i = 0; i < ids.size(); i++)
                    batch.add(ids[i], seq, int(i), all_logits || i + 1 == ids.size());
            };
            // Alone: B's prompt then its decode row; C's 5 rows; A's chunk.
            std::vector<float> b_alone, c_alone, a_alone;
            {
                KVCache cache(m->config(), n_ctx, kv);
                Workspace ws;
                Batch batch;
                const int s = cache.new_sequence();
                cache.append(s, 8);
                prompt_rows(batch, b_prompt, s, false);
                run(cache, ws, batch);
                batch.clear();
                batch.add(42, s, 7, true);
                b_alone = run(cache, ws, batch);
            }
            {
                KVCache cache(m->config(), n_ctx, kv);
                Workspace ws;
                Batch batch;
                const int s = cache.new_sequence();
                cache.append(s, 5);
                prompt_rows(batch, c, s, true);
                c_alone = run(cache, ws, batch);
            }
            {
                KVCache cache(m->config(), n_ctx, kv);
                Workspace ws;
                Batch batch;
                const int s = cache.new_sequence();
                cache.append(s, int(a.size()));
                prompt_rows(batch, a, s, false);
                a_alone = run(cache, ws, batch);
            }
            // Together: B's decode row, C's rows (one row-exact run of 6 rows), A's chunk (tiled).
            KVCache cache(m->config(), n_ctx, kv, KVCache::kDefaultBlockSize, 3 * n_ctx);
            Workspace ws;
            Batch batch;
            const int sb = cache.new_sequence(), sc = cache.new_sequence(), sa = cache.new_sequence();
            cache.append(sb, 8), cache.append(sc, 5), cache.append(sa, int(a.size()));
            prompt_rows(batch, b_prompt, sb, false);
            run(cache, ws, batch);
            batch.clear();
            batch.add(42, sb, 7, true);
            prompt_rows(batch, c, sc, true);
            prompt_rows(batch, a, sa, false);
            const std::vector<float> together = run(cache, ws, batch);
            ASSERT_EQ(together.size(), size_t(7 * V));
            EXPECT_EQ(0, std::memcmp(together.data(), b_alone.data(), size_t(V) * 4)) << where << ": decode row";
            EXPECT_EQ(0, std::memcmp(together.data() + V, c_alone.data(), size_t(5 * V) * 4)) << where << ": short prompt";
            EXPECT_EQ(0, std::memcmp(together.data() + 6 * V, a_alone.data(), size_t(V) * 4)) << where << ": chunk";
        }
}

// forward()'s runs: stretches of >= K (the model's tiled_min_rows()) consecutive positions of one
// sequence are tiled, the rest are grouped into row-exact runs.
TEST(SplitRuns, HandWorked) {
    const int K = int(cpu::kTiledMinRows);
    std::vector<int32_t> seq, pos;
    auto add = [&](int s, int p0, int n) {
        for (int i = 0; i < n; i++) seq.push_back(s), pos.push_back(p0 + i);
    };
    add(0, 7, 1);      // decode rows of three sequences
    add(1, 3, 1);
    add(2, 40, 1);
    add(3, 0, K + 2);  // a prompt chunk: tiled
    add(4, 16, K - 1); // a short chunk: row-exact
    add(5, 0, K);      // tiled
    add(5, K + 1, 1);  // same sequence but not the next position: row-exact
    const int64_t a = 3 + K + 2, b = a + K - 1, c = b + K;  // where the chunks end
    std::vector<RowRun> runs;
    split_runs(seq.data(), pos.data(), c, K, runs);
    ASSERT_EQ(runs.size(), 4u);
    EXPECT_EQ(runs[0].begin, 0);
    EXPECT_EQ(runs[0].end, 3);
    EXPECT_FALSE(runs[0].tiled);
    EXPECT_EQ(runs[1].begin, 3);
    EXPECT_EQ(runs[1].end, a);
    EXPECT_TRUE(runs[1].tiled);
    EXPECT_EQ(runs[2].begin, a);
    EXPECT_EQ(runs[2].end, b);
    EXPECT_FALSE(runs[2].tiled);
    EXPECT_EQ(runs[3].begin, b);
    EXPECT_EQ(runs[3].end, c);
    EXPECT_TRUE(runs[3].tiled);
    // (the last row-exact row after it)
    split_runs(seq.data(), pos.data(), c + 1, K, runs);
    ASSERT_EQ(runs.size(), 5u);
    EXPECT_EQ(runs[4].begin, c);
    EXPECT_EQ(runs[4].end, c + 1);
    EXPECT_FALSE(runs[4].tiled);
    split_runs(seq.data(), pos.data(), 0, K, runs);
    EXPECT_TRUE(runs.empty());
}

}  // namespace
}  // namespace ridge
