// One decode step, alone: loads a model with the default plan, feeds a short prompt, runs one
// decode step to warm up, then exactly one more (Session::decode of the last token, then a greedy
// Sampler::sample of the next) and prints that step's time. It is the program behind the reading
// guide's count of the files one decode step runs (tools/decode_step_files.py): built with
// -DRIDGE_COVERAGE_STEP in a coverage build, it resets gcov's counters just before the step and
// writes them just after it, then exits at once, so the coverage data holds that one step's lines
// and nothing else (no loading, no prompt, no printing of text).
//
//   build/bench_decode_step [MODEL.gguf]     (default: SmolLM2-135M Q4_1)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model.h"
#include "engine/sampler.h"
#include "engine/session.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "tests/test_paths.h"

#if defined(RIDGE_COVERAGE_STEP)
extern "C" void __gcov_reset();
extern "C" void __gcov_dump();
#endif

int main(int argc, char** argv) {
    const std::string path = argc > 1 ? argv[1] : std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
    try {
        auto file = ridge::ModelFile::open(path);
        const ridge::Model model = ridge::Model::from_file(*file);
        const ridge::Engine engine(model, ridge::RunOptions{});
        ridge::SessionOptions so;
        so.n_ctx = 64;
        ridge::Session session(engine, so);
        ridge::SamplerParams sp;
        sp.temperature = 0.0f;  // greedy
        ridge::Sampler sampler(sp);

        const int seq = session.cache().new_sequence();
        std::vector<int32_t> history;
        for (int i = 0; i < 8; i++) history.push_back(int32_t((1 + 97 * i) % session.n_vocab()));
        const float* logits = session.prefill(seq, history);
        int32_t next = sampler.sample(logits, session.n_vocab(), history);
        history.push_back(next);
        logits = session.decode(seq, next);  // the warm-up step
        next = sampler.sample(logits, session.n_vocab(), history);
        history.push_back(next);

#if defined(RIDGE_COVERAGE_STEP)
        __gcov_reset();
#endif
        const auto t0 = std::chrono::steady_clock::now();
        logits = session.decode(seq, next);  // the step
        next = sampler.sample(logits, session.n_vocab(), history);
        const auto t1 = std::chrono::steady_clock::now();
#if defined(RIDGE_COVERAGE_STEP)
        __gcov_dump();
        std::_Exit(0);  // no exit handlers: they would run (and count) more lines
#endif
        std::printf("one decode step: %.3f ms (next token %d)\n",
                    std::chrono::duration<double, std::milli>(t1 - t0).count(), next);
    } catch (const ridge::Error& e) {
        std::fprintf(stderr, "bench_decode_step: %s\n", e.what());
        return 1;
    }
    return 0;
}
