// make_synthetic_model: the shape table (from each model's public config.json), the tensor list
// in GGUF names, the memory check, and the fill: pools of quantized random rows tiled into one
// anonymous mapping with memcpy (see weights/synthetic.h for why).
#include "weights/synthetic.h"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>

#include "weights/error.h"
#include "weights/gguf.h"
#include "weights/gguf_writer.h"
#include "weights/quant.h"
#include "weights/quantize_model.h"

namespace ridge {

namespace {

constexpr size_t kTensorAlign = 64;           // every tensor starts on a cache line
constexpr size_t kFillChunkBytes = size_t(1) << 20;  // unit of parallel work when tiling

// One row of the shape table.
Config llama_config(int d, int layers, int ff, int heads, int kv_heads, int vocab, int ctx, float rope_base,
                    bool tied) {
    Config c;
    c.arch = "llama";
    c.n_embd = d;
    c.n_layers = layers;
    c.n_ff = ff;
    c.n_heads = heads;
    c.n_kv_heads = kv_heads;
    c.head_dim = d / heads;
    c.n_vocab = vocab;
    c.n_ctx_train = ctx;
    c.rope_dim = c.head_dim;
    c.rope_freq_base = rope_base;
    c.rope_style = RopeStyle::Norm;
    c.norm_eps = 1e-5f;
    c.tied_output = tied;
    return c;
}

std::string lower(std::string s) {
    for (char& ch : s) ch = char(std::tolower((unsigned char)ch));
    return s;
}

// The types quantize_row can write, in the order messages list them.
constexpr DType kTypes[] = {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                            DType::Q8_0, DType::F16,  DType::BF16, DType::F32};

// "4.63 GB": decimal, as memory is usually quoted.
std::string gigabytes(uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GB", double(b) / 1e9);
    return buf;
}

// splitmix64: a tiny, well-mixed generator; its whole state is one counter, so every row of a
// pool gets its own stream from (seed, row length, row) and the result does not depend on how
// OpenMP splits the work.
struct SplitMix64 {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    // Uniform in (0, 1]: 53 random bits, never 0 (Box-Muller takes its log).
    double uniform() { return double((next() >> 11) + 1) * (1.0 / 9007199254740992.0); }
    // Standard normal values, two at a time (Box-Muller).
    void normal_pair(double& a, double& b) {
        const double r = std::sqrt(-2.0 * std::log(uniform()));
        const double phi = 6.283185307179586 * uniform();
        a = r * std::cos(phi);
        b = r * std::sin(phi);
    }
};

uint64_t mix(uint64_t a, uint64_t b) {
    SplitMix64 g{a ^ (b * 0xD1B54A32D192ED03ull)};
    g.next();
    return g.next();
}

// Rows of a pool: at least one, about kSyntheticPoolElems values in all.
int64_t pool_rows(int64_t k) { return std::max<int64_t>(1, kSyntheticPoolElems / k); }

size_t padded(size_t n) { return (n + kTensorAlign - 1) / kTensorAlign * kTensorAlign; }

// Pool of quantized random rows of length k: rows * row_bytes(type, k) bytes whose values are
// normal(0, 1/sqrt(k)).
std::vector<uint8_t> make_pool(DType type, int64_t k, uint64_t seed) {
    const int64_t rows = pool_rows(k);
    const size_t rb = row_bytes(type, k);
    std::vector<uint8_t> pool(size_t(rows) * rb);
    const double stddev = 1.0 / std::sqrt(double(k));
#pragma omp parallel
    {
        std::vector<float> row(size_t(k) + 1);  // (k) values, +1 for the odd Box-Muller partner
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            SplitMix64 g{mix(mix(seed, uint64_t(k)), uint64_t(r))};
            for (int64_t i = 0; i < k; i += 2) {
                double a, b;
                g.normal_pair(a, b);
                row[size_t(i)] = float(a * stddev);
                row[size_t(i) + 1] = float(b * stddev);
            }
            quantize_row(type, row.data(), pool.data() + size_t(r) * rb, k);
        }
    }
    return pool;
}

// The ModelFile of a synthetic model: one anonymous mapping holding every tensor.
class SyntheticModelFile : public ModelFile {
public:
    SyntheticModelFile(const std::string& label, const Config& c, size_t bytes) : bytes_(bytes) {
        format_ = ModelFormat::Synthetic;
        path_ = label;
        config_ = c;
        // MAP_POPULATE: the kernel backs every page in one call, which on this machine (a VM, where
        // each page fault is costly) is faster than faulting pages in one at a time while copying.
        // No MADV_HUGEPAGE: with the kernel's defrag set to "madvise" it makes the first touch
        // several times slower, compacting memory for huge pages it cannot find.
        void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED)
            throw Error(label + ": cannot allocate " + gigabytes(bytes) + " for the weights: " + std::strerror(errno));
        data_ = static_cast<uint8_t*>(p);
        file_base_ = data_;
    }
    ~SyntheticModelFile() override { munmap(data_, bytes_); }
    SyntheticModelFile(const SyntheticModelFile&) = delete;
    SyntheticModelFile& operator=(const SyntheticModelFile&) = delete;

