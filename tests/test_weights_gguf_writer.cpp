// Tests for GGUFWriter and quantize_model: a file with every metadata type and a few tensors is
// written and read back with GGUFFile (values, types, shapes, bytes, alignment, padding); bad
// values, bad tensors and abandoned writes leave no file behind; stories260K rewritten as F32 is
// the same model (metadata, bytes), as Q8_0 / F16 / BF16 / Q4_0 it dequantizes close to the
// original, and rewriting SmolLM2 to its own type copies every tensor unchanged.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "weights/gguf.h"
#include "weights/gguf_writer.h"
#include "weights/quant.h"
#include "weights/quantize_model.h"
#include "shared_testdata.h"
#include "test_paths.h"

RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/stories260K.bin");

using namespace ridge;

namespace {

const std::string kStories = std::string(RIDGE_TESTDATA_DIR) + "/gguf-stories260K/stories260K.gguf";
const std::string kStoriesBin = std::string(RIDGE_TESTDATA_DIR) + "/llama2c-stories260K/stories260K.bin";
const std::string kSmol = std::string(RIDGE_MODELS_DIR) + "/SmolLM2-135M-Instruct.Q4_1.gguf";

// A fresh path in this process's own directory (ctest runs the cases as parallel processes).
std::string scratch(const std::string& name) {
    static int n = 0;
    const std::string dir = ::testing::TempDir() + "ridge_gguf_writer_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    return dir + "/" + std::to_string(n++) + "_" + name;
}

bool exists(const std::string& p) { return std::filesystem::exists(p); }

std::vector<uint8_t> read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

GGUFValue scalar(GGUFType t) {
    GGUFValue v;
    v.type = t;
    return v;
}
GGUFValue u(GGUFType t, uint64_t x) { GGUFValue v = scalar(t); v.u = x; return v; }
GGUFValue i(GGUFType t, int64_t x) { GGUFValue v = scalar(t); v.i = x; return v; }
GGUFValue f(GGUFType t, double x) { GGUFValue v = scalar(t); v.f = x; return v; }
GGUFValue s(const std::string& x) { GGUFValue v = scalar(GGUFType::STRING); v.s = x; return v; }
GGUFValue ints(GGUFType et, std::vector<int64_t> x) {
    GGUFValue v = scalar(GGUFType::ARRAY);
    v.elem_type = et;
    v.ints = std::move(x);
    return v;
}
GGUFValue floats(GGUFType et, std::vector<double> x) {
    GGUFValue v = scalar(GGUFType::ARRAY);
    v.elem_type = et;
    v.floats = std::move(x);
    return v;
}
GGUFValue strings(std::vector<std::string> x) {
    GGUFValue v = scalar(GGUFType::ARRAY);
    v.elem_type = GGUFType::STRING;
    v.strings = std::move(x);
    return v;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Field by field, in the reader's representation.
void expect_same_value(const std::string& key, const GGUFValue& a, const GGUFValue& b) {
    ASSERT_EQ(a.type, b.type) << key;
    switch (a.type) {
        case GGUFType::UINT8: case GGUFType::UINT16: case GGUFType::UINT32: case GGUFType::UINT64:
            EXPECT_EQ(a.u, b.u) << key;
            break;
        case GGUFType::INT8: case GGUFType::INT16: case GGUFType::INT32: case GGUFType::INT64: case GGUFType::BOOL:
            EXPECT_EQ(a.i, b.i) << key;
            break;
        case GGUFType::FLOAT32: case GGUFType::FLOAT64: EXPECT_TRUE(same_bits(a.f, b.f)) << key << " " << a.f << " " << b.f; break;
        case GGUFType::STRING: EXPECT_EQ(a.s, b.s) << key; break;
        case GGUFType::ARRAY:
            ASSERT_EQ(a.elem_type, b.elem_type) << key;
            EXPECT_EQ(a.ints, b.ints) << key;
            EXPECT_EQ(a.strings, b.strings) << key;
            ASSERT_EQ(a.floats.size(), b.floats.size()) << key;
            for (size_t k = 0; k < a.floats.size(); k++) EXPECT_TRUE(same_bits(a.floats[k], b.floats[k])) << key << "[" << k << "]";
            break;
    }
}

// Same keys, types and values, except the keys in `except`.
void expect_same_metadata(const GGUFMetadata& a, const GGUFMetadata& b, const std::set<std::string>& except = {}) {
    for (const auto& [key, value] : a) {
        if (except.count(key)) continue;
        auto it = b.find(key);
        ASSERT_NE(it, b.end()) << key << " missing";
        expect_same_value(key, value, it->second);
    }
    for (const auto& [key, value] : b)
        if (!except.count(key)) {
            EXPECT_TRUE(a.count(key)) << key << " added";
        }
}

// Every scalar type (with edge values) and every array element type.
GGUFMetadata every_type() {
    GGUFMetadata kv;
    kv["general.alignment"] = u(GGUFType::UINT32, 64);
    kv["t.u8"] = u(GGUFType::UINT8, 255);
    kv["t.i8"] = i(GGUFType::INT8, -128);
    kv["t.u16"] = u(GGUFType::UINT16, 65535);
    kv["t.i16"] = i(GGUFType::INT16, -32768);
    kv["t.u32"] = u(GGUFType::UINT32, 4294967295u);
    kv["t.i32"] = i(GGUFType::INT32, std::numeric_limits<int32_t>::min());
    kv["t.u64"] = u(GGUFType::UINT64, std::numeric_limits<uint64_t>::max());
    kv["t.i64"] = i(GGUFType::INT64, std::numeric_limits<int64_t>::min());
    kv["t.f32"] = f(GGUFType::FLOAT32, double(0.1f));
    kv["t.f32.neg0"] = f(GGUFType::FLOAT32, -0.0);
    kv["t.f64"] = f(GGUFType::FLOAT64, 1e-300);
    kv["t.f64.inf"] = f(GGUFType::FLOAT64, -std::numeric_limits<double>::infinity());
    kv["t.bool.true"] = i(GGUFType::BOOL, 1);
    kv["t.bool.false"] = i(GGUFType::BOOL, 0);
    kv["t.str"] = s(std::string("h\xc3\xa9llo\0world\n", 13));
    kv["t.str.empty"] = s("");
    kv["t.a.u8"] = ints(GGUFType::UINT8, {0, 1, 255});
    kv["t.a.i8"] = ints(GGUFType::INT8, {-128, 0, 127});
    kv["t.a.u16"] = ints(GGUFType::UINT16, {65535});
    kv["t.a.i16"] = ints(GGUFType::INT16, {-32768, 32767});
    kv["t.a.u32"] = ints(GGUFType::UINT32, {4294967295ll, 7});
    kv["t.a.i32"] = ints(GGUFType::INT32, {-5, 2147483647});
    kv["t.a.u64"] = ints(GGUFType::UINT64, {-1 /* = 2^64 - 1 as the reader stores it */, 3});
    kv["t.a.i64"] = ints(GGUFType::INT64, {std::numeric_limits<int64_t>::max(), -9});
    kv["t.a.bool"] = ints(GGUFType::BOOL, {1, 0, 1});
    kv["t.a.f32"] = floats(GGUFType::FLOAT32, {double(1.5f), double(-1e-5f), double(3.14159f)});
    kv["t.a.f64"] = floats(GGUFType::FLOAT64, {1.0 / 3.0, -2.5e300});
    kv["t.a.str"] = strings({"<s>", "", "\xe2\x96\x81the", std::string("a\0b", 3)});
    kv["t.a.empty"] = ints(GGUFType::INT32, {});
    kv["t.a.str.empty"] = strings({});
    return kv;
}

struct TestTensor {
    GGUFTensorSpec spec;
    std::vector<uint8_t> bytes;
};

// Tensors of several types and ranks whose sizes are not multiples of the alignment.
std::vector<TestTensor> test_tensors() {
    std::vector<TestTensor> ts = {
        {{"norm.weight", DType::F32, {7}}, {}},
        {{"q8.weight", DType::Q8_0, {64, 3}}, {}},
        {{"f16.weight", DType::F16, {5, 2, 3}}, {}},
        {{"q41.weight", DType::Q4_1, {32, 1}}, {}},
        {{"bf16.weight", DType::BF16, {2, 2, 2, 2}}, {}},
    };
    uint32_t x = 12345;
    for (TestTensor& t : ts) {
        t.bytes.resize(t.spec.nbytes());
        for (uint8_t& b : t.bytes) b = uint8_t((x = x * 1103515245u + 12345u) >> 16);
    }
    return ts;
}

std::vector<GGUFTensorSpec> specs_of(const std::vector<TestTensor>& ts) {
    std::vector<GGUFTensorSpec> specs;
    for (const TestTensor& t : ts) specs.push_back(t.spec);
    return specs;
}

// Writes `ts` after `kv` to `path`, each tensor in pieces of up to 5 bytes.
void write_file(const std::string& path, const GGUFMetadata& kv, const std::vector<TestTensor>& ts) {
    GGUFWriter w(path, kv, specs_of(ts));
    for (const TestTensor& t : ts)
        for (size_t at = 0; at < t.bytes.size(); at += 5) w.write(t.bytes.data() + at, std::min<size_t>(5, t.bytes.size() - at));
    w.close();
}

// Max |a - b| over the dequantized elements of two tensors of the same shape.
double max_abs_diff(const TensorView& a, const TensorView& b) {
    EXPECT_EQ(a.shape, b.shape) << a.name;
    const int64_t ne0 = a.shape[0], rows = a.n_elements() / ne0;
    std::vector<float> ra(ne0), rb(ne0);
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        dequantize_row(a.type, a.row(r), ra.data(), ne0);
        dequantize_row(b.type, b.row(r), rb.data(), ne0);
        for (int64_t k = 0; k < ne0; k++) worst = std::max(worst, double(std::fabs(ra[k] - rb[k])));
    }
    return worst;
}

double max_abs(const TensorView& a) {
    const int64_t ne0 = a.shape[0], rows = a.n_elements() / ne0;
    std::vector<float> ra(ne0);
    double m = 0;
    for (int64_t r = 0; r < rows; r++) {
        dequantize_row(a.type, a.row(r), ra.data(), ne0);
        for (float v : ra) m = std::max(m, double(std::fabs(v)));
    }
    return m;
}

template <class F>
void expect_error(F&& fn, const std::string& needle) {
    try {
        fn();
        ADD_FAILURE() << "no error; wanted one containing '" << needle << "'";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find(needle), std::string::npos) << "wanted '" << needle << "' in: " << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    }
}

