// Where the tests and benchmarks find their data, read at run time: $RIDGE_TESTDATA_DIR (the shared
// test data), $RIDGE_MODELS_DIR (downloaded models), $RIDGE_TESTS_DIR (tests/, with its goldens) and
// $RIDGE_BINARY (the ridge program) when set, else the paths this build was configured with
// (*_BUILT_IN). A test binary copied to another machine, as the GPU bundle does, then reads the
// files brought with it.
#pragma once
#include <cstdlib>

namespace ridge_test_paths {
inline const char* from_env(const char* name, const char* built_in) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? v : built_in;
}
}  // namespace ridge_test_paths

#define RIDGE_TESTDATA_DIR ::ridge_test_paths::from_env("RIDGE_TESTDATA_DIR", RIDGE_TESTDATA_DIR_BUILT_IN)
#define RIDGE_MODELS_DIR ::ridge_test_paths::from_env("RIDGE_MODELS_DIR", RIDGE_MODELS_DIR_BUILT_IN)
#define RIDGE_TESTS_DIR ::ridge_test_paths::from_env("RIDGE_TESTS_DIR", RIDGE_TESTS_DIR_BUILT_IN)
#define RIDGE_BINARY ::ridge_test_paths::from_env("RIDGE_BINARY", RIDGE_BINARY_BUILT_IN)
