// llama2.c checkpoint reader: header, exact size check, and the f32 arrays mapped to GGUF names.
// llama2.c stores each linear layer as n_out rows of n_in floats, which is GGUF's {n_in, n_out};
// per-layer arrays are stacked over layers, so layer l of wq starts l * dim * q_dim floats in.
#include "weights/llama2c.h"

#include <cstring>
#include <limits>

#include "weights/error.h"
#include "weights/mapped_file.h"

namespace ridge {

namespace {

constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);

class Llama2cModelFile : public ModelFile {
public:
    explicit Llama2cModelFile(const std::string& path) {
        format_ = ModelFormat::Llama2c;
        path_ = path;
        map_ = MappedFile::open(path);
        file_base_ = map_->data();
        load();
    }

private:
    void load();
    std::shared_ptr<const MappedFile> map_;
};

void Llama2cModelFile::load() {
    const size_t size = map_->size();
    if (size < kHeaderBytes)
        throw Error(path_ + ": not a GGUF file, and too small (" + std::to_string(size) +
                    " bytes) for a llama2.c checkpoint header of 28 bytes");
    int32_t h[7];
    std::memcpy(h, map_->data(), kHeaderBytes);
    const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
    const bool shared_classifier = h[5] > 0;
    if (h[5] < 0) {
        if (h[5] == std::numeric_limits<int32_t>::min())
            throw Error(path_ + ": llama2.c header: vocab_size " + std::to_string(h[5]) + " is invalid");
        h[5] = -h[5];
    }
    std::string header;
    for (int k = 0; k < 7; k++) header += (k ? ", " : "") + std::string(names[k]) + " " + std::to_string(h[k]);
    for (int k = 0; k < 7; k++)
        if (h[k] <= 0 || h[k] > (1 << 24))
            throw Error(path_ + ": not a GGUF file, and not a valid llama2.c checkpoint: header field " + names[k] +
                        " is " + std::to_string(h[k]) + " (header " + header + ")");
    const int64_t dim = h[0], hidden = h[1], L = h[2], n_heads = h[3], n_kv = h[4], vocab = h[5], seq = h[6];
    if (dim % n_heads != 0 || n_heads % n_kv != 0 || n_kv > n_heads)
        throw Error(path_ + ": llama2.c header: dim must be a multiple of n_heads and n_heads of n_kv_heads (" +
                    header + ")");
    const int64_t head_size = dim / n_heads;
    if (head_size % 2 != 0)
        throw Error(path_ + ": llama2.c header: head size " + std::to_string(head_size) + " is odd (" + header + ")");
    const int64_t q_dim = n_heads * head_size, kv_dim = n_kv * head_size;

    // Exact size in floats, in 128-bit arithmetic: the factors are below 2^24 and three are
    // multiplied, which can exceed 64 bits for a corrupt header.
    using u128 = unsigned __int128;
    u128 n_floats = u128(vocab) * dim + u128(L) * dim + u128(L) * dim * q_dim + 2 * u128(L) * dim * kv_dim +
                    u128(L) * q_dim * dim + u128(L) * dim + 3 * u128(L) * dim * hidden + u128(dim) +
                    2 * u128(seq) * (head_size / 2);
    if (!shared_classifier) n_floats += u128(vocab) * dim;
    const u128 expected = kHeaderBytes + n_floats * 4;
    if (expected != size) {
        std::string exp_str = expected > u128(std::numeric_limits<uint64_t>::max())
                                  ? std::string("more than 2^64")
                                  : std::to_string(uint64_t(expected));
        throw Error(path_ + ": llama2.c checkpoint size is " + std::to_string(size) + " bytes, but its header (" +
                    header + (shared_classifier ? ", shared classifier" : ", separate classifier") + ") implies " +
                    exp_str + " bytes");
    }

    config_.arch = "llama";
    config_.n_embd = int(dim);
    config_.n_layers = int(L);
    config_.n_ff = int(hidden);
    config_.n_heads = int(n_heads);
    config_.n_kv_heads = int(n_kv);
    config_.head_dim = int(head_size);
    config_.n_vocab = int(vocab);
    config_.n_ctx_train = int(seq);
    config_.rope_dim = int(head_size);
    config_.rope_freq_base = 10000.0f;
    config_.rope_style = RopeStyle::Norm;  // run.c rotates pairs (2i, 2i+1)
    config_.norm_eps = 1e-5f;
    config_.tied_output = shared_classifier;

    // Walk the arrays in file order; per-layer arrays yield one view per layer.
    const uint8_t* p = map_->data() + kHeaderBytes;
    auto take = [&](const std::string& name, std::vector<int64_t> shape) {
        TensorView t;
        t.name = name;
        t.type = DType::F32;
        t.shape = std::move(shape);
        t.data = p;
        t.nbytes = size_t(t.n_elements()) * 4;
        p += t.nbytes;
        tensors_.push_back(std::move(t));
    };
    auto per_layer = [&](const std::string& suffix, std::vector<int64_t> shape) {
        for (int64_t l = 0; l < L; l++) take("blk." + std::to_string(l) + "." + suffix, shape);
    };
    take("token_embd.weight", {dim, vocab});
    per_layer("attn_norm.weight", {dim});
    per_layer("attn_q.weight", {dim, q_dim});
    per_layer("attn_k.weight", {dim, kv_dim});
    per_layer("attn_v.weight", {dim, kv_dim});
    per_layer("attn_output.weight", {q_dim, dim});
    per_layer("ffn_norm.weight", {dim});
    per_layer("ffn_gate.weight", {dim, hidden});  // w1
    per_layer("ffn_down.weight", {hidden, dim});  // w2
    per_layer("ffn_up.weight", {dim, hidden});    // w3
    take("output_norm.weight", {dim});
    p += size_t(2 * seq * (head_size / 2)) * 4;  // freq_cis_real, freq_cis_imag: unused (ridge computes RoPE)
    if (!shared_classifier) take("output.weight", {dim, vocab});
}

}  // namespace

std::unique_ptr<ModelFile> open_llama2c(const std::string& path) { return std::make_unique<Llama2cModelFile>(path); }

}  // namespace ridge
