#!/usr/bin/env bash
# ridge against llama.cpp on the same GGUF files, threads and test sizes: prefill (ppP) and decode
# (tgN) tokens/s from `ridge bench --json` and `llama-bench -o json`, the two run alternately (the
# first one swaps each repetition) so that drift of this shared machine hits both alike; one table
# of medians, spreads, ridge/llama.cpp ratios and ridge's percent_of_stream (the bound measured
# with the run, median of the repetitions). --ppl FILE also compares perplexity.
# llama.cpp comes from tools/build_llamacpp.sh (built once, outside the repository).
set -euo pipefail

usage() {
  cat <<'EOF'
usage: tools/compare_llamacpp.sh [-t THREADS] [-r REPS] [-p PROMPT] [-n GEN] [--ppl TEXTFILE] [MODEL.gguf ...]
  -t THREADS   threads for both engines (default 2)
  -r REPS      repetitions, each one ridge run and one llama.cpp run (default 5)
  -p PROMPT    prefill test tokens, ppPROMPT (default 512; 0 skips it)
  -n GEN       decode test tokens, tgGEN (default 128; 0 skips it)
  --ppl FILE   also run llama-perplexity and ridge perplexity on FILE with -c 512
               (FILE must tokenize to at least 1024 tokens)
  MODEL        GGUF files (default: models/SmolLM2-135M-Instruct.{Q4_1,Q8_0,F16}.gguf)
Environment: RIDGE_CACHE (where tools/build_llamacpp.sh builds llama.cpp), LLAMA_BENCH and
LLAMA_PERPLEXITY (use these binaries instead of building).
EOF
}

REPO=$(cd "$(dirname "$0")/.." && pwd)
. "$REPO/tools/compare_common.sh"
RIDGE=$REPO/build/ridge
THREADS=2 REPS=5 PROMPT=512 GEN=128 PPL_FILE="" CTX=512
models=()
while [ $# -gt 0 ]; do
  case "$1" in -t|-r|-p|-n|--ppl)
    [ $# -ge 2 ] || { echo "compare_llamacpp: $1 needs a value" >&2; exit 2; } ;;
  esac
  case "$1" in
    -t) THREADS=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    -p) PROMPT=$2; shift 2 ;;
    -n) GEN=$2; shift 2 ;;
    --ppl) PPL_FILE=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "compare_llamacpp: unknown option '$1'" >&2; usage >&2; exit 2 ;;
    *) models+=("$1"); shift ;;
  esac
done
for v in THREADS REPS PROMPT GEN; do
  [[ ${!v} =~ ^[0-9]+$ ]] || { echo "compare_llamacpp: $v must be a whole number, got '${!v}'" >&2; exit 2; }
done
[ "$THREADS" -ge 1 ] && [ "$REPS" -ge 1 ] || { echo "compare_llamacpp: -t and -r must be at least 1" >&2; exit 2; }
[ "$PROMPT" -gt 0 ] || [ "$GEN" -gt 0 ] || [ -n "$PPL_FILE" ] || { echo "compare_llamacpp: nothing to run (-p 0 -n 0, no --ppl)" >&2; exit 2; }
[ -z "$PPL_FILE" ] || [ -f "$PPL_FILE" ] || { echo "compare_llamacpp: --ppl: no file '$PPL_FILE'" >&2; exit 2; }
[ -x "$RIDGE" ] || { echo "compare_llamacpp: $RIDGE is missing; build ridge first (tools/setup.sh)" >&2; exit 1; }

