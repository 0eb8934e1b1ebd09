#!/usr/bin/env bash
# Builds llama.cpp's llama-bench, llama-perplexity, llama-quantize and llama-batched-bench, the
# reference ridge is measured against,
# from the llama.cpp vendored in the source distribution of the PyPI package llama-cpp-python
# (pinned below), with native CPU flags, in ${RIDGE_CACHE:-~/.cache/ridge}/llama.cpp-<version>/.
# Nothing is written into the repository. Safe to run again: each step is skipped when done.
# Prints the paths of the binaries on stdout (one per line); progress goes to stderr.
set -euo pipefail

VERSION=0.3.36   # newest llama-cpp-python on PyPI when this was written (pip index versions)
CACHE=${RIDGE_CACHE:-$HOME/.cache/ridge}
ROOT=$CACHE/llama.cpp-$VERSION
SRC=$ROOT/src/llama_cpp_python-$VERSION/vendor/llama.cpp
BUILD=$ROOT/build
TARGETS=(llama-bench llama-perplexity llama-quantize llama-batched-bench)

log() { echo "build_llamacpp: $*" >&2; }

# Debian packages, installed only when missing.
packages=(build-essential cmake python3 python3-pip)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# 1. The source distribution (the wheel would be a prebuilt library without the tools).
mkdir -p "$ROOT"
sdist=$ROOT/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$sdist" ]; then
  log "downloading llama-cpp-python==$VERSION (sdist)"
  tmp=$(mktemp -d "$ROOT/download.XXXXXX")
  python3 -m pip download --quiet --no-deps --no-binary :all: \
    "llama-cpp-python==$VERSION" -d "$tmp"
  mv "$tmp"/llama_cpp_python-"$VERSION".tar.gz "$sdist"
  rm -rf "$tmp"
fi

# 2. Unpack it (into a temporary folder first, so that a half-unpacked tree is never taken as done).
if [ ! -f "$SRC/CMakeLists.txt" ]; then
  log "unpacking $sdist"
  rm -rf "$ROOT/src" "$ROOT/src.tmp"
  mkdir -p "$ROOT/src.tmp"
  tar -xzf "$sdist" -C "$ROOT/src.tmp"
  mv "$ROOT/src.tmp" "$ROOT/src"
  [ -f "$SRC/CMakeLists.txt" ] || { log "no vendor/llama.cpp/CMakeLists.txt in $sdist"; exit 1; }
fi

# 3. Configure: CPU only, native flags, static, no network, no tests/examples/server.
# AMX is switched off: this machine's CPU reports AMX (Sapphire Rapids) and the kernel grants it,
# but ggml's AMX matmul (ggml-cpu/amx/mmq.cpp, tinygemm_kernel_amx) dies here with SIGILL on
# `tilezero`; every other -march=native extension (AVX-512, VNNI, BF16) stays on. The arguments are
# kept in a stamp file so that a change of them reconfigures (and rebuilds) an existing tree.
cmake_args=(-DCMAKE_BUILD_TYPE=Release
  -DGGML_NATIVE=ON -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF
  "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF -DGGML_SYCL=OFF
  -DGGML_OPENCL=OFF -DGGML_RPC=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF
  -DLLAMA_BUILD_TOOLS=ON)
stamp=$BUILD/ridge-configure-args.txt
if [ ! -f "$BUILD/CMakeCache.txt" ] || [ "$(cat "$stamp" 2>/dev/null)" != "${cmake_args[*]}" ]; then
  log "configuring $SRC -> $BUILD"
  rm -f "$stamp"
  cmake -S "$SRC" -B "$BUILD" "${cmake_args[@]}" >"$ROOT/configure.log" 2>&1 \
    || { log "cmake configure failed; see $ROOT/configure.log"; exit 1; }
  echo "${cmake_args[*]}" >"$stamp"
fi

# 4. Build only these tools (make/ninja skip what is up to date).
start=$(date +%s)
cmake --build "$BUILD" --target "${TARGETS[@]}" -j"$(nproc)" >"$ROOT/build.log" 2>&1 \
  || { log "build failed; see $ROOT/build.log"; tail -20 "$ROOT/build.log" >&2; exit 1; }
log "build step took $(( $(date +%s) - start )) s"

for t in "${TARGETS[@]}"; do
  [ -x "$BUILD/bin/$t" ] || { log "missing $BUILD/bin/$t after the build"; exit 1; }
  echo "$BUILD/bin/$t"
done
