#!/usr/bin/env python3
"""The ridge source files one decode step runs, counted from a coverage build.

Builds bench/bench_decode_step with gcc --coverage and -DRIDGE_COVERAGE_STEP (in build-cov/, CPU
only, the default plan), runs it on the default model, and lists every source file of the
repository (tests, benchmarks and third-party code excluded) with a line executed during exactly
one decode step: Session::decode of one token and the greedy Sampler::sample of the next. The
program resets gcov's counters just before that step and writes them just after it, so loading,
the prompt and the warm-up step are not counted, and neither is printing text (the CLI's and the
tokenizer's part of `ridge generate`, not the engine's step).
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
                    "-DRIDGE_CUDA=OFF", "-DRIDGE_SERVE=OFF", "-DCMAKE_CXX_FLAGS=--coverage -O1 -DRIDGE_COVERAGE_STEP",
                    "-DCMAKE_EXE_LINKER_FLAGS=--coverage"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "-j", str(os.cpu_count() or 2), "--target", "bench_decode_step"],
                   check=True, stdout=subprocess.DEVNULL)


def step_lines(model):
    """(file, line) -> times executed during the one decode step."""
    for f in glob.glob(os.path.join(BUILD, "**", "*.gcda"), recursive=True):
        os.remove(f)
    env = dict(os.environ, OMP_NUM_THREADS="2")
    subprocess.run([os.path.join(BUILD, "bench_decode_step"), model], check=True, env=env,
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
    files = collections.Counter()
    for key, c in step_lines(a.model).items():
        if c > 0:
            files[key[0]] += 1
    ours = {}
    for path, lines in files.items():
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(("..", "tests" + os.sep, "bench" + os.sep, "build")):
            continue  # third-party headers, tests, the driver, generated files
        ours[rel] = lines
    for rel in sorted(ours):
        print(f"{ours[rel]:5d}  {rel}")
    sources = [r for r in ours if not r.endswith((".h", ".cuh"))]
    print(f"{len(ours)} files ({len(sources)} source files, {len(ours) - len(sources)} headers)")


if __name__ == "__main__":
    sys.exit(main())
