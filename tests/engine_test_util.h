// Helpers shared by the engine tests: model files opened once per process (stories260K and SmolLM2
// are read by many cases) and a field-by-field comparison of two costs.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/model.h"
#include "kernels/cpu/cost.h"
#include "weights/model_file.h"

// Under AddressSanitizer every multiply-add of the scalar kernels is instrumented and a 135M
// model runs ~20x slower: tests on the real model run shorter inputs in that build (the release
// build runs them whole).
#if defined(__SANITIZE_ADDRESS__)
#define RIDGE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RIDGE_TEST_SANITIZED 1
#endif
#endif

namespace ridge::test {

#ifdef RIDGE_TEST_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

struct Loaded {
    std::unique_ptr<ModelFile> file;
    Model model;
    std::unique_ptr<Engine> fast;
    mutable std::unique_ptr<Engine> exact_;  // made on first use

    // The model on the CPU: the default fast path, or --exact (f32 activations in every matmul).
    const Engine& engine() const { return *fast; }
    const Engine& exact() const {
        if (!exact_) exact_ = std::make_unique<Engine>(model, RunOptions{.exact = true});
        return *exact_;
    }
};

// The model at `path`, opened on first use and kept for the rest of the process.
inline const Loaded& load(const std::string& path) {
    static std::vector<std::pair<std::string, std::unique_ptr<Loaded>>> cache;
    for (auto& [p, l] : cache)
        if (p == path) return *l;
    auto l = std::make_unique<Loaded>();
    l->file = ModelFile::open(path);
    l->model = Model::from_file(*l->file);
    l->fast = std::make_unique<Engine>(l->model);
    cache.emplace_back(path, std::move(l));
    return *cache.back().second;
}

// Field by field, to a relative 1e-12 (sums taken in another order may differ in the last bit).
inline void expect_cost_near(const cpu::Cost& a, const cpu::Cost& b, const std::string& what) {
    auto near = [&](double x, double y, const char* field) {
        EXPECT_NEAR(x, y, 1e-12 * std::max(std::abs(x), std::abs(y))) << what << ": " << field;
    };
    near(a.flops, b.flops, "flops");
    near(a.weight_bytes, b.weight_bytes, "weight_bytes");
    near(a.act_read, b.act_read, "act_read");
    near(a.act_written, b.act_written, "act_written");
    near(a.kv_read, b.kv_read, "kv_read");
    near(a.kv_written, b.kv_written, "kv_written");
}

// A listing of a CPU's caches as Linux gives one, in dir (made afresh): index<i>/size holding
// sizes[i] ("48K", "491520K", "32M"), for last_level_cache_bytes and $RIDGE_CPU_CACHE_DIR.
inline std::string write_cache_listing(const std::string& dir, const std::vector<std::string>& sizes) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    for (size_t i = 0; i < sizes.size(); i++) {
        const std::string index = dir + "/index" + std::to_string(i);
        std::filesystem::create_directories(index);
        std::ofstream(index + "/size") << sizes[i] << "\n";
    }
    return dir;
}

}  // namespace ridge::test
