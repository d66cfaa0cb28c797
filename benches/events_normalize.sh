#!/usr/bin/env bash
# The `autocode events normalize` command as a whole process (not the library parser): wall
# throughput and peak RSS, human and --json, per format, on inputs made by repeating the real
# fixture streams. Usage: benches/events_normalize.sh [MB ...]   (default: 200)
# AUTOCODE_BIN=path times another build (e.g. a copy of the one before a change).
# Needs a release build (`cargo build --release`); prints a markdown table. CPU MB/s is the
# input over the process's user + system time: on this shared machine wall time also counts
# the time the process waited for a core.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${AUTOCODE_BIN:-target/release/autocode}
[ -x "$bin" ] || cargo build --release --locked -q
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

declare -A samples=(
  [opencode]="thinking failcmd err429"
  [codex]="happy failcmd err429"
  [claude]="happy failcmd err429once"
)

make_input() { # format MB -> path
  local format=$1 mb=$2 unit="$work/$1.unit" path="$work/$1-$2.jsonl"
  : >"$unit"
  for case in ${samples[$format]}; do
    cat "tests/fixtures/real-clis/$format/$case/stdout.jsonl" >>"$unit"
  done
  local target=$((mb * 1000 * 1000)) size
  # Double the unit until it is ~1 MB, then append copies up to the target.
  while [ "$(stat -c %s "$unit")" -lt 1000000 ]; do cat "$unit" "$unit" >"$unit.2" && mv "$unit.2" "$unit"; done
  : >"$path"
  size=0
  local unit_size
  unit_size=$(stat -c %s "$unit")
  while [ "$size" -lt "$target" ]; do cat "$unit" >>"$path"; size=$((size + unit_size)); done
  echo "$path"
}

echo "| format | MB | output | wall s | wall MB/s | CPU MB/s | peak RSS MiB |"
echo "|---|---|---|---|---|---|---|"
for mb in "${@:-200}"; do
  for format in opencode codex claude; do
    input=$(make_input "$format" "$mb")
    bytes=$(stat -c %s "$input")
    for mode in human json; do
      flag=()
      [ "$mode" = json ] && flag=(--json)
      # Warm the page cache once, then measure.
      cat "$input" >/dev/null
      /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$bin" events normalize --transport "$format" "$input" "${flag[@]}" >/dev/null
      read -r wall user sys kib <"$work/time"
      awk -v f="$format" -v mb="$mb" -v m="$mode" -v w="$wall" -v u="$user" -v s="$sys" -v b="$bytes" -v k="$kib" \
        'BEGIN { cpu = u + s;
                 printf "| %s | %d | %s | %.2f | %.0f | %.0f | %.1f |\n", f, mb, m, w, (w > 0 ? b / 1e6 / w : 0), (cpu > 0 ? b / 1e6 / cpu : 0), k / 1024 }'
    done
    rm -f "$input"
  done
done
