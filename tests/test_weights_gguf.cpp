// Tests for the GGUF reader and config_from_gguf: real files checked against numbers read
// independently with gguf-py 0.19 (GGUFReader: counts, data_offset, field values, tensor infos),
// and corrupted copies (truncated, header fields overwritten) that must fail with a located error.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "weights/config.h"
#include "weights/gguf.h"
#include "weights/model_file.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "ollama-tiny-random/llama-2-tiny-random.gguf", "llamacpp-vocab/ggml-vocab-llama-bpe.gguf", "llamacpp-vocab/ggml-vocab-qwen2.gguf", "llamacpp-vocab/ggml-vocab-llama-spm.gguf");

using namespace ridge;

namespace {

const std::string kTestdata = RIDGE_TESTDATA_DIR;
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";
const std::string kStories = kTestdata + "/gguf-stories260K/stories260K.gguf";
const std::string kTinyRandom = kTestdata + "/ollama-tiny-random/llama-2-tiny-random.gguf";
const std::string kVocab = kTestdata + "/llamacpp-vocab/";

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    EXPECT_TRUE(in) << path;
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Byte offset of the GGUF string `s` (u64 length + bytes) in `f`: the offset of its length field.
size_t find_gguf_string(const std::vector<uint8_t>& f, const std::string& s) {
    std::vector<uint8_t> pat(8 + s.size());
    uint64_t n = s.size();
    std::memcpy(pat.data(), &n, 8);
    std::memcpy(pat.data() + 8, s.data(), s.size());
    auto it = std::search(f.begin(), f.end(), pat.begin(), pat.end());
    EXPECT_NE(it, f.end()) << s;
    return size_t(it - f.begin());
}

template <class T>
void put(std::vector<uint8_t>& f, size_t at, T v) {
    std::memcpy(f.data() + at, &v, sizeof v);
}
template <class T>
T get(const std::vector<uint8_t>& f, size_t at) {
    T v;
    std::memcpy(&v, f.data() + at, sizeof v);
    return v;
}

// Parsing `bytes` must throw ridge::Error with a one-line message naming `name` and holding `needle`.
void expect_reject(const std::vector<uint8_t>& bytes, const std::string& needle, size_t size = SIZE_MAX) {
    const std::string name = "corrupt-copy.gguf";
    try {
        GGUFFile::from_memory(bytes.data(), std::min(size, bytes.size()), name);
        ADD_FAILURE() << "accepted; wanted an error containing '" << needle << "'";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_EQ(m.rfind(name + ": ", 0), 0u) << m;
        EXPECT_NE(m.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
}

// Field offsets of one tensor info in a GGUF file, found from its name.
struct TensorInfoAt {
    size_t name, n_dims, dims, type, offset;
};
TensorInfoAt tensor_info_at(const std::vector<uint8_t>& f, const std::string& name) {
    TensorInfoAt t;
    t.name = find_gguf_string(f, name);
    t.n_dims = t.name + 8 + name.size();
    t.dims = t.n_dims + 4;
    t.type = t.dims + 8 * get<uint32_t>(f, t.n_dims);
    t.offset = t.type + 4;
    return t;
}

// A tiny GGUF writer for synthetic files (every value type, chosen alignment, chosen version).
struct Builder {
    std::vector<uint8_t> b;
    template <class T>
    void pod(T v) {
        const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof v);
    }
    void str(const std::string& s) {
        pod<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
    }
    void key(const std::string& k, GGUFType t) {
        str(k);
        pod<uint32_t>(uint32_t(t));
    }
    void header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
        b.insert(b.end(), {'G', 'G', 'U', 'F'});
        pod(version);
        pod(n_tensors);
        pod(n_kv);
    }
    void tensor(const std::string& name, std::vector<uint64_t> dims, DType t, uint64_t offset) {
        str(name);
        pod<uint32_t>(uint32_t(dims.size()));
        for (uint64_t d : dims) pod(d);
        pod<uint32_t>(uint32_t(t));
        pod(offset);
    }
    void pad(size_t alignment) {
        while (b.size() % alignment) b.push_back(0);
    }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Real files. Expected values: gguf-py GGUFReader on the same files (see the file comment).

TEST(GGUFReal, SmolLM2Header) {
    auto f = GGUFFile::open(kSmol);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->tensors().size(), 272u);
    EXPECT_EQ(f->metadata().size(), 33u);
    EXPECT_EQ(f->alignment(), 32u);
    EXPECT_EQ(f->data_offset(), 1785664u);
    EXPECT_EQ(f->get_string("general.architecture"), "llama");
    EXPECT_EQ(f->get_string("general.name"), "Smollm2 135M 8k Lc100K Mix1 Ep2");
    EXPECT_EQ(f->get_u64("llama.block_count"), 30u);
    EXPECT_EQ(f->get_u64("llama.context_length"), 8192u);
    EXPECT_EQ(f->get_u64("general.file_type"), 3u);
    EXPECT_EQ(f->get_f64("llama.rope.freq_base"), 100000.0);
    EXPECT_EQ(float(f->get_f64("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
    EXPECT_FALSE(f->get_bool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 49152u);
    EXPECT_EQ(f->get_string_array("tokenizer.ggml.merges").size(), 48900u);
    EXPECT_EQ(f->get_i32_array("tokenizer.ggml.token_type").size(), 49152u);
    EXPECT_EQ(f->get_string_array("general.languages"), std::vector<std::string>{"en"});
    EXPECT_EQ(f->value_str("tokenizer.ggml.tokens"), "[49152 strings]");
    EXPECT_EQ(f->value_str("llama.block_count"), "30");
    EXPECT_EQ(f->value_str("general.languages"), "[\"en\"]");
    EXPECT_EQ(f->get_u64_or("no.such.key", 7), 7u);

    // Tensor infos; offsets are absolute (data_offset + relative offset) as gguf-py reports them.
    const TensorView* emb = f->find("token_embd.weight");
    ASSERT_NE(emb, nullptr);
    EXPECT_EQ(emb->type, DType::Q8_0);
    EXPECT_EQ(emb->shape, (std::vector<int64_t>{576, 49152}));
    EXPECT_EQ(emb->nbytes, 30081024u);
    EXPECT_EQ(size_t(emb->data - f->tensors()[0].data), 0u);
    const TensorView& down = f->require("blk.0.ffn_down.weight", {DType::Q4_1}, {1536, 576});
    EXPECT_EQ(down.nbytes, 552960u);
    EXPECT_EQ(size_t(down.data - emb->data) + 1785664u, 31868992u);
    const TensorView& k = f->require("blk.0.attn_k.weight", {DType::Q4_1, DType::Q8_0}, {576, 192});
    EXPECT_EQ(size_t(k.data - emb->data) + 1785664u, 33530176u);
    EXPECT_EQ(f->find("output.weight"), nullptr);
}

TEST(GGUFReal, SmolLM2Config) {
    auto f = GGUFFile::open(kSmol);
    Config c = config_from_gguf(*f);
    EXPECT_EQ(c.arch, "llama");
    EXPECT_EQ(c.n_embd, 576);
    EXPECT_EQ(c.n_layers, 30);
    EXPECT_EQ(c.n_ff, 1536);
    EXPECT_EQ(c.n_heads, 9);
    EXPECT_EQ(c.n_kv_heads, 3);
    EXPECT_EQ(c.head_dim, 64);
    EXPECT_EQ(c.q_dim(), 576);
    EXPECT_EQ(c.kv_dim(), 192);
    EXPECT_EQ(c.norm_eps, 1e-5f);
    EXPECT_EQ(c.rope_freq_base, 100000.0f);
    EXPECT_EQ(c.rope_dim, 64);
    EXPECT_EQ(c.rope_style, RopeStyle::Norm);
    EXPECT_EQ(c.n_ctx_train, 8192);
    EXPECT_EQ(c.n_vocab, 49152);
    EXPECT_TRUE(c.tied_output);  // no output.weight in the file
}

TEST(GGUFReal, Stories260K) {
    auto f = GGUFFile::open(kStories);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->tensors().size(), 48u);
    EXPECT_EQ(f->metadata().size(), 19u);
    EXPECT_EQ(f->data_offset(), 14176u);
    EXPECT_EQ(f->file_size(), 1185376u);
    EXPECT_EQ(f->get_u64("tokenizer.ggml.seperator_token_id"), 4294967295u);
    EXPECT_EQ(f->get_f32_array("tokenizer.ggml.scores").size(), 512u);
    const TensorView& out = f->require("output.weight", {DType::F32}, {64, 512});
    EXPECT_EQ(size_t(out.data - f->tensors()[0].data) + 14176u, 145504u);
    for (const TensorView& t : f->tensors()) EXPECT_EQ(t.type, DType::F32) << t.name;

    Config c = config_from_gguf(*f);
    EXPECT_EQ(c.n_embd, 64);
    EXPECT_EQ(c.n_layers, 5);
    EXPECT_EQ(c.n_ff, 172);
    EXPECT_EQ(c.n_heads, 8);
    EXPECT_EQ(c.n_kv_heads, 4);
    EXPECT_EQ(c.head_dim, 8);
    EXPECT_EQ(c.rope_dim, 8);
    EXPECT_EQ(c.rope_freq_base, 10000.0f);  // key absent: the default
    EXPECT_EQ(c.n_ctx_train, 2048);
    EXPECT_EQ(c.n_vocab, 512);              // no llama.vocab_size: from the token array
    EXPECT_FALSE(c.tied_output);
}

TEST(GGUFReal, TinyRandomF16) {
    auto m = ModelFile::open(kTinyRandom);
    EXPECT_EQ(m->format(), ModelFormat::GGUF);
    ASSERT_NE(m->gguf(), nullptr);
    EXPECT_EQ(m->tensors().size(), 12u);
    EXPECT_EQ(m->gguf()->data_offset(), 724416u);
    EXPECT_EQ(m->gguf()->get_string("general.name"), "LLaMA v2");
    const Config& c = m->config();
    EXPECT_EQ(c.n_embd, 8);
    EXPECT_EQ(c.n_layers, 1);
    EXPECT_EQ(c.n_ff, 32);
    EXPECT_EQ(c.n_heads, 2);
    EXPECT_EQ(c.n_kv_heads, 2);
    EXPECT_EQ(c.rope_dim, 4);
    EXPECT_EQ(c.n_vocab, 32000);
    EXPECT_EQ(c.n_ctx_train, 4096);
}

TEST(GGUFReal, VocabOnlyFiles) {
    // name, kv count, vocab size, architecture (gguf-py; SOURCES.md agrees on vocab and arch)
    struct Case { const char* file; size_t n_kv; size_t n_vocab; const char* arch; };
    const Case cases[] = {
        {"ggml-vocab-llama-spm.gguf", 22, 32000, "llama"},   {"ggml-vocab-phi-3.gguf", 26, 32064, "phi3"},
        {"ggml-vocab-gpt-2.gguf", 16, 50257, "gpt2"},        {"ggml-vocab-starcoder.gguf", 19, 49152, "starcoder2"},
        {"ggml-vocab-refact.gguf", 18, 49216, "refact"},     {"ggml-vocab-deepseek-coder.gguf", 25, 32256, "llama"},
        {"ggml-vocab-mpt.gguf", 17, 50432, "mpt"},
    };
    for (const Case& c : cases) {
        auto f = GGUFFile::open(kVocab + c.file);
        EXPECT_EQ(f->tensors().size(), 0u) << c.file;
        EXPECT_EQ(f->metadata().size(), c.n_kv) << c.file;
        EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), c.n_vocab) << c.file;
        EXPECT_EQ(f->get_string("general.architecture"), c.arch) << c.file;
    }
    auto spm = GGUFFile::open(kVocab + "ggml-vocab-llama-spm.gguf");
    EXPECT_TRUE(spm->get_bool("tokenizer.ggml.add_bos_token"));
    EXPECT_EQ(spm->get_f32_array("tokenizer.ggml.scores").size(), 32000u);
    // deepseek-coder: rope base 100000, eps 1e-6, linear rope scaling factor 4
    auto ds = GGUFFile::open(kVocab + "ggml-vocab-deepseek-coder.gguf");
    EXPECT_EQ(ds->get_f64("llama.rope.freq_base"), 100000.0);
    EXPECT_EQ(float(ds->get_f64("llama.attention.layer_norm_rms_epsilon")), 1e-6f);
    EXPECT_EQ(ds->get_string("llama.rope.scaling.type"), "linear");
    EXPECT_EQ(ds->get_u64("tokenizer.ggml.bos_token_id"), 32013u);
    // A non-llama architecture is refused by config_from_gguf with the file named.
    auto gpt2 = GGUFFile::open(kVocab + "ggml-vocab-gpt-2.gguf");
    try {
        config_from_gguf(*gpt2);
        FAIL() << "gpt2 architecture accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("ggml-vocab-gpt-2.gguf"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("gpt2"), std::string::npos) << e.what();
    }
}

TEST(GGUFReal, GetterErrorsNameFileAndKey) {
    auto f = GGUFFile::open(kStories);
    auto expect_error = [&](auto fn, const char* needle) {
        try {
            fn();
            ADD_FAILURE() << "no error for " << needle;
        } catch (const Error& e) {
            std::string m = e.what();
            EXPECT_NE(m.find(kStories), std::string::npos) << m;
            EXPECT_NE(m.find(needle), std::string::npos) << m;
        }
    };
    expect_error([&] { f->get_u64("llama.nope"); }, "llama.nope");
    expect_error([&] { f->get_u64("general.name"); }, "general.name");
    expect_error([&] { f->get_string("llama.block_count"); }, "llama.block_count");
    expect_error([&] { f->get_string_array("tokenizer.ggml.scores"); }, "tokenizer.ggml.scores");
    expect_error([&] { f->require("output.weight", {DType::Q4_1}, {64, 512}); }, "expected Q4_1");
    expect_error([&] { f->require("output.weight", {DType::F32}, {64, 500}); }, "[64, 512], expected [64, 500]");
    expect_error([&] { f->require("blk.9.attn_q.weight", {DType::F32}, {64, 64}); }, "blk.9.attn_q.weight");
}

TEST(GGUFReal, ModelFileMissingFile) {
    try {
        ModelFile::open("/nonexistent/dir/model.gguf");
        FAIL();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.gguf"), std::string::npos);
    }
}

// ---------------------------------------------------------------------------------------------
// Synthetic files

// Every metadata value type, scalar and array, in a v2 file with alignment 64 and two tensors.
TEST(GGUFSynthetic, EveryValueTypeV2) {
    Builder w;
    w.header(2, 2, 17);
    w.key("general.alignment", GGUFType::UINT32); w.pod<uint32_t>(64);
    w.key("t.u8", GGUFType::UINT8); w.pod<uint8_t>(200);
    w.key("t.i8", GGUFType::INT8); w.pod<int8_t>(-100);
    w.key("t.u16", GGUFType::UINT16); w.pod<uint16_t>(60000);
    w.key("t.i16", GGUFType::INT16); w.pod<int16_t>(-30000);
    w.key("t.u32", GGUFType::UINT32); w.pod<uint32_t>(4000000000u);
    w.key("t.i32", GGUFType::INT32); w.pod<int32_t>(-2000000000);
    w.key("t.f32", GGUFType::FLOAT32); w.pod<float>(0.25f);
    w.key("t.bool", GGUFType::BOOL); w.pod<uint8_t>(1);
    w.key("t.str", GGUFType::STRING); w.str("h\xc3\xa9llo");
    w.key("t.u64", GGUFType::UINT64); w.pod<uint64_t>(UINT64_MAX);
    w.key("t.i64", GGUFType::INT64); w.pod<int64_t>(INT64_MIN);
    w.key("t.f64", GGUFType::FLOAT64); w.pod<double>(-1e300);
    w.key("t.arr_i32", GGUFType::ARRAY); w.pod<uint32_t>(uint32_t(GGUFType::INT32)); w.pod<uint64_t>(3);
    w.pod<int32_t>(-1); w.pod<int32_t>(0); w.pod<int32_t>(7);
    w.key("t.arr_str", GGUFType::ARRAY); w.pod<uint32_t>(uint32_t(GGUFType::STRING)); w.pod<uint64_t>(2);
    w.str("a"); w.str("");
    w.key("t.arr_f32", GGUFType::ARRAY); w.pod<uint32_t>(uint32_t(GGUFType::FLOAT32)); w.pod<uint64_t>(2);
    w.pod<float>(1.5f); w.pod<float>(-2.0f);
    w.key("t.arr_empty", GGUFType::ARRAY); w.pod<uint32_t>(uint32_t(GGUFType::UINT8)); w.pod<uint64_t>(0);
    w.tensor("a", {32, 2}, DType::Q8_0, 0);       // 2 blocks of 34 bytes = 68, padded to 128
    w.tensor("b", {3}, DType::F32, 128);
    w.pad(64);
    const size_t data_at = w.b.size();
    for (int i = 0; i < 128 + 12; i++) w.b.push_back(uint8_t(i));

    auto f = GGUFFile::from_memory(w.b.data(), w.b.size(), "synthetic.gguf");
    EXPECT_EQ(f->version(), 2u);
    EXPECT_EQ(f->alignment(), 64u);
    EXPECT_EQ(f->data_offset(), data_at);
    EXPECT_EQ(f->get_u64("t.u8"), 200u);
    EXPECT_EQ(f->get_i64("t.i8"), -100);
    EXPECT_EQ(f->get_u64("t.u16"), 60000u);
    EXPECT_EQ(f->get_i64("t.i16"), -30000);
    EXPECT_EQ(f->get_u64("t.u32"), 4000000000u);
    EXPECT_EQ(f->get_i64("t.u32"), 4000000000);
    EXPECT_EQ(f->get_i64("t.i32"), -2000000000);
    EXPECT_THROW(f->get_u64("t.i32"), Error);  // negative
    EXPECT_EQ(f->get_f64("t.f32"), 0.25);
    EXPECT_TRUE(f->get_bool("t.bool"));
    EXPECT_EQ(f->get_string("t.str"), "h\xc3\xa9llo");
    EXPECT_EQ(f->get_u64("t.u64"), UINT64_MAX);
    EXPECT_THROW(f->get_i64("t.u64"), Error);  // does not fit
    EXPECT_EQ(f->get_i64("t.i64"), INT64_MIN);
    EXPECT_EQ(f->get_f64("t.f64"), -1e300);
    EXPECT_EQ(f->get_i32_array("t.arr_i32"), (std::vector<int32_t>{-1, 0, 7}));
    EXPECT_EQ(f->get_string_array("t.arr_str"), (std::vector<std::string>{"a", ""}));
    EXPECT_EQ(f->get_f32_array("t.arr_f32"), (std::vector<float>{1.5f, -2.0f}));
    EXPECT_EQ(f->find_value("t.arr_empty")->array_size(), 0u);
    EXPECT_EQ(f->find_value("t.arr_empty")->elem_type, GGUFType::UINT8);
    EXPECT_EQ(f->value_str("t.arr_i32"), "[-1, 0, 7]");
    EXPECT_EQ(f->value_str("t.f32"), "0.25");
    EXPECT_EQ(f->value_str("t.bool"), "true");
    EXPECT_EQ(f->value_str("t.str", 5), "\"h...");
    ASSERT_EQ(f->tensors().size(), 2u);
    EXPECT_EQ(f->tensors()[0].nbytes, 68u);
    EXPECT_EQ(f->tensors()[0].data, w.b.data() + data_at);
    EXPECT_EQ(f->tensors()[1].data, w.b.data() + data_at + 128);
    EXPECT_EQ(f->tensors()[1].nbytes, 12u);
    EXPECT_EQ(f->tensors()[0].row(1), w.b.data() + data_at + 34);
}

TEST(GGUFSynthetic, Rejects) {
    auto one_kv = [](const std::function<void(Builder&)>& kv) {
        Builder w;
        w.header(3, 0, 1);
        kv(w);
        return w.b;
    };
    expect_reject(one_kv([](Builder& w) { w.key("general.alignment", GGUFType::UINT32); w.pod<uint32_t>(48); }),
                  "general.alignment 48 is not a power of two");
    expect_reject(one_kv([](Builder& w) { w.key("general.alignment", GGUFType::UINT32); w.pod<uint32_t>(0); }),
                  "not a power of two");
    expect_reject(one_kv([](Builder& w) { w.key("general.alignment", GGUFType::UINT32); w.pod<uint32_t>(4); }),
                  "not a power of two in [8, 2^30]");
    expect_reject(one_kv([](Builder& w) { w.key("general.alignment", GGUFType::STRING); w.str("32"); }),
                  "general.alignment");
    expect_reject(one_kv([](Builder& w) { w.key("x.b", GGUFType::BOOL); w.pod<uint8_t>(2); }), "neither 0 nor 1");
    expect_reject(one_kv([](Builder& w) {
                      w.key("x.nest", GGUFType::ARRAY);
                      w.pod<uint32_t>(uint32_t(GGUFType::ARRAY));
                      w.pod<uint64_t>(1);
                  }),
                  "nested arrays");
    expect_reject(one_kv([](Builder& w) {
                      w.key("x.arr", GGUFType::ARRAY);
                      w.pod<uint32_t>(uint32_t(GGUFType::UINT64));
                      w.pod<uint64_t>(uint64_t(1) << 61);  // 2^64 bytes: must fail before allocating
                  }),
                  "cannot fit");
    expect_reject(one_kv([](Builder& w) {
                      w.key("x.arr", GGUFType::ARRAY);
                      w.pod<uint32_t>(77);
                      w.pod<uint64_t>(1);
                  }),
                  "unknown array element type 77");

    // Tensor-level defects.
    auto one_tensor = [](std::vector<uint64_t> dims, DType t, uint64_t offset, size_t data_bytes) {
        Builder w;
        w.header(3, 1, 0);
        w.tensor("w", dims, t, offset);
        w.pad(32);
        w.b.resize(w.b.size() + data_bytes);
        return w.b;
    };
    expect_reject(one_tensor({48, 2}, DType::Q4_0, 0, 1024), "row length 48 is not a multiple of the Q4_0 block size 32");
    expect_reject(one_tensor({1, 1, 1, 1, 1}, DType::F32, 0, 64), "has 5 dimensions");
    expect_reject(one_tensor({}, DType::F32, 0, 64), "has 0 dimensions");
    expect_reject(one_tensor({4, 0}, DType::F32, 0, 64), "dimension 1 is 0");
    expect_reject(one_tensor({uint64_t(1) << 63, 1}, DType::F32, 0, 64), "must be positive");
    expect_reject(one_tensor({uint64_t(1) << 40, uint64_t(1) << 40}, DType::F32, 0, 64), "element count overflows");
    expect_reject(one_tensor({uint64_t(1) << 62}, DType::F32, 0, 64), "byte size overflows");
    expect_reject(one_tensor({16}, DType::F32, 0, 63), "runs past the end of the file");
    expect_reject(one_tensor({16}, DType::F32, UINT64_MAX - 31, 64), "runs past the end of the file");
    expect_reject(one_tensor({16}, DType::F32, 16, 64), "not a multiple of the alignment 32");

    Builder w;  // two tensors sharing bytes
    w.header(3, 2, 0);
    w.tensor("a", {16}, DType::F32, 0);
    w.tensor("b", {8}, DType::F32, 32);
    w.pad(32);
    w.b.resize(w.b.size() + 64);
    expect_reject(w.b, "overlaps tensor 'a'");
}

// ---------------------------------------------------------------------------------------------
// Corrupted copies of a real file (stories260K.gguf: 22 keys, 48 tensors, data at 14176)

TEST(GGUFCorrupt, TruncatedAnywhere) {
    const std::vector<uint8_t> f = read_all(kStories);
    const size_t data_offset = 14176;  // gguf-py
    ASSERT_NO_THROW(GGUFFile::from_memory(f.data(), f.size(), "whole.gguf"));
    // Every length through the header, metadata and tensor infos (and the padding after them),
    for (size_t n = 0; n <= data_offset; n++) expect_reject(f, "", n);
    // and sampled lengths inside the tensor data.
    for (size_t n = data_offset + 1; n < f.size(); n += 4093) expect_reject(f, "runs past the end", n);
    expect_reject(f, "runs past the end", f.size() - 1);
}

TEST(GGUFCorrupt, TruncatedSmolLM2Sampled) {
    const std::vector<uint8_t> f = read_all(kSmol);
    const size_t data_offset = 1785664;  // gguf-py
    for (size_t n = 0; n < data_offset; n += 1 + n / 4 + 7919 * (n > 4096)) expect_reject(f, "", n);
    expect_reject(f, "runs past the end", f.size() - 1);
}

TEST(GGUFCorrupt, HeaderFields) {
    const std::vector<uint8_t> orig = read_all(kStories);
    std::vector<uint8_t> f;
    auto fresh = [&] { f = orig; };

    fresh(); f[3] = 'X'; expect_reject(f, "magic is \"GGUX\"");
    fresh(); put<uint32_t>(f, 4, 1); expect_reject(f, "GGUF version 1 is not supported");
    fresh(); put<uint32_t>(f, 4, 4); expect_reject(f, "unknown GGUF version 4");
    fresh(); put<uint32_t>(f, 4, 0x03000000); expect_reject(f, "big-endian");
    fresh(); put<uint64_t>(f, 8, uint64_t(1) << 62); expect_reject(f, "tensor count");
    fresh(); put<uint64_t>(f, 16, uint64_t(1) << 62); expect_reject(f, "metadata count");
    fresh(); put<uint64_t>(f, 16, 23); expect_reject(f, "");  // one key too many: tensor infos misread
    fresh(); put<uint64_t>(f, 24, uint64_t(1) << 40); expect_reject(f, "metadata key has length 1099511627776");
    fresh(); put<uint64_t>(f, 24, UINT64_MAX); expect_reject(f, "has length");

    // A string inside the token array, and the token array's length.
    const size_t tokens_key = find_gguf_string(orig, "tokenizer.ggml.tokens");
    const size_t tokens_len = tokens_key + 8 + 21 + 4 + 4;  // key, type ARRAY, element type
    ASSERT_EQ(get<uint64_t>(orig, tokens_len), 512u);
    fresh(); put<uint64_t>(f, tokens_len, uint64_t(1) << 59); expect_reject(f, "cannot fit");
    fresh(); put<uint64_t>(f, tokens_len + 8, uint64_t(1) << 50); expect_reject(f, "array string has length");
    // Nested array, unknown value type, duplicate key.
    const size_t scores_key = find_gguf_string(orig, "tokenizer.ggml.scores");
    fresh(); put<uint32_t>(f, scores_key + 8 + 21 + 4, 9); expect_reject(f, "nested arrays are not supported");
    fresh(); put<uint32_t>(f, scores_key + 8 + 21, 13); expect_reject(f, "unknown value type 13");
    const size_t eos_key = find_gguf_string(orig, "tokenizer.ggml.eos_token_id");
    fresh(); f[eos_key + 8 + 15] = 'b'; expect_reject(f, "duplicate metadata key 'tokenizer.ggml.bos_token_id'");

    // Tensor infos.
    const TensorInfoAt emb = tensor_info_at(orig, "token_embd.weight");
    const TensorInfoAt outw = tensor_info_at(orig, "output.weight");
    const TensorInfoAt k0 = tensor_info_at(orig, "blk.0.attn_k.weight");
    ASSERT_EQ(get<uint32_t>(orig, emb.n_dims), 2u);
    ASSERT_EQ(get<uint64_t>(orig, emb.dims), 64u);
    fresh(); put<uint32_t>(f, emb.type, 99); expect_reject(f, "tensor 'token_embd.weight' has unknown or unsupported type 99");
    fresh(); put<uint32_t>(f, emb.type, uint32_t(DType::Q4_K)); expect_reject(f, "not a multiple of the Q4_K block size 256");
    fresh(); put<uint64_t>(f, emb.dims, 0); expect_reject(f, "tensor 'token_embd.weight' dimension 0 is 0");
    fresh(); put<uint64_t>(f, emb.dims + 8, uint64_t(1) << 40); expect_reject(f, "runs past the end of the file");
    fresh(); put<uint64_t>(f, emb.dims, uint64_t(1) << 62); expect_reject(f, "element count overflows");
    fresh(); put<uint32_t>(f, emb.n_dims, 0); expect_reject(f, "has 0 dimensions");
    fresh(); put<uint32_t>(f, emb.n_dims, 7); expect_reject(f, "has 7 dimensions");
    fresh(); put<uint64_t>(f, outw.offset, orig.size()); expect_reject(f, "tensor 'output.weight' data [offset");
    fresh(); put<uint64_t>(f, outw.offset, get<uint64_t>(orig, outw.offset) + 4); expect_reject(f, "not a multiple of the alignment 32");
    fresh(); put<uint64_t>(f, outw.offset, 0); expect_reject(f, "overlaps tensor");
    fresh(); put<uint64_t>(f, outw.offset, 64); expect_reject(f, "overlaps tensor");
    fresh(); f[k0.name + 8 + 11] = 'q'; expect_reject(f, "duplicate tensor name 'blk.0.attn_q.weight'");
    fresh(); put<uint64_t>(f, k0.name, uint64_t(1) << 33); expect_reject(f, "tensor name has length");
}

TEST(GGUFCorrupt, RandomByteFlipsNeverCrash) {
    // Random damage in the header region: each copy either parses or throws ridge::Error.
    const std::vector<uint8_t> orig = read_all(kStories);
    std::mt19937 rng(1234);
    int rejected = 0;
    for (int it = 0; it < 3000; it++) {
        std::vector<uint8_t> f(orig.begin(), orig.begin() + 14176 + 4096);
        const int n_flips = 1 + int(rng() % 4);
        for (int k = 0; k < n_flips; k++) {
            size_t at = rng() % 14176;
            f[at] = (rng() % 2) ? uint8_t(rng()) : uint8_t(f[at] ^ (1u << (rng() % 8)));
        }
        try {
            GGUFFile::from_memory(f.data(), f.size(), "flipped.gguf");
        } catch (const Error& e) {
            rejected++;
            ASSERT_EQ(std::string(e.what()).rfind("flipped.gguf: ", 0), 0u) << e.what();
        }
    }
    EXPECT_GT(rejected, 100);  // the copies are cut inside the tensor data, so most must fail
}

TEST(GGUFCorrupt, TruncatedFileOnDisk) {
    // Through the path-based API, as `ridge info` uses it.
    std::vector<uint8_t> f = read_all(kStories);
    f.resize(12000);
    const std::string path = ::testing::TempDir() + "truncated-stories-" + std::to_string(::getpid()) + ".gguf";
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(f.data()), std::streamsize(f.size()));
    try {
        ModelFile::open(path);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find("bytes remain"), std::string::npos) << e.what();
    }
}