    uint8_t* data() { return data_; }
    std::vector<TensorView>& views() { return tensors_; }

private:
    uint8_t* data_ = nullptr;  // (bytes_) the tensors, each at a multiple of kTensorAlign
    size_t bytes_ = 0;
};

// Copies `len` bytes of the pool, read circularly from byte `from`, to dst.
void copy_from_pool(const std::vector<uint8_t>& pool, size_t from, uint8_t* dst, size_t len) {
    size_t at = from % pool.size();
    while (len > 0) {
        const size_t n = std::min(len, pool.size() - at);
        std::memcpy(dst, pool.data() + at, n);
        dst += n;
        len -= n;
        at = 0;
    }
}

// Where tensor `index` starts reading its pool: a block offset drawn from (seed, index), so no two
// tensors begin with the same bytes.
size_t pool_start(const std::vector<uint8_t>& pool, size_t bb, uint64_t seed, size_t index) {
    return size_t(mix(seed, 0x7E45041ull + index) % (pool.size() / bb)) * bb;
}

// Norm weights: 1 + normal(0, 0.02), so that they scale as trained RMSNorm weights do.
void fill_norm(float* w, int64_t n, uint64_t seed, size_t index) {
    SplitMix64 g{mix(seed, 0x0A11ull + index)};
    for (int64_t j = 0; j < n; j += 2) {
        double a, b;
        g.normal_pair(a, b);
        w[j] = float(1.0 + 0.02 * a);
        if (j + 1 < n) w[j + 1] = float(1.0 + 0.02 * b);
    }
}

}  // namespace

std::vector<SyntheticShape> synthetic_shapes() {
    // name, d, layers, ff, heads, kv heads, vocab, context, rope base, tied embedding/output
    return {
        {"smollm2-135m", llama_config(576, 30, 1536, 9, 3, 49152, 8192, 100000.0f, true)},
        // Llama 3.2 advertises 131072 tokens through llama3 rope scaling (which ridge does not
        // apply); 8192 is the context it was pretrained at, and keeps KV caches sensible.
        {"llama-3.2-1b", llama_config(2048, 16, 8192, 32, 8, 128256, 8192, 500000.0f, true)},
        {"llama-3.2-3b", llama_config(3072, 28, 8192, 24, 8, 128256, 8192, 500000.0f, true)},
        {"llama-3-8b", llama_config(4096, 32, 14336, 32, 8, 128256, 8192, 500000.0f, false)},
    };
}

std::string synthetic_names() {
    std::string s;
    for (const SyntheticShape& sh : synthetic_shapes()) s += (s.empty() ? "" : ", ") + sh.name;
    return s;
}

Config synthetic_config(const std::string& name) {
    const std::string n = lower(name);
    for (const SyntheticShape& sh : synthetic_shapes())
        if (sh.name == n) return sh.config;
    throw Error("synthetic model '" + name + "' is not known; known: " + synthetic_names());
}

std::string synthetic_type_names() {
    std::string s;
    for (DType t : kTypes) s += (s.empty() ? "" : ", ") + lower(std::string(dtype_name(t)));
    return s;
}

DType synthetic_type_from_name(const std::string& name) {
    const std::optional<DType> t = dtype_from_name(name);
    if (t && std::find(std::begin(kTypes), std::end(kTypes), *t) != std::end(kTypes)) return *t;
    throw Error("synthetic weight type '" + name + "' is not supported; valid: " + synthetic_type_names());
}

std::vector<SyntheticTensor> synthetic_tensors(const Config& c, DType type) {
    const int64_t d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), ff = c.n_ff, vocab = c.n_vocab;
    std::vector<SyntheticTensor> t;
    t.push_back({"token_embd.weight", type, {d, vocab}});  // (n_vocab, d)
    for (int l = 0; l < c.n_layers; l++) {
        const std::string p = "blk." + std::to_string(l) + ".";
        t.push_back({p + "attn_norm.weight", DType::F32, {d}});
        t.push_back({p + "attn_q.weight", type, {d, q_dim}});         // (q_dim, d)
        t.push_back({p + "attn_k.weight", type, {d, kv_dim}});        // (kv_dim, d)
        t.push_back({p + "attn_v.weight", type, {d, kv_dim}});        // (kv_dim, d)
        t.push_back({p + "attn_output.weight", type, {q_dim, d}});    // (d, q_dim)
        t.push_back({p + "ffn_norm.weight", DType::F32, {d}});
        t.push_back({p + "ffn_gate.weight", type, {d, ff}});          // (n_ff, d)
        t.push_back({p + "ffn_up.weight", type, {d, ff}});            // (n_ff, d)
        t.push_back({p + "ffn_down.weight", type, {ff, d}});          // (d, n_ff)
    }
    t.push_back({"output_norm.weight", DType::F32, {d}});
    if (!c.tied_output) t.push_back({"output.weight", type, {d, vocab}});  // (n_vocab, d)
    return t;
}

