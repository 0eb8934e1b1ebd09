#!/usr/bin/env python3
"""The ridge source files one decode step runs, counted from a coverage build.

Builds ridge with gcc --coverage (in build-cov/, CPU only), runs `ridge generate` greedily on the
default model with -n 2 and then -n 3 from the same prompt, and lists every source file of the
repository (tests and third-party code excluded) that has a line whose execution count grew from -n 2
to -n 3: the lines of exactly one more decode step (its forward pass, sampling the token, printing
it). (-n 1 decodes nothing: its one token comes from the prompt's logits.)
The reading guide (docs/reading-guide.md) lists these files.

Usage: python3 tools/decode_step_files.py [--model FILE] [--no-build]
"""
import argparse
import collections
import glob
import gzip
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build-cov")


def build():
    subprocess.run(["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Debug", "-DRIDGE_TESTS=OFF",
                    "-DRIDGE_CUDA=OFF", "-DCMAKE_CXX_FLAGS=--coverage -O1", "-DCMAKE_EXE_LINKER_FLAGS=--coverage"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "-j", str(os.cpu_count() or 2), "--target", "ridge"], check=True,
                   stdout=subprocess.DEVNULL)


def line_counts(model, n):
    """(file, line) -> times executed by one `generate -n n` run."""
    for f in glob.glob(os.path.join(BUILD, "**", "*.gcda"), recursive=True):
        os.remove(f)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    subprocess.run([os.path.join(BUILD, "ridge"), "generate", "-m", model, "-p", "The capital of France is",
                    "-n", str(n), "--temp", "0", "--seed", "1"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    counts = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        for gcda in glob.glob(os.path.join(BUILD, "**", "*.gcda"), recursive=True):
            subprocess.run(["gcov", "--json-format", "-o", os.path.dirname(gcda), gcda], cwd=tmp, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for path in glob.glob(os.path.join(tmp, "*.gcov.json.gz")):
            with gzip.open(path, "rt") as fp:
                data = json.load(fp)
            for f in data["files"]:
                name = os.path.normpath(os.path.join(data.get("current_working_directory", ""), f["file"]))
                for ln in f["lines"]:
                    counts[(name, ln["line_number"])] += ln["count"]
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--no-build", action="store_true", help="use build-cov/ as it is")
    a = ap.parse_args()
    if not a.no_build:
        build()
    one, two = line_counts(a.model, 2), line_counts(a.model, 3)
    files = collections.Counter()
    for key, c in two.items():
        if c > one.get(key, 0):
            files[key[0]] += 1
    ours = {}
    for path, lines in files.items():
        rel = os.path.relpath(path, ROOT)
        if rel.startswith("..") or rel.startswith("tests" + os.sep) or rel.startswith("build"):
            continue  # third-party headers, tests, generated files
        ours[rel] = lines
    for rel in sorted(ours):
        print(f"{ours[rel]:5d}  {rel}")
    sources = [r for r in ours if not r.endswith((".h", ".cuh"))]
    print(f"{len(ours)} files ({len(sources)} source files, {len(ours) - len(sources)} headers)")


if __name__ == "__main__":
    sys.exit(main())
