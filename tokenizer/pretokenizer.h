// Pre-tokenizers for byte-level BPE: the regex list named by tokenizer.ggml.pre (as llama.cpp's
// llama-vocab.cpp chooses it) and RegexSplitter, which runs such a list with PCRE2 in UTF mode
// with Unicode properties. Each regex splits every piece so far into its matches and the gaps
// between them; BPE then works inside each final piece.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ridge {

struct PretokenizerSpec {
    std::string kind;                   // the regex family: "gpt2", "llama3", "qwen2", ...
    std::vector<std::string> patterns;  // PCRE2 syntax, applied in order
    bool ignore_merges = false;         // a piece that is itself a token is emitted whole (llama3)
    bool add_bos = false;               // llama.cpp's add_bos default for this pre-tokenizer
    bool known = true;                  // false: name not recognised, using "default"
};

// The spec for a tokenizer.ggml.pre value. Unknown names get llama.cpp's "default" regexes.
PretokenizerSpec pretokenizer_for(std::string_view pre);

class RegexSplitter {
public:
    // Compiles (and JIT-compiles) the patterns; ridge::Error naming `what` and the pattern if one
    // does not compile.
    RegexSplitter(const std::vector<std::string>& patterns, const std::string& what);
    ~RegexSplitter();
    RegexSplitter(const RegexSplitter&) = delete;
    RegexSplitter& operator=(const RegexSplitter&) = delete;

    // Splits valid UTF-8 `text` into consecutive non-empty pieces covering all of it.
    // Thread-safe: no state is shared between calls.
    std::vector<std::string_view> split(std::string_view text) const;

private:
    struct Compiled;  // a pcre2_code and its pattern text
    struct CompiledDeleter {
        void operator()(Compiled* c) const;
    };
    std::vector<std::unique_ptr<Compiled, CompiledDeleter>> regexes_;
    std::string what_;
};

}  // namespace ridge
