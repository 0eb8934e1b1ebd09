// Pre-tokenizer regexes by tokenizer.ggml.pre, as llama.cpp (src/llama-vocab.cpp,
// llm_tokenizer_bpe) lists them, and their evaluation with PCRE2. The patterns come from each
// model's tokenizer.json; llama.cpp spells the case-insensitive contractions "(?i:'s|...)" as
// explicit classes, and so do we. PCRE2 runs with PCRE2_UTF | PCRE2_UCP so that \s, \p{L},
// \p{N} and \p{P} follow Unicode.
#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "weights/error.h"

namespace ridge {

namespace {

// GPT-2's pattern (also mpt, olmo, jais, phi-2 ...): contractions, optional space + letters,
// optional space + digits, optional space + other symbols, whitespace not followed by a
// non-space (so the last space sticks to the next word).
const char* const kGpt2 = R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))re";

// Llama 3's pattern: case-insensitive contractions, one leading non-letter joins a word,
// digits in groups of up to three, newlines kept together.
const char* const kLlama3 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

// Qwen2's pattern: Llama 3's with single digits.
const char* const kQwen2 =
    R"re((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

bool one_of(std::string_view name, std::initializer_list<std::string_view> names) {
    for (std::string_view n : names)
        if (name == n) return true;
    return false;
}

}  // namespace

