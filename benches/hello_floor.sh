#!/usr/bin/env bash
# The hello task (`autocode demo`: six stages of a pinned CLI against the scripted model) and
# what the orchestrator adds to it (issue 29). One command:
#   benches/hello_floor.sh [CLI] [RUNS]        (default codex, 5 runs; CLI: codex, claude, opencode)
# Prints, per run: wall and CPU seconds (/usr/bin/time), the run directory's bytes (its files),
# the exec ledgers' bytes and lines, and the lines of default output; then, from one run under
# strace, the processes autocode itself started (every execve by a process still running
# autocode's image: the CLI launches, git, the keeper's helpers) by program, and its fsync and
# fdatasync calls. AUTOCODE names the binary (default: the debug build of this checkout).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
cli=${1:-codex}
runs=${2:-5}
bin=${AUTOCODE:-${CARGO_TARGET_DIR:-target}/debug/autocode}
bin=$(realpath "$bin")
export PATH="$PWD/tests/clis/node_modules/.bin:$PATH"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "| run | wall s | cpu s | run dir bytes | ledger bytes | ledger lines | output lines |"
echo "|---|---|---|---|---|---|---|"
for run in $(seq "$runs"); do
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$bin" demo --provider "$cli" >"$work/out" 2>"$work/err"
  read -r wall user sys <"$work/time"
  dir=$(sed -n 's/^run directory: //p' "$work/err" | tail -1)
  bytes=$(find "$dir" -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
  ledger=$(find "$dir" -type f -name ledger.jsonl -printf '%s\n' | awk '{ s += $1 } END { print s }')
  lines=$(find "$dir" -type f -name ledger.jsonl -exec cat {} + | wc -l)
  out=$(cat "$work/out" "$work/err" | wc -l)
  echo "| $run | $wall | $(awk "BEGIN { print $user + $sys }") | $bytes | $ledger | $lines | $out |"
  rm -rf "$(dirname "$(dirname "$(dirname "$(dirname "$dir")")")")"
done
# One run under strace: who started what, and the syncs of autocode's own processes.
strace -f -qq -o "$work/trace" -e trace=execve,clone,clone3,fork,vfork,fsync,fdatasync \
  "$bin" demo --provider "$cli" >"$work/out" 2>"$work/err" || true
dir=$(sed -n 's/^run directory: //p' "$work/err" | tail -1)
[ -n "$dir" ] && rm -rf "$(dirname "$(dirname "$(dirname "$(dirname "$dir")")")")"
python3 - "$work/trace" "$bin" <<'EOF'
import collections, re, sys
trace, binary = sys.argv[1], sys.argv[2]
image = {}  # tid -> the program it runs
root = None
started = collections.Counter()
syncs = 0
pending = {}  # tid -> the program of an execve not finished yet
for line in open(trace, errors="replace"):
    m = re.match(r"(\d+) +(?:<\.\.\. )?(\w+)(?:\(| resumed>)(.*)", line)
    if not m:
        continue
    tid, call, rest = int(m.group(1)), m.group(2), m.group(3)
    if call == "execve" and rest.endswith("<unfinished ...>"):
        program = re.match(r'"([^"]*)"', rest)
        pending[tid] = program.group(1) if program else "?"
        continue
    if root is None:
        root = tid
        image[tid] = binary
    mine = image.get(tid) == binary
    if call in ("clone", "clone3", "fork", "vfork"):
        child = re.search(r"= (\d+)$", line.strip())
        if child:
            image[int(child.group(1))] = image.get(tid)
    elif call == "execve" and "= 0" in line.rsplit(")", 1)[-1]:
        program = re.match(r'"([^"]*)"', rest)
        program = program.group(1) if program else pending.pop(tid, "?")
        if mine and tid != root:
            started[program.rsplit("/", 1)[-1]] += 1
        image[tid] = program
    elif call in ("fsync", "fdatasync") and mine:
        syncs += 1
print()
print(f"processes autocode started: {sum(started.values())} ({', '.join(f'{n} {p}' for p, n in started.most_common())})")
print(f"fsync/fdatasync by autocode's own processes: {syncs}")
EOF
