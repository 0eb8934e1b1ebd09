// Ceilings (see ceilings.h): measuring this machine's roofline with the probes of kernels/cpu/probe.h
// and the engine's own f32 matmul, and keeping the result as a small JSON file (nlohmann-json).
// A missing file is "not measured yet"; a file that is there but unreadable is a one-line Error.
#include "measure/ceilings.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/gpu.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/probe.h"
#include "weights/error.h"

namespace ridge {

namespace {

using Clock = std::chrono::steady_clock;

// "AMD EPYC 7B13 64-Core Processor": the first "model name" line of /proc/cpuinfo (x86), else
// the first "Model"/"Hardware" line (ARM boards), else "unknown".
std::string cpu_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string line, fallback;
    while (std::getline(in, line)) {
        const size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::string key = line.substr(0, colon);
        key.erase(key.find_last_not_of(" \t") + 1);
        std::string value = line.substr(colon + 1);
        value.erase(0, value.find_first_not_of(" \t"));
        if (value.empty()) continue;
        if (key == "model name") return value;
        if ((key == "Model" || key == "Hardware") && fallback.empty()) fallback = value;
    }
    return fallback.empty() ? "unknown" : fallback;
}

std::string iso8601_now() {
    const std::time_t t = std::time(nullptr);
    std::tm utc{};
    gmtime_r(&t, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return buf;
}

// (max - min) / median of the samples' values.
double spread(const std::vector<ProbeSample>& s, double med) {
    if (s.empty() || med <= 0) return 0;
    auto [lo, hi] = std::minmax_element(s.begin(), s.end(),
                                        [](const ProbeSample& a, const ProbeSample& b) { return a.value < b.value; });
    return (hi->value - lo->value) / med;
}

double median_value(const std::vector<ProbeSample>& s) {
    std::vector<double> v;
    for (const ProbeSample& x : s) v.push_back(x.value);
    return median(v);
}

// FMA rounds per thread (or rounds of another compute probe, `probe`) so that one repetition lasts
// about `target` seconds on this machine (calibrated on a short run; the loop's speed does not
// depend on the data).
long fma_iters_for(double target_s, int threads,
                   std::vector<ProbeSample> (*probe)(long, int, int) = probe_fma_peak) {
    long iters = 1 << 20;
    for (int round = 0; round < 4; round++) {
        const std::vector<ProbeSample> s = probe(iters, 1, threads);
        if (s.empty() || s[0].seconds <= 0) break;
        if (s[0].seconds >= target_s / 4) return std::max(1L, long(double(iters) * target_s / s[0].seconds));
        iters *= 8;
    }
    return iters;
}

// The engine's f32 matmul (what matmul() runs for F32 weights: v2_eigen) on an (n x n) . (n x n)
// problem; one GFLOP/s value per repetition after a warm-up call. Eigen parallelizes with OpenMP,
// so the caller sets the thread count.
std::vector<double> probe_matmul_f32(int64_t n, int reps) {
    std::vector<float> w(size_t(n * n)), x(size_t(n * n)), y(size_t(n * n));  // (n, n) each
    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& v : w) v = dist(rng);
    for (float& v : x) v = dist(rng);
    TensorView W;
    W.name = "probe.w";
    W.type = DType::F32;
    W.shape = {n, n};
    W.data = reinterpret_cast<const uint8_t*>(w.data());
    W.nbytes = w.size() * sizeof(float);
    cpu::matmul(W, x.data(), n, y.data());  // warm-up: Eigen's packing buffers, page faults
    std::vector<double> out;
    for (int r = 0; r < reps; r++) {
        const auto t0 = Clock::now();
        const Cost cost = cpu::matmul(W, x.data(), n, y.data());
        const double s = std::chrono::duration<double>(Clock::now() - t0).count();
        out.push_back(cost.flops / s / 1e9);
    }
    return out;
}

// Sets OpenMP's thread count for the probes and restores it afterwards.
struct ScopedThreads {
    int saved;
    explicit ScopedThreads(int n) : saved(omp_get_max_threads()) { omp_set_num_threads(n); }
    ~ScopedThreads() { omp_set_num_threads(saved); }
};

bool positive_finite(double v) { return std::isfinite(v) && v > 0; }

}  // namespace

double Ceilings::peak_gflops() const {
    if (device != "cuda") return fma_gflops;
    return std::max({fma_gflops, matmul_gflops, reference_gflops});
}

double Ceilings::attainable_gflops(double intensity) const {
    return std::min(peak_gflops(), intensity * bandwidth_gbs);
}

double Ceilings::int_attainable_gflops(double intensity) const {
    return int_dot_gflops > 0 ? std::min(int_dot_gflops, intensity * bandwidth_gbs) : 0.0;
}

std::string default_ceilings_path(int threads) {
    if (const char* p = std::getenv("RIDGE_PROBE_FILE"); p && *p) return p;
    const std::string file = "ridge/probe-t" + std::to_string(threads) + ".json";
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/" + file;
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/" + file;
    return ".cache/" + file;  // no home: beside the working directory
}

