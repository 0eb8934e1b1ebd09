#!/usr/bin/env bash
# The whole test suite: (re)builds build/ and runs every GoogleTest suite through ctest.
# Needs the set-up of tools/setup.sh (dependencies and the default model) done once. The test data
# made by others comes from tools/testdata.sh: ../shared/testdata, or, without it, what PyPI ships
# (then the tests that need the rest skip, and the count of skipped tests is printed at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
testdata=$(bash tools/testdata.sh)  # a one-line error before any build when it cannot be had
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRIDGE_TESTDATA_DIR="$testdata" >/dev/null
cmake --build build -j"$(nproc)"
# ctest -j runs two suites at once on two cores: with passive OpenMP waiting a thread whose partner
# was descheduled sleeps instead of spinning away the core that partner needs (without it a suite
# can take many times as long; docs/measurements/source-comment-history.md).
export OMP_WAIT_POLICY=PASSIVE
status=0
ctest --test-dir build --output-on-failure -j"$(nproc)" 2>&1 | tee build/ctest.log || status=$?
skipped=$(grep -c '(Skipped)$' build/ctest.log || true)
if [ "$skipped" -gt 0 ]; then
  echo "ridge tests: $skipped skipped, each listed above (no GPU; no openai package; or test data only" \
       "../shared/testdata has, named in the test's output: ctest --test-dir build -R NAME -V)"
fi
exit "$status"
