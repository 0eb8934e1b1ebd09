#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.cpp) with clang and runs each for SECONDS
# (default 60), seeded with real test files. A crash or sanitizer report exits non-zero.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DRIDGE_FUZZ=ON -DRIDGE_TESTS=OFF -DRIDGE_NATIVE=ON >/dev/null
targets=$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//')
cmake --build build-fuzz -j"$(nproc)" --target $targets
testdata=../shared/testdata
for t in $targets; do
  corpus=build-fuzz/corpus-$t
  mkdir -p "$corpus"
  case $t in
    fuzz_gguf) cp -n $testdata/gguf-stories260K/stories260K.gguf $testdata/llamacpp-vocab/ggml-vocab-llama-spm.gguf "$corpus"/ ;;
    fuzz_tokenizer) cp -n $testdata/llamacpp-vocab/*.inp "$corpus"/ ;;
  esac
  echo "fuzz: $t for ${seconds}s" >&2
  ASAN_OPTIONS=detect_leaks=1 "build-fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=4096 \
    -print_final_stats=1 "$corpus" 2>&1 | tail -n 15
  [ "${PIPESTATUS[0]}" -eq 0 ] || { echo "fuzz: $t failed" >&2; exit 1; }
done
