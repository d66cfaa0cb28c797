#!/usr/bin/env bash
# The exec ledger's cost on exec-heavy children, as whole processes: each workload plain and
# under `autocode supervise --ledger FILE` (the boundary, every exec read, written to the ledger
# file and followed to its end), plus the fixed cost of a supervised launch (`supervise -- true`
# against `true`: autocode's start, the probe, the keeper, the final verification), which a run
# pays once per stage whatever the child does. Runs alternate so a machine whose speed drifts
# affects both alike; medians of RUNS rounds.
# Usage: benches/ledger_overhead.sh [RUNS]   (default 9). Needs a release build (of
# ${CARGO_TARGET_DIR:-target}, or the binary AUTOCODE_BIN names). Prints wall seconds and,
# beside them, CPU seconds (user + system of every process waited for), the figure to trust on
# a loaded machine.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${AUTOCODE_BIN:-${CARGO_TARGET_DIR:-$PWD/target}/release/autocode}
[ -x "$bin" ] || cargo build --release --locked -q
runs=${1:-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

loop='i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done'

# A small crate without dependencies (`cargo new`), built offline from scratch each time.
cargo new -q --vcs none "$work/small" >/dev/null
cargo build -q --offline --manifest-path "$work/small/Cargo.toml" # warm the toolchain
small="cd $work/small && rm -rf target && cargo build -q --offline"
# The same crate with one small dependency (`itoa`, already in the cargo cache once autocode
# is built): a few more rustc runs, each much longer than an exec round trip.
cargo new -q --vcs none "$work/dep" >/dev/null
printf 'itoa = "1"\n' >>"$work/dep/Cargo.toml"
cargo build -q --offline --manifest-path "$work/dep/Cargo.toml"
dep="cd $work/dep && rm -rf target && cargo build -q --offline"

# "WALL CPU" seconds of one run of a command (CPU: user + system, children included).
wall() {
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$@" >/dev/null 2>&1 || true
  awk '{ print $1, $2 + $3 }' "$work/time"
}

calc() { awk "BEGIN { print $* }"; }

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

measure() { # name script
  local name=$1 script=$2 plain=() ledger=() fixed=() plain_cpu=() ledger_cpu=() round
  for round in $(seq 0 "$runs"); do
    local p l t s
    p=$(wall sh -c "$script")
    l=$(wall "$bin" supervise --timeout 600 --ledger "$work/ledger.jsonl" -- sh -c "$script")
    t=$(wall true)
    s=$(wall "$bin" supervise --timeout 600 --ledger "$work/true.jsonl" -- true)
    # Round 0 is a warm-up.
    [ "$round" -eq 0 ] && continue
    plain+=("${p% *}") ledger+=("${l% *}") fixed+=("$(calc "${s% *} - ${t% *}")")
    plain_cpu+=("${p#* }") ledger_cpu+=("${l#* }")
  done
  local mp ml mf mpc mlc execs
  mp=$(printf '%s\n' "${plain[@]}" | median)
  ml=$(printf '%s\n' "${ledger[@]}" | median)
  mf=$(printf '%s\n' "${fixed[@]}" | median)
  mpc=$(printf '%s\n' "${plain_cpu[@]}" | median)
  mlc=$(printf '%s\n' "${ledger_cpu[@]}" | median)
  execs=$(grep -o '"seq":[0-9]*' "$work/ledger.jsonl" | sort -u | wc -l)
  printf '| %s | %s | %.3f | %.3f | %+.1f %% | %.1f ms | %+.1f %% | %.0f µs | %.3f | %.3f | %+.1f %% |\n' \
    "$name" "$execs" "$mp" "$ml" \
    "$(calc "($ml / $mp - 1) * 100")" \
    "$(calc "$mf * 1000")" \
    "$(calc "(($ml - $mf) / $mp - 1) * 100")" \
    "$(calc "($ml - $mf - $mp) / $execs * 1000000")" \
    "$mpc" "$mlc" "$(calc "($mlc / $mpc - 1) * 100")"
}

echo "| workload | ledger lines with a seq | plain s | supervised + ledger s | overhead | fixed launch cost | overhead without it | per exec | plain cpu s | supervised + ledger cpu s | cpu overhead |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
measure "1,000 execs of /bin/true" "$loop"
measure "cargo build of a new crate" "$small"
measure "cargo build of a new crate with one dependency" "$dep"
