// The CUDA backend: forward()'s ops on kernels/cuda, with the weights uploaded once into the
// kernels' layouts (DeviceWeights) and the activations in device memory. Every kernel of a pass is
// queued on one stream; a pass that needs nothing from the host between ops (no counters, no dumps,
// no tiled run) is captured once as a CUDA graph and replayed. Without CUDA in the build every entry
// point throws a one-line error instead.
#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/backend.h"
#include "engine/gpu.h"
#include "weights/error.h"

#if RIDGE_HAVE_CUDA
#include "kernels/cuda/attention.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/runtime.h"
#endif

namespace ridge {

#if !RIDGE_HAVE_CUDA

namespace {
const char* kNoCuda = "this ridge was built without CUDA (nvcc was not found when it was configured)";
[[noreturn]] void no_cuda() { throw Error(std::string("--device cuda: ") + kNoCuda); }
}  // namespace
namespace gpu {
bool built() { return false; }
bool available() { return false; }
std::string unavailable_reason() { return kNoCuda; }
std::shared_ptr<uint8_t> device_alloc(size_t) { no_cuda(); }
}  // namespace gpu
struct DeviceWeights {};
std::shared_ptr<const DeviceWeights> upload_weights(const Model&, int) { no_cuda(); }
std::unique_ptr<Backend> make_cuda_backend(const Engine&, std::shared_ptr<const DeviceWeights>) { no_cuda(); }

#else  // RIDGE_HAVE_CUDA

namespace gpu {
bool built() { return true; }
bool available() { return cuda::device_count() > 0; }
std::string unavailable_reason() { return available() ? "" : cuda::no_device_reason(); }
std::shared_ptr<uint8_t> device_alloc(size_t bytes) {
    auto* buf = new cuda::DeviceBuffer(bytes);
    return std::shared_ptr<uint8_t>(buf->as<uint8_t>(), [buf](uint8_t*) { delete buf; });
}
}  // namespace gpu

// The weights on the device: linear weights in matrix.h's layouts, norm vectors as f32, each found
// by the model's view of it.
struct DeviceWeights {
    int device = 0;
    std::unordered_map<const TensorView*, cuda::DeviceMatrix> matrices;
    std::unordered_map<const TensorView*, cuda::DeviceBuffer> vectors;
    const cuda::Matrix& matrix(const TensorView& w) const { return matrices.at(&w).view; }
    const float* vector(const TensorView& w) const { return vectors.at(&w).as<float>(); }
};

std::shared_ptr<const DeviceWeights> upload_weights(const Model& model, int device) {
    try {
        cuda::set_device(device);  // ridge::Error naming the reason when there is none
        auto g = std::make_shared<DeviceWeights>();
        g->device = device;
        auto matrix = [&](const TensorView* w) {
            if (!g->matrices.count(w)) g->matrices.emplace(w, cuda::upload_matrix(*w));
        };
        auto vector = [&](const TensorView* w) {
            cuda::DeviceBuffer b(w->nbytes);
            b.upload(w->data, w->nbytes);
            g->vectors.emplace(w, std::move(b));
        };
        matrix(model.token_embd), matrix(model.output), vector(model.output_norm);
        for (const LayerWeights& L : model.layers) {
            vector(L.attn_norm), vector(L.ffn_norm);
            for (const TensorView* w : {L.attn_q_bias, L.attn_k_bias, L.attn_v_bias, L.attn_q_norm, L.attn_k_norm})
                if (w != nullptr) vector(w);
            for (const TensorView* w : {L.attn_q, L.attn_k, L.attn_v, L.attn_output, L.ffn_gate, L.ffn_up, L.ffn_down})
                matrix(w);
        }
        return g;
    } catch (const Error& e) {
        throw Error(std::string("--device cuda: ") + e.what());
    }
}

namespace {

void grow(cuda::DeviceBuffer& b, size_t bytes) {
    if (b.size() < bytes) b = cuda::DeviceBuffer(bytes);
}

class CudaBackend final : public Backend {
public:
    CudaBackend(const Engine& engine, std::shared_ptr<const DeviceWeights> weights)
        : engine_(engine), c_(engine.config()), w_(std::move(weights)) {
        cuda::use_device(w_->device);
        stream_ = std::make_unique<cuda::Stream>();
        // Decode attention's splits a row, fixed for the backend's life: a row's result then never
        // depends on the step or the batch, and every step's launch has the same grid.
        split_cap_ = cuda::attention_v3_split_cap(cuda::device_info(w_->device).sm_count,
                                                  AttentionShape{c_.n_heads, c_.n_kv_heads, c_.head_dim});
    }