PretokenizerSpec pretokenizer_for(std::string_view pre) {
    PretokenizerSpec s;
    if (one_of(pre, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
        s.kind = "llama3";
        s.patterns = {kLlama3};
        s.ignore_merges = true;
        s.add_bos = true;
    } else if (one_of(pre, {"dbrx", "smaug-bpe"})) {
        s.kind = "llama3";
        s.patterns = {kLlama3};
    } else if (one_of(pre, {"qwen2", "deepseek-r1-qwen", "kormo", "stablelm2", "megrez", "hunyuan"})) {
        s.kind = "qwen2";
        s.patterns = {kQwen2};
    } else if (one_of(pre, {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"})) {
        // Every digit is a piece of its own, then GPT-2's pattern.
        s.kind = "starcoder";
        s.patterns = {R"re(\p{N})re", kGpt2};
    } else if (one_of(pre, {"gpt-2", "mpt", "olmo", "jais", "trillion", "phi-2", "jina-es", "jina-de", "gigachat",
                            "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "exaone4", "jina-v1-en", "jina-v2-code",
                            "roberta-bpe"})) {
        s.kind = "gpt2";
        s.patterns = {kGpt2};
    } else if (pre == "deepseek-coder") {
        // Newlines alone, letters with one leading space, punctuation likewise, CJK runs
        // (U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF), single digits.
        s.kind = "deepseek-coder";
        s.patterns = {R"re([\r\n])re", R"re(\s?\p{L}+)re", R"re(\s?\p{P}+)re",
                      R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re", R"re(\p{N})re"};
    } else if (pre == "deepseek-llm") {
        // Newlines alone; one optional space and a run of the letters of the alphabets DeepSeek
        // lists (Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, ... not CJK); one optional
        // space and a run of ASCII/full-width punctuation and symbols; trailing whitespace; CJK
        // runs; digit runs.
        s.kind = "deepseek-llm";
        s.patterns = {R"re([\r\n])re",
                      R"re(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-)re"
                      R"re(\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-)re"
                      R"re(\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-)re"
                      R"re(\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77})re"
                      R"re(\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-)re"
                      R"re(\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE})re"
                      R"re(\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-)re"
                      R"re(\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})re"
                      R"re(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149})re"
                      R"re(\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3})re"
                      R"re(\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-)re"
                      R"re(\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F})re"
                      R"re(\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})re"
                      R"re(\x{1E900}-\x{1E943}]+)re",
                      R"re(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)re", R"re(\s+$)re",
                      R"re([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)re", R"re(\p{N}+)re"};
    } else if (pre == "falcon") {
        s.kind = "falcon";
        s.patterns = {R"re([\p{P}\$\+<=>\^~\|`]+)re", kGpt2, R"re([0-9][0-9][0-9])re"};
    } else {
        // llama.cpp's "default" (also its fallback for unrecognised names): punctuation runs,
        // GPT-2's pattern, digit runs, then groups of three ASCII digits.
        s.kind = "default";
        s.patterns = {R"re([\p{P}\$\+<=>\^~\|]+)re", kGpt2, R"re(\p{N}+)re", R"re([0-9][0-9][0-9])re"};
        s.known = pre == "default";
    }
    return s;
}

struct RegexSplitter::Compiled {
    pcre2_code* code = nullptr;
    std::string pattern;
};

void RegexSplitter::CompiledDeleter::operator()(Compiled* c) const {
    pcre2_code_free(c->code);
    delete c;
}

RegexSplitter::RegexSplitter(const std::vector<std::string>& patterns, const std::string& what) : what_(what) {
    for (const std::string& p : patterns) {
        int err = 0;
        PCRE2_SIZE err_offset = 0;
        // DOLLAR_ENDONLY: "$" means the end of the piece, as in std::regex, not "before a final \n".
        pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                         PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &err, &err_offset, nullptr);
        if (!code) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            throw Error(what + ": pre-tokenizer regex /" + p + "/ does not compile at offset " +
                        std::to_string(err_offset) + ": " + reinterpret_cast<const char*>(msg));
        }
        regexes_.emplace_back(new Compiled{code, p});
        // JIT is an optimisation only: without it (unsupported platform) matching still works.
        pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    }
}

RegexSplitter::~RegexSplitter() = default;

std::vector<std::string_view> RegexSplitter::split(std::string_view text) const {
    std::vector<std::string_view> pieces;
    if (text.empty()) return pieces;
    pieces.push_back(text);

    // Per-call matching state, so that one splitter serves many threads.
    std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(pcre2_match_data_create(4, nullptr),
                                                                          &pcre2_match_data_free);
    std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> mctx(nullptr, &pcre2_match_context_free);
    std::unique_ptr<pcre2_jit_stack, decltype(&pcre2_jit_stack_free)> jit_stack(nullptr, &pcre2_jit_stack_free);
    if (!md) throw std::bad_alloc();

    std::vector<std::string_view> next;
    for (const auto& re : regexes_) {
        next.clear();
        next.reserve(pieces.size() * 2);
        for (std::string_view piece : pieces) {
            // Each piece is a subject of its own: lookaheads and "$" stop at its end.
            const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
            size_t start = 0;     // where the next search begins
            size_t emitted = 0;   // end of what has been emitted so far
            while (start < piece.size()) {
                int rc = pcre2_match(re->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md.get(), mctx.get());
                if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !jit_stack) {
                    // Long runs can need more than the default 32 KiB JIT stack.
                    jit_stack.reset(pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr));
                    mctx.reset(pcre2_match_context_create(nullptr));
                    if (!jit_stack || !mctx) throw std::bad_alloc();
                    pcre2_jit_stack_assign(mctx.get(), nullptr, jit_stack.get());
                    continue;
                }
                if (rc == PCRE2_ERROR_NOMATCH) break;
                if (rc < 0) {
                    PCRE2_UCHAR msg[256];
                    pcre2_get_error_message(rc, msg, sizeof msg);
                    throw Error(what_ + ": pre-tokenizer regex /" + re->pattern + "/ failed: " +
                                reinterpret_cast<const char*>(msg));
                }
                const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
                const size_t m_begin = ov[0], m_end = ov[1];
                if (m_end == m_begin) {
                    // An empty match splits nothing; step over one character and search on.
                    start = m_begin + 1;
                    while (start < piece.size() && (static_cast<uint8_t>(piece[start]) & 0xC0) == 0x80) ++start;
                    continue;
                }
                if (m_begin > emitted) next.push_back(piece.substr(emitted, m_begin - emitted));
                next.push_back(piece.substr(m_begin, m_end - m_begin));
                emitted = start = m_end;
            }
            if (emitted < piece.size()) next.push_back(piece.substr(emitted));
        }
        pieces.swap(next);
    }
    return pieces;
}

}  // namespace ridge