// ---- the writer ---------------------------------------------------------------------------------

TEST(GGUFWriter, EveryMetadataTypeAndTensorsRoundTrip) {
    const std::string path = scratch("every_type.gguf");
    const GGUFMetadata kv = every_type();
    const std::vector<TestTensor> ts = test_tensors();
    write_file(path, kv, ts);
    EXPECT_FALSE(exists(path + ".tmp"));

    auto g = GGUFFile::open(path);
    EXPECT_EQ(g->version(), 3u);
    EXPECT_EQ(g->alignment(), 64u);
    EXPECT_EQ(g->data_offset() % 64, 0u);
    EXPECT_EQ(g->file_size() % 64, 0u) << "the last tensor is padded too";
    expect_same_metadata(kv, g->metadata());
    ASSERT_EQ(g->tensors().size(), ts.size());
    size_t expected_offset = 0;
    for (size_t k = 0; k < ts.size(); k++) {
        const TensorView& t = g->tensors()[k];
        EXPECT_EQ(t.name, ts[k].spec.name);
        EXPECT_EQ(t.type, ts[k].spec.type) << t.name;
        EXPECT_EQ(t.shape, ts[k].spec.shape) << t.name;
        ASSERT_EQ(t.nbytes, ts[k].bytes.size()) << t.name;
        EXPECT_EQ(std::memcmp(t.data, ts[k].bytes.data(), t.nbytes), 0) << t.name;
        const size_t off = size_t(t.data - g->data()) - g->data_offset();
        EXPECT_EQ(off % 64, 0u) << t.name;
        EXPECT_EQ(off, expected_offset) << t.name << ": tensors are packed in order, each padded to the alignment";
        expected_offset = (off + t.nbytes + 63) / 64 * 64;
    }
    // The header as the spec lays it out: "GGUF", u32 version, u64 tensor count, u64 key count.
    const std::vector<uint8_t> bytes = read_all(path);
    ASSERT_GE(bytes.size(), 24u);
    EXPECT_EQ(std::memcmp(bytes.data(), "GGUF", 4), 0);
    uint32_t version;
    uint64_t n_tensors, n_kv;
    std::memcpy(&version, bytes.data() + 4, 4);
    std::memcpy(&n_tensors, bytes.data() + 8, 8);
    std::memcpy(&n_kv, bytes.data() + 16, 8);
    EXPECT_EQ(version, 3u);
    EXPECT_EQ(n_tensors, ts.size());
    EXPECT_EQ(n_kv, kv.size());
    // The padding is zeros.
    for (size_t k = 0; k < ts.size(); k++) {
        const TensorView& t = g->tensors()[k];
        const size_t end = size_t(t.data - g->data()) + t.nbytes;
        const size_t next = k + 1 < ts.size() ? size_t(g->tensors()[k + 1].data - g->data()) : bytes.size();
        for (size_t at = end; at < next; at++) ASSERT_EQ(bytes[at], 0) << "padding after " << t.name << " at " << at;
    }
}