// ---------------------------------------------------------------------------------------------
// config_from_gguf on synthetic metadata: defaults and consistency checks

namespace {
struct KV {
    std::string key;
    GGUFType type;
    uint64_t u = 0;
    float f = 0;
    std::string s{};  // (an initializer, so that entries may leave it out without a warning)
};
std::vector<uint8_t> llama_file(const std::vector<KV>& kvs) {
    Builder w;
    w.header(3, 0, kvs.size());
    for (const KV& kv : kvs) {
        w.key(kv.key, kv.type);
        if (kv.type == GGUFType::UINT32) w.pod<uint32_t>(uint32_t(kv.u));
        else if (kv.type == GGUFType::FLOAT32) w.pod<float>(kv.f);
        else if (kv.type == GGUFType::STRING) w.str(kv.s);
    }
    return w.b;
}
std::vector<KV> minimal_llama() {
    return {{"general.architecture", GGUFType::STRING, 0, 0, "llama"},
            {"llama.embedding_length", GGUFType::UINT32, 256},
            {"llama.block_count", GGUFType::UINT32, 2},
            {"llama.feed_forward_length", GGUFType::UINT32, 512},
            {"llama.attention.head_count", GGUFType::UINT32, 8},
            {"llama.context_length", GGUFType::UINT32, 1024},
            {"llama.vocab_size", GGUFType::UINT32, 1000}};
}
Config config_of(const std::vector<KV>& kvs) {
    auto bytes = llama_file(kvs);
    auto f = GGUFFile::from_memory(bytes.data(), bytes.size(), "cfg.gguf");
    return config_from_gguf(*f);
}
void expect_config_error(const std::vector<KV>& kvs, const std::string& needle) {
    try {
        config_of(kvs);
        ADD_FAILURE() << "accepted; wanted '" << needle << "'";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("cfg.gguf: ", 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}
}  // namespace

TEST(GGUFConfig, Defaults) {
    Config c = config_of(minimal_llama());
    EXPECT_EQ(c.head_dim, 32);           // 256 / 8
    EXPECT_EQ(c.n_kv_heads, 8);          // head_count_kv absent: = head_count
    EXPECT_EQ(c.rope_dim, 32);           // rope.dimension_count absent: = head_dim
    EXPECT_EQ(c.rope_freq_base, 10000.0f);
    EXPECT_EQ(c.norm_eps, 1e-5f);
    EXPECT_EQ(c.n_vocab, 1000);
    EXPECT_TRUE(c.tied_output);          // no output.weight
}

TEST(GGUFConfig, Rejects) {
    auto with = [](std::vector<KV> kvs, KV extra) {
        for (KV& kv : kvs)
            if (kv.key == extra.key) {
                kv = extra;
                return kvs;
            }
        kvs.push_back(extra);
        return kvs;
    };
    auto without = [](std::vector<KV> kvs, const std::string& key) {
        std::erase_if(kvs, [&](const KV& kv) { return kv.key == key; });
        return kvs;
    };
    const auto base = minimal_llama();
    expect_config_error(with(base, {"llama.attention.head_count", GGUFType::UINT32, 7}), "not a multiple of llama.attention.head_count 7");
    expect_config_error(with(base, {"llama.attention.head_count_kv", GGUFType::UINT32, 3}), "head_count_kv 3");
    expect_config_error(with(base, {"llama.rope.dimension_count", GGUFType::UINT32, 64}), "rope.dimension_count 64");
    expect_config_error(with(base, {"llama.block_count", GGUFType::UINT32, 0}), "llama.block_count' is 0");
    expect_config_error(with(base, {"llama.block_count", GGUFType::STRING, 0, 0, "two"}), "llama.block_count' has type STRING");
    expect_config_error(with(base, {"general.architecture", GGUFType::STRING, 0, 0, "gemma2"}),
                        "'gemma2', ridge supports llama, qwen2, qwen3");
    expect_config_error(without(base, "llama.embedding_length"), "'llama.embedding_length' is missing");
    expect_config_error(without(base, "llama.vocab_size"), "vocabulary size");
    expect_config_error(with(with(base, {"llama.attention.key_length", GGUFType::UINT32, 64}),
                             {"llama.attention.value_length", GGUFType::UINT32, 32}),
                        "value_length 32 differs from llama.attention.key_length 64");
    expect_config_error(with(base, {"llama.rope.freq_base", GGUFType::FLOAT32, 0, -1.0f}), "freq_base");
}
