#!/usr/bin/env bash
# The GPU check in one command, run from a bundle (tools/gpu_bundle.sh copies this file to
# DIR/run.sh): the device, every GPU test binary, compute-sanitizer on a few small kernels, the
# probe, the benchmarks, then one table. Writes exactly two files into RESULTS_DIR (default
# ./gpu-results): results.md (the table and the commands) and logs.tar.gz (every log). Each step
# runs under `timeout`; on a machine without a GPU every GPU row says "no CUDA device" and it exits
# 0; a failed test binary or step makes the exit status 1.
#   bash run.sh [RESULTS_DIR] [--only ROW,...]     rows: device, tests, sanitizers, probe, bench
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="" only=""
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=${2:?--only needs rows: device,tests,sanitizers,probe,bench}; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
    *) out=$1; shift ;;
  esac
done
out=${out:-$PWD/gpu-results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RIDGE_TESTDATA_DIR="$here/testdata" RIDGE_MODELS_DIR="$here/models" RIDGE_BINARY="$here/bin/ridge"
export RIDGE_GPU_PROBE_FILE="$logs/probe-cuda.json" RIDGE_PROBE_FILE="$logs/probe-cpu.json"
export OMP_WAIT_POLICY=PASSIVE
ridge="$here/bin/ridge"
fail=0
rows=()
row() { rows+=("| $1 | $2 |"); printf '%-52s %s\n' "$1" "$2"; }
want() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }

# A GPU is there when nvidia-smi lists one (the driver's own tool; the bundle brings no driver).
gpu=0
nvidia-smi -L > "$logs/nvidia-smi-L.txt" 2>&1 && grep -q '^GPU ' "$logs/nvidia-smi-L.txt" && gpu=1
nogpu="no CUDA device"

