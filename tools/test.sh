#!/usr/bin/env bash
# The whole test suite: (re)builds build/ and runs every GoogleTest suite through ctest.
# Needs the set-up of tools/setup.sh (dependencies and the default model) done once.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
