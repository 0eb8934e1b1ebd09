// Running the ridge program from a test: arguments quoted for the shell, environment variables set
// for that run only, standard input from a string, stdout and stderr captured through per-process
// temporary files (ctest runs the cases of one file as parallel processes), and a probe file
// (measure/ceilings.h's JSON) written by hand so that bench, explain and roofline compare with known
// ceilings instead of measuring them. Also readers for `ridge info`'s "label: number" lines and
// its by-type table.
#pragma once
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include "test_paths.h"

namespace cli_test {

inline std::string read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

inline std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// A fresh path in this process's scratch directory: name_<n>.ext, n counting up.
inline std::string scratch(const std::string& name) {
    static int n = 0;
    const std::string dir = ::testing::TempDir() + "ridge_cli_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    return dir + "/" + std::to_string(n++) + "_" + name;
}

struct RunResult {
    int rc = -1;
    std::string out, err;
    std::vector<std::string> err_lines() const {
        std::vector<std::string> lines;
        std::stringstream ss(err);
        for (std::string l; std::getline(ss, l);) lines.push_back(l);
        return lines;
    }
};

using Env = std::vector<std::pair<std::string, std::string>>;

// Runs ridge with these arguments and environment (OMP_NUM_THREADS=2 unless env sets it), `input`
// on its standard input (none: /dev/null).
inline RunResult ridge(const std::vector<std::string>& args, const Env& env = {}, const std::string& input = "") {
    const std::string in = input.empty() ? "/dev/null" : scratch("in.txt");
    if (!input.empty()) std::ofstream(in, std::ios::binary) << input;
    const std::string out = scratch("out.txt"), err = scratch("err.txt");
    // Appended piece by piece (GCC 12 warns falsely, -Wrestrict, on "literal" + std::string&&).
    std::string cmd = "OMP_NUM_THREADS=2";
    for (const auto& [k, v] : env) cmd.append(" ").append(k).append("=").append(quote(v));
    cmd.append(" ").append(quote(RIDGE_BINARY));
    for (const std::string& a : args) cmd.append(" ").append(quote(a));
    cmd.append(" <").append(quote(in)).append(" >").append(quote(out)).append(" 2>").append(quote(err));
    const int status = std::system(cmd.c_str());
    RunResult r;
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = read_file(out);
    r.err = read_file(err);
    if (!input.empty()) std::remove(in.c_str());
    std::remove(out.c_str()), std::remove(err.c_str());
    return r;
}

// The probe_version `ridge probe` writes now (ridge::kProbeVersion; test_cli_probe.cpp checks that
// they agree): saved files of older versions are measured again.
inline constexpr int kProbeFileVersion = 3;

// A probe file as `ridge probe` saves it, with the given ceilings (the matmul kernel's at half the
// FMA peak unless given); returns its path.
inline std::string write_probe(double bandwidth_gbs, double fma_gflops, int threads = 2, double matmul_gflops = 0,
                               double int_dot_gflops = 0) {
    nlohmann::ordered_json j;
    j["probe_version"] = kProbeFileVersion;
    j["threads"] = threads;
    j["bandwidth_gbs"] = bandwidth_gbs;
    j["bandwidth_spread"] = 0.05;
    j["fma_gflops"] = fma_gflops;
    if (int_dot_gflops > 0) j["int_dot_gflops"] = int_dot_gflops, j["int_dot_name"] = "vpdpwssd zmm";
    j["matmul_gflops"] = matmul_gflops > 0 ? matmul_gflops : 0.5 * fma_gflops;
    j["matmul_name"] = "written by a test";
    j["ridge_point"] = fma_gflops / bandwidth_gbs;
    j["quick"] = true;
    j["bandwidth_buffer_bytes"] = 1 << 27;
    j["reps"] = 3;
    j["cpu"] = "Test CPU";
    j["measured_at"] = "2026-01-02T03:04:05Z";
    const std::string path = scratch("probe.json");
    std::ofstream(path, std::ios::binary) << j.dump(2) << "\n";
    return path;
}

// One "ridge: ..." line on stderr mentioning `mention`, nothing on stdout, a non-zero exit.
inline void expect_one_line_error(const std::vector<std::string>& args, const std::string& mention,
                                  const Env& env = {}) {
    const RunResult r = ridge(args, env);
    std::string cmd;
    for (const auto& a : args) cmd += a + " ";
    EXPECT_NE(r.rc, 0) << cmd;
    EXPECT_EQ(r.out, "") << cmd;
    const auto lines = r.err_lines();
    ASSERT_EQ(lines.size(), 1u) << cmd << "\n" << r.err;
    EXPECT_EQ(lines[0].rfind("ridge: ", 0), 0u) << cmd << "\n" << lines[0];
    EXPECT_NE(lines[0].find(mention), std::string::npos) << cmd << "\n" << lines[0];
}

// The integer after "<label>: " at the start of a line (leading spaces allowed), or -1.
inline int64_t field(const std::string& text, const std::string& label) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        const size_t p = line.find_first_not_of(' ');
        if (p == std::string::npos || line.compare(p, label.size() + 2, label + ": ") != 0) continue;
        return std::stoll(line.substr(p + label.size() + 2));
    }
    return -1;
}

// The row "  TYPE  tensors  elements  bytes" of `ridge info`'s by-type table.
inline std::vector<int64_t> type_row(const std::string& text, const std::string& type) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream ls(line);
        std::string t;
        int64_t a, b, c;
        if (ls >> t && t == type && ls >> a >> b >> c) return {a, b, c};
    }
    return {};
}

}  // namespace cli_test
