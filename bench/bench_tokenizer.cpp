// Tokenizer throughput: encode about 1 MB of English text (the license texts every Debian system
// has in /usr/share/common-licenses, repeated) with SmolLM2's byte-level BPE and with the Llama 2
// SentencePiece vocabulary, and decode it back. Reports MB/s and tokens/s as the median of
// several repetitions. A measurement, not a test: nothing here asserts a time.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "tokenizer/tokenizer.h"
#include "weights/gguf.h"
#include "tests/test_paths.h"

namespace {

const std::string kSmolLM2 = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kLlamaSpm = std::string(RIDGE_TESTDATA_DIR) + "/llamacpp-vocab/ggml-vocab-llama-spm.gguf";
constexpr size_t kTextBytes = 1 << 20;

// About 1 MB of English: the license texts, concatenated and repeated, cut at a line end.
const std::string& english_text() {
    static const std::string text = [] {
        std::string all;
        const std::filesystem::path dir = "/usr/share/common-licenses";
        std::vector<std::filesystem::path> files;
        if (std::filesystem::is_directory(dir))
            for (const auto& e : std::filesystem::directory_iterator(dir))
                if (e.is_regular_file()) files.push_back(e.path());
        std::sort(files.begin(), files.end());
        std::string one_pass;
        for (const auto& p : files) {
            std::ifstream in(p, std::ios::binary);
            std::stringstream ss;
            ss << in.rdbuf();
            one_pass += ss.str();
        }
        if (one_pass.empty()) one_pass = "The quick brown fox jumps over the lazy dog. It's 2024; we've got 3 cats!\n";
        while (all.size() < kTextBytes) all += one_pass;
        all.resize(kTextBytes);
        // Licenses are ASCII or UTF-8; cut back to a newline so no character is split.
        all.resize(all.rfind('\n') + 1);
        return all;
    }();
    return text;
}

std::unique_ptr<ridge::Tokenizer> load(const std::string& path) {
    auto f = ridge::GGUFFile::open(path);
    return ridge::Tokenizer::from_gguf(*f);
}

void report(benchmark::State& state, size_t bytes, size_t tokens) {
    state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(bytes));  // shown as MB/s ("bytes_per_second")
    state.counters["tokens/s"] = benchmark::Counter(double(state.iterations()) * double(tokens), benchmark::Counter::kIsRate);
    state.counters["tokens"] = double(tokens);
}

// Steady state: the piece cache of the byte-level tokenizer is warm after the first iteration.
void BM_Encode(benchmark::State& state, const std::string& path) {
    const auto tok = load(path);
    const std::string& text = english_text();
    size_t n = 0;
    for (auto _ : state) {
        auto ids = tok->encode(text, false, false);
        n = ids.size();
        benchmark::DoNotOptimize(ids.data());
    }
    report(state, text.size(), n);
}

// A fresh tokenizer for every pass (its construction is not timed): nothing is cached yet.
void BM_EncodeFirstPass(benchmark::State& state, const std::string& path) {
    const std::string& text = english_text();
    size_t n = 0;
    for (auto _ : state) {
        state.PauseTiming();
        auto tok = load(path);
        state.ResumeTiming();
        auto ids = tok->encode(text, false, false);
        n = ids.size();
        benchmark::DoNotOptimize(ids.data());
        state.PauseTiming();
        tok.reset();
        state.ResumeTiming();
    }
    report(state, text.size(), n);
}

void BM_Decode(benchmark::State& state, const std::string& path) {
    const auto tok = load(path);
    const std::string& text = english_text();
    const auto ids = tok->encode(text, false, false);
    for (auto _ : state) {
        ridge::StreamDecoder dec(*tok);
        std::string out;
        out.reserve(text.size());
        for (int32_t id : ids) out += dec.push(id);
        out += dec.flush();
        benchmark::DoNotOptimize(out.data());
    }
    report(state, text.size(), ids.size());
}

void register_all() {
    struct Vocab {
        const char* name;
        std::string path;
    };
    for (const Vocab& v : {Vocab{"smollm2", kSmolLM2}, Vocab{"llama-spm", kLlamaSpm}}) {
        if (!std::filesystem::exists(v.path)) continue;
        const std::string p = v.path;
        for (auto [kind, fn] : {std::pair{"encode", &BM_Encode}, std::pair{"encode_first_pass", &BM_EncodeFirstPass},
                                std::pair{"decode", &BM_Decode}}) {
            benchmark::RegisterBenchmark((std::string(kind) + "/" + v.name).c_str(),
                                         [fn = fn, p](benchmark::State& s) { fn(s, p); })
                ->Unit(benchmark::kMillisecond)
                ->Repetitions(5)
                ->ReportAggregatesOnly(true)
                ->UseRealTime();
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
