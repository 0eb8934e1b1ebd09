#!/usr/bin/env bash
# The GPU check, on a machine with an NVIDIA GPU: builds ridge with CUDA (build-gpu/), runs the GPU
# test suites (every kernel and variant against the CPU's scalar twins; SmolLM2 and stories260K on
# the GPU against the CPU), probes the GPU's ceilings and runs the GPU benchmarks, then prints one
# results table. Logs and JSON go to $OUT (default build-gpu/results). About 5 minutes on an H200.
#   SmolLM2: models/SmolLM2-135M-Instruct.Q4_1.gguf when present (tools/fetch_model.sh), else a
#   synthetic model of its shape (speed only; its correctness tests then skip, saying so).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build-gpu/results}
B=${RIDGE_GPU_BUILD:-build-gpu}
mkdir -p "$OUT"
fail=0
rows=()
row() { rows+=("$(printf '%-44s %s' "$1" "$2")"); }

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem \
  --format=csv > "$OUT/nvidia-smi.csv" 2>&1
echo "== build ($B)"
t0=$(date +%s)
if ! { cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release && cmake --build "$B" -j"$(nproc)"; } > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"
  echo "gpu-check: the build failed (log: $OUT/build.log)"
  exit 1
fi
grep -q "CUDA kernels build with" "$OUT/build.log" || { echo "gpu-check: CMake found no nvcc: nothing to check"; exit 1; }
row "build" "$(( $(date +%s) - t0 )) s"

echo "== GPU tests"
for t in "$B"/test_cuda_* "$B"/test_engine_gpu; do
  name=$(basename "$t")
  "$t" --gtest_brief=1 > "$OUT/$name.log" 2>&1
  rc=$?
  passed=$(grep -c '^\[       OK \]' "$OUT/$name.log")
  failed=$(grep -c '^\[  FAILED  \]' "$OUT/$name.log")
  skipped=$(grep -c '^\[  SKIPPED \]' "$OUT/$name.log")
  [ "$rc" -ne 0 ] && fail=1
  row "$name" "rc $rc, failed $failed, skipped $skipped$( [ "$rc" -ne 0 ] && echo '  <-- FAILED' )"
done

echo "== probe"
"$B/ridge" probe --device cuda -o "$OUT/probe-cuda.json" > "$OUT/probe.txt" 2>&1 || fail=1
cat "$OUT/probe.txt"
export RIDGE_GPU_PROBE_FILE="$OUT/probe-cuda.json"
bw=$(sed -n 's/^bandwidth: \([0-9.]*\).*/\1/p' "$OUT/probe.txt")
row "read bandwidth (GB/s)" "$bw"
row "matmul: ridge best (GFLOP/s)" "$(sed -n 's/^matmul: \(.*\)/\1/p' "$OUT/probe.txt")"
row "matmul: cuBLAS (GFLOP/s)" "$(sed -n 's/^reference: \(.*\)/\1/p' "$OUT/probe.txt")"

echo "== benchmarks"
smol=(-m models/SmolLM2-135M-Instruct.Q4_1.gguf)
[ -f models/SmolLM2-135M-Instruct.Q4_1.gguf ] || smol=(--synthetic smollm2-135m --synthetic-type q4_1)
bench() {  # name, then ridge bench arguments; one line of the table from its JSON
  local name=$1; shift
  if "$B/ridge" bench --device cuda --no-count --json "$@" > "$OUT/$name.json" 2> "$OUT/$name.err"; then
    row "$name" "$(python3 - "$OUT/$name.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
out = []
for t in d.get("tests", []):
    s = f'{t["name"]} {t["tokens_per_second"]["median"]:.1f} t/s'
    if t.get("percent_of_bound") is not None:
        s += f' ({t["percent_of_bound"]:.1f}% of bound)'
    out.append(s)
print(", ".join(out))
EOF
)"
  else
    fail=1
    row "$name" "failed: $(tail -1 "$OUT/$name.err")"
  fi
}
bench smollm2_graph "${smol[@]}" -p 512 -n 128 -r 5
bench smollm2_no_graph "${smol[@]}" -p 512 -n 128 -r 5 --no-graph
bench llama3_8b_bf16 --synthetic llama-3-8b --synthetic-type bf16 -p 512 -n 64 -r 3

echo
echo "== results ($(head -2 "$OUT/nvidia-smi.csv" 2>/dev/null | tail -1))"
printf '%s\n' "${rows[@]}" | tee "$OUT/results.txt"
exit $fail
