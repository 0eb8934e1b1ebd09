#!/usr/bin/env bash
# The whole test suite: (re)builds build/ and runs every GoogleTest suite through ctest.
# Needs the set-up of tools/setup.sh (dependencies and the default model) done once.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/testdata.sh >/dev/null  # the shared test data is there, or a one-line error before any build
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release ${RIDGE_TESTDATA_DIR:+-DRIDGE_TESTDATA_DIR="$RIDGE_TESTDATA_DIR"} >/dev/null
cmake --build build -j"$(nproc)"
# ctest -j runs two suites at once on two cores: with passive OpenMP waiting a thread whose partner
# was descheduled sleeps instead of spinning away the core that partner needs (without it a suite
# can take many times as long; docs/measurements/source-comment-history.md).
export OMP_WAIT_POLICY=PASSIVE
ctest --test-dir build --output-on-failure -j"$(nproc)"
