// quantize_model: GGUF in, GGUF out with another weight type. For each tensor in file order:
// a matrix is re-encoded chunk by chunk of rows (dequantize_row to f32, quantize_row to the target,
// rows in parallel), a 1-D tensor or one already of the target type is copied byte for byte.
// A matrix whose row length is not a multiple of its type's block size falls back to a type that
// fits, as llama-quantize does (see quantize_plan), and is reported as such.
#include "weights/quantize_model.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "weights/error.h"
#include "weights/gguf.h"
#include "weights/gguf_writer.h"
#include "weights/quant.h"

namespace ridge {

namespace {

// llama.cpp's llama_ftype of each: ALL_F32 0, MOSTLY_F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9,
// Q4_K_S 14 (what llama-quantize --pure Q4_K_S writes), Q4_K_M 15, Q5_K_S 16, Q5_K_M 17, Q6_K 18, BF16 32.
constexpr QuantizeTarget kTargets[] = {
    {"q8_0", DType::Q8_0, 7, false},  {"q4_0", DType::Q4_0, 2, false},   {"q4_1", DType::Q4_1, 3, false},
    {"q5_0", DType::Q5_0, 8, false},  {"q5_1", DType::Q5_1, 9, false},   {"q4_k", DType::Q4_K, 14, false},
    {"q5_k", DType::Q5_K, 16, false}, {"q6_k", DType::Q6_K, 18, false},  {"q4_k_m", DType::Q4_K, 15, true},
    {"q5_k_m", DType::Q5_K, 17, true}, {"f16", DType::F16, 1, false},    {"bf16", DType::BF16, 32, false},
    {"f32", DType::F32, 0, false},
};

constexpr size_t kChunkBytes = size_t(4) << 20;  // output bytes re-encoded per parallel step

// Dimensions that count (trailing 1s dropped, as ggml_n_dims does): 2 or more is a matrix.
size_t effective_dims(const std::vector<int64_t>& shape) {
    size_t n = shape.size();
    while (n > 1 && shape[n - 1] == 1) n--;
    return n;
}

// Sets an integer key to `value`, keeping its integer type if it has one, else as UINT32.
void set_uint(GGUFMetadata& kv, const std::string& key, uint32_t value) {
    GGUFValue& v = kv[key];
    const bool is_uint = v.type == GGUFType::UINT8 || v.type == GGUFType::UINT16 || v.type == GGUFType::UINT32 ||
                         v.type == GGUFType::UINT64;
    const bool is_int = v.type == GGUFType::INT16 || v.type == GGUFType::INT32 || v.type == GGUFType::INT64;
    if (is_uint && (v.type != GGUFType::UINT8 || value <= 0xff) && (v.type != GGUFType::UINT16 || value <= 0xffff)) {
        v.u = value;
    } else if (is_int && (v.type != GGUFType::INT16 || value <= 0x7fff)) {
        v.i = int64_t(value);
    } else {
        v = GGUFValue{};
        v.type = GGUFType::UINT32;
        v.u = value;
    }
}

bool is_quantized(DType t) { return block_elems(t) > 1; }

// ridge::Error unless `path` can be opened and starts with the GGUF magic.
void require_gguf(const std::string& path) {
    std::FILE* fp = std::fopen(path.c_str(), "rb");
    if (!fp) throw Error(path + ": cannot open: " + std::strerror(errno));
    char magic[4] = {};
    const size_t got = std::fread(magic, 1, 4, fp);
    std::fclose(fp);
    if (got != 4 || std::memcmp(magic, "GGUF", 4) != 0)
        throw Error(path + ": not a GGUF file (a llama2.c checkpoint?): only GGUF files can be rewritten");
}

bool same_file(const std::string& a, const std::string& b) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(b, ec) && fs::equivalent(a, b, ec)) return true;
    const fs::path ca = fs::weakly_canonical(a, ec), cb = fs::weakly_canonical(b, ec);
    return !ec && ca == cb;
}

}  // namespace