uint64_t synthetic_model_bytes(const std::string& name, DType type) {
    const Config c = synthetic_config(name);
    uint64_t bytes = 0;
    std::map<int64_t, uint64_t> pools;  // row length -> pool bytes
    for (const SyntheticTensor& t : synthetic_tensors(c, type)) {
        bytes += padded(row_bytes(t.type, t.shape[0]) * size_t(t.shape.size() > 1 ? t.shape[1] : 1));
        if (t.shape.size() > 1) pools[t.shape[0]] = uint64_t(pool_rows(t.shape[0])) * row_bytes(type, t.shape[0]);
    }
    for (const auto& [k, b] : pools) bytes += b;
    return bytes;
}

uint64_t synthetic_memory_limit() {
    std::ifstream in("/proc/meminfo");
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string key, unit;
        uint64_t kb = 0;
        if (ls >> key >> kb >> unit && key == "MemAvailable:") {
            const uint64_t avail = kb * 1024;
            const uint64_t margin = std::max<uint64_t>(uint64_t(1) << 30, avail / 10);
            return avail > margin ? avail - margin : 0;
        }
    }
    return std::numeric_limits<uint64_t>::max();
}

std::unique_ptr<ModelFile> make_synthetic_model(const std::string& name, DType type, uint64_t seed) {
    return make_synthetic_model(name, type, seed, synthetic_memory_limit());
}

std::unique_ptr<ModelFile> make_synthetic_model(const std::string& name, DType type, uint64_t seed,
                                                uint64_t memory_limit) {
    const Config c = synthetic_config(name);
    synthetic_type_from_name(std::string(dtype_name(type)));  // rejects types quantize_row cannot write
    const std::string canonical = lower(name);
    const std::string type_name = lower(std::string(dtype_name(type)));
    const std::string label = "synthetic " + canonical + " (" + type_name + ", seed " + std::to_string(seed) + ")";

    const uint64_t need = synthetic_model_bytes(name, type);
    if (need > memory_limit) {
        const std::string hint = type == DType::Q4_0 ? "a smaller model"
                                                     : "q4_0 (" + gigabytes(synthetic_model_bytes(name, DType::Q4_0)) +
                                                           ") or a smaller model";
        throw Error(label + " needs " + gigabytes(need) + " of memory but only " + gigabytes(memory_limit) +
                    " may be used (MemAvailable less a margin); try " + hint);
    }

    // Lay the tensors out, each padded to kTensorAlign.
    const std::vector<SyntheticTensor> specs = synthetic_tensors(c, type);
    std::vector<size_t> offsets;
    size_t total = 0;
    for (const SyntheticTensor& t : specs) {
        offsets.push_back(total);
        total += padded(row_bytes(t.type, t.shape[0]) * size_t(t.shape.size() > 1 ? t.shape[1] : 1));
    }
    auto file = std::make_unique<SyntheticModelFile>(label, c, total);
    for (size_t i = 0; i < specs.size(); i++) {
        TensorView v;
        v.name = specs[i].name;
        v.type = specs[i].type;
        v.shape = specs[i].shape;
        v.data = file->data() + offsets[i];
        v.nbytes = row_bytes(v.type, v.shape[0]) * size_t(v.ne(1));
        file->views().push_back(std::move(v));
    }

    // Pools, one per row length of a matrix (d and n_ff for these shapes).
    std::map<int64_t, std::vector<uint8_t>> pools;
    for (const SyntheticTensor& t : specs)
        if (t.shape.size() > 1 && !pools.count(t.shape[0])) pools[t.shape[0]] = make_pool(type, t.shape[0], seed);

    // Work list: every matrix cut into chunks of whole blocks; each starts reading its pool at a
    // block offset drawn from (seed, tensor index), so no two tensors begin with the same bytes.
    struct Chunk {
        uint8_t* dst;
        const std::vector<uint8_t>* pool;
        size_t from;  // byte in the pool (read circularly)
        size_t len;
    };
    std::vector<Chunk> chunks;
    const size_t bb = block_bytes(type);
    const size_t chunk_bytes = kFillChunkBytes / bb * bb;
    const std::vector<TensorView>& views = file->views();
    for (size_t i = 0; i < views.size(); i++) {
        const TensorView& v = views[i];
        if (v.shape.size() < 2) continue;
        const std::vector<uint8_t>& pool = pools.at(v.shape[0]);
        const size_t start = pool_start(pool, bb, seed, i);
        uint8_t* dst = file->data() + offsets[i];
        for (size_t off = 0; off < v.nbytes; off += chunk_bytes)
            chunks.push_back({dst + off, &pool, start + off, std::min(chunk_bytes, v.nbytes - off)});
    }
#pragma omp parallel for schedule(dynamic, 16)
    for (size_t i = 0; i < chunks.size(); i++) copy_from_pool(*chunks[i].pool, chunks[i].from, chunks[i].dst, chunks[i].len);

    for (size_t i = 0; i < views.size(); i++)
        if (views[i].shape.size() == 1) fill_norm(reinterpret_cast<float*>(file->data() + offsets[i]), views[i].shape[0], seed, i);
    return file;
}