    Activations begin(const Batch& batch, KVCache& cache, Workspace& ws) override {
        cuda::use_device(w_->device);  // this thread may not be the one that placed the model
        if (!cache.on_gpu()) throw Error("forward: the model runs on the GPU but its KV cache is in host memory");
        const cuda::Stream& s = *stream_;
        const int64_t m = batch.size();
        const int64_t d = c_.n_embd, q_dim = c_.q_dim(), kv_dim = c_.kv_dim(), n_ff = c_.n_ff;
        int64_t m_out = 0;
        for (uint8_t w : batch.want_logits) m_out += w ? 1 : 0;
        m_ = m;
        // Host side, only the rows (the CPU's activation buffers stay empty).
        auto grow_host = [](auto& v, int64_t n) {
            if (int64_t(v.size()) < n) v.resize(size_t(n));
        };
        grow_host(ws.slots, m), grow_host(ws.attn_rows, m);
        grow_host(ws.logits, m_out * c_.n_vocab);
        ws.n_vocab = c_.n_vocab;
        ws.n_logit_rows = m_out;

        const size_t f = sizeof(float);
        grow(x_, size_t(m * d) * f), grow(x_norm_, size_t(m * d) * f), grow(attn_out_, size_t(m * d) * f);
        grow(ffn_out_, size_t(m * d) * f), grow(q_, size_t(m * q_dim) * f), grow(attn_, size_t(m * q_dim) * f);
        grow(k_, size_t(m * kv_dim) * f), grow(v_, size_t(m * kv_dim) * f);
        grow(ffn_gate_, size_t(m * n_ff) * f), grow(ffn_up_, size_t(m * n_ff) * f), grow(ffn_act_, size_t(m * n_ff) * f);
        grow(out_norm_, size_t(std::max<int64_t>(m_out, 1) * d) * f);
        grow(logits_, size_t(std::max<int64_t>(m_out, 1) * c_.n_vocab) * f);
        grow(tokens_, size_t(m) * 4), grow(pos_, size_t(m) * 4), grow(slots_, size_t(m) * 8);
        grow(rows_, size_t(m) * sizeof(AttentionRow));

        // Slots and attention rows as the CPU makes them; the block tables of the batch's sequences
        // go to the device once each, and the device rows point at those copies.
        tables_host_.clear();
        std::vector<std::pair<int32_t, size_t>> table_at;  // (sequence, offset in tables_host_)
        std::vector<size_t> row_table(static_cast<size_t>(m));  // (m) offset of each row's table
        for (int64_t i = 0; i < m; i++) {
            const int32_t sq = batch.seq[size_t(i)];
            ws.slots[size_t(i)] = cache.slot(sq, batch.pos[size_t(i)]);  // checks seq and pos
            ws.attn_rows[size_t(i)] = AttentionRow{cache.block_table(sq).data(), batch.pos[size_t(i)] + 1};
            size_t at = SIZE_MAX;
            for (const auto& [seq, off] : table_at)
                if (seq == sq) at = off;
            if (at == SIZE_MAX) {
                at = tables_host_.size();
                const std::vector<int32_t>& t = cache.block_table(sq);
                tables_host_.insert(tables_host_.end(), t.begin(), t.end());
                table_at.emplace_back(sq, at);
            }
            row_table[size_t(i)] = at;
        }
        // Grown by doubling: sequences gain a block every block_size tokens, and a reallocation
        // waits for the device.
        if (tables_.size() < tables_host_.size() * 4)
            tables_ = cuda::DeviceBuffer(std::max(tables_host_.size() * 4, 2 * tables_.size()));
        rows_host_.resize(size_t(m));
        for (int64_t i = 0; i < m; i++)
            rows_host_[size_t(i)] = AttentionRow{tables_.as<int32_t>() + row_table[size_t(i)], ws.attn_rows[size_t(i)].n_keys};
        // The step's inputs go up from pinned staging, queued on the stream before its kernels (the
        // previous pass's end() waited for the stream, so the staging is free again).
        struct Up {
            cuda::DeviceBuffer* to;
            const void* from;
            size_t bytes;
        };
        const Up ups[] = {{&tokens_, batch.token.data(), size_t(m) * 4},
                          {&pos_, batch.pos.data(), size_t(m) * 4},
                          {&slots_, ws.slots.data(), size_t(m) * 8},
                          {&tables_, tables_host_.data(), tables_host_.size() * 4},
                          {&rows_, rows_host_.data(), size_t(m) * sizeof(AttentionRow)}};
        auto padded = [](size_t bytes) { return (bytes + 15) / 16 * 16; };
        size_t staged = 0;
        for (const Up& u : ups) staged += padded(u.bytes);
        staging_.reserve(staged);
        staged = 0;
        for (const Up& u : ups) {
            uint8_t* at = staging_.as<uint8_t>() + staged;
            std::memcpy(at, u.from, u.bytes);
            u.to->upload_async(at, u.bytes, s);
            staged += padded(u.bytes);
        }

        // The runs, as on the CPU.
        split_batch(batch, engine_.plan().tiled_min_rows, ws.runs, ws.out_seq, ws.out_pos, ws.out_runs);

        // Decode attention launches for the most splits a row can have (v3: the cap; v1: the
        // cache capacity's splits of kSplitKeys keys), not for the rows' current lengths, so that a
        // captured step stays valid while the rows grow; its scratch is sized before any kernel is
        // queued (a graph capture must not allocate).
        const AttentionShape heads{c_.n_heads, c_.n_kv_heads, c_.head_dim};
        const bool v3 = cuda::attention_v3_fits(cache.layer(0), heads);
        launch_splits_ = v3 ? split_cap_ : (cache.n_ctx() + cuda::kSplitKeys - 1) / cuda::kSplitKeys;
        size_t scratch = 0;
        for (const RowRun& run : ws.runs)
            scratch = std::max(scratch, cuda::attention_split_workspace_bytes(rows_host_.data() + run.begin, run.rows(),
                                                                              heads, launch_splits_, v3 ? split_cap_ : 0));
        grow(attn_scratch_, scratch);

        // The graph key: everything the captured launches baked in (the model, the rows and which
        // want logits, the attention's launch splits, the runs, the KV pool and every buffer). The
        // rows' lengths are not in it: the kernels read them from the device each step.
        key_ = {uint64_t(m), uint64_t(m_out), uint64_t(reinterpret_cast<uintptr_t>(w_.get())), uint64_t(launch_splits_)};
        all_row_exact_ = true;
        for (int64_t i = 0; i < m; i++) key_.push_back(uint64_t(batch.want_logits[size_t(i)]));
        for (const RowRun& run : ws.runs) key_.push_back(uint64_t(run.begin)), key_.push_back(uint64_t(run.end)), all_row_exact_ = all_row_exact_ && !run.tiled;
        for (const RowRun& run : ws.out_runs) key_.push_back(uint64_t(run.begin)), key_.push_back(uint64_t(run.end));
        const KVLayer kv0 = cache.layer(0);  // the cache's pool (all layers are one allocation)
        for (uint64_t v : {uint64_t(reinterpret_cast<uintptr_t>(kv0.k)), uint64_t(kv0.n_slots), uint64_t(kv0.block_size), uint64_t(kv0.type)})
            key_.push_back(v);
        for (const cuda::DeviceBuffer* b : {&x_, &x_norm_, &q_, &k_, &v_, &attn_, &attn_out_, &ffn_gate_, &ffn_up_, &ffn_act_,
                                            &ffn_out_, &out_norm_, &logits_, &tokens_, &pos_, &slots_, &rows_, &attn_scratch_})
            key_.push_back(uint64_t(reinterpret_cast<uintptr_t>(b->data()))), key_.push_back(b->size());
        m_out_ = m_out;

        Activations a;
        a.m = m, a.m_out = m_out;
        a.x = x_.as<float>(), a.x_norm = x_norm_.as<float>(), a.q = q_.as<float>(), a.k = k_.as<float>(), a.v = v_.as<float>();
        a.attn = attn_.as<float>(), a.attn_out = attn_out_.as<float>();
        a.ffn_gate = ffn_gate_.as<float>(), a.ffn_up = ffn_up_.as<float>(), a.ffn_act = ffn_act_.as<float>();
        a.ffn_out = ffn_out_.as<float>(), a.out_norm = out_norm_.as<float>(), a.logits = logits_.as<float>();
        a.runs = &ws.runs, a.out_runs = &ws.out_runs;
        return a;
    }