std::string gpu_ceilings_path() {
    if (const char* p = std::getenv("RIDGE_GPU_PROBE_FILE"); p && *p) return p;
    const std::string file = "ridge/probe-cuda.json";
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/" + file;
    if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/" + file;
    return ".cache/" + file;
}

std::string ceilings_to_json(const Ceilings& c) {
    nlohmann::ordered_json j;
    j["probe_version"] = c.version;
    j["device"] = c.device;
    j["threads"] = c.threads;
    j["bandwidth_gbs"] = c.bandwidth_gbs;
    j["bandwidth_spread"] = c.bandwidth_spread;
    j["fma_gflops"] = c.fma_gflops;
    if (c.device == "cpu" && c.int_dot_gflops > 0) {
        j["int_dot_gflops"] = c.int_dot_gflops;
        j["int_dot_name"] = c.int_dot_name;
    }
    j["matmul_gflops"] = c.matmul_gflops;
    j["matmul_name"] = c.matmul_name;
    if (c.device == "cuda") {
        j["reference_gflops"] = c.reference_gflops;
        j["reference_name"] = c.reference_name;
    }
    j["ridge_point"] = c.ridge_point();  // derived (peak / bandwidth), for readers; not read back
    j["quick"] = c.quick;
    j["bandwidth_buffer_bytes"] = c.bandwidth_bytes;
    if (c.device == "cpu") j["bandwidth_huge_page_bytes"] = c.bandwidth_huge_bytes;
    j["reps"] = c.reps;
    j["cpu"] = c.cpu;
    j["measured_at"] = c.measured_at;
    return j.dump(2) + "\n";
}

std::optional<Ceilings> load_ceilings(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) return std::nullopt;
        throw Error(path + ": cannot read the probe file");
    }
    std::stringstream text;
    text << in.rdbuf();
    Ceilings c;
    try {
        const nlohmann::json j = nlohmann::json::parse(text.str());
        if (!j.is_object()) throw Error("not a JSON object");
        c.version = j.value("probe_version", 1);
        c.device = j.value("device", std::string("cpu"));
        if (c.device != "cpu" && c.device != "cuda") throw Error("device '" + c.device + "' is not cpu or cuda");
        c.threads = j.at("threads").get<int>();
        c.bandwidth_gbs = j.at("bandwidth_gbs").get<double>();
        c.bandwidth_spread = j.value("bandwidth_spread", 0.0);
        c.fma_gflops = j.at("fma_gflops").get<double>();
        c.int_dot_gflops = j.value("int_dot_gflops", 0.0);
        c.int_dot_name = j.value("int_dot_name", std::string());
        c.matmul_gflops = j.value("matmul_gflops", 0.0);
        c.matmul_name = j.value("matmul_name", std::string());
        c.reference_gflops = j.value("reference_gflops", 0.0);
        c.reference_name = j.value("reference_name", std::string());
        c.quick = j.value("quick", false);
        c.bandwidth_bytes = j.value("bandwidth_buffer_bytes", size_t(0));
        c.bandwidth_huge_bytes = j.value("bandwidth_huge_page_bytes", size_t(0));
        c.reps = j.value("reps", 0);
        c.cpu = j.value("cpu", std::string());
        c.measured_at = j.value("measured_at", std::string());
    } catch (const nlohmann::json::exception& e) {
        std::string what = e.what();
        std::replace(what.begin(), what.end(), '\n', ' ');
        throw Error(path + ": malformed probe file (" + what + "); run `ridge probe` again");
    } catch (const Error& e) {
        throw Error(path + ": malformed probe file (" + e.what() + "); run `ridge probe` again");
    }
    if (c.threads < 1 || !positive_finite(c.bandwidth_gbs) || !positive_finite(c.fma_gflops))
        throw Error(path + ": malformed probe file (threads " + std::to_string(c.threads) + ", bandwidth_gbs " +
                    std::to_string(c.bandwidth_gbs) + ", fma_gflops " + std::to_string(c.fma_gflops) +
                    " must be positive); run `ridge probe` again");
    c.path = path;
    return c;
}

void save_ceilings(const Ceilings& c, const std::string& path) {
    const std::filesystem::path p(path);
    std::error_code ec;
    if (p.has_parent_path()) {
        std::filesystem::create_directories(p.parent_path(), ec);
        if (ec) throw Error(path + ": cannot create directory " + p.parent_path().string() + ": " + ec.message());
    }
    // Written beside the target and renamed, so a reader never sees half a file.
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
        if (!out) throw Error(path + ": cannot write the probe file");
        out << ceilings_to_json(c);
        if (!out.flush()) throw Error(path + ": cannot write the probe file");
    }
    std::filesystem::rename(tmp, p, ec);
    if (ec) throw Error(path + ": cannot write the probe file: " + ec.message());
}