TEST(GGUFWriter, RewritingWhatWasReadGivesTheSameBytes) {
    const std::string a = scratch("a.gguf"), b = scratch("b.gguf");
    write_file(a, every_type(), test_tensors());
    auto g = GGUFFile::open(a);
    std::vector<GGUFTensorSpec> specs;
    for (const TensorView& t : g->tensors()) specs.push_back({t.name, t.type, t.shape});
    GGUFWriter w(b, g->metadata(), specs);
    for (const TensorView& t : g->tensors()) w.write(t.data, t.nbytes);
    EXPECT_EQ(w.current_tensor(), specs.size());
    w.close();
    EXPECT_EQ(read_all(a), read_all(b));
}

TEST(GGUFWriter, DefaultAlignmentIs32AndNoTensorsIsAValidFile) {
    const std::string path = scratch("default_alignment.gguf");
    GGUFMetadata kv;
    kv["general.architecture"] = s("llama");
    std::vector<TestTensor> ts = {{{"w", DType::F32, {3}}, std::vector<uint8_t>(12, 1)},
                                  {{"v", DType::F32, {5}}, std::vector<uint8_t>(20, 2)}};
    write_file(path, kv, ts);
    auto g = GGUFFile::open(path);
    EXPECT_EQ(g->alignment(), 32u);
    EXPECT_EQ(g->data_offset() % 32, 0u);
    EXPECT_EQ(size_t(g->tensors()[1].data - g->data()) - g->data_offset(), 32u);

    const std::string empty = scratch("no_tensors.gguf");
    GGUFWriter w(empty, kv, {});
    w.close();
    auto e = GGUFFile::open(empty);
    EXPECT_EQ(e->tensors().size(), 0u);
    EXPECT_EQ(e->get_string("general.architecture"), "llama");
}