    bool run(bool replayable, const std::function<void()>& ops) override {
        if (!replayable || !engine_.options().graph || !all_row_exact_) {
            ops();
            return true;
        }
        bool ran = false;
        graph_.run(*stream_, key_, [&] {
            ran = true;  // captured now: the ops run (under capture)
            ops();
        });
        return ran;
    }
    void end(Workspace& ws) override {
        // The logits come down on the stream, after the pass, into pinned memory; one wait for both
        // (any error inside a kernel surfaces here).
        const size_t bytes = size_t(m_out_ * c_.n_vocab) * sizeof(float);
        logits_host_.reserve(bytes);
        if (bytes > 0) logits_.download_async(logits_host_.data(), bytes, *stream_);
        stream_->sync();
        if (bytes > 0) std::memcpy(ws.logits.data(), logits_host_.data(), bytes);
    }
    void sync() override { stream_->sync(); }
    void read(const float* buf, int64_t n, float* host) override {
        stream_->sync();
        cuda::copy_to_host(host, buf, size_t(n) * sizeof(float));
    }

    Cost embed(const TensorView& table, float* out) override {
        return cuda::embed(*stream_, w_->matrix(table), tokens_.as<int32_t>(), m_, out);
    }
    Cost rmsnorm(const float* x, const TensorView& w, int64_t m, float* y) override {
        return cuda::rmsnorm(*stream_, x, w_->vector(w), m, w.ne(0), c_.norm_eps, y);
    }
    Cost add_bias(float* x, const TensorView& b, int64_t m) override {
        return cuda::add_bias(*stream_, x, w_->vector(b), m, b.ne(0));
    }
    Cost rope(float* x, int n_heads) override {
        return cuda::rope(*stream_, x, pos_.as<int32_t>(), m_, n_heads,
                          RopeParams{c_.head_dim, c_.rope_dim, c_.rope_freq_base, c_.rope_style});
    }
    Cost quantize(const float*, int64_t, int64_t) override {
        throw Error("forward: the CUDA kernels take f32 activations (a plan asked for 16-bit integers)");
    }
    // At most kMatvecMaxRows rows a launch, each row's sum the same whatever its neighbours. Counted
    // as the CPU counts a run (its weights once): a run of more rows reads them once per launch here,
    // a cost of this kernel the counters leave out.
    // The outputs that read one x (q, k, v; gate, up) go in one launch (cuda::matvec_fused).
    void matmul_rows(const LinearOut* outs, int n_outs, const float* x, int64_t m, Cost* costs) override {
        for (int o0 = 0; o0 < n_outs; o0 += cuda::kMatvecMaxOutputs) {
            const int n = std::min(cuda::kMatvecMaxOutputs, n_outs - o0);
            for (int64_t r = 0; r < m; r += cuda::kMatvecMaxRows) {
                const int64_t rows = std::min(cuda::kMatvecMaxRows, m - r);
                cuda::MatvecOut mo[cuda::kMatvecMaxOutputs];
                Cost unused[cuda::kMatvecMaxOutputs];
                int64_t k = 0;
                for (int o = 0; o < n; o++) {
                    const cuda::Matrix& W = w_->matrix(*outs[o0 + o].plan->w);
                    mo[o] = {W, outs[o0 + o].y + r * W.n};
                    k = W.k;
                }
                cuda::matvec_fused(*stream_, mo, n, x + r * k, rows, unused);
            }
            for (int o = 0; o < n; o++) costs[o0 + o] = cuda::matmul_cost(w_->matrix(*outs[o0 + o].plan->w), m);
        }
    }
    Cost matmul_tiled(const MatmulPlan& plan, const float* x, int64_t m, float* y) override {
        return cuda::matmul(*stream_, w_->matrix(*plan.w), x, m, y);
    }
    Cost kv_store(const KVLayer& kv, const float* k, const float* v) override {
        return cuda::kv_store(*stream_, kv, k, v, slots_.as<int64_t>(), m_);
    }
    AttentionCost attention(const RowRun& run, const KVLayer& kv, const float* q, float* out) override {
        // Both copies of the rows hold device block-table pointers (the host one sizes the launch).
        const cuda::AttentionRows rows{rows_.as<AttentionRow>() + run.begin, rows_host_.data() + run.begin, run.rows(),
                                       launch_splits_, split_cap_};
        const AttentionShape heads{c_.n_heads, c_.n_kv_heads, c_.head_dim};
        return run.tiled ? cuda::attention(*stream_, q, rows, kv, heads, out, attn_scratch_)
                         : cuda::attention_decode(*stream_, q, rows, kv, heads, out, attn_scratch_);
    }
    Cost swiglu(const float* gate, const float* up, int64_t n, float* out) override {
        return cuda::swiglu(*stream_, gate, up, n, out);
    }
    Cost add(float* x, const float* y, int64_t n) override { return cuda::add(*stream_, x, y, n); }

private:
    const Engine& engine_;
    const Config& c_;
    std::shared_ptr<const DeviceWeights> w_;
    std::unique_ptr<cuda::Stream> stream_;  // every kernel of this backend's passes queues here
    cuda::Graph graph_;                     // the decode step, captured
    std::vector<uint64_t> key_;             // what the graph of this pass baked in
    bool all_row_exact_ = false;
    int launch_splits_ = 0;                 // decode attention's grid: the most splits a row can have
    int split_cap_ = 0;                     // v3_wide's splits a row, from the SM count
    int64_t m_ = 0, m_out_ = 0;
    // (m, width) activations, named as Activations names them
    cuda::DeviceBuffer x_, x_norm_, q_, k_, v_, attn_, attn_out_, ffn_gate_, ffn_up_, ffn_act_, ffn_out_;
    cuda::DeviceBuffer out_norm_, logits_;  // (m_out, d), (m_out, n_vocab)
    cuda::DeviceBuffer tokens_, pos_;       // (m) int32
    cuda::DeviceBuffer slots_;              // (m) int64
    cuda::DeviceBuffer rows_;               // (m) AttentionRow with device block-table pointers
    cuda::DeviceBuffer tables_;             // the batch's sequences' block tables, one after another
    cuda::DeviceBuffer attn_scratch_;       // decode attention's partial results
    std::vector<AttentionRow> rows_host_;   // (m) host copy of rows_
    std::vector<int32_t> tables_host_;
    cuda::PinnedBuffer staging_;            // a pass's uploads, one after another
    cuda::PinnedBuffer logits_host_;        // (m_out, n_vocab) its logits, downloaded
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(const Engine& engine, std::shared_ptr<const DeviceWeights> weights) {
    return std::make_unique<CudaBackend>(engine, std::move(weights));
}

#endif  // RIDGE_HAVE_CUDA

}  // namespace ridge
