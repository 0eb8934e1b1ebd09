// quantize_model: GGUF in, GGUF out with another weight type. For each tensor in file order:
// a matrix is re-encoded chunk by chunk of rows (dequantize_row to f32, quantize_row to the target,
// rows in parallel), a 1-D tensor or one already of the target type is copied byte for byte.
// A matrix whose row length is not a multiple of the target's block size is written as F16
// (llama.cpp's practice of falling back to a type that fits) and reported as such.
#include "weights/quantize_model.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
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

struct Target {
    const char* name;
    DType type;
    uint32_t ftype;  // llama.cpp llama_ftype
};
constexpr Target kTargets[] = {
    {"q8_0", DType::Q8_0, 7}, {"q4_0", DType::Q4_0, 2}, {"q4_1", DType::Q4_1, 3}, {"q5_0", DType::Q5_0, 8},
    {"q5_1", DType::Q5_1, 9}, {"f16", DType::F16, 1},   {"bf16", DType::BF16, 32}, {"f32", DType::F32, 0},
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

std::optional<DType> quantize_target_from_name(std::string_view name) {
    std::string lower(name);
    for (char& c : lower) c = char(std::tolower(static_cast<unsigned char>(c)));
    for (const Target& t : kTargets)
        if (lower == t.name) return t.type;
    return std::nullopt;
}

std::string quantize_target_names() {
    std::string s;
    for (const Target& t : kTargets) s += (s.empty() ? "" : ", ") + std::string(t.name);
    return s;
}

uint32_t llama_ftype_of(DType type) {
    for (const Target& t : kTargets)
        if (t.type == type) return t.ftype;
    throw Error("cannot quantize to " + std::string(dtype_name(type)) + " (targets: " + quantize_target_names() + ")");
}

QuantizeSummary quantize_model(const std::string& in, const std::string& out, DType target,
                               const std::function<void(const QuantizeTensorReport&)>& on_tensor) {
    const uint32_t ftype = llama_ftype_of(target);
    if (out.empty()) throw Error("no output file given");
    require_gguf(in);
    if (same_file(in, out)) throw Error(out + ": the output is the input file; write to another path");
    const auto gguf = GGUFFile::open(in);

    // Decide every tensor's type (and refuse unreadable ones) before anything is written.
    const std::vector<TensorView>& tensors = gguf->tensors();
    std::vector<GGUFTensorSpec> specs;
    std::vector<bool> convert, fell_back;
    for (const TensorView& t : tensors) {
        GGUFTensorSpec s{t.name, t.type, t.shape};
        bool conv = false, fb = false;
        if (effective_dims(t.shape) >= 2) {
            s.type = target;
            if (t.shape[0] % block_elems(target) != 0) {
                s.type = DType::F16;
                fb = true;
            }
            conv = s.type != t.type;
        }
        if (conv && !can_dequantize(t.type))
            throw Error(in + ": tensor '" + t.name + "' has type " + std::string(dtype_name(t.type)) +
                        ", which ridge cannot dequantize (it reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, "
                        "Q5_1, Q4_K, Q5_K, Q6_K)");
        specs.push_back(std::move(s));
        convert.push_back(conv);
        fell_back.push_back(fb);
    }

    GGUFMetadata kv = gguf->metadata();
    set_uint(kv, "general.file_type", ftype);
    if (is_quantized(target)) set_uint(kv, "general.quantization_version", 2);

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
        if (fell_back[k]) sum.n_fallback++;
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
            rep.fell_back = fell_back[k];
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
