#!/usr/bin/env bash
# ridge batch-bench against llama.cpp's llama-batched-bench on the same GGUF files, threads, batch
# sizes B, prompt and generation lengths: decode tokens/s of B sequences together (ridge's
# tokens_per_second, llama.cpp's S_TG), the two run alternately (the first one swaps each
# repetition) so that drift of this shared machine hits both alike; one table of medians, ratios
# and ridge's % of its roof (min(FMA peak, I x bandwidth) from the saved probe).
# llama.cpp comes from tools/build_llamacpp.sh (built once, outside the repository).
set -euo pipefail

usage() {
  cat <<'USAGE'
usage: tools/compare_batched.sh [-t THREADS] [-r REPS] [-B SIZES] [-p PROMPT] [-n GEN] [MODEL.gguf ...]
  -t THREADS   threads for both engines (default 2)
  -r REPS      repetitions, each one ridge run and one llama.cpp run (default 5)
  -B SIZES     batch sizes, comma-separated (default 1,4,16,64)
  -p PROMPT    prompt tokens of each sequence (default 32)
  -n GEN       decode steps (default 32)
  MODEL        GGUF files (default: models/SmolLM2-135M-Instruct.Q4_1.gguf)
Environment: RIDGE_CACHE (where tools/build_llamacpp.sh builds llama.cpp), LLAMA_BATCHED_BENCH (use
this binary instead of building).
USAGE
}

REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/tools/compare_common.sh"
RIDGE=$REPO/build/ridge
THREADS=2 REPS=5 SIZES=1,4,16,64 PROMPT=32 GEN=32
models=()
while [ $# -gt 0 ]; do
  case "$1" in -t|-r|-B|-p|-n)
    [ $# -ge 2 ] || { echo "compare_batched: $1 needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    -t) THREADS=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -B) SIZES=$2; shift 2 ;;
    -p) PROMPT=$2; shift 2 ;;
    -n) GEN=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "compare_batched: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
for v in THREADS REPS PROMPT GEN; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "compare_batched: $v must be a whole number, got '${!v}'" >&2; exit 2; }
done
[[ $SIZES =~ ^[0-9]+(,[0-9]+)*$ ]] || { echo "compare_batched: -B wants sizes like 1,4,16, got '$SIZES'" >&2; exit 2; }
[ "$THREADS" -ge 1 ] && [ "$REPS" -ge 1 ] && [ "$PROMPT" -ge 1 ] && [ "$GEN" -ge 1 ] ||
  { echo "compare_batched: -t, -r, -p and -n must be at least 1" >&2; exit 2; }
[ -x "$RIDGE" ] || { echo "compare_batched: $RIDGE is missing; build ridge first (tools/setup.sh)" >&2; exit 1; }
[ ${#models[@]} -gt 0 ] || models=("$REPO/models/SmolLM2-135M-Instruct.Q4_1.gguf")
for m in "${models[@]}"; do [ -f "$m" ] || { echo "compare_batched: no model file '$m'" >&2; exit 1; }; done

if [ -z "${LLAMA_BATCHED_BENCH:-}" ]; then
  LLAMA_BATCHED_BENCH=$(bash "$REPO/tools/build_llamacpp.sh" | grep '/llama-batched-bench$')
fi
largest=$(tr ',' '\n' <<<"$SIZES" | sort -n | tail -1)
ctx=$(( largest * (PROMPT + GEN) + 64 ))

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results.tsv   # model, engine, B, tokens/s, ridge % of roof
: >"$results"
ridge_cmd=("$RIDGE" batch-bench -t "$THREADS" -B "$SIZES" -p "$PROMPT" -n "$GEN" -r 1 --json)
llama_cmd=("$LLAMA_BATCHED_BENCH" -t "$THREADS" -tb "$THREADS" -c "$ctx" -npp "$PROMPT" -ntg "$GEN" -npl "$SIZES"
           --output-format jsonl)

echo "== ridge batch-bench vs llama-batched-bench, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(nproc) cores visible, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "ridge:   $("$RIDGE" --version 2>/dev/null | head -1), repo $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "commands (one per repetition, alternating; the first engine swaps each repetition):"
echo "  ${ridge_cmd[*]:0:2} -m MODEL ${ridge_cmd[*]:2}"
echo "  ${llama_cmd[0]} -m MODEL ${llama_cmd[*]:1}"

run_engine() {
  local engine=$1 model=$2 out=$work/run.out
  if [ "$engine" = ridge ]; then
    "${ridge_cmd[@]:0:2}" -m "$model" "${ridge_cmd[@]:2}" >"$out" 2>"$work/run.err" || {
      echo "  ridge failed on $(basename "$model"): $(tail -1 "$work/run.err")"; return 0; }
  else
    "${llama_cmd[0]}" -m "$model" "${llama_cmd[@]:1}" >"$out" 2>"$work/run.err" || {
      echo "  llama-batched-bench failed on $(basename "$model"): $(tail -1 "$work/run.err")"; return 0; }
    grep -h '^{' "$out" "$work/run.err" >"$work/lines.jsonl" || true  # its results go to the log stream
    out=$work/lines.jsonl
  fi
  python3 - "$engine" "$(basename "$model")" "$out" >>"$results" <<'PY'
import json, sys
engine, model, path = sys.argv[1:4]
if engine == "ridge":
    for p in json.load(open(path))["points"]:
        roof = p.get("percent_of_bound")
        print(f"{model}\t{engine}\t{p['batch']}\t{p['tokens_per_second']}\t{'' if roof is None else roof}")
else:
    for line in open(path):
        t = json.loads(line)
        print(f"{model}\t{engine}\t{t['pl']}\t{t['speed_tg']}\t")
PY
}

alternate_engines "$REPS" "${models[@]}"

echo
echo "threads $THREADS, prompt $PROMPT, $GEN decode steps, $REPS repetitions; decode t/s of all B sequences:"
echo "median [min-max]; ratio = ridge median / llama.cpp median (llama.cpp's S_TG)"
python3 - "$results" <<'PY'
import statistics, sys
runs, roof = {}, {}
for line in open(sys.argv[1]):
    model, engine, b, tps, pct = line.rstrip("\n").split("\t")
    runs.setdefault((model, int(b)), {}).setdefault(engine, []).append(float(tps))
    if pct:
        roof.setdefault((model, int(b)), []).append(float(pct))
def cell(xs):
    return (f"{statistics.median(xs):.1f}", f"{min(xs):.1f}-{max(xs):.1f}") if xs else ("-", "-")
rows = [("model", "B", "ridge t/s", "spread", "llama.cpp t/s", "spread", "ridge/llama.cpp", "ridge % of roof")]
for (model, b), by in sorted(runs.items()):
    r, l = by.get("ridge", []), by.get("llama.cpp", [])
    ratio = f"{statistics.median(r) / statistics.median(l):.2f}" if r and l else "-"
    p = roof.get((model, b))
    rows.append((model, str(b), *cell(r), *cell(l), ratio, f"{statistics.median(p):.0f}" if p else "-"))
w = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
for k, row in enumerate(rows):
    print("  ".join(c.ljust(x) if i == 0 else c.rjust(x) for i, (c, x) in enumerate(zip(row, w))))
    if k == 0:
        print("  ".join("-" * x for x in w))
PY
