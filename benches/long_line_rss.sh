#!/usr/bin/env bash
# autocode's peak RSS while a stage's CLI prints one enormous stdout line: the live stream
# reader must drop it piecewise (it never holds more than the 16 MiB line cap), so the peak
# must not grow with the line. Runs the integration test
# `it::operator_e2e::a_huge_stdout_line_does_not_grow_autocode` (a whole `autocode run` with the
# scripted fake agent; a wrapper reads ru_maxrss of autocode and all it waited for) at each
# size and prints a markdown table. The test itself asserts < 64 MiB.
# Usage: benches/long_line_rss.sh [BYTES ...]   (default: 1 and 1 GiB)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 $((1 << 30)))
echo "| line bytes | peak RSS (KiB) |"
echo "|---:|---:|"
for bytes in "${sizes[@]}"; do
  peak=$(AUTOCODE_LONG_LINE_BYTES=$bytes cargo test -q --test all -- \
           it::operator_e2e::a_huge_stdout_line_does_not_grow_autocode --nocapture 2>&1 |
         sed -n 's/^peak RSS with a [0-9]*-byte line: \([0-9]*\) KiB$/\1/p')
  echo "| $bytes | ${peak:-FAILED} |"
done