size_t last_level_cache_bytes(const std::string& cache_dir) {
    std::error_code ec;
    std::filesystem::directory_iterator it(cache_dir, ec), end;
    size_t largest = 0;
    for (; !ec && it != end; it.increment(ec)) {
        if (it->path().filename().string().rfind("index", 0) != 0) continue;
        std::ifstream in(it->path() / "size");
        size_t n = 0;
        std::string unit;
        if (!(in >> n)) continue;
        in >> unit;  // "K", "M" or "G" right after the number; nothing for bytes
        const int shift = unit == "K" ? 10 : unit == "M" ? 20 : unit == "G" ? 30 : 0;
        if (!unit.empty() && shift == 0) continue;  // not a size
        largest = std::max(largest, n << shift);
    }
    return largest;
}

size_t last_level_cache_bytes() {
    const char* dir = std::getenv("RIDGE_CPU_CACHE_DIR");
    return last_level_cache_bytes(dir && *dir ? dir : "/sys/devices/system/cpu/cpu0/cache");
}

Ceilings measure_ceilings(const ProbeOptions& opt) {
    if (opt.threads < 1) throw Error("probe: threads " + std::to_string(opt.threads) + " must be >= 1");
    if (opt.reps < 1) throw Error("probe: repetitions " + std::to_string(opt.reps) + " must be >= 1");
    // Quick: a 128 MiB buffer (still 4x a 32 MB L3), 3 repetitions, a 1024^3 matmul.
    const size_t bw_bytes = opt.quick ? std::min(opt.bandwidth_bytes, size_t(128) << 20) : opt.bandwidth_bytes;
    const int reps = opt.quick ? std::min(opt.reps, 3) : opt.reps;
    const int64_t mm_n = opt.quick ? 1024 : 2048;
    const int mm_reps = opt.quick ? 2 : 5;
    const double fma_target_s = opt.quick ? 0.02 : 0.1;
    if (bw_bytes < (size_t(1) << 20))
        throw Error("probe: bandwidth buffer of " + std::to_string(bw_bytes) + " bytes is too small (>= 1 MiB)");

    ScopedThreads scope(opt.threads);
    Ceilings c;
    c.threads = opt.threads;
    c.quick = opt.quick;
    c.bandwidth_bytes = bw_bytes;
    c.reps = reps;
    c.cpu = cpu_name();

    const std::vector<ProbeSample> bw = probe_read_bandwidth(bw_bytes, reps, opt.threads, &c.bandwidth_huge_bytes);
    if (bw.empty()) throw Error("probe: cannot allocate " + std::to_string(bw_bytes) + " bytes for the bandwidth buffer");
    c.bandwidth_gbs = median_value(bw);
    c.bandwidth_spread = spread(bw, c.bandwidth_gbs);

    c.fma_gflops = median_value(probe_fma_peak(fma_iters_for(fma_target_s, opt.threads), reps, opt.threads));
    if (kProbeIntMacs > 0) {
        const long iters = fma_iters_for(fma_target_s, opt.threads, probe_int_dot_peak);
        c.int_dot_gflops = median_value(probe_int_dot_peak(iters, reps, opt.threads));
        c.int_dot_name = probe_int_dot_name();
    }

    c.matmul_gflops = median(probe_matmul_f32(mm_n, mm_reps));
    const std::string n = std::to_string(mm_n);
    c.matmul_name = "v2_eigen f32 " + n + "x" + n + "x" + n;

    c.measured_at = iso8601_now();
    if (!positive_finite(c.bandwidth_gbs) || !positive_finite(c.fma_gflops))
        throw Error("probe: measured bandwidth " + std::to_string(c.bandwidth_gbs) + " GB/s, peak " +
                    std::to_string(c.fma_gflops) + " GFLOP/s: not positive (timer or allocation failed)");
    return c;
}

Ceilings gpu_ceilings_for(bool* measured_now) {
    const std::string path = gpu_ceilings_path();
    if (std::optional<Ceilings> saved = load_ceilings(path); saved && saved->device == "cuda") {
        if (measured_now) *measured_now = false;
        return *saved;
    }
    Ceilings c = measure_gpu_ceilings(false);
    save_ceilings(c, path);
    c.path = path;
    if (measured_now) *measured_now = true;
    return c;
}

Ceilings ceilings_for(int threads, bool* measured_now) {
    const std::string path = default_ceilings_path(threads);
    const std::optional<Ceilings> saved = load_ceilings(path);
    if (saved && saved->threads == threads && saved->device == "cpu" && saved->version >= kProbeVersion) {
        if (measured_now) *measured_now = false;
        return *saved;
    }
    ProbeOptions opt;
    opt.threads = threads;
    Ceilings c = measure_ceilings(opt);
    save_ceilings(c, path);
    c.path = path;
    if (measured_now) *measured_now = true;
    return c;
}

}  // namespace ridge