TEST(GGUFWriter, BadValuesAndTensorsAreRejectedBeforeAnyFileExists) {
    const std::string path = scratch("bad.gguf");
    auto reject_kv = [&](const std::string& key, const GGUFValue& v, const std::string& needle) {
        GGUFMetadata kv;
        kv[key] = v;
        expect_error([&] { GGUFWriter w(path, kv, {}); }, needle);
        EXPECT_FALSE(exists(path));
        EXPECT_FALSE(exists(path + ".tmp"));
    };
    reject_kv("k.u8", u(GGUFType::UINT8, 256), "does not fit in UINT8");
    reject_kv("k.i16", i(GGUFType::INT16, 40000), "does not fit in INT16");
    reject_kv("k.bool", i(GGUFType::BOOL, 2), "neither 0 nor 1");
    reject_kv("k.a.u8", ints(GGUFType::UINT8, {1, -1}), "does not fit in UINT8");
    reject_kv("k.a.bool", ints(GGUFType::BOOL, {3}), "neither 0 nor 1");
    reject_kv("k.nested", floats(GGUFType::ARRAY, {}), "nested arrays");
    reject_kv("general.alignment", u(GGUFType::UINT32, 48), "power of two");
    reject_kv("general.alignment", s("32"), "expected an unsigned integer");

    auto reject_tensors = [&](std::vector<GGUFTensorSpec> specs, const std::string& needle) {
        expect_error([&] { GGUFWriter w(path, {}, specs); }, needle);
        EXPECT_FALSE(exists(path));
        EXPECT_FALSE(exists(path + ".tmp"));
    };
    reject_tensors({{"a", DType::F32, {4}}, {"a", DType::F32, {4}}}, "duplicate tensor name 'a'");
    reject_tensors({{"q", DType::Q8_0, {48, 2}}}, "row length 48 is not a multiple of the Q8_0 block size 32");
    reject_tensors({{"z", DType::F32, {4, 0}}}, "dimensions must be positive");
    reject_tensors({{"d", DType::F32, {}}}, "0 dimensions");
    reject_tensors({{"d5", DType::F32, {1, 1, 1, 1, 1}}}, "5 dimensions");
}

