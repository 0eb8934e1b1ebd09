#!/usr/bin/env bash
# Where the tests read the test data made by others (tiny models, tokenizer vocabularies with their
# expected ids, chat templates; see its SOURCES.md), printed on stdout:
#   - $RIDGE_TESTDATA_DIR, else ../shared/testdata beside this repository, as CI places it;
#   - else, for a clone without it, what public packages ship: llama.cpp's tokenizer vocabularies
#     with their test strings and expected ids, and its chat templates, from the source
#     distribution of the PyPI package llama-cpp-python (the llama.cpp tools/build_llamacpp.sh
#     builds), unpacked once into ${RIDGE_CACHE:-~/.cache/ridge}/. The tests that need anything
#     else (the stories260K models, tiny-qwen, ...) then skip, naming the file (tests/shared_testdata.h).
# With RIDGE_REQUIRE_TESTDATA=1 (CI) only the shared test data will do: without it this fails.
# When nothing can be had (offline), says so in one line and prints an empty folder: tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ -n "${RIDGE_TESTDATA_DIR:-}" ]; then
  [ -f "$RIDGE_TESTDATA_DIR/SOURCES.md" ] ||
    { echo "ridge tests: \$RIDGE_TESTDATA_DIR=$RIDGE_TESTDATA_DIR has no SOURCES.md: not the shared test data" >&2; exit 1; }
  echo "$RIDGE_TESTDATA_DIR"
  exit 0
fi
shared=$PWD/../shared/testdata
if [ -f "$shared/SOURCES.md" ]; then
  echo "$shared"
  exit 0
fi
if [ "${RIDGE_REQUIRE_TESTDATA:-0}" = 1 ]; then
  echo "ridge tests: no shared test data at $shared (RIDGE_REQUIRE_TESTDATA=1)" >&2
  exit 1
fi

VERSION=0.3.36  # as tools/build_llamacpp.sh, whose download this shares
CACHE=${RIDGE_CACHE:-$HOME/.cache/ridge}
out=$CACHE/testdata-llama-cpp-python-$VERSION
if [ -f "$out/SOURCES.md" ]; then
  echo "$out"
  exit 0
fi
none=$CACHE/testdata-none
sdist=$CACHE/llama.cpp-$VERSION/llama_cpp_python-$VERSION.tar.gz
mkdir -p "$CACHE/llama.cpp-$VERSION"
if [ ! -f "$sdist" ]; then
  echo "ridge tests: no ../shared/testdata; fetching llama-cpp-python==$VERSION's source distribution from PyPI" >&2
  tmp=$(mktemp -d "$CACHE/llama.cpp-$VERSION/download.XXXXXX")
  if ! python3 -m pip download --quiet --no-deps --no-binary :all: "llama-cpp-python==$VERSION" -d "$tmp" >&2 2>/dev/null; then
    rm -rf "$tmp"
    mkdir -p "$none"
    echo "ridge tests: no ../shared/testdata and PyPI cannot be reached: the tests that read test data will skip" >&2
    echo "$none"
    exit 0
  fi
  mv "$tmp/llama_cpp_python-$VERSION.tar.gz" "$sdist"
  rm -rf "$tmp"
fi

# The vocabularies the tokenizer suites run (tests/test_tokenizer_vocab.cpp) and every template.
vocabs=(deepseek-coder deepseek-llm gpt-2 llama-bpe llama-spm mpt phi-3 qwen2 refact starcoder)
tmp=$(mktemp -d "$CACHE/testdata.XXXXXX")
models=llama_cpp_python-$VERSION/vendor/llama.cpp/models
tar -xzf "$sdist" -C "$tmp" --wildcards "$models/ggml-vocab-*" "$models/templates/*.jinja"
mkdir -p "$tmp/out/llamacpp-vocab" "$tmp/out/chat-templates"
for v in "${vocabs[@]}"; do
  for ext in gguf gguf.inp gguf.out; do
    cp "$tmp/$models/ggml-vocab-$v.$ext" "$tmp/out/llamacpp-vocab/"
  done
done
cp "$tmp/$models"/templates/*.jinja "$tmp/out/chat-templates/"
cat >"$tmp/out/SOURCES.md" <<EOF
# Test data from public packages (tools/testdata.sh)

Made because ../shared/testdata was not beside the repository. From the source distribution of the
PyPI package llama-cpp-python==$VERSION (vendor/llama.cpp/models/):
- llamacpp-vocab/: ggml-vocab-{$(IFS=,; echo "${vocabs[*]}")}.gguf with their .inp test strings and .out expected ids
- chat-templates/: every templates/*.jinja

Not here (only the shared test data has them; the tests that read them skip): gguf-stories260K,
llama2c-stories260K, llama2c-tokenizer, ollama-tiny-random, tiny-qwen.
EOF
rm -rf "$out"
mv "$tmp/out" "$out"
rm -rf "$tmp"
echo "$out"
