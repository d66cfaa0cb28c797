#!/usr/bin/env bash
# How long a worktree run waits before its first stage on a large repository, the first run and
# the runs after it (issue 29, item 6: a spare checkout per workspace, `src/run/workspace/spare.rs`).
# One command:
#   benches/worktree_start.sh [FILES] [CLI] [RUNS]     (default 100000 files, codex, 3 runs)
# Runs the one-line task (benches/task_on_workspace.rs) RUNS times, one after the other, on one
# clone of benches/large_workspace.sh's generated repository, and once on a tiny repository; each
# under strace (execve only) to time the start of the first stage: from the bench's own start to
# the first launch of the CLI that is not `--version`. Beside it, `git worktree add` of the clone
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
# Seconds from the first execve of the trace to the first stage's launch.
first_stage() {
  python3 - "$1" "$cli" <<'PY'
import re, sys
start = stage = None
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r'\d+ +([\d.]+) execve\("([^"]*)", \[(.*?)\]', line)
    if not m or "= -1" in line:
        continue
    t = float(m.group(1))
    start = start if start is not None else t
    if m.group(2).rsplit("/", 1)[-1] == sys.argv[2] and '"--version"' not in m.group(3):
        stage = t
        break
print(f"{stage - start:.2f}" if stage is not None else "n/a")
PY
}
task() {
  strace -f -qq -ttt -e trace=execve -o "$work/trace" "$bin" "$1" "$cli" worktree >"$work/out" 2>"$work/err" || true
  echo "$(first_stage "$work/trace") | $(cut -d'|' -f1-3 "$work/out")"
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