TEST(GGUFWriter, IncompleteOrAbandonedWritesLeaveNoFile) {
    const std::string path = scratch("incomplete.gguf");
    const std::vector<GGUFTensorSpec> specs = {{"a", DType::F32, {4}}, {"b", DType::F32, {2}}};
    const std::vector<uint8_t> data(16, 7);
    {
        GGUFWriter w(path, {}, specs);
        w.write(data.data(), 16);
        EXPECT_TRUE(exists(path + ".tmp"));
        EXPECT_FALSE(exists(path));
    }  // destroyed without close()
    EXPECT_FALSE(exists(path));
    EXPECT_FALSE(exists(path + ".tmp"));
    {
        GGUFWriter w(path, {}, specs);
        w.write(data.data(), 16);
        w.write(data.data(), 4);
        expect_error([&] { w.close(); }, "tensor 'b' got 4 of its 8 bytes");
    }
    EXPECT_FALSE(exists(path));
    EXPECT_FALSE(exists(path + ".tmp"));
    {
        GGUFWriter w(path, {}, specs);
        EXPECT_THROW(w.write(data.data(), 17), std::logic_error);  // more than tensor 'a' holds
    }
    EXPECT_FALSE(exists(path + ".tmp"));
}

TEST(GGUFWriter, UnwritablePathIsAOneLineError) {
    expect_error([] { GGUFWriter w("/nonexistent-dir-for-ridge/out.gguf", {}, {}); },
                 "/nonexistent-dir-for-ridge/out.gguf: cannot write");
}

// ---- quantize_model -----------------------------------------------------------------------------

TEST(QuantizeModel, TargetNamesAndLlamaFileTypes) {
    auto type_of = [](const char* name) { return quantize_target_from_name(name).value().type; };
    EXPECT_EQ(type_of("q8_0"), DType::Q8_0);
    EXPECT_EQ(type_of("Q4_1"), DType::Q4_1);
    EXPECT_EQ(type_of("bf16"), DType::BF16);
    EXPECT_EQ(type_of("q4_k"), DType::Q4_K);
    EXPECT_EQ(type_of("Q4_K_M"), DType::Q4_K);
    EXPECT_TRUE(quantize_target_from_name("q4_k_m")->mix_m);
    EXPECT_FALSE(quantize_target_from_name("q4_k")->mix_m);
    EXPECT_EQ(quantize_target_from_name("q2_k"), std::nullopt);
    EXPECT_EQ(quantize_target_from_name(""), std::nullopt);
    // llama.cpp's llama_ftype numbers (llama.h).
    auto ftype = [](const char* name) { return quantize_target_from_name(name).value().ftype; };
    EXPECT_EQ(ftype("f32"), 0u);
    EXPECT_EQ(ftype("f16"), 1u);
    EXPECT_EQ(ftype("q4_0"), 2u);
    EXPECT_EQ(ftype("q4_1"), 3u);
    EXPECT_EQ(ftype("q8_0"), 7u);
    EXPECT_EQ(ftype("q5_0"), 8u);
    EXPECT_EQ(ftype("q5_1"), 9u);
    EXPECT_EQ(ftype("q4_k"), 14u);  // LLAMA_FTYPE_MOSTLY_Q4_K_S, as llama-quantize --pure writes
    EXPECT_EQ(ftype("q4_k_m"), 15u);
    EXPECT_EQ(ftype("q5_k"), 16u);
    EXPECT_EQ(ftype("q5_k_m"), 17u);
    EXPECT_EQ(ftype("q6_k"), 18u);
    EXPECT_EQ(ftype("bf16"), 32u);
    EXPECT_EQ(quantize_target_of(DType::Q4_K).name, std::string("q4_k"));
    expect_error([] { quantize_target_of(DType::Q2_K); }, "cannot quantize to Q2_K");
}

