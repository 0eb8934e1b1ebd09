// `ridge info (-m MODEL | --synthetic NAME) [--metadata] [--tensors]`: what a model holds and
// what it costs to run: the config, parameter count, bytes per weight type, the weight bytes one
// decode step reads and the KV cache bytes per token (numbers from weights/model_stats.h),
// optionally the metadata and every tensor.
#include <cinttypes>
#include <cstdio>
#include <string>

#include "engine/engine.h"
#include "tools/commands.h"
#include "tools/model_args.h"
#include "weights/error.h"
#include "weights/model_file.h"
#include "weights/model_stats.h"

namespace ridge::cli {

namespace {

// "94.2 MiB" style, for the human reading beside the exact number.
std::string human_bytes(uint64_t b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(b);
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
    return buf;
}

std::string human_count(int64_t n) {
    char buf[32];
    if (n >= 1000000000) std::snprintf(buf, sizeof buf, "%.2f B", double(n) / 1e9);
    else if (n >= 1000000) std::snprintf(buf, sizeof buf, "%.2f M", double(n) / 1e6);
    else if (n >= 1000) std::snprintf(buf, sizeof buf, "%.2f K", double(n) / 1e3);
    else std::snprintf(buf, sizeof buf, "%" PRId64, n);
    return buf;
}

void print_info(const ModelArgs& args, bool list_metadata, bool list_tensors) {
    auto m = args.open();
    const Config& c = m->config();
    const ModelStats s = compute_stats(*m);

    switch (m->format()) {
        case ModelFormat::GGUF: {
            const GGUFFile* g = m->gguf();
            std::printf("file: %s\n", m->path().c_str());
            std::printf("format: GGUF v%u (%zu metadata keys, %zu tensors, alignment %zu, data at byte %zu)\n",
                        g->version(), g->metadata().size(), g->tensors().size(), g->alignment(), g->data_offset());
            std::printf("name: %s\n", g->get_string_or("general.name", "(none)").c_str());
            break;
        }
        case ModelFormat::Llama2c:
            std::printf("file: %s\n", m->path().c_str());
            std::printf("format: llama2.c checkpoint (%zu tensors)\n", m->tensors().size());
            break;
        case ModelFormat::Synthetic:
            std::printf("model: %s\n", m->path().c_str());
            std::printf("format: synthetic (%zu tensors of seeded random weights in memory; offsets are into "
                        "that memory; the text it writes is meaningless)\n",
                        m->tensors().size());
            break;
    }
    std::printf("architecture: %s\n", c.arch.c_str());
    std::printf("config:\n");
    std::printf("  n_embd: %d\n", c.n_embd);
    std::printf("  n_layers: %d\n", c.n_layers);
    std::printf("  n_ff: %d\n", c.n_ff);
    std::printf("  n_heads: %d\n", c.n_heads);
    std::printf("  n_kv_heads: %d\n", c.n_kv_heads);
    std::printf("  head_dim: %d\n", c.head_dim);
    std::printf("  n_vocab: %d\n", c.n_vocab);
    std::printf("  n_ctx_train: %d\n", c.n_ctx_train);
    std::printf("  rope_dim: %d\n", c.rope_dim);
    std::printf("  rope_freq_base: %g\n", double(c.rope_freq_base));
    std::printf("  rope_style: %s\n", c.rope_style == RopeStyle::Norm ? "norm" : "neox");
    std::printf("  norm_eps: %g\n", double(c.norm_eps));
    std::printf("  tied_output: %s\n", c.tied_output ? "yes" : "no");

    std::printf("parameters: %" PRId64 " (%s)\n", s.n_params, human_count(s.n_params).c_str());
    std::printf("weights by type:\n");
    std::printf("  %-6s %8s %14s %14s\n", "type", "tensors", "elements", "bytes");
    for (const TypeStats& t : s.by_type)
        std::printf("  %-6s %8" PRId64 " %14" PRId64 " %14" PRIu64 "\n", std::string(dtype_name(t.type)).c_str(),
                    t.n_tensors, t.n_elements, t.bytes);
    std::printf("weight bytes: %" PRIu64 " (%s)\n", s.weight_bytes, human_bytes(s.weight_bytes).c_str());
    std::printf("decode bytes per token: %" PRIu64 " (%s; includes the output head %" PRIu64
                " and one embedding row %" PRIu64 ")\n",
                s.decode_bytes_per_token, human_bytes(s.decode_bytes_per_token).c_str(), s.output_head_bytes,
                s.embedding_row_bytes);
    std::printf("kv cache bytes per token: f32 %" PRIu64 ", f16 %" PRIu64 "\n", s.kv_bytes_per_token_f32,
                s.kv_bytes_per_token_f16);
    // The plan of every matrix on this CPU (ridge explain shows --exact's and cuda's); a file ridge
    // cannot run (another architecture, a vocabulary without weights) says why instead.
    try {
        const Model model = Model::from_file(*m);
        std::printf("kernels (planned at load; rows: decode rows and short prompts, tiled: prompt chunks):\n");
        for (const std::string& line : describe_plan(make_plan(model, RunOptions{}))) std::printf("  %s\n", line.c_str());
    } catch (const Error& e) {
        std::printf("kernels: none planned (%s)\n", e.what());
    }

    if (list_metadata && m->gguf()) {
        std::printf("metadata:\n");
        for (const auto& [key, value] : m->gguf()->metadata())
            std::printf("  %s: %s\n", key.c_str(), m->gguf()->value_str(key).c_str());
    }
    if (list_tensors) {
        std::printf("tensors:\n");
        std::printf("  %-32s %-6s %-22s %12s %12s\n", "name", "type", "shape", "bytes", "offset");
        for (const TensorView& t : m->tensors())
            std::printf("  %-32s %-6s %-22s %12zu %12" PRIu64 "\n", t.name.c_str(),
                        std::string(dtype_name(t.type)).c_str(), shape_str(t.shape).c_str(), t.nbytes,
                        m->file_offset(t));
    }
}

}  // namespace

void register_info(CLI::App& app) {
    CLI::App* cmd = app.add_subcommand("info", "Show a model's config, sizes and per-token costs");
    auto model = std::make_shared<ModelArgs>();
    auto metadata = std::make_shared<bool>(false);
    auto tensors = std::make_shared<bool>(false);
    model->add_options(cmd, /*with_tokenizer=*/false);
    cmd->add_flag("--metadata", *metadata, "also list every GGUF metadata key and (shortened) value");
    cmd->add_flag("--tensors", *tensors, "also list every tensor: name, type, shape, bytes, file offset");
    cmd->callback([model, metadata, tensors] { print_info(*model, *metadata, *tensors); });
}

}  // namespace ridge::cli
