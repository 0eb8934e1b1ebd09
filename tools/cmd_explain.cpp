// `ridge explain -m MODEL [-T TOKENS] [-c CONTEXT] [-t THREADS]`: the roofline on paper. Every op of
// one layer and of the output head with its shape, FLOPs, bytes, intensity and whether it is
// memory- or compute-bound on this machine; per-token totals for a prefill of T tokens and a decode
// step at context c; the KV cache and the memory needed to run. Numbers from measure/explain.h.
#include <omp.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "measure/ceilings.h"
#include "measure/explain.h"
#include "tools/commands.h"
#include "tools/model_args.h"
#include "weights/error.h"

namespace ridge::cli {

namespace {

struct ExplainArgs {
    ModelArgs model;
    int tokens = 1;
    int context = 512;
    int threads = 0;  // 0: OpenMP's default, as generate uses
    bool threads_set = false;
    std::string kv_type = "f32";
    double bandwidth = 0;  // GB/s override
    double peak = 0;       // GFLOP/s override
    bool bandwidth_set = false, peak_set = false;
};

// "1.36 G" style with decimal prefixes (GB/s and GFLOP/s are decimal too).
std::string si(double v) {
    const char* units[] = {"", "k", "M", "G", "T", "P"};
    int u = 0;
    while (v >= 1000.0 && u < 5) {
        v /= 1000.0;
        u++;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
    return buf;
}

std::string seconds_str(double s) {
    char buf[32];
    if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.1f µs", s * 1e6);
    else if (s < 1.0) std::snprintf(buf, sizeof buf, "%.2f ms", s * 1e3);
    else std::snprintf(buf, sizeof buf, "%.2f s", s);
    return buf;
}

// Code points in a UTF-8 string (the shapes hold × · ᵀ →), for column padding.
size_t width(const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
    return n;
}
std::string pad(const std::string& s, size_t w) { return s + std::string(w > width(s) ? w - width(s) : 0, ' '); }

// Bytes as "207.36 kB", or "-" for none.
std::string bytes_str(double b) { return b > 0 ? si(b) + "B" : "-"; }

void print_header_row() {
    std::printf("  %s %s %-5s %10s %10s %10s %10s %7s %-7s %9s\n", pad("op", 12).c_str(), pad("shape", 36).c_str(),
                "type", "FLOPs", "weights", "KV cache", "act", "FLOP/B", "bound", "t_min");
}

void print_row(const std::string& name, const std::string& shape, const std::string& type, const Cost& c,
               const Ceilings& ceil) {
    const Bound b = roofline_bound(c, ceil);
    char intensity[16] = "-";
    if (b != Bound::Cache) std::snprintf(intensity, sizeof intensity, "%.2f", c.intensity());
    std::printf("  %s %s %-5s %10s %10s %10s %10s %7s %-7s %9s\n", pad(name, 12).c_str(), pad(shape, 36).c_str(),
                type.c_str(), si(c.flops).c_str(), bytes_str(c.weight_bytes).c_str(),
                bytes_str(c.kv_read + c.kv_written).c_str(), bytes_str(c.act_read + c.act_written).c_str(), intensity,
                bound_name(b), seconds_str(min_seconds(c, ceil)).c_str());
}

void print_ops(const std::vector<ExplainOp>& ops, const Ceilings& ceil) {
    for (const ExplainOp& op : ops) print_row(op.name, op.shape, op.type, op.cost, ceil);
}

// One pass's totals, and the tokens/s bound they give.
void print_pass(const std::string& title, const ExplainPhase& p, const Ceilings& ceil) {
    const Cost t = p.per_token();
    const double s = min_seconds(p.total, ceil);
    std::printf("%s\n", title.c_str());
    std::printf("  per token: %sFLOP; weights %s, KV cache %s (activations %s); intensity %.2f FLOP/B: %s-bound\n",
                si(t.flops).c_str(), bytes_str(t.weight_bytes).c_str(), bytes_str(t.kv_read + t.kv_written).c_str(),
                bytes_str(t.act_read + t.act_written).c_str(), p.total.intensity(),
                bound_name(roofline_bound(p.total, ceil)));
    std::printf("  bound: at least %s per pass, at most %.1f tokens/s\n", seconds_str(s).c_str(), double(p.rows) / s);
}

void run_explain(ExplainArgs& a) {
    if (a.threads_set && a.threads <= 0) throw Error("-t/--threads " + std::to_string(a.threads) + " must be >= 1");
    if (a.tokens < 1) throw Error("-T/--tokens " + std::to_string(a.tokens) + " must be >= 1");
    if (a.context < 1) throw Error("-c/--ctx-size " + std::to_string(a.context) + " must be >= 1");
    if (a.kv_type != "f32" && a.kv_type != "f16") throw Error("--kv-type '" + a.kv_type + "' must be f32 or f16");
    if (a.bandwidth_set && !(a.bandwidth > 0)) throw Error("--bandwidth " + std::to_string(a.bandwidth) + " must be > 0");
    if (a.peak_set && !(a.peak > 0)) throw Error("--peak " + std::to_string(a.peak) + " must be > 0");
    const int threads = a.threads_set ? a.threads : omp_get_max_threads();

    std::unique_ptr<ModelFile> file = a.model.open();
    ExplainOptions opt;
    opt.tokens = a.tokens;
    opt.context = a.context;
    opt.kv_type = a.kv_type == "f16" ? DType::F16 : DType::F32;
    opt.exact = a.model.exact;
    opt.gpu = a.model.on_gpu();
    const Explain e = explain_model(*file, opt);
    const Config& c = e.config;

    // The machine: the saved probe (measured now when there is none), or the overrides.
    Ceilings ceil;
    std::string source;
    if (a.bandwidth_set && a.peak_set) {
        ceil.threads = threads;
        source = "given with --bandwidth and --peak";
    } else if (opt.gpu) {
        if (std::optional<Ceilings> saved = load_ceilings(gpu_ceilings_path()); !saved || saved->device != "cuda")
            std::fprintf(stderr, "ridge: no saved GPU probe at %s: measuring now (see ridge probe --device cuda)...\n",
                         gpu_ceilings_path().c_str());
        ceil = gpu_ceilings_for();
        source = "GPU probe of " + ceil.measured_at + ", " + ceil.path;
        if (a.bandwidth_set || a.peak_set) source += ", with --" + std::string(a.bandwidth_set ? "bandwidth" : "peak");
    } else {
        const std::string path = default_ceilings_path(threads);
        std::optional<Ceilings> saved = load_ceilings(path);
        if (!saved || saved->threads != threads)
            std::fprintf(stderr, "ridge: no saved probe for %d threads at %s: measuring now (see ridge probe)...\n",
                         threads, path.c_str());
        ceil = ceilings_for(threads);
        source = "probe of " + ceil.measured_at + ", " + ceil.path;
        if (a.bandwidth_set || a.peak_set) source += ", with --" + std::string(a.bandwidth_set ? "bandwidth" : "peak");
    }
    if (a.bandwidth_set) ceil.bandwidth_gbs = a.bandwidth;
    if (a.peak_set) ceil.fma_gflops = a.peak, ceil.matmul_gflops = 0, ceil.reference_gflops = 0;  // the given peak alone

    const std::string name = a.model.synthetic.empty() ? file->path() : "synthetic " + a.model.synthetic;
    std::printf("model: %s (%s, %d layers, d %d, %d heads (%d kv) of %d, ff %d, vocab %d; %s params)\n",
                name.c_str(), c.arch.c_str(), c.n_layers, c.n_embd, c.n_heads, c.n_kv_heads, c.head_dim, c.n_ff,
                c.n_vocab, si(double(e.n_params)).c_str());
    std::printf("machine: %d threads, bandwidth %.1f GB/s, peak %.1f GFLOP/s -> I* = %.2f FLOP/byte (%s)\n",
                ceil.threads, ceil.bandwidth_gbs, ceil.peak_gflops(), ceil.ridge_point(), source.c_str());
    if (ceil.int_dot_gflops > 0 && !a.peak_set)
        std::printf("integer roof: %.1f GFLOP/s (%s), the quantized matmuls' own compute ceiling -> I* = %.2f "
                    "FLOP/byte; t_min below keeps the FMA peak\n",
                    ceil.int_dot_gflops, ceil.int_dot_name.c_str(), ceil.int_dot_gflops / ceil.bandwidth_gbs);
    std::printf("costs are the kernels' formulas (kernels/cpu *_cost), not measurements: (m×k)·(k×n) is 2mnk FLOPs; "
                "weights in their storage type; FLOP/B = FLOPs / (weight + KV bytes), the bytes that stream from "
                "memory (activations, act, stay in cache); t_min = max(FLOPs / peak, those bytes / bandwidth)\n");

    // The table: the pass -T asks for (a decode step at context c when T = 1).
    const ExplainPhase& p = a.tokens == 1 ? e.decode : e.prefill;
    std::printf("\n");
    if (a.tokens == 1)
        std::printf("decode step: 1 row at position %d, attending to c = %d positions; KV cache %s\n", a.context - 1,
                    a.context, a.kv_type.c_str());
    else
        std::printf("prefill: T = %d rows at positions 0..%d in one pass (causal attention); KV cache %s\n", a.tokens,
                    a.tokens - 1, a.kv_type.c_str());
    std::printf("one layer (layer 0; each of the %d layers%s):\n", c.n_layers,
                e.layers_differ ? " has these ops, some with other weight types" : " is the same");
    print_header_row();
    print_ops(p.layer, ceil);
    const Cost layer0 = [&] {
        Cost s;
        for (const ExplainOp& op : p.layer) s += op.cost;
        return s;
    }();
    print_row("layer", "sum of the above", "", layer0, ceil);
    print_row("all layers", "× " + std::to_string(c.n_layers), "", p.layers, ceil);
    std::printf("outside the layers (embedding before, output head after; logits for the last row only):\n");
    print_ops(p.outside, ceil);
    print_row("pass", "everything", "", p.total, ceil);

    std::printf("\n");
    const bool one = a.tokens == 1;
    print_pass("prefill of T = " + std::to_string(a.tokens) + (one ? " token" : " tokens") + " (one pass of " +
                   std::to_string(a.tokens) + (one ? " row):" : " rows):"),
               e.prefill, ceil);
    print_pass("decode at context c = " + std::to_string(a.context) + " (one row per pass):", e.decode, ceil);
    std::printf("  reference: 2N = %sFLOP per token for N = %s parameters; decode reads every weight once "
                "(the embedding table one row): tokens/s <= bandwidth / weight bytes = %.1f\n",
                si(2.0 * double(e.n_params)).c_str(), si(double(e.n_params)).c_str(),
                ceil.bandwidth_gbs * 1e9 / e.decode.total.weight_bytes);
    if (a.tokens > 1) {
        std::printf("  its attention, per layer (the KV cache read grows with c):\n");
        for (const ExplainOp& op : e.decode.layer)
            if (op.cost.kv_read + op.cost.kv_written > 0) print_row(op.name, op.shape, op.type, op.cost, ceil);
    }

    std::printf("\nKV cache at %lld positions: f32 %sB, f16 %sB  (2 · %d layers · %d kv heads · %d · %lld positions "
                "· 4 or 2 bytes)\n",
                (long long)e.n_ctx, si(double(e.kv_bytes_f32)).c_str(), si(double(e.kv_bytes_f16)).c_str(),
                c.n_layers, c.n_kv_heads, c.head_dim, (long long)e.n_ctx);
    std::printf("memory to run (context %lld, T = %d): weights %sB + KV cache (%s) %sB + activations %sB = %sB\n",
                (long long)e.n_ctx, a.tokens, si(double(e.weight_bytes)).c_str(), a.kv_type.c_str(),
                si(double(opt.kv_type == DType::F16 ? e.kv_bytes_f16 : e.kv_bytes_f32)).c_str(),
                si(double(e.activation_bytes)).c_str(), si(double(e.memory_bytes())).c_str());
    if (c.n_ctx_train > 0 && e.n_ctx > c.n_ctx_train)
        std::printf("note: context %lld is past the %d positions the model was trained for\n", (long long)e.n_ctx,
                    c.n_ctx_train);
    std::printf("kernels (planned at load; rows: decode rows and short prompts, tiled: prompt chunks):\n");
    for (const std::string& line : e.plan) std::printf("  %s\n", line.c_str());
}

}  // namespace

void register_explain(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand(
        "explain", "The roofline on paper: each op's FLOPs, bytes, intensity and bound; KV cache and memory");
    auto a = std::make_shared<ExplainArgs>();
    a->model.add_options(cmd, false);
    a->model.add_exact_option(cmd);
    cmd->add_option("-T,--tokens", a->tokens, "prompt tokens in one prefill pass (1: show a decode step)")
        ->capture_default_str();
    cmd->add_option("-c,--ctx-size,--context", a->context,
                    "the context the decode step fills (it attends to this many positions)")->capture_default_str();
    cmd->add_option("-t,--threads", a->threads, "threads whose probe to compare with (default: all, as generate)")
        ->each([a](const std::string&) { a->threads_set = true; });
    cmd->add_option("--kv-type", a->kv_type, "KV cache element type: f32 or f16")->capture_default_str();
    cmd->add_option("--bandwidth", a->bandwidth, "memory bandwidth in GB/s instead of the probe's")
        ->each([a](const std::string&) { a->bandwidth_set = true; });
    cmd->add_option("--peak", a->peak, "peak GFLOP/s instead of the probe's")
        ->each([a](const std::string&) { a->peak_set = true; });
    cmd->callback([a] { run_explain(*a); });
}

}  // namespace ridge::cli