TEST(QuantizeModel, Stories260kAsF32IsTheSameModel) {
    const std::string out = scratch("stories.f32.gguf");
    const QuantizeSummary sum = quantize_model(kStories, out, quantize_target_of(DType::F32));
    auto a = GGUFFile::open(kStories);
    auto b = GGUFFile::open(out);
    EXPECT_EQ(sum.n_tensors, a->tensors().size());
    EXPECT_EQ(sum.n_copied, a->tensors().size()) << "an F32 file rewritten as F32 copies every tensor";
    EXPECT_EQ(sum.file_bytes_in, a->file_size());
    EXPECT_EQ(sum.file_bytes_out, b->file_size());
    EXPECT_EQ(b->version(), 3u);
    EXPECT_EQ(b->alignment(), a->alignment());
    expect_same_metadata(a->metadata(), b->metadata(), {"general.file_type"});
    EXPECT_EQ(b->get_u64("general.file_type"), 0u);
    EXPECT_FALSE(b->has("general.quantization_version"));
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    for (size_t k = 0; k < a->tensors().size(); k++) {
        const TensorView &ta = a->tensors()[k], &tb = b->tensors()[k];
        EXPECT_EQ(ta.name, tb.name);
        EXPECT_EQ(tb.type, DType::F32);
        EXPECT_EQ(ta.shape, tb.shape);
        ASSERT_EQ(ta.nbytes, tb.nbytes);
        EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0) << ta.name;
        EXPECT_EQ(max_abs_diff(ta, tb), 0.0) << ta.name;
    }
}

TEST(QuantizeModel, Stories260kToEachTypeDequantizesCloseToTheOriginal) {
    auto a = GGUFFile::open(kStories);
    // Worst error per element relative to the tensor's largest magnitude M: Q8_0 rounds to half a
    // step of M/127; Q4_0 and Q5_0 (scale max/-8, max/-16) lose up to one step, M/8 or M/16, where
    // the clamp cuts the side opposite the largest value; Q4_1 rounds to half of range/15 <= 2M/15;
    // f16 and bf16 to a relative 2^-11 and 2^-8. The f16 block scales add about M * 2^-11.
    struct Case {
        DType type;
        double tol;
        uint32_t ftype;
    };
    const double scale = 1e-3;
    for (const Case c : {Case{DType::Q8_0, 0.5 / 127 + scale, 7}, Case{DType::Q4_0, 1.0 / 8 + scale, 2},
                         Case{DType::Q4_1, 0.5 * 2 / 15 + scale, 3}, Case{DType::F16, 1.0 / 2048, 1},
                         Case{DType::BF16, 1.0 / 256, 32}, Case{DType::Q5_0, 1.0 / 16 + scale, 8}}) {
        const std::string name(dtype_name(c.type));
        const std::string out = scratch("stories." + name + ".gguf");
        std::vector<QuantizeTensorReport> reports;
        const QuantizeSummary sum = quantize_model(kStories, out, quantize_target_of(c.type), [&](const QuantizeTensorReport& r) {
            reports.push_back(r);
        });
        auto b = GGUFFile::open(out);
        expect_same_metadata(a->metadata(), b->metadata(), {"general.file_type", "general.quantization_version"});
        EXPECT_EQ(b->get_u64("general.file_type"), c.ftype) << name;
        ASSERT_EQ(reports.size(), a->tensors().size());
        const bool quantized = block_elems(c.type) > 1;
        size_t n_fallback = 0;
        for (size_t k = 0; k < a->tensors().size(); k++) {
            const TensorView &ta = a->tensors()[k], &tb = b->tensors()[k];
            EXPECT_EQ(reports[k].name, ta.name);
            EXPECT_EQ(reports[k].to, tb.type);
            EXPECT_EQ(ta.name, tb.name);
            EXPECT_EQ(ta.shape, tb.shape);
            if (ta.shape.size() == 1) {  // norms: copied unchanged
                EXPECT_EQ(tb.type, DType::F32) << ta.name;
                EXPECT_TRUE(reports[k].copied);
                ASSERT_EQ(ta.nbytes, tb.nbytes);
                EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0) << ta.name;
                continue;
            }
            // stories260K's ffn_down rows have 172 elements: no 32-element blocks fit, F16 instead.
            const bool falls_back = quantized && ta.shape[0] % 32 != 0;
            n_fallback += falls_back;
            EXPECT_EQ(reports[k].fell_back, falls_back) << ta.name;
            EXPECT_EQ(tb.type, falls_back ? DType::F16 : c.type) << name << " " << ta.name;
            const double tol = falls_back ? 1.0 / 2048 : c.tol;
            EXPECT_LE(max_abs_diff(ta, tb), tol * max_abs(ta)) << name << " " << ta.name;
        }
        EXPECT_EQ(n_fallback, quantized ? 5u : 0u) << name;
        EXPECT_EQ(sum.n_fallback, n_fallback);
        EXPECT_EQ(sum.n_copied + sum.n_converted, sum.n_tensors);
        EXPECT_EQ(b->has("general.quantization_version"), quantized) << name;
        if (quantized) {
            EXPECT_EQ(b->get_u64("general.quantization_version"), 2u);
        }
        EXPECT_LT(sum.file_bytes_out, sum.file_bytes_in) << name;
    }
}

