#!/usr/bin/env bash
# How long a worktree run waits before its first stage on a large repository, the first run and
# the runs after it (issue 29, item 6: a spare checkout per workspace, `src/run/workspace/spare.rs`).
# One command:
#   benches/worktree_start.sh [FILES] [CLI] [RUNS]     (default 100000 files, codex, 3 runs)
# Runs the one-line task (benches/task_on_workspace.rs) RUNS times, one after the other, on one
# clone of benches/large_workspace.sh's generated repository, and once on a tiny repository, and
# times the start of the first stage: from the bench's own start to the first stage's "attempt
# started" in the run's `activity.jsonl` (strace would stop every system call of the 100,000-file
# git work, and its seccomp-bpf mode cannot see the execs the boundary's notifications take). Beside it, `git worktree add` of the clone
# by hand (what every run paid before the spare). WS_START_PROFILE picks the cargo profile
# (default dev: the debug build).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=${1:-100000}
cli=${2:-codex}
runs=${3:-3}
base=${LARGE_WS_DIR:-/tmp/autocode-large-ws}
export PATH="$PWD/tests/clis/node_modules/.bin:$PATH"
LARGE_WS_ONLY_GENERATE=1 benches/large_workspace.sh "$files" >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g() { git -c core.hooksPath=/dev/null -c user.name=bench -c user.email=bench@example.invalid -c commit.gpgsign=false "$@"; }
mkdir "$work/tiny" && echo "# tiny" >"$work/tiny/README.md"
g -C "$work/tiny" init -q -b main && g -C "$work/tiny" add -A && g -C "$work/tiny" commit -qm seed
g clone -q "$base/repo-$files" "$work/large"
bin=$(cargo build --profile "${WS_START_PROFILE:-dev}" --locked -q --bench task_on_workspace --message-format=json |
  sed -n 's/.*"executable":"\([^"]*task_on_workspace[^"]*\)".*/\1/p' | tail -1)
# Seconds from START (epoch seconds) to the first "attempt started" of the newest run of WS.
first_stage() { # WS START
  python3 - "$1" "$2" <<'PY'
import datetime, json, os, sys
runs = os.path.join(sys.argv[1], ".autocode", "runs")
try:
    newest = max((os.path.join(runs, d) for d in os.listdir(runs)), key=os.path.getmtime)
    for line in open(os.path.join(newest, "activity.jsonl")):
        entry = json.loads(line)
        if entry.get("event") == "attempt started":
            at = datetime.datetime.fromisoformat(entry["at"].replace("Z", "+00:00")[:26] + "+00:00")
            print(f"{at.timestamp() - float(sys.argv[2]):.2f}")
            break
    else:
        print("n/a")
except (OSError, ValueError):
    print("n/a")
PY
}
task() {
  local start
  start=$(date +%s.%N)
  "$bin" "$1" "$cli" worktree >"$work/out" 2>"$work/err" || true
  echo "$(first_stage "$1" "$start") | $(cut -d'|' -f1-3 "$work/out")"
}
echo "| workspace | run | first stage starts after (s) | whole task |"
echo "|---|---|---|---|"
echo "| tiny (1 file) | 1 | $(task "$work/tiny") |"
for run in $(seq "$runs"); do
  echo "| $files files | $run | $(task "$work/large") |"
done
s=$(date +%s%N)
g -C "$work/large" worktree add -q --detach "$work/by-hand" HEAD
e=$(date +%s%N)
echo
echo "git worktree add of the $files-file clone by hand: $(awk "BEGIN { print ($e - $s) / 1e9 }") s; load average $(cut -d' ' -f1-3 /proc/loadavg)"
