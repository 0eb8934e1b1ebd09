// The model on a CUDA device: to_gpu (weights into the kernels' layouts) and forward_gpu, which
// reads like forward() with kernels/cuda's ops in place of kernels/cpu's. Without CUDA in the
// build every entry point throws a one-line error instead.
#include "engine/gpu.h"

#include <algorithm>
#include <ctime>
#include <string>
#include <vector>

#include "weights/error.h"

#if RIDGE_HAVE_CUDA
#include "kernels/cuda/attention.h"
#include "kernels/cuda/graph.h"
#include "kernels/cuda/matmul.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/probe.h"
#include "kernels/cuda/runtime.h"
#endif

namespace ridge {

#if !RIDGE_HAVE_CUDA

namespace {
[[noreturn]] void no_cuda() {
    throw Error("--device cuda: this ridge was built without CUDA (nvcc was not found when it was configured)");
}
}  // namespace
namespace gpu {
bool built() { return false; }
bool available() { return false; }
std::string unavailable_reason() { return "this ridge was built without CUDA (nvcc was not found when it was configured)"; }
std::shared_ptr<uint8_t> device_alloc(size_t) { no_cuda(); }
}  // namespace gpu
struct GpuModel {};
struct GpuWorkspace {};
Ceilings measure_gpu_ceilings(bool) { no_cuda(); }
void to_gpu(Model&, int, bool) { no_cuda(); }
void forward_gpu(const Model&, KVCache&, const Batch&, Workspace&, Counters*, Dumper*) { no_cuda(); }

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

Ceilings measure_gpu_ceilings(bool quick) {
    cuda::set_device(0);
    const cuda::DeviceInfo info = cuda::device_info(0);
    Ceilings c;
    c.device = "cuda";
    c.threads = info.sm_count;
    c.cpu = info.name;
    c.quick = quick;
    c.reps = quick ? 3 : 9;
    // Bandwidth: a buffer far larger than L2 (4 GiB; quick 256 MiB), but at most a quarter of memory.
    c.bandwidth_bytes = std::min<size_t>(quick ? size_t(256) << 20 : size_t(4) << 30, info.global_bytes / 4);
    const cuda::Timing bw = cuda::time_read(c.bandwidth_bytes, c.reps);
    c.bandwidth_gbs = double(c.bandwidth_bytes) / bw.median_s / 1e9;
    c.bandwidth_spread = bw.spread;
    double flops = 0;
    const cuda::Timing fma = cuda::time_fma(&flops, c.reps);
    c.fma_gflops = flops / fma.median_s / 1e9;
    // ridge's tiled variants on one BF16 problem; the best is the engine's matmul ceiling.
    const int64_t n = quick ? 1024 : 4096;
    const int mm_reps = quick ? 3 : 7;
    const std::string shape = std::to_string(n) + "x" + std::to_string(n) + "x" + std::to_string(n);
    for (const char* v : {"v2_smem", "v3_regblock", "v4_mma"}) {
        const cuda::Timing t = cuda::time_matmul(v, n, n, n, mm_reps);
        const double gf = 2.0 * double(n) * double(n) * double(n) / t.median_s / 1e9;
        if (gf > c.matmul_gflops) c.matmul_gflops = gf, c.matmul_name = std::string(v) + " bf16 W, f32 X " + shape;
    }
    cuda::Timing ref;
    std::string why;
    if (cuda::time_cublas_bf16(n, n, n, mm_reps, &ref, &why)) {
        c.reference_gflops = 2.0 * double(n) * double(n) * double(n) / ref.median_s / 1e9;
        c.reference_name = "cuBLAS bf16 " + shape;
    } else {
        c.reference_name = why;
    }
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&now, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
    c.measured_at = buf;
    return c;
}

// The weights on the device. Norm vectors stay f32; linear weights in matrix.h's layouts.
struct GpuModel {
    struct Layer {
        cuda::DeviceBuffer attn_norm, ffn_norm;  // (d) f32
        cuda::DeviceMatrix q, k, v, o, gate, up, down;
    };
    int device = 0;
    bool use_graph = true;                 // decode steps replay a CUDA graph (to_gpu's `graph`)
    cuda::DeviceMatrix token_embd;         // (n_vocab, d)
    cuda::DeviceMatrix output;             // (n_vocab, d); empty when tied (token_embd serves)
    cuda::DeviceBuffer output_norm;        // (d) f32
    std::vector<Layer> layers;
    const cuda::Matrix& output_matrix() const { return output.storage.size() ? output.view : token_embd.view; }
};

// Activation buffers on the device, grown to the largest batch seen (the CPU Workspace's roles).
struct GpuWorkspace {
    cuda::DeviceBuffer x, x_norm, q, k, v, attn, attn_out, ffn_gate, ffn_up, ffn_act, ffn_out;  // (m, width)
    cuda::DeviceBuffer out_norm, logits;  // (m_out, d), (m_out, n_vocab)
    cuda::DeviceBuffer tokens, pos;       // (m) int32
    cuda::DeviceBuffer slots;             // (m) int64
    cuda::DeviceBuffer rows;              // (m) AttentionRow with device block-table pointers
    cuda::DeviceBuffer tables;            // the batch's sequences' block tables, one after another
    cuda::DeviceBuffer attn_scratch;      // attention_v1_split's partial results
    std::unique_ptr<cuda::Stream> stream; // every kernel of this workspace's forward passes queues here
    cuda::Graph graph;                    // the decode step, captured (GpuModel::use_graph)
    std::vector<cpu::AttentionRow> rows_for_device;  // (m) host copy of `rows`
    std::vector<int32_t> tables_host;
};

namespace {
void grow(cuda::DeviceBuffer& b, size_t bytes) {
    if (b.size() < bytes) b = cuda::DeviceBuffer(bytes);
}
cuda::DeviceBuffer upload_f32(const TensorView& t) {
    cuda::DeviceBuffer b(t.nbytes);
    b.upload(t.data, t.nbytes);
    return b;
}
}  // namespace

void to_gpu(Model& model, int device, bool graph) {
    cuda::set_device(device);  // ridge::Error naming the reason when there is none
    auto g = std::make_shared<GpuModel>();
    g->device = device;
    g->use_graph = graph;
    g->token_embd = cuda::upload_matrix(*model.token_embd);
    if (model.output != model.token_embd) g->output = cuda::upload_matrix(*model.output);
    g->output_norm = upload_f32(*model.output_norm);
    for (const LayerWeights& L : model.layers) {
        GpuModel::Layer gl;
        gl.attn_norm = upload_f32(*L.attn_norm);
        gl.ffn_norm = upload_f32(*L.ffn_norm);
        gl.q = cuda::upload_matrix(*L.attn_q);
        gl.k = cuda::upload_matrix(*L.attn_k);
        gl.v = cuda::upload_matrix(*L.attn_v);
        gl.o = cuda::upload_matrix(*L.attn_output);
        gl.gate = cuda::upload_matrix(*L.ffn_gate);
        gl.up = cuda::upload_matrix(*L.ffn_up);
        gl.down = cuda::upload_matrix(*L.ffn_down);
        g->layers.push_back(std::move(gl));
    }
    model.gpu = g;
}

void forward_gpu(const Model& model, KVCache& cache, const Batch& batch, Workspace& ws, Counters* counters,
                 Dumper* dump) {
    const GpuModel& g = *model.gpu;
    cuda::use_device(g.device);  // this thread may not be the one that placed the model
    const Config& c = model.config;
    const int64_t m = batch.size();
    const int64_t d = c.n_embd, q_dim = c.q_dim(), kv_dim = c.kv_dim(), n_ff = c.n_ff;
    if (m == 0) throw Error("forward: empty batch");
    if (batch.seq.size() != size_t(m) || batch.pos.size() != size_t(m) || batch.want_logits.size() != size_t(m))
        throw Error("forward: batch columns have different lengths");
    if (!cache.on_gpu()) throw Error("forward: the model runs on the GPU but its KV cache is in host memory");
    for (int64_t i = 0; i < m; i++)
        if (batch.token[size_t(i)] < 0 || batch.token[size_t(i)] >= c.n_vocab)
            throw Error("token id " + std::to_string(batch.token[size_t(i)]) + " at row " + std::to_string(i) +
                        " is outside the vocabulary of " + std::to_string(c.n_vocab));
    int64_t m_out = 0;
    for (uint8_t w : batch.want_logits) m_out += w ? 1 : 0;
    // Host side, only what the GPU path uses (the CPU's activation buffers stay empty): the rows'
    // slots and attention rows, the logits rows' sequences and positions, the logits.
    auto grow_host = [](auto& v, int64_t n) {
        if (int64_t(v.size()) < n) v.resize(size_t(n));
    };
    grow_host(ws.slots, m), grow_host(ws.attn_rows, m), grow_host(ws.out_seq, m_out), grow_host(ws.out_pos, m_out);
    grow_host(ws.logits, m_out * c.n_vocab);
    ws.n_vocab = c.n_vocab;
    ws.n_logit_rows = m_out;
    if (!ws.gpu) ws.gpu = std::make_shared<GpuWorkspace>();
    GpuWorkspace& gw = *ws.gpu;
    if (!gw.stream) gw.stream = std::make_unique<cuda::Stream>();
    const cuda::Stream& s = *gw.stream;

    // Device buffers for this batch.
    const size_t f = sizeof(float);
    grow(gw.x, size_t(m * d) * f), grow(gw.x_norm, size_t(m * d) * f), grow(gw.attn_out, size_t(m * d) * f);
    grow(gw.ffn_out, size_t(m * d) * f), grow(gw.q, size_t(m * q_dim) * f), grow(gw.attn, size_t(m * q_dim) * f);
    grow(gw.k, size_t(m * kv_dim) * f), grow(gw.v, size_t(m * kv_dim) * f);
    grow(gw.ffn_gate, size_t(m * n_ff) * f), grow(gw.ffn_up, size_t(m * n_ff) * f), grow(gw.ffn_act, size_t(m * n_ff) * f);
    grow(gw.out_norm, size_t(std::max<int64_t>(m_out, 1) * d) * f);
    grow(gw.logits, size_t(std::max<int64_t>(m_out, 1) * c.n_vocab) * f);
    grow(gw.tokens, size_t(m) * 4), grow(gw.pos, size_t(m) * 4), grow(gw.slots, size_t(m) * 8);
    grow(gw.rows, size_t(m) * sizeof(cpu::AttentionRow));

    // Slots and attention rows, as forward() makes them; the block tables of the batch's sequences
    // go to the device once each, and the device rows point at those copies.
    gw.tables_host.clear();
    std::vector<std::pair<int32_t, size_t>> table_at;  // (sequence, offset in tables_host)
    std::vector<size_t> row_table(static_cast<size_t>(m));  // (m) offset of each row's table
    for (int64_t i = 0; i < m; i++) {
        const int32_t sq = batch.seq[size_t(i)];
        ws.slots[size_t(i)] = cache.slot(sq, batch.pos[size_t(i)]);  // checks seq and pos
        ws.attn_rows[size_t(i)] = cpu::AttentionRow{cache.block_table(sq).data(), batch.pos[size_t(i)] + 1};
        size_t at = SIZE_MAX;
        for (const auto& [seq, off] : table_at)
            if (seq == sq) at = off;
        if (at == SIZE_MAX) {
            at = gw.tables_host.size();
            const std::vector<int32_t>& t = cache.block_table(sq);
            gw.tables_host.insert(gw.tables_host.end(), t.begin(), t.end());
            table_at.emplace_back(sq, at);
        }
        row_table[size_t(i)] = at;
    }
    // Grown by doubling: sequences gain a block every block_size tokens, and a reallocation waits
    // for the device.
    if (gw.tables.size() < gw.tables_host.size() * 4)
        gw.tables = cuda::DeviceBuffer(std::max(gw.tables_host.size() * 4, 2 * gw.tables.size()));
    gw.rows_for_device.resize(size_t(m));
    for (int64_t i = 0; i < m; i++)
        gw.rows_for_device[size_t(i)] =
            cpu::AttentionRow{gw.tables.as<int32_t>() + row_table[size_t(i)], ws.attn_rows[size_t(i)].n_keys};
    gw.tokens.upload_async(batch.token.data(), size_t(m) * 4, s);
    gw.pos.upload_async(batch.pos.data(), size_t(m) * 4, s);
    gw.slots.upload_async(ws.slots.data(), size_t(m) * 8, s);
    gw.tables.upload_async(gw.tables_host.data(), gw.tables_host.size() * 4, s);
    gw.rows.upload_async(gw.rows_for_device.data(), size_t(m) * sizeof(cpu::AttentionRow), s);

    // The runs, as on the CPU: tiled prompt chunks and row-exact rest.
    const int64_t min_tiled = model.tiled_min_rows();
    split_runs(batch.seq.data(), batch.pos.data(), m, min_tiled, ws.runs);
    for (int64_t i = 0, r = 0; i < m; i++)
        if (batch.want_logits[size_t(i)]) ws.out_seq[size_t(r)] = batch.seq[size_t(i)], ws.out_pos[size_t(r)] = batch.pos[size_t(i)], r++;
    split_runs(ws.out_seq.data(), ws.out_pos.data(), m_out, min_tiled, ws.out_runs);

    // Counting: with counters, the stream is drained before every clock reading so that an op's
    // wall time is its own (the price of the measurement); without them nothing waits until the logits.
    CallRecorder rec(counters, [&s] { s.sync(); });
    auto count = [&](int layer, Op op, const cpu::Cost& cost) { rec.add(layer, op, cost); };
    std::vector<float> host_rows;
    auto dump_rows = [&](const std::string& name, const cuda::DeviceBuffer& buf, int64_t rows, int64_t width) {
        if (!dump) return;
        s.sync();
        host_rows.resize(size_t(rows * width));
        buf.download(host_rows.data(), host_rows.size() * f);
        dump->write(name, host_rows.data(), long(rows), long(width));
    };
    // Y = X . W^T run by run: a tiled run in one matmul (the tiled kernel), a row-exact run through
    // the matvec, at most kMatvecMaxRows rows a launch (each row's sum the same whatever its neighbours).
    auto linear = [&](int layer, const std::vector<RowRun>& runs, Op op, const cuda::Matrix& W, const float* x,
                      float* y) {
        for (const RowRun& run : runs) {
            const float* xr = x + run.begin * W.k;
            float* yr = y + run.begin * W.n;
            if (run.tiled) {
                count(layer, op, cuda::matmul(s, W, xr, run.rows(), yr));
                continue;
            }
            for (int64_t r = 0; r < run.rows(); r += cuda::kMatvecMaxRows) {
                const int64_t rows = std::min(cuda::kMatvecMaxRows, run.rows() - r);
                cuda::matvec(s, W, xr + r * W.k, rows, yr + r * W.n);
            }
            // Counted as the CPU counts a run (its weights once): a run of more than kMatvecMaxRows
            // rows reads them once per launch here, a cost of this kernel the counters leave out.
            count(layer, op, cuda::matmul_cost(W, run.rows()));
        }
    };
    const cpu::AttentionShape heads{c.n_heads, c.n_kv_heads, c.head_dim};
    auto attend = [&](int layer, const cpu::KVLayer& kv) {
        for (const RowRun& run : ws.runs) {
            // Both copies of the rows hold device block-table pointers (the host one sizes the launch).
            const cuda::AttentionRows rows{gw.rows.as<cpu::AttentionRow>() + run.begin,
                                           gw.rows_for_device.data() + run.begin, run.rows()};
            const float* q = gw.q.as<float>() + run.begin * q_dim;
            float* out = gw.attn.as<float>() + run.begin * q_dim;
            rec.add_attention(layer, run.tiled ? cuda::attention(s, q, rows, kv, heads, out, gw.attn_scratch)
                                               : cuda::attention_v1_split(s, q, rows, kv, heads, out, gw.attn_scratch));
        }
    };
    const cpu::RopeParams rope{c.head_dim, c.rope_dim, c.rope_freq_base, c.rope_style};
    float* x = gw.x.as<float>();
    float* x_norm = gw.x_norm.as<float>();

    // The attention's scratch, sized before any kernel is queued (a graph capture must not allocate).
    size_t scratch = 0;
    for (const RowRun& run : ws.runs)
        scratch = std::max(scratch, cuda::attention_v1_split_workspace_bytes(gw.rows_for_device.data() + run.begin,
                                                                             run.rows(), heads));
    grow(gw.attn_scratch, scratch);

    // Every kernel of the forward pass, queued on the stream in order.
    auto queue_all = [&]() {
        count(-1, Op::Embed, cuda::embed(s, g.token_embd.view, gw.tokens.as<int32_t>(), m, x));
        dump_rows("embed", gw.x, m, d);

        for (int l = 0; l < c.n_layers; l++) {
            const GpuModel::Layer& L = g.layers[size_t(l)];
            const std::string name = "layer." + std::to_string(l) + ".";
            const cpu::KVLayer kv = cache.layer(l);  // device pointers

            count(l, Op::Norm, cuda::rmsnorm(s, x, L.attn_norm.as<float>(), m, d, c.norm_eps, x_norm));
            dump_rows(name + "attn_norm", gw.x_norm, m, d);
            linear(l, ws.runs, Op::Q, L.q.view, x_norm, gw.q.as<float>());
            linear(l, ws.runs, Op::K, L.k.view, x_norm, gw.k.as<float>());
            linear(l, ws.runs, Op::V, L.v.view, x_norm, gw.v.as<float>());
            dump_rows(name + "q", gw.q, m, q_dim);
            dump_rows(name + "k", gw.k, m, kv_dim);
            dump_rows(name + "v", gw.v, m, kv_dim);
            count(l, Op::Rope, cuda::rope(s, gw.q.as<float>(), gw.pos.as<int32_t>(), m, c.n_heads, rope));
            count(l, Op::Rope, cuda::rope(s, gw.k.as<float>(), gw.pos.as<int32_t>(), m, c.n_kv_heads, rope));
            dump_rows(name + "q_rope", gw.q, m, q_dim);
            dump_rows(name + "k_rope", gw.k, m, kv_dim);

            count(l, Op::KVStore, cuda::kv_store(s, kv, gw.k.as<float>(), gw.v.as<float>(), gw.slots.as<int64_t>(), m));
            attend(l, kv);
            dump_rows(name + "attn", gw.attn, m, q_dim);
            linear(l, ws.runs, Op::O, L.o.view, gw.attn.as<float>(), gw.attn_out.as<float>());
            dump_rows(name + "attn_out", gw.attn_out, m, d);
            count(l, Op::Residual, cuda::add(s, x, gw.attn_out.as<float>(), m * d));
            dump_rows(name + "attn_resid", gw.x, m, d);

            count(l, Op::Norm, cuda::rmsnorm(s, x, L.ffn_norm.as<float>(), m, d, c.norm_eps, x_norm));
            dump_rows(name + "ffn_norm", gw.x_norm, m, d);
            linear(l, ws.runs, Op::Gate, L.gate.view, x_norm, gw.ffn_gate.as<float>());
            linear(l, ws.runs, Op::Up, L.up.view, x_norm, gw.ffn_up.as<float>());
            dump_rows(name + "ffn_gate", gw.ffn_gate, m, n_ff);
            dump_rows(name + "ffn_up", gw.ffn_up, m, n_ff);
            count(l, Op::Swiglu, cuda::swiglu(s, gw.ffn_gate.as<float>(), gw.ffn_up.as<float>(), m * n_ff, gw.ffn_act.as<float>()));
            dump_rows(name + "ffn_act", gw.ffn_act, m, n_ff);
            linear(l, ws.runs, Op::Down, L.down.view, gw.ffn_act.as<float>(), gw.ffn_out.as<float>());
            dump_rows(name + "ffn_out", gw.ffn_out, m, d);
            count(l, Op::Residual, cuda::add(s, x, gw.ffn_out.as<float>(), m * d));
            dump_rows(name + "out", gw.x, m, d);
        }

        if (m_out > 0) {
            int64_t r = 0;
            for (int64_t i = 0; i < m; i++) {
                if (!batch.want_logits[size_t(i)]) continue;
                count(-1, Op::Norm, cuda::rmsnorm(s, x + i * d, g.output_norm.as<float>(), 1, d, c.norm_eps,
                                                  gw.out_norm.as<float>() + r * d));
                r++;
            }
            dump_rows("final_norm", gw.out_norm, m_out, d);
            linear(-1, ws.out_runs, Op::OutputHead, g.output_matrix(), gw.out_norm.as<float>(), gw.logits.as<float>());
            dump_rows("logits", gw.logits, m_out, c.n_vocab);
        }
    };

    // Decode steps (no tiled run) without counters or dumps replay a CUDA graph of queue_all; the
    // key holds everything the captured launches baked in: the model, the rows (which want logits,
    // their attention splits: the split kernel's grid), the runs, the KV pool and every buffer.
    bool graph = g.use_graph && !counters && !dump;
    for (const RowRun& run : ws.runs) graph = graph && !run.tiled;
    if (!graph) {
        queue_all();
    } else {
        std::vector<uint64_t> key = {uint64_t(m), uint64_t(m_out), uint64_t(reinterpret_cast<uintptr_t>(&g))};
        for (int64_t i = 0; i < m; i++)  // each row: does it want logits, how many attention splits
            key.push_back(uint64_t(batch.want_logits[size_t(i)]) << 32 |
                          uint64_t((ws.attn_rows[size_t(i)].n_keys + cuda::kSplitKeys - 1) / cuda::kSplitKeys));
        for (const RowRun& run : ws.runs) key.push_back(uint64_t(run.begin)), key.push_back(uint64_t(run.end));
        for (const RowRun& run : ws.out_runs) key.push_back(uint64_t(run.begin)), key.push_back(uint64_t(run.end));
        const cpu::KVLayer kv0 = cache.layer(0);  // the cache's pool (all layers are one allocation)
        for (uint64_t v : {uint64_t(reinterpret_cast<uintptr_t>(kv0.k)), uint64_t(kv0.n_slots), uint64_t(kv0.block_size),
                           uint64_t(kv0.type)})
            key.push_back(v);
        // Every buffer the launches name (the block tables are not: the rows, re-uploaded each
        // step, point into them).
        for (const cuda::DeviceBuffer* b : {&gw.x, &gw.x_norm, &gw.q, &gw.k, &gw.v, &gw.attn, &gw.attn_out,
                                            &gw.ffn_gate, &gw.ffn_up, &gw.ffn_act, &gw.ffn_out, &gw.out_norm,
                                            &gw.logits, &gw.tokens, &gw.pos, &gw.slots, &gw.rows, &gw.attn_scratch})
            key.push_back(uint64_t(reinterpret_cast<uintptr_t>(b->data()))), key.push_back(b->size());
        gw.graph.run(s, key, queue_all);
    }
    s.sync();  // the batch is done (and any error inside a kernel surfaces here)
    if (m_out > 0) gw.logits.download(ws.logits.data(), size_t(m_out * c.n_vocab) * f);
}

#endif  // RIDGE_HAVE_CUDA

}  // namespace ridge
