#!/usr/bin/env bash
# Instructions per 20 ms chunk on aarch64, NEON against scalar, counted under
# qemu-user: aarch64_insns.c built with the wheel's flags (setup.py) by
# Debian's cross compiler, run one instruction per translation block with
# every executed block logged (-singlestep -d exec,nochain; Debian's qemu
# ships no plugins), counting the log's lines between mark_begin and
# mark_end.  Prints a Markdown table for benchmarks/README.md.
# Needs gcc-aarch64-linux-gnu and qemu-user (.ci/aarch64 installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
src=audiocore/src
aarch64-linux-gnu-gcc -std=c11 -O3 -fno-math-errno -fno-trapping-math -Wall -Wextra -Werror \
  -static -I"$src" benchmarks/aarch64_insns.c "$src/convert.c" "$src/resample.c" "$src/simd.c" \
  -o "$out/insns"
count() {
  qemu-aarch64 -singlestep -d exec,nochain -D "$out/log" "$out/insns" "$1" "$2"
  awk '/\] mark_begin$/ { on = 1; next } /\] mark_end$/ { on = 0 } on { n++ } END { print n }' \
    "$out/log"
}
echo "| work (960 samples, 20 ms at 48 kHz) | scalar | neon | scalar / neon |"
echo "|---|---:|---:|---:|"
for kind in f32-s16 s16-f32 resample; do
  scalar=$(count "$kind" scalar)
  neon=$(count "$kind" neon)
  printf '| %s | %d | %d | %.1f× |\n' "$kind" "$scalar" "$neon" "$(echo "$scalar / $neon" | bc -l)"
done
