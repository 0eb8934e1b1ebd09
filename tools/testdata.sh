#!/usr/bin/env bash
# Where the tests read the test data made by others (tiny models, tokenizer vocabularies with their
# expected ids; see its SOURCES.md): $RIDGE_TESTDATA_DIR, else ../shared/testdata beside this
# repository, as CI places it. Prints the directory, or says in one line what is missing and fails.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${RIDGE_TESTDATA_DIR:-$PWD/../shared/testdata}
if [ ! -f "$dir/SOURCES.md" ]; then
  echo "ridge tests: no shared test data at $dir (expected ../shared/testdata beside the repository, or \$RIDGE_TESTDATA_DIR)" >&2
  exit 1
fi
echo "$dir"
