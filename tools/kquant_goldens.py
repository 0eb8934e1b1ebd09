#!/usr/bin/env python3
"""Reference bytes for `ridge quantize`'s K-quants, made by llama.cpp's own llama-quantize.

    python3 -m venv /tmp/kq-venv && /tmp/kq-venv/bin/pip install gguf numpy
    /tmp/kq-venv/bin/python tools/kquant_goldens.py [--llama-quantize PATH]

llama-quantize comes from tools/build_llamacpp.sh (found there when --llama-quantize is not given).
Writes, under tests/data/kquant/:

  input.f16.gguf  a small Llama-shaped F16 model (8 layers, 256-wide rows; two extra matrices with
                  288- and 48-element rows that no K-quant block fits), written with gguf-py from
                  seeded numpy values drawn group by group from awkward distributions (zeros,
                  constants, values below f16's normal range, large values, one-signed groups,
                  normals of scales from 1e-3 to 1) so that every branch of the quantizers runs.
  goldens.json    for each llama-quantize run (the command line, the target ridge names for it),
                  every tensor of its output: name, type, and the FNV-1a 64-bit hash of its bytes.

llama-quantize runs without an importance matrix, so its quantizers are the deterministic
reference ones. The test (tests/test_weights_kquant.cpp) quantizes input.f16.gguf with ridge and
compares every tensor's type and hash. Nothing here is taken from ridge's output.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "..", "tests", "data", "kquant")

N_LAYER, N_EMBD, N_FF, N_VOCAB = 8, 256, 512, 16

# (ridge's --type, llama-quantize's arguments)
RUNS = [
    ("q4_k", ["--pure"], "Q4_K_S"),
    ("q5_k", ["--pure"], "Q5_K_S"),
    ("q6_k", [], "Q6_K"),
    ("q4_k_m", [], "Q4_K_M"),
    ("q5_k_m", [], "Q5_K_M"),
]


def awkward_values(rng, n_rows, n_per_row):
    """Rows whose 16-element groups each come from one of several distributions."""
    x = np.empty((n_rows, n_per_row), dtype=np.float32)
    for r in range(n_rows):
        for g in range(0, n_per_row, 16):
            kind = rng.integers(0, 12)
            if kind == 0:
                v = np.zeros(16)
            elif kind == 1:
                v = np.full(16, rng.normal())
            elif kind == 2:
                v = rng.normal(0, 1e-6, 16)  # below f16's normal range: subnormal halves or zero
            elif kind == 3:
                v = rng.normal(0, 300, 16)
            elif kind == 4:
                v = rng.uniform(0.1, 1.0, 16)
            elif kind == 5:
                v = -rng.uniform(0.1, 1.0, 16)
            elif kind == 6:
                v = rng.normal(0, 0.02, 16)
                v[rng.integers(0, 16)] = 1.5  # one outlier
            else:
                v = rng.normal(0, 10 ** rng.uniform(-3, 0), 16)
            x[r, g:g + 16] = v
    return x.astype(np.float16)


def write_input(path):
    rng = np.random.default_rng(20261205)
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("kquant-test")
    w.add_block_count(N_LAYER)
    w.add_context_length(256)
    w.add_embedding_length(N_EMBD)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(4)
    w.add_head_count_kv(2)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(64)
    w.add_vocab_size(N_VOCAB)
    w.add_file_type(1)  # MOSTLY_F16

    def matrix(name, n_rows, n_per_row):
        # gguf-py takes numpy's shape (rows, row length); the GGUF shape is the reverse.
        w.add_tensor(name, awkward_values(rng, n_rows, n_per_row))

    def norm(name):
        w.add_tensor(name, (1 + rng.normal(0, 0.1, N_EMBD)).astype(np.float32))

    matrix("token_embd.weight", N_VOCAB, N_EMBD)  # no output.weight: the head is the embedding
    for i in range(N_LAYER):
        norm(f"blk.{i}.attn_norm.weight")
        matrix(f"blk.{i}.attn_q.weight", 2, N_EMBD)
        matrix(f"blk.{i}.attn_k.weight", 2, N_EMBD)
        matrix(f"blk.{i}.attn_v.weight", 2, N_EMBD)
        matrix(f"blk.{i}.attn_output.weight", 2, N_EMBD)
        norm(f"blk.{i}.ffn_norm.weight")
        matrix(f"blk.{i}.ffn_gate.weight", 4, N_EMBD)
        matrix(f"blk.{i}.ffn_up.weight", 4, N_EMBD)
        matrix(f"blk.{i}.ffn_down.weight", 2, N_FF)
    norm("output_norm.weight")
    matrix("extra.rows288.weight", 4, 288)  # K-quants fall back to their 32-block types
    matrix("extra.rows48.weight", 2, 48)    # no quantized block fits: F16
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def find_llama_quantize():
    out = subprocess.run(["bash", os.path.join(HERE, "build_llamacpp.sh")], check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    for line in out.splitlines():
        if line.endswith("/llama-quantize"):
            return line
    sys.exit("kquant_goldens: build_llamacpp.sh printed no llama-quantize")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--llama-quantize")
    args = ap.parse_args()
    quantize = args.llama_quantize or find_llama_quantize()
    os.makedirs(OUT_DIR, exist_ok=True)
    inp = os.path.join(OUT_DIR, "input.f16.gguf")
    write_input(inp)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for target, flags, ltype in RUNS:
            out = os.path.join(tmp, target + ".gguf")
            cmd = [quantize, *flags, inp, out, ltype, "1"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            r = gguf.GGUFReader(out)
            tensors = [{"name": t.name, "type": t.tensor_type.name,
                        "fnv1a64": "%016x" % fnv1a64(bytes(t.data.tobytes()))} for t in r.tensors]
            file_type = int(r.fields["general.file_type"].parts[-1][0])
            runs.append({"target": target, "llama_quantize": " ".join(["llama-quantize", *flags, "IN", "OUT", ltype]),
                         "file_type": file_type, "tensors": tensors})
            print(f"{target}: {len(tensors)} tensors, file_type {file_type}")
    with open(os.path.join(OUT_DIR, "goldens.json"), "w") as f:
        json.dump({"made_by": "tools/kquant_goldens.py with llama-quantize from tools/build_llamacpp.sh",
                   "input": "input.f16.gguf", "runs": runs}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
