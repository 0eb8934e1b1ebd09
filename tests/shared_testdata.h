// The shared test data a test program reads (../shared/testdata, or $RIDGE_TESTDATA_DIR; what each
// file is and where it came from: its SOURCES.md). A clone without it still builds and runs the
// suite: tools/testdata.sh fetches what public packages ship (llama.cpp's vocabularies, their test
// strings and the chat templates), and a program that needs anything else names it once,
//     RIDGE_SHARED_TESTDATA("gguf-stories260K/stories260K.gguf", "llama2c-stories260K/tok512.bin");
// so that, where one is missing, each of its tests is skipped (ctest lists them as not run) with a
// line naming the file. Under RIDGE_REQUIRE_TESTDATA=1 (CI, which has the shared data) a missing
// file fails them instead.
#pragma once
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <vector>

#include "test_paths.h"

namespace ridge_test_paths {

class SharedTestData : public ::testing::Environment {
public:
    explicit SharedTestData(std::vector<std::string> files) : files_(std::move(files)) {}
    void SetUp() override {
        for (const std::string& f : files_) {
            const std::string path = std::string(RIDGE_TESTDATA_DIR) + "/" + f;
            if (std::filesystem::exists(path)) continue;
            const char* require = std::getenv("RIDGE_REQUIRE_TESTDATA");
            if (require != nullptr && std::string(require) == "1") {
                // Not FAIL(): GoogleTest then lists every test as skipped, which ctest would count.
                std::fprintf(stderr, "missing shared test data %s (RIDGE_REQUIRE_TESTDATA=1)\n", path.c_str());
                std::exit(1);
            }
            // GoogleTest reports tests skipped here as passed; this line is what ctest counts
            // (gtest_discover_tests's SKIP_REGULAR_EXPRESSION).
            std::printf("[  SKIPPED ] needs %s, which only the shared test data has (../shared/testdata)\n",
                        path.c_str());
            GTEST_SKIP();
        }
    }

private:
    std::vector<std::string> files_;
};

inline bool register_shared_testdata(std::initializer_list<const char*> files) {
    ::testing::AddGlobalTestEnvironment(new SharedTestData({files.begin(), files.end()}));
    return true;
}

}  // namespace ridge_test_paths

#define RIDGE_SHARED_TESTDATA(...)                                      \
    [[maybe_unused]] static const bool ridge_shared_testdata_registered = \
        ::ridge_test_paths::register_shared_testdata({__VA_ARGS__})
