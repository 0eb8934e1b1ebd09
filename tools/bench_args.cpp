// BenchArgs (see bench_args.h): option binding, checks, and fetching the ceilings.
#include "tools/bench_args.h"

#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <string>

#include "weights/error.h"

namespace ridge::cli {

void BenchArgs::add_options(CLI::App* cmd) {
    model.add_options(cmd, /*with_tokenizer=*/false);
    model.add_exact_option(cmd);
    cmd->add_option("-p,--n-prompt", opt.n_prompt, "prefill test: prompt tokens (0 skips it)")->capture_default_str();
    cmd->add_option("-n,--n-gen", opt.n_gen, "decode test: generated tokens (0 skips it)")->capture_default_str();
    cmd->add_option("-d,--depth", opt.n_decode_prompt,
                    "decode test: tokens in the KV cache before its first timed step (an untimed prompt; the "
                    "attention's KV bytes grow with it)")
        ->capture_default_str();
    cmd->add_option("-r,--repetitions", opt.reps, "timed repetitions of each test (after one warm-up)")
        ->capture_default_str();
    cmd->add_option("-t,--threads", threads, "CPU threads (default: all)")->each([this](const std::string&) {
        threads_set = true;
    });
    cmd->add_option(rows_option, opt.max_rows, "most prompt tokens per forward pass")->capture_default_str();
    cmd->add_option("--kv-type", kv_type, "KV cache element type: f32 or f16")->capture_default_str();
    cmd->add_option("--seed", opt.seed, "seed of the random prompt and decode token ids")->capture_default_str();
}

int BenchArgs::check_and_apply() {
    if (opt.n_prompt < 0) throw Error("-p/--n-prompt " + std::to_string(opt.n_prompt) + " must be >= 0");
    if (opt.n_gen < 0) throw Error("-n/--n-gen " + std::to_string(opt.n_gen) + " must be >= 0");
    if (opt.n_prompt == 0 && opt.n_gen == 0) throw Error("-p 0 and -n 0 leave no test to run");
    if (opt.n_decode_prompt < 1) throw Error("-d/--depth " + std::to_string(opt.n_decode_prompt) + " must be >= 1");
    if (opt.reps < 1) throw Error("-r/--repetitions " + std::to_string(opt.reps) + " must be >= 1");
    if (threads_set && threads < 1) throw Error("-t/--threads " + std::to_string(threads) + " must be >= 1");
    if (opt.max_rows < 1) {
        std::string name = rows_option;
        std::replace(name.begin(), name.end(), ',', '/');
        throw Error(name + " " + std::to_string(opt.max_rows) + " must be >= 1");
    }
    if (kv_type != "f32" && kv_type != "f16") throw Error("--kv-type '" + kv_type + "' must be f32 or f16");
    opt.kv_type = kv_type == "f16" ? DType::F16 : DType::F32;
    if (threads_set) omp_set_num_threads(threads);
    return omp_get_max_threads();
}

std::vector<int> parse_batch_sizes(const std::string& list, const std::string& option) {
    std::vector<int> sizes;
    size_t start = 0;
    while (true) {
        const size_t comma = list.find(',', start);
        const std::string item = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (item.empty())
            throw Error(option + " '" + list + "': " + (list.empty() ? "no batch sizes given" : "an empty entry"));
        size_t used = 0;
        long v = 0;
        try {
            v = std::stol(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used != item.size() || v < INT_MIN || v > INT_MAX)
            throw Error(option + " '" + list + "': '" + item + "' is not a whole number");
        sizes.push_back(int(v));
        if (comma == std::string::npos) return sizes;
        start = comma + 1;
    }
}

Ceilings machine_ceilings(int threads, bool gpu) {
    if (gpu) {
        const std::optional<Ceilings> saved = load_ceilings(gpu_ceilings_path());
        if (!saved || saved->device != "cuda")
            std::fprintf(stderr, "ridge: no GPU ceilings saved (%s): measuring them now, as `ridge probe --device cuda` does\n",
                         gpu_ceilings_path().c_str());
        return gpu_ceilings_for();
    }
    const std::string path = default_ceilings_path(threads);
    const std::optional<Ceilings> saved = load_ceilings(path);
    if (!saved || saved->threads != threads)
        std::fprintf(stderr, "ridge: no ceilings saved for %d threads (%s): measuring them now, as `ridge probe` does\n",
                     threads, path.c_str());
    return ceilings_for(threads);
}

std::string si(double v) {
    const char* prefixes[] = {"", "k", "M", "G", "T"};
    int i = 0;
    while (std::abs(v) >= 1000 && i < 4) v /= 1000, i++;
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, prefixes[i]);
    return buf;
}

std::string types_of(const ModelStats& s) {
    std::string t;
    for (const TypeStats& ts : s.by_type) t += (t.empty() ? "" : "+") + std::string(dtype_name(ts.type));
    return t;
}

nlohmann::ordered_json cost_json(const Cost& c) {
    nlohmann::ordered_json j;
    j["flops"] = c.flops;
    j["bytes"] = c.memory_bytes();
    j["weight_bytes"] = c.weight_bytes;
    j["kv_read_bytes"] = c.kv_read;
    j["kv_written_bytes"] = c.kv_written;
    j["activation_read_bytes"] = c.act_read;
    j["activation_written_bytes"] = c.act_written;
    return j;
}

nlohmann::ordered_json ceilings_json(const Ceilings& c) {
    return {{"device", c.device},
            {"threads", c.threads},
            {"bandwidth_gbs", c.bandwidth_gbs},
            {"peak_gflops", c.peak_gflops()},
            {"int_dot_gflops", c.int_dot_gflops > 0 ? nlohmann::ordered_json(c.int_dot_gflops) : nullptr},
            {"matmul_gflops", c.matmul_gflops},
            {"ridge_point", c.ridge_point()},
            {"path", c.path},
            {"cpu", c.cpu},
            {"measured_at", c.measured_at}};
}

nlohmann::ordered_json model_json(const std::string& path, const Config& c, const ModelStats& s) {
    return {{"path", path},
            {"arch", c.arch},
            {"n_params", s.n_params},
            {"n_layers", c.n_layers},
            {"n_embd", c.n_embd},
            {"weight_types", types_of(s)},
            {"weight_bytes", s.weight_bytes},
            {"decode_weight_bytes", s.decode_bytes_per_token}};
}

}  // namespace ridge::cli