TEST(QuantizeModel, SmolLM2ToItsOwnTypeCopiesEveryTensor) {
    if (!exists(kSmol)) GTEST_SKIP() << kSmol << " not downloaded (tools/fetch_model.sh)";
    const std::string out = scratch("smol.q4_1.gguf");
    const QuantizeSummary sum = quantize_model(kSmol, out, quantize_target_of(DType::Q4_1));
    auto a = GGUFFile::open(kSmol);
    auto b = GGUFFile::open(out);
    expect_same_metadata(a->metadata(), b->metadata());  // file_type was already MOSTLY_Q4_1
    EXPECT_EQ(b->get_u64("general.file_type"), 3u);
    ASSERT_EQ(a->tensors().size(), b->tensors().size());
    size_t n_changed = 0;
    for (size_t k = 0; k < a->tensors().size(); k++) {
        const TensorView &ta = a->tensors()[k], &tb = b->tensors()[k];
        EXPECT_EQ(ta.name, tb.name);
        if (ta.type != tb.type) {  // the Q8_0 token embedding becomes Q4_1
            n_changed++;
            EXPECT_EQ(tb.type, DType::Q4_1) << ta.name;
            continue;
        }
        ASSERT_EQ(ta.nbytes, tb.nbytes);
        EXPECT_EQ(std::memcmp(ta.data, tb.data, ta.nbytes), 0) << ta.name;
    }
    EXPECT_EQ(sum.n_converted, n_changed);
    std::filesystem::remove(out);
}

TEST(QuantizeModel, BadInputIsAOneLineErrorAndWritesNothing) {
    const std::string out = scratch("never.gguf");
    auto no_output = [&] {
        EXPECT_FALSE(exists(out));
        EXPECT_FALSE(exists(out + ".tmp"));
    };
    expect_error([&] { quantize_model("/nonexistent/model.gguf", out, quantize_target_of(DType::Q8_0)); }, "/nonexistent/model.gguf: cannot open");
    no_output();
    expect_error([&] { quantize_model(kStoriesBin, out, quantize_target_of(DType::Q8_0)); }, "only GGUF files can be rewritten");
    no_output();
    expect_error([&] { quantize_model(kStories, out, quantize_target_of(DType::Q2_K)); }, "cannot quantize to Q2_K");
    no_output();
    expect_error([&] { quantize_model(kStories, kStories, quantize_target_of(DType::Q8_0)); }, "the output is the input");
    // The same file under another name.
    const std::string dotted = std::filesystem::path(kStories).parent_path().string() + "/./stories260K.gguf";
    expect_error([&] { quantize_model(kStories, dotted, quantize_target_of(DType::Q8_0)); }, "the output is the input");

    // A truncated copy.
    const std::vector<uint8_t> bytes = read_all(kStories);
    const std::string cut = scratch("truncated.gguf");
    std::ofstream(cut, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), 100000);
    expect_error([&] { quantize_model(cut, out, quantize_target_of(DType::Q8_0)); }, "runs past the end of the file");
    no_output();
    expect_error([&] { quantize_model(kStories, "/nonexistent-dir-for-ridge/out.gguf", quantize_target_of(DType::Q8_0)); }, "cannot write");
}

TEST(QuantizeModel, ATypeThatCannotBeDequantizedIsNamed) {
    const std::string in = scratch("q2k.gguf"), out = scratch("q2k.out.gguf");
    std::vector<TestTensor> ts = {{{"norm.weight", DType::F32, {256}}, std::vector<uint8_t>(1024, 0)},
                                  {{"w.weight", DType::Q2_K, {256, 2}}, std::vector<uint8_t>(2 * 84, 0)}};
    write_file(in, {}, ts);
    expect_error([&] { quantize_model(in, out, quantize_target_of(DType::Q8_0)); }, "tensor 'w.weight' has type Q2_K, which ridge cannot dequantize");
    EXPECT_FALSE(exists(out));
    EXPECT_FALSE(exists(out + ".tmp"));
}

}  // namespace
