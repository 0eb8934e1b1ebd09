#!/usr/bin/env bash
# The one-shot GPU check, prepared here: builds (portably: -DRIDGE_NATIVE=OFF, CUDA on; libstdc++ and
# libgcc linked in, no server, whose cpp-httplib needs OpenSSL, no libedit) only what the check needs (ridge,
# every GPU test binary, the kernel microbenchmark bench_cuda_decode), strips it, copies every
# shared library it loads that is not a base system library into DIR/lib, the tiny test data the
# GPU tests read into DIR/testdata, and writes DIR/run.sh (tools/gpu_run.sh): one command on the GPU
# machine, which has nvcc and CMake but none of ridge's Debian libraries. Then checks that DIR is
# self-contained and portable (tools/gpu_bundle_check.sh) and at most 48 MiB.
#   bash tools/gpu_bundle.sh DIR                       build in build-bundle/, then package
#   bash tools/gpu_bundle.sh --from BUILD_DIR DIR      package an existing build, compiling nothing
#   --no-check                                         skip the size and portability checks (a native build)
set -euo pipefail
cd "$(dirname "$0")/.."
from="" check=1 dir=""
while [ $# -gt 0 ]; do
  case $1 in
    --from) from=${2:?--from needs a build directory}; shift 2 ;;
    --no-check) check=0; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_bundle: unknown option $1" >&2; exit 2 ;;
    *) [ -z "$dir" ] || { echo "gpu_bundle: one DIR only ($dir, $1)" >&2; exit 2; }; dir=$1; shift ;;
  esac
done
[ -n "$dir" ] || { echo "usage: bash tools/gpu_bundle.sh [--from BUILD_DIR] [--no-check] DIR" >&2; exit 2; }
testdata=$(bash tools/testdata.sh)

if [ -z "$from" ]; then
  from=build-bundle
  mkdir -p "$from"
  cmake -S . -B "$from" -DCMAKE_BUILD_TYPE=Release -DRIDGE_NATIVE=OFF -DRIDGE_CUDA=ON -DRIDGE_CUDA_PTX=OFF \
    -DRIDGE_SERVE=OFF -DRIDGE_LIBEDIT=OFF -DRIDGE_STATIC_RUNTIME=ON -DRIDGE_TESTDATA_DIR="$testdata" > "$from/configure.log" 2>&1 ||
    { tail -20 "$from/configure.log"; exit 1; }
  grep -q "CUDA kernels build with" "$from/configure.log" ||
    { echo "gpu_bundle: CMake found no nvcc, so there are no GPU kernels to bundle" >&2; exit 1; }
  targets=(ridge bench_cuda_decode)
  for src in tests/test_cuda_*.cpp tests/test_engine_gpu.cpp; do targets+=("$(basename "$src" .cpp)"); done
  cmake --build "$from" -j"$(nproc)" --target "${targets[@]}"
fi
[ -x "$from/ridge" ] || { echo "gpu_bundle: $from/ridge is missing: build it first" >&2; exit 1; }

rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib" "$dir/testdata"
cp "$from/ridge" "$dir/bin/"
[ -x "$from/bench_cuda_decode" ] && cp "$from/bench_cuda_decode" "$dir/bin/"
n_tests=0
for t in "$from"/test_cuda_* "$from"/test_engine_gpu; do
  [ -x "$t" ] || continue
  cp "$t" "$dir/bin/"
  n_tests=$((n_tests + 1))
done
[ "$n_tests" -gt 0 ] || { echo "gpu_bundle: no GPU test binaries in $from (configured without CUDA?)" >&2; exit 1; }
strip --strip-unneeded "$dir"/bin/*

# Every shared library the binaries load, except the base system's and the driver's (the GPU
# machine brings its own libcuda).
base='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libcuda\.so)'
for b in "$dir"/bin/*; do
  ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $base ]] && continue
  cp -L "$path" "$dir/lib/$name"
done
chmod u+w "$dir"/lib/* 2>/dev/null || true
strip --strip-unneeded "$dir"/lib/* 2>/dev/null || true

# The tiny models the GPU tests read (test_engine_gpu: stories260K, GGUF and llama2.c with its
# tokenizer); SmolLM2 does not travel (98 MB): its GPU tests skip and the benchmarks take a
# synthetic model of its shapes.
for d in gguf-stories260K llama2c-stories260K; do
  [ -d "$testdata/$d" ] && cp -r "$testdata/$d" "$dir/testdata/"
done
cp tools/gpu_run.sh "$dir/run.sh"
chmod +x "$dir/run.sh"

size=$(du -sb "$dir" | cut -f1)
echo "gpu_bundle: $dir: $n_tests GPU test binaries, $(ls "$dir/lib" | wc -l) libraries, $((size / 1048576)) MiB"
if [ "$check" = 1 ]; then
  if [ "$size" -gt $((48 * 1048576)) ]; then
    echo "gpu_bundle: $dir is $((size / 1048576)) MiB, over the 48 MiB that may travel with the repository" >&2
    exit 1
  fi
  bash tools/gpu_bundle_check.sh "$dir"
fi
