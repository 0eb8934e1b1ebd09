#!/usr/bin/env bash
# The GPU bundle on this machine (CTest, with CUDA in the build): packages this build without
# compiling (tools/gpu_bundle.sh --from BUILD --no-check: a native build is not portable), runs its
# run.sh, and checks that every row of the GPU check's table is printed, that exactly results.md and
# logs.tar.gz are written, and that a planted failing test binary is reported as failed with a
# non-zero exit. Without a GPU the GPU rows say "no CUDA device" and run.sh exits 0.
#   bash tests/gpu_bundle_test.sh BUILD_DIR
set -uo pipefail
build=${1:?usage: gpu_bundle_test.sh BUILD_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
check() {  # description, then a command that must succeed
  local what=$1; shift
  if "$@"; then echo "ok: $what"; else echo "FAILED: $what"; failures=$((failures + 1)); fi
}

bash "$root/tools/gpu_bundle.sh" --from "$build" --no-check "$tmp/bundle" > "$tmp/bundle.log" 2>&1
check "gpu_bundle.sh --from packages the build" test -x "$tmp/bundle/run.sh" -a -x "$tmp/bundle/bin/ridge"
cat "$tmp/bundle.log"

bash "$tmp/bundle/run.sh" "$tmp/results" > "$tmp/run.log" 2>&1
rc=$?
cat "$tmp/run.log"
gpu=0
nvidia-smi -L 2>/dev/null | grep -q '^GPU ' && gpu=1
[ "$gpu" = 1 ] || check "run.sh exits 0 without a GPU" test "$rc" = 0
check "exactly two files in the results folder" test "$(ls "$tmp/results" | tr '\n' ' ')" = "logs.tar.gz results.md "
for r in "device" "compute-sanitizer memcheck" "compute-sanitizer racecheck" "logits GPU vs CPU exact path" \
         "greedy text GPU vs CPU" "read bandwidth (probe)" "matvec per 8B shape and type" \
         "matmul 4096³ BF16: ridge best, cuBLAS" "decode attention 4K / 16K" "synthetic 8B BF16 decode, graph" \
         "synthetic 8B BF16 decode, no graph" "synthetic 8B BF16 prefill 512" "smollm2-135m Q4_1 (synthetic) decode, graph" \
         "smollm2-135m Q4_1 (synthetic) decode, no graph"; do
  check "row '$r' in results.md" grep -qF "| $r" "$tmp/results/results.md"
done
for t in "$tmp"/bundle/bin/test_*; do
  check "row for $(basename "$t")" grep -q "^| $(basename "$t") | passed" "$tmp/results/results.md"
done
if [ "$gpu" = 0 ]; then
  check "GPU rows say no CUDA device" grep -q "^| read bandwidth (probe) | no CUDA device |" "$tmp/results/results.md"
fi
check "the logs hold every test binary's log" bash -c "tar -tzf '$tmp/results/logs.tar.gz' | grep -q test_engine_gpu.log"

# A test binary that fails, planted among the others.
cat > "$tmp/bundle/bin/test_planted_failure" <<'EOF'
#!/bin/sh
echo "[==========] 2 tests from 1 test suite ran. (0 ms total)"
echo "[  PASSED  ] 1 test."
echo "[  FAILED  ] 1 test, listed below:"
exit 1
EOF
chmod +x "$tmp/bundle/bin/test_planted_failure"
bash "$tmp/bundle/run.sh" "$tmp/results2" --only tests > "$tmp/run2.log" 2>&1
rc=$?
check "a failed test binary makes run.sh exit non-zero" test "$rc" -ne 0
check "the failed binary's row says FAILED" grep -q "^| test_planted_failure | FAILED" "$tmp/results2/results.md"
check "--only tests runs no other row" bash -c "! grep -q 'read bandwidth' '$tmp/results2/results.md'"

if [ "$failures" = 0 ]; then echo "gpu_bundle_test: every check held"; else echo "gpu_bundle_test: $failures checks failed"; fi
[ "$failures" = 0 ]