std::optional<QuantizeTarget> quantize_target_from_name(std::string_view name) {
    std::string lower(name);
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    for (const QuantizeTarget& t : kTargets)
        if (lower == t.name) return t;
    return std::nullopt;
}

QuantizeTarget quantize_target_of(DType type) {
    for (const QuantizeTarget& t : kTargets)
        if (t.type == type && !t.mix_m) return t;
    throw Error("cannot quantize to " + std::string(dtype_name(type)) + " (targets: " + quantize_target_names() + ")");
}

std::string quantize_target_names() {
    std::string s;
    for (const QuantizeTarget& t : kTargets) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

std::vector<QuantizePlanEntry> quantize_plan(const std::vector<QuantizePlanTensor>& tensors, const QuantizeTarget& target,
                                             int block_count) {
    // llama-quantize's fallback for a row length `type` cannot hold.
    auto fallback = [](DType type, int64_t row) {
        if (row % block_elems(type) == 0) return type;
        DType f = DType::F16;
        if (type == DType::Q4_K) f = DType::Q5_0;
        if (type == DType::Q5_K) f = DType::Q5_1;
        if (type == DType::Q6_K) f = DType::Q8_0;
        return row % block_elems(f) == 0 ? f : DType::F16;
    };
    std::vector<QuantizePlanEntry> plan(tensors.size());
    bool tied = true;  // no output.weight: the token embedding is also the head
    for (const QuantizePlanTensor& t : tensors)
        if (t.name == "output.weight") tied = false;
    // llama-quantize counts attn_v and ffn_down in its order: by layer (others first), then by name.
    auto layer_of = [](const std::string& name) {
        int layer = -1;
        if (name.rfind("blk.", 0) == 0) layer = std::atoi(name.c_str() + 4);
        return layer;
    };
    std::vector<size_t> order(tensors.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const int la = layer_of(tensors[a].name), lb = layer_of(tensors[b].name);
        return la != lb ? la < lb : tensors[a].name < tensors[b].name;
    });
    int n_attn_v = 0;
    for (const QuantizePlanTensor& t : tensors)
        if (t.name.find("attn_v.weight") != std::string::npos) n_attn_v++;
    // The layers that get more bits: the first and last eighth, and every third in between.
    auto more_bits = [](int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; };
    int i_attn_v = 0, i_ffn_down = 0;
    for (size_t k : order) {
        const QuantizePlanTensor& t = tensors[k];
        QuantizePlanEntry& e = plan[k];
        if (effective_dims(t.shape) < 2) {
            e.type = e.wanted = t.type;
            continue;
        }
        const int64_t row = t.shape[0];
        DType want = target.type;
        if (target.mix_m) {
            const bool head = t.name == "output.weight" || (tied && t.name == "token_embd.weight");
            if (head) {
                // Not a fallback in llama-quantize's terms: its rule for the head.
                e.type = e.wanted = row % QK_K != 0 ? DType::Q8_0 : DType::Q6_K;
                continue;
            }
            if (t.name.find("attn_v.weight") != std::string::npos) {
                if (more_bits(i_attn_v, n_attn_v)) want = DType::Q6_K;
                i_attn_v++;
            } else if (t.name.find("ffn_down") != std::string::npos) {
                if (more_bits(i_ffn_down, block_count)) want = DType::Q6_K;
                i_ffn_down++;
            }
        }
        e.wanted = want;
        e.type = fallback(want, row);
        e.fell_back = e.type != want;
    }
    return plan;
}

