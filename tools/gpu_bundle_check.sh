#!/usr/bin/env bash
# Whether a GPU bundle (tools/gpu_bundle.sh) runs on a machine that is not this one: every shared
# library its binaries and libraries need is in DIR/lib or on a short list of base system libraries
# (libc, libm, libdl, libpthread, librt, ld-linux, libcuda); the highest GLIBC_ symbol version any of
# them requires is at most 2.34; and no AVX-512 (zmm) instruction appears in their code, since the
# GPU machine's CPU is not this one. Prints what it found and names whatever breaks it (exit 1).
#   bash tools/gpu_bundle_check.sh DIR
set -euo pipefail
dir=${1:?usage: bash tools/gpu_bundle_check.sh DIR}
[ -d "$dir/bin" ] || { echo "gpu_bundle_check: $dir/bin is missing: not a bundle" >&2; exit 1; }
max_glibc=2.34
base='^(libc\.so\.6|libm\.so\.6|libdl\.so\.2|libpthread\.so\.0|librt\.so\.1|ld-linux-x86-64\.so\.2|libcuda\.so\.1)$'
bad=0
highest=0.0
for f in "$dir"/bin/* "$dir"/lib/*; do
  [ -f "$f" ] || continue
  for need in $(objdump -p "$f" | awk '$1 == "NEEDED" {print $2}'); do
    if [[ ! $need =~ $base ]] && [ ! -f "$dir/lib/$need" ]; then
      echo "gpu_bundle_check: $(basename "$f") needs $need, which is neither in $dir/lib nor a base system library"
      bad=1
    fi
  done
  v=$(objdump -T "$f" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)
  if [ -n "$v" ]; then
    if [ "$(printf '%s\n%s\n' "$v" "$max_glibc" | sort -V | tail -1)" != "$max_glibc" ]; then
      echo "gpu_bundle_check: $(basename "$f") requires GLIBC_$v, above $max_glibc:" \
        "$(objdump -T "$f" | grep "GLIBC_$v" | awk '{print $NF}' | head -3 | tr '\n' ' ')"
      bad=1
    fi
    highest=$(printf '%s\n%s\n' "$v" "$highest" | sort -V | tail -1)
  fi
  zmm=$(objdump -d --no-show-raw-insn "$f" 2>/dev/null | grep -c '%zmm' || true)
  if [ "$zmm" -gt 0 ]; then
    echo "gpu_bundle_check: $(basename "$f") has $zmm instructions on zmm registers (AVX-512), e.g." \
      "$(objdump -d --no-show-raw-insn "$f" | grep -m1 '%zmm' | sed 's/^ *//')"
    bad=1
  fi
done
echo "gpu_bundle_check: highest GLIBC_ version required: $highest (at most $max_glibc)"
if [ "$bad" = 0 ]; then
  echo "gpu_bundle_check: $dir is self-contained and portable"
fi
exit $bad