if [ ${#models[@]} -eq 0 ]; then
  for q in Q4_1 Q8_0 F16; do models+=("$REPO/models/SmolLM2-135M-Instruct.$q.gguf"); done
fi
present=()
for m in "${models[@]}"; do
  if [ -f "$m" ]; then present+=("$m"); else echo "compare_llamacpp: skipping $m (no such file)"; fi
done
[ ${#present[@]} -gt 0 ] || { echo "compare_llamacpp: no model file to run" >&2; exit 1; }

# llama.cpp binaries: built (or found already built) by tools/build_llamacpp.sh.
if [ -z "${LLAMA_BENCH:-}" ] || { [ -n "$PPL_FILE" ] && [ -z "${LLAMA_PERPLEXITY:-}" ]; }; then
  bins=$(bash "$REPO/tools/build_llamacpp.sh")
  LLAMA_BENCH=${LLAMA_BENCH:-$(grep '/llama-bench$' <<<"$bins")}
  LLAMA_PERPLEXITY=${LLAMA_PERPLEXITY:-$(grep '/llama-perplexity$' <<<"$bins")}
fi
LLAMA_PERPLEXITY=${LLAMA_PERPLEXITY:-}
llama_src=$(dirname "$(dirname "$(dirname "$LLAMA_BENCH")")")  # .../llama.cpp-<version>
pip_version=$(basename "$llama_src" | sed -n 's/^llama\.cpp-//p')
vendored=$(ls -d "$llama_src"/src/llama_cpp_python-*/vendor/llama.cpp 2>/dev/null | head -1 || true)
commit=$( [ -n "$vendored" ] && git -C "$vendored" log -1 --format='%h (%cs)' 2>/dev/null || echo unknown)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results.tsv   # model, engine, test, tokens/s: one line per run and test
: >"$results"

ridge_cmd=("$RIDGE" bench -t "$THREADS" -p "$PROMPT" -n "$GEN" -r 1 --json)
llama_cmd=("$LLAMA_BENCH" -t "$THREADS" -p "$PROMPT" -n "$GEN" -r 1 -o json)

echo "== ridge vs llama.cpp, $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine:   $(nproc) cores visible, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
echo "ridge:     $("$RIDGE" --version 2>/dev/null | head -1), repo $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "llama.cpp: llama-cpp-python $pip_version, vendored llama.cpp commit $commit"
if [ "$PROMPT" -gt 0 ] || [ "$GEN" -gt 0 ]; then
  echo "commands (one per repetition, alternating; the first engine swaps each repetition):"
  echo "  ${ridge_cmd[*]:0:2} -m MODEL ${ridge_cmd[*]:2}"
  echo "  ${llama_cmd[*]:0:1} -m MODEL ${llama_cmd[*]:1}"
  echo "  (each does one untimed warm-up run, then one timed run)"
fi

# Appends one run's tests/s to $results. $1 engine, $2 model, $3 JSON file.
extract() {
  python3 - "$1" "$2" "$3" >>"$results" <<'PY'
import json, sys
engine, model, path = sys.argv[1:4]
doc = json.load(open(path))
if engine == "ridge":
    for t in doc["tests"]:
        pct = t.get("percent_of_stream")
        print(f"{model}\t{engine}\t{t['name']}\t{t['tokens_per_second']['median']}\t{'' if pct is None else pct}")
else:  # llama-bench: a list of tests; a prefill test has n_gen 0, a decode test n_prompt 0
    for t in doc:
        name = f"pp{t['n_prompt']}" if t["n_gen"] == 0 else f"tg{t['n_gen']}"
        print(f"{model}\t{engine}\t{name}\t{t['avg_ts']}\t")
PY
}

# One run of one engine on one model; a failure is reported and the comparison goes on.
run_engine() {
  local engine=$1 model=$2 out=$work/run.json err=$work/run.err
  if [ "$engine" = ridge ]; then
    "${ridge_cmd[@]:0:2}" -m "$model" "${ridge_cmd[@]:2}" >"$out" 2>"$err" || {
      echo "  ridge failed on $(basename "$model"): $(tail -1 "$err")"; return 0; }
  else
    "${llama_cmd[0]}" -m "$model" "${llama_cmd[@]:1}" >"$out" 2>"$err" || {
      echo "  llama-bench failed on $(basename "$model"): $(tail -1 "$err")"; return 0; }
  fi
  extract "$engine" "$(basename "$model")" "$out" || echo "  $engine: could not read its JSON output"
  [ -f "$work/settings-$engine.json" ] || cp "$out" "$work/settings-$engine.json"
}

if [ "$PROMPT" -gt 0 ] || [ "$GEN" -gt 0 ]; then
  alternate_engines "$REPS" "${present[@]}"

  echo
  echo "threads $THREADS, $REPS repetitions; t/s: median [min-max]; ratio = ridge median / llama.cpp median"
  python3 - "$results" "$work" <<'PY'
import json, os, statistics, sys
def settings(engine):
    try:
        return json.load(open(os.path.join(sys.argv[2], f"settings-{engine}.json")))
    except (OSError, ValueError):
        return None
r, l = settings("ridge"), settings("llama.cpp")
if r:
    print(f"ridge settings: KV cache {r['kv_type']}, batch {r['batch']}, counting {r['counting']}")
if l:
    t = l[0]
    fa = {-1: "auto", 0: "off", 1: "on"}.get(t["flash_attn"], t["flash_attn"])
    print(f"llama.cpp settings: KV cache {t['type_k']}/{t['type_v']}, flash_attn {fa}, "
          f"n_batch {t['n_batch']}, n_ubatch {t['n_ubatch']}, repack {t['repack']}")
runs, stream = {}, {}
for line in open(sys.argv[1]):
    model, engine, test, tps, pct = line.rstrip("\n").split("\t")
    runs.setdefault((model, test), {}).setdefault(engine, []).append(float(tps))
    if pct:
        stream.setdefault((model, test), []).append(float(pct))

def cell(xs):
    if not xs:
        return "-", "-"
    return f"{statistics.median(xs):.2f}", f"{min(xs):.2f}-{max(xs):.2f}"

rows = [("model", "test", "ridge t/s", "spread", "llama.cpp t/s", "spread", "ridge/llama.cpp",
         "ridge % of stream")]
for (model, test), by in runs.items():
    r, l = by.get("ridge", []), by.get("llama.cpp", [])
    ratio = f"{statistics.median(r) / statistics.median(l):.3f}" if r and l else "-"
    pct = stream.get((model, test))
    rows.append((model, test, *cell(r), *cell(l), ratio, f"{statistics.median(pct):.1f}" if pct else "-"))
widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
for k, row in enumerate(rows):
    print("  ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    if k == 0:
        print("  ".join("-" * w for w in widths))
PY
fi

if [ -n "$PPL_FILE" ]; then
  echo
  echo "perplexity of $PPL_FILE, -c $CTX, threads $THREADS:"
  echo "  ${LLAMA_PERPLEXITY:-llama-perplexity} -m MODEL -f $PPL_FILE -c $CTX -t $THREADS"
  echo "  $RIDGE perplexity -m MODEL -f $PPL_FILE -c $CTX -t $THREADS"
  ridge_has_ppl=1
  "$RIDGE" perplexity --help >/dev/null 2>&1 || ridge_has_ppl=0
  for model in "${present[@]}"; do
    name=$(basename "$model")
    llama_ppl="" ridge_ppl=""
    if [ -n "$LLAMA_PERPLEXITY" ] && [ -x "$LLAMA_PERPLEXITY" ]; then
      s=$(date +%s.%N)
      if "$LLAMA_PERPLEXITY" -m "$model" -f "$PPL_FILE" -c "$CTX" -t "$THREADS" >"$work/ppl.log" 2>&1; then
        llama_ppl=$(sed -n 's/.*Final estimate: PPL = \([0-9.eE+-]*\) +\/- \([0-9.eE+-]*\).*/\1 \2/p' "$work/ppl.log" | tail -1)
      fi
      t=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$s" "$(date +%s.%N)")
      if [ -n "$llama_ppl" ]; then
        echo "  $name  llama-perplexity: PPL = ${llama_ppl% *} +/- ${llama_ppl#* }  (${t} s)"
      else
        echo "  $name  llama-perplexity: no result: $(grep -m1 -iE 'error|need at least' "$work/ppl.log" || tail -1 "$work/ppl.log")"
      fi
    else
      echo "  llama-perplexity: not available"
    fi
    if [ "$ridge_has_ppl" = 1 ]; then
      s=$(date +%s.%N)
      if "$RIDGE" perplexity -m "$model" -f "$PPL_FILE" -c "$CTX" -t "$THREADS" >"$work/rppl.out" 2>"$work/rppl.err"; then
        ridge_ppl=$(tail -1 "$work/rppl.out" | awk '$1 == "perplexity" { print $2 }')
      fi
      t=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$s" "$(date +%s.%N)")
      if [ -n "$ridge_ppl" ]; then
        echo "  $name  ridge perplexity: PPL = $ridge_ppl  (${t} s; $(tail -1 "$work/rppl.out"))"
      else
        echo "  $name  ridge perplexity: no result: $(tail -1 "$work/rppl.err")"
      fi
    else
      echo "  $name  ridge perplexity: not available"
    fi
    if [ -n "$llama_ppl" ] && [ -n "$ridge_ppl" ]; then
      python3 -c "import sys; r, l = float(sys.argv[1]), float(sys.argv[2]); print(f'  {sys.argv[3]}  ridge - llama.cpp: {100 * (r - l) / l:+.3f} % of llama.cpp')" \
        "$ridge_ppl" "${llama_ppl% *}" "$name"
    fi
  done
fi