SyntheticFileSummary write_synthetic_gguf(const std::string& name, DType type, uint64_t seed,
                                          const std::string& vocab_from, const std::string& out) {
    Config c = synthetic_config(name);
    synthetic_type_from_name(std::string(dtype_name(type)));
    const auto vocab = GGUFFile::open(vocab_from);
    if (!vocab->has("tokenizer.ggml.tokens"))
        throw Error(vocab_from + ": no tokenizer.ggml.tokens: --vocab-from needs a GGUF file with a vocabulary");
    c.n_vocab = int(vocab->get_string_array("tokenizer.ggml.tokens").size());

    GGUFMetadata kv;
    for (const auto& [key, value] : vocab->metadata())
        if (key.rfind("tokenizer.", 0) == 0) kv[key] = value;
    auto str = [&](const std::string& key, const std::string& v) {
        GGUFValue& g = kv[key];
        g.type = GGUFType::STRING;
        g.s = v;
    };
    auto u32 = [&](const std::string& key, uint64_t v) {
        GGUFValue& g = kv[key];
        g.type = GGUFType::UINT32;
        g.u = v;
    };
    auto f32 = [&](const std::string& key, double v) {
        GGUFValue& g = kv[key];
        g.type = GGUFType::FLOAT32;
        g.f = v;
    };
    str("general.architecture", "llama");
    str("general.name", "synthetic " + lower(name) + " (seed " + std::to_string(seed) + ")");
    u32("general.file_type", quantize_target_of(type).ftype);
    if (block_elems(type) > 1) u32("general.quantization_version", 2);
    u32("llama.context_length", uint64_t(c.n_ctx_train));
    u32("llama.embedding_length", uint64_t(c.n_embd));
    u32("llama.block_count", uint64_t(c.n_layers));
    u32("llama.feed_forward_length", uint64_t(c.n_ff));
    u32("llama.attention.head_count", uint64_t(c.n_heads));
    u32("llama.attention.head_count_kv", uint64_t(c.n_kv_heads));
    u32("llama.rope.dimension_count", uint64_t(c.rope_dim));
    u32("llama.vocab_size", uint64_t(c.n_vocab));
    f32("llama.rope.freq_base", c.rope_freq_base);
    f32("llama.attention.layer_norm_rms_epsilon", c.norm_eps);

    const std::vector<SyntheticTensor> specs = synthetic_tensors(c, type);
    std::vector<GGUFTensorSpec> tensors;
    for (const SyntheticTensor& t : specs) tensors.push_back({t.name, t.type, t.shape});
    GGUFWriter writer(out, kv, tensors);
    std::map<int64_t, std::vector<uint8_t>> pools;
    const size_t bb = block_bytes(type);
    std::vector<uint8_t> buf;
    // One tensor at a time, each filled as make_synthetic_model fills it.
    for (size_t i = 0; i < specs.size(); i++) {
        const SyntheticTensor& t = specs[i];
        const size_t nbytes = row_bytes(t.type, t.shape[0]) * size_t(t.shape.size() > 1 ? t.shape[1] : 1);
        buf.resize(nbytes);
        if (t.shape.size() == 1) {
            fill_norm(reinterpret_cast<float*>(buf.data()), t.shape[0], seed, i);
        } else {
            if (!pools.count(t.shape[0])) pools[t.shape[0]] = make_pool(type, t.shape[0], seed);
            const std::vector<uint8_t>& pool = pools.at(t.shape[0]);
            const size_t start = pool_start(pool, bb, seed, i);
            const size_t chunk = kFillChunkBytes / bb * bb;
            const int64_t n_chunks = int64_t((nbytes + chunk - 1) / chunk);
#pragma omp parallel for schedule(dynamic, 16)
            for (int64_t k = 0; k < n_chunks; k++) {
                const size_t off = size_t(k) * chunk;
                copy_from_pool(pool, start + off, buf.data() + off, std::min(chunk, nbytes - off));
            }
        }
        writer.write(buf.data(), nbytes);
    }
    writer.close();
    return {c, writer.bytes_written()};
}

}  // namespace ridge
