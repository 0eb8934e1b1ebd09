#!/usr/bin/env bash
# Serving benchmark: starts `ridge serve` on a free loopback port (or uses a running server with
# --port P), runs `ridge bench-serve` at concurrency 1, 4 and 16 (requests/s, output tokens/s, time
# to first token and time per output token, median and p99), and stops the server it started.
#   bash tools/bench_serve.sh [-m MODEL] [--port P] [-C 1,4,16] [-n MAX_TOKENS] [-r REQUESTS] [-- SERVE OPTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."

ridge=${RIDGE:-build/ridge}
model=models/SmolLM2-135M-Instruct.Q4_1.gguf
port=""
levels=1,4,16
max_tokens=32
requests=0
serve_args=(--max-batch 16 -c 512)
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    -C) levels=$2; shift 2 ;;
    -n) max_tokens=$2; shift 2 ;;
    -r) requests=$2; shift 2 ;;
    --) shift; serve_args=("$@"); break ;;
    *) echo "bench_serve.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
[ -x "$ridge" ] || { echo "bench_serve.sh: $ridge not built (set RIDGE=path/to/ridge)" >&2; exit 1; }

pid=""
log=$(mktemp)
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -f "$log"
}
trap cleanup EXIT

if [ -z "$port" ]; then
  "$ridge" serve -m "$model" --port 0 "${serve_args[@]}" 2>"$log" &
  pid=$!
  for _ in $(seq 600); do
    port=$(sed -n 's|^ridge: listening on http://[^:]*:\([0-9]*\)$|\1|p' "$log")
    [ -n "$port" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  [ -n "$port" ] || { echo "bench_serve.sh: the server did not start" >&2; cat "$log" >&2; exit 1; }
  grep '^ridge: ' "$log" | head -2 >&2
fi

"$ridge" bench-serve --port "$port" -C "$levels" -n "$max_tokens" -r "$requests"
curl -s "http://127.0.0.1:$port/metrics" 2>/dev/null |
  grep -E '^ridge_(decode_tokens_per_second|decode_gbs|decode_percent_of_bound|batch_size_max) ' >&2 || true
