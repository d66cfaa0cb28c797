#!/usr/bin/env bash
# Snapshots and verification trees on a generated large git workspace (issue 13): one command.
#   benches/large_workspace.sh [FILES]        (default 100000; LARGE_WS_PROFILE=dev for debug)
# Generates FILES small Python files in 1,000 directories (committed), plus an ignored build
# directory, once per FILES in ${LARGE_WS_DIR:-/tmp/autocode-large-ws}; then runs the
# `large_workspace` bench (benches/large_workspace.rs) on it. As root the page cache is dropped
# for the cold measures (LARGE_WS_COLD=0 to skip); LARGE_WS_OLD_COPY=1 also times the old copy
# (minutes at 100k files). Prints markdown tables.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=${1:-100000}
base=${LARGE_WS_DIR:-/tmp/autocode-large-ws}
repo="$base/repo-$files"
if [ ! -e "$repo/.done" ]; then
  rm -rf "$repo"
  mkdir -p "$repo"
  python3 - "$repo" "$files" <<'PY'
import os, sys
root, total = sys.argv[1], int(sys.argv[2])
dirs = 1000 if total >= 1000 else 1
per = total // dirs
for d in range(dirs):
    p = os.path.join(root, f"pkg{d:04d}")
    os.makedirs(p)
    for f in range(per):
        with open(os.path.join(p, f"mod{f:03d}.py"), "w") as fh:
            fh.write(f"# file {d}/{f}\nVALUE = {d * per + f}\n\ndef f():\n    return VALUE\n")
os.makedirs(os.path.join(root, "build"))
for f in range(100):
    with open(os.path.join(root, "build", f"obj{f}.o"), "w") as fh:
        fh.write("ignored build output\n")
with open(os.path.join(root, ".gitignore"), "w") as fh:
    fh.write("build/\n")
PY
  g() { git -C "$repo" -c core.hooksPath=/dev/null -c user.name=bench -c user.email=bench@example.invalid -c commit.gpgsign=false "$@"; }
  g init -q
  g add -A
  g commit -qm "generated"
  touch "$repo/.done"
  echo ".done" >> "$repo/.git/info/exclude"
fi
[ -n "${LARGE_WS_ONLY_GENERATE:-}" ] && exit 0  # benches/task_on_workspace.sh needs only the repository
cold=${LARGE_WS_COLD:-$([ "$(id -u)" = 0 ] && echo 1 || echo 0)}
LARGE_WS_COLD=$cold cargo bench --profile "${LARGE_WS_PROFILE:-bench}" --bench large_workspace -- "$repo"
