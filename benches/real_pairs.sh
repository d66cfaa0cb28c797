#!/usr/bin/env bash
# Real projects against the same commands by hand, interleaved (issue 29, point 5):
#
#   benches/real_pairs.sh ROUNDS CASE...
#
# Each round, per case: the whole run on scripted-codex (`autocode scenario run CASE --catalog
# scenarios-real`; its time is the run's own, "run created" to its end in `activity.jsonl`, not
# the harness's setup and oracle), then the case's builder and tester commands by hand
# (benches/real_by_hand.sh) with an empty HOME, as the harness gives the run ("cold": the same
# caches, so the ratio is autocode's), and with the machine's own HOME ("warm": a person's
# caches, which the run does not get here). Prints every round and, per case, the medians and
# the ratio of the medians run / cold. AUTOCODE names the binary (default: the release build);
# AUTOCODE_BEFORE names another (an earlier build) whose run of the case comes right before
# each run of AUTOCODE's, in a column of its own.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:?usage: benches/real_pairs.sh ROUNDS CASE...}
shift
[[ $# -gt 0 ]] || { echo "usage: benches/real_pairs.sh ROUNDS CASE..." >&2; exit 2; }
bin=${AUTOCODE:-${CARGO_TARGET_DIR:-target}/release/autocode}
[ -x "$bin" ] || cargo build --release --locked -q
export PATH="$PWD/tests/clis/node_modules/.bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Seconds from "run created" to the last event of the newest run under DIR.
run_span() { # DIR
  python3 - "$1" <<'EOF'
import datetime, glob, json, os, sys
files = sorted(glob.glob(os.path.join(sys.argv[1], "**", "activity.jsonl"), recursive=True), key=os.path.getmtime)
rows = [json.loads(line) for line in open(files[-1])]
at = lambda row: datetime.datetime.fromisoformat(row["at"].replace("Z", "+00:00"))
print(f"{(at(rows[-1]) - at(rows[0])).total_seconds():.1f}")
EOF
}
by_hand() { # CASE [cold]
  REAL_BY_HAND_HOME=${2:-} benches/real_by_hand.sh "$1" 2>/dev/null | awk -v c="$1" '$1 == c { print $4 }'
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| round | case | run s | verdict | by hand, cold HOME s | by hand, warm HOME s | before: run s, verdict |"
echo "|---|---|---|---|---|---|---|"
before=${AUTOCODE_BEFORE:-}
# The whole run of CASE by BINARY into OUT: prints its span and verdict.
run_case() { # BINARY CASE OUT
  "$1" scenario run "$2" --catalog scenarios-real --profile scripted-codex --out "$3" \
    >"$3.log" 2>&1 || true
  verdict=$(python3 -c 'import glob, json, sys; print(json.load(open(glob.glob(sys.argv[1] + "/**/result.json", recursive=True)[0]))["verdict"])' "$3")
  echo "$(run_span "$3") $verdict"
  rm -rf "$3"
}
for round in $(seq 1 "$rounds"); do
  for case in "$@"; do
    out="$work/$case-$round"
    earlier="- -"
    [[ -z "$before" ]] || earlier=$(run_case "$before" "$case" "$out-before")
    read -r span verdict < <(run_case "$bin" "$case" "$out")
    cold=$(by_hand "$case" cold)
    warm=$(by_hand "$case")
    echo "$case $span $cold $warm ${earlier%% *}" >>"$work/rows"
    echo "| $round | $case | $span | $verdict | $cold | $warm | $earlier |"
  done
done
echo
echo "| case | run s (median) | cold by hand s | warm by hand s | run / cold | run / warm | before: run s (median) |"
echo "|---|---|---|---|---|---|---|"
for case in "$@"; do
  r=$(awk -v c="$case" '$1 == c { print $2 }' "$work/rows" | median)
  c=$(awk -v c="$case" '$1 == c { print $3 }' "$work/rows" | median)
  w=$(awk -v c="$case" '$1 == c { print $4 }' "$work/rows" | median)
  b=-
  [[ -z "$before" ]] || b=$(awk -v c="$case" '$1 == c { print $5 }' "$work/rows" | median)
  printf '| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %s |\n' "$case" "$r" "$c" "$w" \
    "$(awk "BEGIN { print $r / $c }")" "$(awk "BEGIN { print $r / $w }")" "$b"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
