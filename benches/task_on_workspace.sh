#!/usr/bin/env bash
# A one-line task end to end (the demo's hello.txt; a pinned CLI against the scripted model) on a
# tiny repository and on a generated large one, beside a cold and a warm `git status` of the
# large one (issue 13's target: at most the tiny time plus 6x a cold `git status`, run directory
# under 20 MB). One command:
#   benches/task_on_workspace.sh [FILES] [CLI] [MODE]    (default 100000 files, codex, worktree;
#   MODE in-place runs in the clone itself, without a worktree)
# The large repository is benches/large_workspace.sh's (generated once in
# ${LARGE_WS_DIR:-/tmp/autocode-large-ws}); each task runs on a fresh clone of it, so every run
# pays its own first checkout. As root the page cache is dropped before the cold `git status`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=${1:-100000}
cli=${2:-codex}
mode=${3:-worktree}
base=${LARGE_WS_DIR:-/tmp/autocode-large-ws}
export PATH="$PWD/tests/clis/node_modules/.bin:$PATH"
# Generates the large repository (and nothing else) when missing.
LARGE_WS_ONLY_GENERATE=1 benches/large_workspace.sh "$files" >/dev/null
large="$base/repo-$files"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g() { git -c core.hooksPath=/dev/null -c user.name=bench -c user.email=bench@example.invalid -c commit.gpgsign=false "$@"; }
mkdir "$work/tiny" && echo "# tiny" >"$work/tiny/README.md"
g -C "$work/tiny" init -q -b main && g -C "$work/tiny" add -A && g -C "$work/tiny" commit -qm seed
g clone -q "$large" "$work/large"
bin=$(cargo build --release --locked -q --bench task_on_workspace --message-format=json |
  sed -n 's/.*"executable":"\([^"]*task_on_workspace[^"]*\)".*/\1/p' | tail -1)
status() { local s e; s=$(date +%s%N); git -C "$work/large" status --porcelain >/dev/null; e=$(date +%s%N); awk "BEGIN { print ($e - $s) / 1e9 }"; }
# Cold: the median of three, each after dropping the page cache (one alone swings 3x here).
colds=()
for _ in 1 2 3; do
  sync
  if echo 3 2>/dev/null >/proc/sys/vm/drop_caches; then colds+=("$(status)"); fi
done
if [ ${#colds[@]} -eq 3 ]; then
  cold="$(printf '%s\n' "${colds[@]}" | sort -g | sed -n 2p) (of ${colds[*]})"
else
  cold="n/a (not root)"
fi
warm=$(status)
echo "| workspace | task |"
echo "|---|---|"
echo "| tiny (1 file) | $("$bin" "$work/tiny" "$cli" "$mode") |"
echo "| $files files | $("$bin" "$work/large" "$cli" "$mode") |"
echo
echo "git status of the $files-file clone: cold $cold s, warm $warm s"
