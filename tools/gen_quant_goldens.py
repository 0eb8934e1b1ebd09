#!/usr/bin/env python3
"""Golden data for weights/quant.h (the formats of weights/formats/), made with gguf-py (gguf.quants.quantize / dequantize).

Run with the system python3 (gguf 0.19, numpy):  python3 tools/gen_quant_goldens.py
Writes tests/data/quant/<TYPE>.bin, one file per type, each in this raw little-endian format:

    offset 0   4 bytes  magic b"RQG1"
           4   u32      ggml type number (GGUF tensor type: F16 = 1, Q4_0 = 2, ..., BF16 = 30)
           8   u32      n_rows
          12   u32      n_per_row (elements per row; a multiple of the type's block size)
          16   u32      has_input: 1 if the float input rows follow, 0 if not
          20   f32      input [n_rows * n_per_row]                   (only when has_input)
           .   u8       quantized bytes [n_rows * row_bytes(type, n_per_row)]
           .   f32      gguf-py's dequantization of those bytes [n_rows * n_per_row]

Types gguf-py can quantize (F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) carry the input, so a test
can check quantize (input -> bytes) and dequantize (bytes -> floats). For the K-quants (Q4_K,
Q5_K, Q6_K), which gguf-py only dequantizes, the bytes are random blocks whose f16 scale fields
are overwritten with sane values; those files have no input.
"""
import os
import struct

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

N_PER_ROW = 256
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "quant")


def input_rows(rng: np.random.Generator) -> np.ndarray:
    """Six rows of N_PER_ROW float32 values covering the interesting cases."""
    rows = []
    rows.append(rng.standard_normal(N_PER_ROW))                            # plain Gaussian
    scales = 10.0 ** rng.uniform(-6, 4, size=N_PER_ROW // 32)              # odd magnitudes per block
    rows.append(rng.standard_normal(N_PER_ROW) * np.repeat(scales, 32))
    rows.append(np.zeros(N_PER_ROW))                                       # all zeros
    r = rng.standard_normal(N_PER_ROW) * 0.01                              # one huge value
    r[37] = 3.0e4
    rows.append(r)
    r = rng.integers(-8, 9, size=N_PER_ROW).astype(np.float64) * 0.5       # exact ties, a zero block
    r[64:96] = 0.0
    rows.append(r)
    r = rng.uniform(-1, 1, size=N_PER_ROW) * 1e-6                          # f16-subnormal scales
    r[200:232] = rng.uniform(0.5, 2.0, size=32)                            # one all-positive block
    r[232:256] = -rng.uniform(0.5, 2.0, size=24)
    rows.append(r)
    return np.stack(rows).astype(np.float32)


def random_k_blocks(rng: np.random.Generator, qtype: T, n_rows: int) -> np.ndarray:
    """Random K-quant rows whose f16 scales are sane (finite, modest), one block with d = 0."""
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = n_rows * N_PER_ROW // block_elems
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)

    def f16_bytes(values):
        return np.asarray(values, dtype=np.float16).view(np.uint8).reshape(-1, 2)

    if qtype in (T.Q4_K, T.Q5_K):            # d at bytes 0-1, dmin at bytes 2-3
        raw[:, 0:2] = f16_bytes(rng.uniform(1e-4, 0.05, size=n_blocks))
        raw[:, 2:4] = f16_bytes(rng.uniform(1e-4, 0.05, size=n_blocks))
        raw[1, 0:2] = 0
    elif qtype == T.Q6_K:                    # d at the end, bytes 208-209
        raw[:, 208:210] = f16_bytes(rng.uniform(1e-4, 0.05, size=n_blocks))
        raw[1, 208:210] = 0
    else:
        raise ValueError(qtype)
    return raw.reshape(n_rows, -1)


def write(qtype: T, inp, qbytes: np.ndarray, deq: np.ndarray) -> None:
    n_rows = qbytes.shape[0]
    path = os.path.join(OUT_DIR, f"{qtype.name}.bin")
    with open(path, "wb") as f:
        f.write(b"RQG1")
        f.write(struct.pack("<IIII", int(qtype), n_rows, N_PER_ROW, 0 if inp is None else 1))
        if inp is not None:
            f.write(np.ascontiguousarray(inp, dtype="<f4").tobytes())
        f.write(np.ascontiguousarray(qbytes, dtype=np.uint8).tobytes())
        f.write(np.ascontiguousarray(deq, dtype="<f4").tobytes())
    print(f"{path}: {os.path.getsize(path)} bytes")


def main() -> None:
    os.makedirs(OUT_DIR, exist_ok=True)
    rng = np.random.default_rng(20261129)
    x = input_rows(rng)
    for qtype in (T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1):
        q = quants.quantize(x, qtype)
        qbytes = q.view(np.uint8).reshape(x.shape[0], -1)
        deq = quants.dequantize(qbytes, qtype).reshape(x.shape).astype(np.float32)
        write(qtype, x, qbytes, deq)
    for qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
        qbytes = random_k_blocks(rng, qtype, 4)
        deq = quants.dequantize(qbytes, qtype).reshape(4, N_PER_ROW).astype(np.float32)
        write(qtype, None, qbytes, deq)


if __name__ == "__main__":
    main()
