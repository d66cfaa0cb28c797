#!/usr/bin/env bash
# Where a stage's added time goes (issue 29, item 1): one stage launch of the hello task, the
# same `codex exec` (its argv, working directory, prompt on stdin, output schema, CODEX_HOME
# configuration, from one `autocode demo --provider codex` run's `launch.json` and `prompt.md`)
# against the scripted model, run six ways, round-robin, one layer of the stage added at a time:
#   warm    bare, with a CODEX_HOME an earlier launch already initialized (a person's second run)
#   fresh   bare, with a pristine CODEX_HOME (only its config.toml), as every role's first stage
#           sees HOME in autocode (the room gives each role its own layer of HOME)
#   sup     `autocode supervise --`: the process-ownership boundary (seccomp user notification)
#   ledger  `autocode supervise --ledger FILE --`: plus every exec read and written
#   room    `autocode supervise --writable CWD --allow-connect MODEL --`: plus the room (Landlock,
#           private copy-on-write layers of HOME and /tmp, gated sockets)
#   stage   room and ledger together: what a stage launch is, without the orchestrator around it
#   warm-stage  the same over the warm CODEX_HOME of `warm` (its layer of HOME new at each
#           launch, as a role's is at each run): a person's second run, launch by launch
# Every column but `warm` and `warm-stage` starts from a fresh CODEX_HOME. Prints each round (wall/CPU seconds,
# CPU = user + system of every process waited for) and the medians; the demo's whole-task
# comparison is benches/hello_bare.sh.
# Usage: benches/stage_layers.sh [ROUNDS] [STAGE]   (default 7 rounds, the first stage;
# STAGE is a stage directory name such as 004-builder-1). AUTOCODE names the binary (default:
# the release build of ${CARGO_TARGET_DIR:-target}).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-7}
stage=${2:-001-requirements-1}
bin=${AUTOCODE:-${CARGO_TARGET_DIR:-target}/release/autocode}
[ -x "$bin" ] || cargo build --release --locked -q
bin=$(realpath "$bin")
export PATH="$PWD/tests/clis/node_modules/.bin:$PATH"
work=$(mktemp -d)
server=
root=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null
  [ -n "$root" ] && rm -rf "$root"
  rm -rf "$work"
}
trap cleanup EXIT

"$bin" demo --provider codex >"$work/out" 2>"$work/err"
run=$(sed -n 's/^run directory: //p' "$work/err" | tail -1)
# The demo's root (`/tmp/autocode-demo-…`) from its run directory (root/workspace/.autocode/runs/ID).
root=$(dirname "$(dirname "$(dirname "$(dirname "$run")")")")
here="$run/stages/$stage"
[ -f "$here/launch.json" ] || { echo "no stage $stage in $run" >&2; exit 2; }
"$bin" scripted-model demo-script >"$work/script.json"
"$bin" scripted-model serve --script "$work/script.json" >"$work/address" 2>/dev/null &
server=$!
while [ ! -s "$work/address" ]; do sleep 0.1; done
address=$(head -1 "$work/address")
mkdir -p "$work/base/.codex"
sed "s#^base_url = .*#base_url = \"http://$address/v1\"#" "$root/home/.codex/config.toml" \
  >"$work/base/.codex/config.toml"
cp -r "$work/base" "$work/warm"
cwd=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cwd"])' "$here/launch.json")
mapfile -t args < <(python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["args"]))' "$here/launch.json")

# "WALL/CPU" of one launch with HOME $1, the rest of the arguments prefixed to `codex …`.
launch() {
  local home=$1
  shift
  (cd "$cwd" && /usr/bin/time -f "%e %U %S" -o "$work/time" env -i PATH="$PATH" HOME="$home" \
    CODEX_HOME="$home/.codex" MOCK_API_KEY=demo LANG=C.UTF-8 "$@" codex "${args[@]}" \
    <"$here/prompt.md" >"$work/launch.out" 2>&1) || {
    echo "a launch failed ($*):" >&2
    tail -5 "$work/launch.out" >&2
    exit 1
  }
  awk '{ printf "%.2f/%.2f", $1, $2 + $3 }' "$work/time"
}
fresh() {
  rm -rf "$work/home"
  cp -r "$work/base" "$work/home"
  echo "$work/home"
}
column() { # NAME
  case $1 in
  warm) launch "$work/warm" ;;
  fresh) launch "$(fresh)" ;;
  sup) launch "$(fresh)" "$bin" supervise -- ;;
  ledger) launch "$(fresh)" "$bin" supervise --ledger "$work/ledger.jsonl" -- ;;
  room) launch "$(fresh)" "$bin" supervise --writable "$cwd" --allow-connect "$address" -- ;;
  stage) launch "$(fresh)" "$bin" supervise --ledger "$work/ledger.jsonl" --writable "$cwd" \
    --allow-connect "$address" -- ;;
  warm-stage) launch "$work/warm" "$bin" supervise --ledger "$work/ledger.jsonl" --writable "$cwd" \
    --allow-connect "$address" -- ;;
  esac
}
names=(warm fresh sup ledger room stage warm-stage)
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "stage $stage, wall/CPU seconds per launch, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '| round |'; printf ' %s |' "${names[@]}"; echo
echo "|---|---|---|---|---|---|---|---|"
: >"$work/rows"
for round in $(seq 0 "$rounds"); do
  row=()
  for name in "${names[@]}"; do row+=("$(column "$name")"); done
  # Round 0 is a warm-up.
  [ "$round" -eq 0 ] && continue
  echo "${row[*]}" >>"$work/rows"
  printf '| %s |' "$round"; printf ' %s |' "${row[@]}"; echo
done
printf '| median'
for i in "${!names[@]}"; do
  w=$(awk -v c=$((i + 1)) '{ split($c, a, "/"); print a[1] }' "$work/rows" | median)
  c=$(awk -v c=$((i + 1)) '{ split($c, a, "/"); print a[2] }' "$work/rows" | median)
  printf ' | %.2f/%.2f' "$w" "$c"
done
echo ' |'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