QuantizeSummary quantize_model(const std::string& in, const std::string& out, const QuantizeTarget& target,
                               const std::function<void(const QuantizeTensorReport&)>& on_tensor) {
    if (out.empty()) throw Error("no output file given");
    require_gguf(in);
    if (same_file(in, out)) throw Error(out + ": the output is the input file; write to another path");
    const auto gguf = GGUFFile::open(in);

    // Decide every tensor's type (and refuse unreadable ones) before anything is written.
    const std::vector<TensorView>& tensors = gguf->tensors();
    std::vector<QuantizePlanTensor> listed;
    for (const TensorView& t : tensors) listed.push_back({t.name, t.type, t.shape});
    // The layer count, for a mix: <arch>.block_count, else one more than the highest blk.N.
    int block_count = 0;
    const std::string arch = gguf->get_string_or("general.architecture", "");
    if (!arch.empty() && gguf->has(arch + ".block_count")) block_count = int(gguf->get_u64(arch + ".block_count"));
    else
        for (const TensorView& t : tensors)
            if (t.name.rfind("blk.", 0) == 0) block_count = std::max(block_count, std::atoi(t.name.c_str() + 4) + 1);
    const std::vector<QuantizePlanEntry> plan = quantize_plan(listed, target, block_count);
    std::vector<GGUFTensorSpec> specs;
    std::vector<bool> convert;
    for (size_t k = 0; k < tensors.size(); k++) {
        const TensorView& t = tensors[k];
        const bool conv = plan[k].type != t.type;
        if (conv && !can_dequantize(t.type))
            throw Error(in + ": tensor '" + t.name + "' has type " + std::string(dtype_name(t.type)) +
                        ", which ridge cannot dequantize (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                        "Q5_1, Q4_K, Q5_K, Q6_K)");
        specs.push_back({t.name, plan[k].type, t.shape});
        convert.push_back(conv);
    }

    GGUFMetadata kv = gguf->metadata();
    set_uint(kv, "general.file_type", target.ftype);
    if (is_quantized(target.type)) set_uint(kv, "general.quantization_version", 2);

    GGUFWriter writer(out, kv, specs);
    QuantizeSummary sum;
    sum.n_tensors = tensors.size();
    sum.file_bytes_in = gguf->file_size();
    std::vector<uint8_t> buf;
    for (size_t k = 0; k < tensors.size(); k++) {
        const TensorView& t = tensors[k];
        const GGUFTensorSpec& s = specs[k];
        if (!convert[k]) {
            writer.write(t.data, t.nbytes);
            sum.n_copied++;
        } else {
            const int64_t ne0 = t.shape[0];
            const int64_t n_rows = t.n_elements() / ne0;
            const size_t in_row = row_bytes(t.type, ne0), out_row = row_bytes(s.type, ne0);
            const int64_t chunk = std::max<int64_t>(1, int64_t(kChunkBytes / out_row));
            buf.resize(size_t(std::min(chunk, n_rows)) * out_row);
            for (int64_t r0 = 0; r0 < n_rows; r0 += chunk) {
                const int64_t r1 = std::min(n_rows, r0 + chunk);
                // The types were checked above, so neither call can throw inside the parallel loop.
#pragma omp parallel
                {
                    std::vector<float> row(static_cast<size_t>(ne0));  // (ne0) one row in f32
#pragma omp for schedule(static)
                    for (int64_t r = r0; r < r1; r++) {
                        dequantize_row(t.type, t.data + size_t(r) * in_row, row.data(), ne0);
                        quantize_row(s.type, row.data(), buf.data() + size_t(r - r0) * out_row, ne0);
                    }
                }
                writer.write(buf.data(), size_t(r1 - r0) * out_row);
            }
            sum.n_converted++;
        }
        if (plan[k].fell_back) sum.n_fallback++;
        sum.tensor_bytes_in += t.nbytes;
        sum.tensor_bytes_out += s.nbytes();
        if (on_tensor) {
            QuantizeTensorReport rep;
            rep.index = k;
            rep.count = tensors.size();
            rep.name = t.name;
            rep.from = t.type;
            rep.to = s.type;
            rep.copied = !convert[k];
            rep.fell_back = plan[k].fell_back;
            rep.wanted = plan[k].wanted;
            rep.row_length = t.shape[0];
            rep.bytes_in = t.nbytes;
            rep.bytes_out = s.nbytes();
            on_tensor(rep);
        }
    }
    writer.close();
    sum.file_bytes_out = writer.bytes_written();
    return sum;
}

}  // namespace ridge