# cuBLAS, the reference only: where a pip install puts it, the CUDA toolkit's, or $RIDGE_CUBLAS.
if [ -z "${RIDGE_CUBLAS:-}" ]; then
  for c in $(python3 -c 'import site; print(" ".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null); do
    for p in "$c"/nvidia/cu13/lib/libcublas.so.* "$c"/nvidia/cublas/lib/libcublas.so.*; do
      [ -f "$p" ] && [ -z "${RIDGE_CUBLAS:-}" ] && export RIDGE_CUBLAS="$p"
    done
  done
  for p in /usr/local/cuda/lib64/libcublas.so.*; do
    [ -f "$p" ] && [ -z "${RIDGE_CUBLAS:-}" ] && export RIDGE_CUBLAS="$p"
  done
fi

echo "== ridge GPU check ($(date -u +%Y-%m-%dT%H:%M:%SZ), results in $out)"
if want device; then
  mem=$(awk '/MemAvailable/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo)
  if [ "$gpu" = 1 ]; then
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader > "$logs/device.txt" 2>&1
    runtime=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
    row "device" "$(head -1 "$logs/device.txt"), CUDA $runtime, MemAvailable $mem, cuBLAS ${RIDGE_CUBLAS:-none found}"
  else
    row "device" "$nogpu (MemAvailable $mem, cuBLAS ${RIDGE_CUBLAS:-none found})"
  fi
fi

# Every GPU test binary (without a GPU their GPU tests skip, saying why, and the rest run).
if want tests; then
  for t in "$here"/bin/test_*; do
    name=$(basename "$t")
    timeout 240 "$t" --gtest_brief=1 > "$logs/$name.log" 2>&1
    rc=$?
    # gtest's closing counts: "[  PASSED  ] N tests.", "[  SKIPPED ] N tests, listed below:", ...
    count() { sed -n "s/^\[  $1 *\] \([0-9]*\) tests\{0,1\}[.,].*/\1/p" "$logs/$name.log" | tail -1; }
    passed=$(count PASSED) skipped=$(count SKIPPED) failed=$(count FAILED)
    if [ "$rc" -ne 0 ]; then
      fail=1
      row "$name" "FAILED (exit $rc$([ "$rc" = 124 ] && echo ', timed out'); failed ${failed:-?}, passed ${passed:-0}, skipped ${skipped:-0})"
    else
      row "$name" "passed ${passed:-0}, skipped ${skipped:-0}"
    fi
  done
fi

# compute-sanitizer on one kernel of each kind, small sizes.
if want sanitizers; then
  san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
  for tool in memcheck racecheck; do
    if [ "$gpu" = 0 ]; then row "compute-sanitizer $tool" "$nogpu"; continue; fi
    if [ -z "$san" ]; then row "compute-sanitizer $tool" "unavailable: compute-sanitizer not found"; continue; fi
    errors=0 ran=0 note=""
    for spec in "test_cuda_ops:*" "test_cuda_matvec:*MatchesScalar*" "test_cuda_attention:*DecodeWide*:*FlashChunk*" \
                "test_cuda_matmul:*HandWorked*"; do
      bin=${spec%%:*} filter=${spec#*:}
      [ -x "$here/bin/$bin" ] || continue
      timeout 120 "$san" --tool "$tool" --error-exitcode 9 "$here/bin/$bin" --gtest_filter="$filter" \
        > "$logs/sanitizer-$tool-$bin.log" 2>&1
      rc=$?
      n=$(sed -n 's/.*ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$logs/sanitizer-$tool-$bin.log" | tail -1)
      if [ -z "$n" ]; then
        note="unavailable: $(grep -m1 -i 'error\|not supported' "$logs/sanitizer-$tool-$bin.log" | cut -c1-80)"
        continue
      fi
      ran=$((ran + 1)); errors=$((errors + n))
      [ "$rc" -ne 0 ] && [ "$n" = 0 ] && note="exit $rc"
    done
    if [ "$ran" = 0 ]; then row "compute-sanitizer $tool" "${note:-unavailable: nothing ran}"
    else row "compute-sanitizer $tool" "$errors errors ($ran binaries)${note:+; $note}"; fi
    [ "$errors" -gt 0 ] && fail=1
  done
fi

if want probe; then
  if [ "$gpu" = 0 ]; then
    row "read bandwidth (probe)" "$nogpu"
    row "matmul 4096³ BF16: ridge best, cuBLAS" "$nogpu"
  elif timeout 180 "$ridge" probe --device cuda -o "$RIDGE_GPU_PROBE_FILE" > "$logs/probe.txt" 2>&1; then
    row "read bandwidth (probe)" "$(sed -n 's/^bandwidth: *//p' "$logs/probe.txt" | head -1)"
    row "matmul 4096³ BF16: ridge best, cuBLAS" "$(sed -n 's/^matmul: *//p' "$logs/probe.txt" | head -1); $(sed -n 's/^reference: *//p' "$logs/probe.txt" | head -1)"
  else
    fail=1
    row "read bandwidth (probe)" "FAILED: $(tail -1 "$logs/probe.txt")"
  fi
fi

# One ridge bench --json run as table cells: "name t/s (% of bound, GFLOP/s)" per test.
bench() {  # row, log name, then ridge bench arguments ($note, when set, opens the value)
  local label=$1 name=$2; shift 2
  if [ "$gpu" = 0 ]; then row "$label" "$nogpu"; return; fi
  if timeout 300 "$ridge" bench --device cuda --json "$@" > "$logs/$name.json" 2> "$logs/$name.err"; then
    row "$label" "$note$(python3 - "$logs/$name.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
cells = []
for t in d.get("tests", []):
    s = f'{t["name"]} {t["tokens_per_second"]["median"]:.1f} t/s'
    if t.get("percent_of_bound") is not None:
        s += f', {t["percent_of_bound"]:.1f}% of bound'
    if t.get("achieved_gflops") is not None and t["phase"] == "prefill":
        s += f', {t["achieved_gflops"] / 1000:.1f} TFLOP/s'
    cells.append(s)
print("; ".join(cells))
EOF
)"
  else
    fail=1
    row "$label" "FAILED: $(tail -1 "$logs/$name.err")"
  fi
}

if want bench; then
  # The synthetic 8B needs its weights in host memory first (BF16: 16 GB): with less available
  # the 3B takes its place, saying so; RIDGE_GPU_SYNTHETIC overrides.
  big=${RIDGE_GPU_SYNTHETIC:-llama-3-8b} note=""
  avail_gb=$(awk '/MemAvailable/ {print int($2 / 1048576)}' /proc/meminfo)
  if [ -z "${RIDGE_GPU_SYNTHETIC:-}" ] && [ "$avail_gb" -lt 24 ]; then
    big=llama-3.2-3b
    echo "run.sh: MemAvailable ${avail_gb} GiB is under the 24 GiB the synthetic 8B needs: measuring llama-3.2-3b instead"
  fi
  [ "$big" != llama-3-8b ] && note="$big in its place: "
  bench "synthetic 8B BF16 decode, graph" big_graph --synthetic "$big" --synthetic-type bf16 -p 0 -n 64 -r 3 --no-count
  bench "synthetic 8B BF16 decode, no graph" big_no_graph --synthetic "$big" --synthetic-type bf16 -p 0 -n 64 -r 3 --no-count --no-graph
  bench "synthetic 8B BF16 prefill 512" big_prefill --synthetic "$big" --synthetic-type bf16 -p 512 -n 0 -r 3 --no-count
  note=""
  bench "smollm2-135m Q4_1 (synthetic) decode, graph" smol_graph --synthetic smollm2-135m --synthetic-type q4_1 -p 0 -n 128 -r 5 --no-count
  bench "smollm2-135m Q4_1 (synthetic) decode, no graph" smol_no_graph --synthetic smollm2-135m --synthetic-type q4_1 -p 0 -n 128 -r 5 --no-count --no-graph
  # test_engine_gpu prints its figures as "RIDGE_FIGURE logits|greedy NAME key=value ...".
  figures() {
    local f="$logs/test_engine_gpu.log"
    if [ "$gpu" = 0 ]; then echo "$nogpu"; return; fi
    if [ ! -s "$f" ]; then echo "unavailable: test_engine_gpu did not run (its row)"; return; fi
    local got
    got=$(sed -n "s/^RIDGE_FIGURE $1 //p" "$f" | tr '\n' ';' | sed 's/;$//; s/;/; /g')
    echo "${got:-no figure: the tests that print it failed or were skipped (test_engine_gpu row)}"
  }
  row "logits GPU vs CPU exact path" "$(figures logits)"
  row "greedy text GPU vs CPU" "$(figures greedy)"
  # The kernel microbenchmark: every 8B matvec shape in BF16, Q8_0, Q4_0, and decode attention.
  if [ "$gpu" = 0 ]; then
    row "matvec per 8B shape and type" "$nogpu"
    row "decode attention 4K / 16K" "$nogpu"
  elif [ ! -x "$here/bin/bench_cuda_decode" ]; then
    row "matvec per 8B shape and type" "unavailable: bench_cuda_decode is not in the bundle"
    row "decode attention 4K / 16K" "unavailable: bench_cuda_decode is not in the bundle"
  elif timeout 300 "$here/bin/bench_cuda_decode" > "$logs/bench_cuda_decode.txt" 2>&1; then
    per_type=$(awk '$NF ~ /^\(/ && $7 ~ /%$/ {t=$1; p=$7+0; if (!(t in lo) || p < lo[t]) lo[t]=p; if (p > hi[t]) hi[t]=p}
                    END {for (t in lo) printf "%s %.0f-%.0f%%; ", t, lo[t], hi[t]}' "$logs/bench_cuda_decode.txt")
    row "matvec per 8B shape and type" "${per_type}of read bandwidth (every shape below)"
    row "decode attention 4K / 16K" "$(grep '^attention' "$logs/bench_cuda_decode.txt" | sed 's/^attention *//' | tr '\n' ';' | sed 's/;$//')"
  else
    fail=1
    row "matvec per 8B shape and type" "FAILED: $(tail -1 "$logs/bench_cuda_decode.txt")"
    row "decode attention 4K / 16K" "FAILED (see matvec row)"
  fi
fi

{
  echo "# ridge GPU check"
  echo
  echo "Command: \`bash run.sh $out${only:+ --only $only}\` in $here, $(date -u +%Y-%m-%dT%H:%M:%SZ)."
  echo
  echo "| row | value |"
  echo "|---|---|"
  printf '%s\n' "${rows[@]}"
  if [ -s "$logs/bench_cuda_decode.txt" ]; then
    echo
    echo "## bench_cuda_decode"
    echo
    echo '```'
    cat "$logs/bench_cuda_decode.txt"
    echo '```'
  fi
} > "$out/results.md"
tar -czf "$out/logs.tar.gz" -C "$logs" .
echo "== results: $out/results.md, logs: $out/logs.tar.gz (exit $fail)"
exit $fail
