#!/usr/bin/env bash
# The `autocode events normalize` command as a whole process (not the library parser): wall
# throughput and peak RSS, human and --json, per format, on inputs made by repeating the real
# fixture streams. Usage: benches/events_normalize.sh [MB ...]   (default: 200)
# AUTOCODE_BIN=path times another build (e.g. a copy of the one before a change).
# AUTOCODE_BEFORE=path also times that build, alternated with AUTOCODE_BIN run by run on the
# same input (before, after, before, after...; ROUNDS pairs, default 5) so both see the same
# neighbours' load, and prints the median of each.
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

# One timed run: binary format input mode -> "wall user sys kib"
timed() {
  local flag=()
  [ "$4" = json ] && flag=(--json)
  /usr/bin/time -f '%e %U %S %M' -o "$work/time" "$1" events normalize --transport "$2" "$3" "${flag[@]}" >/dev/null
  cat "$work/time"
}

# Median of the runs in file $1 (lines "wall user sys kib") -> "wall cpu kib" medians.
medians() {
  local n
  n=$(wc -l <"$1")
  for column in 1 cpu 4; do
    if [ "$column" = cpu ]; then awk '{ print $2 + $3 }' "$1"; else awk -v c="$column" '{ print $c }' "$1"; fi |
      sort -g | awk -v n="$n" 'NR == int((n + 1) / 2)'
  done | paste -sd ' '
}

rounds=${ROUNDS:-5}
if [ -n "${AUTOCODE_BEFORE:-}" ]; then
  echo "| format | MB | output | before: wall MB/s | CPU MB/s | after: wall MB/s | CPU MB/s | after: peak RSS MiB |"
  echo "|---|---|---|---|---|---|---|---|"
else
  echo "| format | MB | output | wall s | wall MB/s | CPU MB/s | peak RSS MiB |"
  echo "|---|---|---|---|---|---|---|"
fi
for mb in "${@:-200}"; do
  for format in opencode codex claude; do
    input=$(make_input "$format" "$mb")
    bytes=$(stat -c %s "$input")
    for mode in human json; do
      # Warm the page cache once, then measure.
      cat "$input" >/dev/null
      if [ -n "${AUTOCODE_BEFORE:-}" ]; then
        : >"$work/before" && : >"$work/after"
        for _ in $(seq "$rounds"); do
          timed "$AUTOCODE_BEFORE" "$format" "$input" "$mode" >>"$work/before"
          timed "$bin" "$format" "$input" "$mode" >>"$work/after"
        done
        read -r bw bc _ < <(medians "$work/before")
        read -r aw ac ak < <(medians "$work/after")
        awk -v f="$format" -v mb="$mb" -v m="$mode" -v b="$bytes" -v bw="$bw" -v bc="$bc" -v aw="$aw" -v ac="$ac" -v k="$ak" \
          'function rate(s) { return s > 0 ? b / 1e6 / s : 0 }
           BEGIN { printf "| %s | %d | %s | %.0f | %.0f | %.0f | %.0f | %.1f |\n", f, mb, m, rate(bw), rate(bc), rate(aw), rate(ac), k / 1024 }'
      else
        read -r wall user sys kib < <(timed "$bin" "$format" "$input" "$mode")
        awk -v f="$format" -v mb="$mb" -v m="$mode" -v w="$wall" -v u="$user" -v s="$sys" -v b="$bytes" -v k="$kib" \
          'BEGIN { cpu = u + s;
                   printf "| %s | %d | %s | %.2f | %.0f | %.0f | %.1f |\n", f, mb, m, w, (w > 0 ? b / 1e6 / w : 0), (cpu > 0 ? b / 1e6 / cpu : 0), k / 1024 }'
      fi
    done
    rm -f "$input"
  done
done
