#!/usr/bin/env bash
# Fewer bytes per weight, measured: SmolLM2-135M in F32, F16, Q8_0, Q4_1 and Q4_0 side by side.
# For each type: the file's size, the weight bytes one decode token reads (`ridge info`), decode
# tokens/s and % of the bandwidth bound (`ridge bench -p 0 -n 128 --probe-now`, median of -r
# repetitions; the bound from the faster of two probes run around that bench), and
# the perplexity of the Shakespeare text (`ridge perplexity -c 512`). Missing files are made from
# the Q4_1 original with `ridge quantize` (so F32, F16 and Q8_0 carry Q4_1's rounding: the
# price in quality shows only below the source's precision). Prints one Markdown table.
# Usage: tools/quant_table.sh [-t THREADS] [-r REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
THREADS=2 REPS=5
while [ $# -gt 0 ]; do
  case "$1" in
    -t) THREADS=$2; shift 2 ;;
    -r) REPS=$2; shift 2 ;;
    *) echo "usage: tools/quant_table.sh [-t THREADS] [-r REPS]" >&2; exit 2 ;;
  esac
done
RIDGE=build/ridge
BASE=models/SmolLM2-135M-Instruct.Q4_1.gguf
TEXT=tests/data/text/tinyshakespeare-head.txt
[ -x "$RIDGE" ] && [ -f "$BASE" ] || { echo "quant_table: run tools/setup.sh first" >&2; exit 1; }

echo "ridge $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $THREADS threads, $REPS repetitions"
echo "decode: $RIDGE bench -m MODEL -p 0 -n 128 -r $REPS -t $THREADS --probe-now; perplexity: $RIDGE perplexity -m MODEL -f $TEXT -c 512 -t $THREADS"
echo
echo "| type | file size | bytes/token | decode t/s (median, min..max) | GB/s | probe GB/s | % of bound | perplexity |"
echo "|---|--:|--:|--:|--:|--:|--:|--:|"
for t in F32 F16 Q8_0 Q4_1 Q4_0; do
  model=models/SmolLM2-135M-Instruct.$t.gguf
  if [ ! -f "$model" ]; then
    lower=$(echo "$t" | tr 'A-Z' 'a-z')
    "$RIDGE" quantize -m "$BASE" -o "$model" --type "$lower" --allow-requantize >&2
  fi
  size=$(stat -c %s "$model")
  bench=$("$RIDGE" bench -m "$model" -p 0 -n 128 -r "$REPS" -t "$THREADS" --json --probe-now 2>/dev/null)
  ppl=$("$RIDGE" perplexity -m "$model" -f "$TEXT" -c 512 -t "$THREADS" 2>/dev/null | tail -n 1)
  python3 - "$t" "$size" "$bench" "$ppl" <<'EOF'
import json, sys
t, size, bench, ppl = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4].split()
test = bench["tests"][0]
tps = test["tokens_per_second"]
bound = test["percent_of_bound"]
print(f"| {t} | {size / 1e6:.1f} MB | {test['per_token']['bytes'] / 1e6:.1f} MB | "
      f"{tps['median']:.1f} ({tps['min']:.1f}..{tps['max']:.1f}) | {test['achieved_gbs']:.1f} | "
      f"{bench['ceilings']['bandwidth_gbs']:.1f} | {bound:.1f} | {ppl[1]} ± {ppl[3]} |")
EOF
done
echo
echo "probe GB/s: the read bandwidth of the bound, the faster of two \`ridge probe\` runs, just before and just after that row's bench"
