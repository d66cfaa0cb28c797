#!/usr/bin/env bash
# `autocode status` on synthetic long runs: wall time (median of 11) and peak RSS, human and
# --json, at 1,000 and 10,000 stages. The runs are written by benches/run_state.rs with
# autocode's own types and key (their tags verify), which also prints what one checkpoint
# costs at that length.
# Usage: benches/status.sh [STAGES ...]   (default: 1000 10000)
# RUN_STATE_BIN=path runs an already built generator instead of `cargo bench --bench run_state`.
# Measures the published build (`cargo build --profile dist`: fat LTO, one codegen unit; the
# memory target is set for it); prints a markdown table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bin=${AUTOCODE_BIN:-target/dist/autocode}
[ -x "$bin" ] || cargo build --profile dist --locked -q
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# The toolchain stays where it is when HOME moves (rustup and cargo find it through HOME).
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup} CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
export HOME=$root/home XDG_STATE_HOME=$root/home/.local/state
mkdir -p "$HOME"

commits=()
for stages in "${@:-1000 10000}"; do
  for n in $stages; do
    # A plain directory, and a git repository (where status also asks git whether the run is
    # tracked: two supervised git launches).
    for ws in "$root/ws-$n" "$root/gws-$n"; do
      mkdir -p "$ws"
      case $ws in */gws-*) git -C "$ws" init -q ;; esac
      if [ -n "${RUN_STATE_BIN:-}" ]; then
        commits+=("$("$RUN_STATE_BIN" "$ws" "$n" | tail -1)")
      else
        commits+=("$(cargo bench -q --bench run_state -- "$ws" "$n" 2>/dev/null | tail -1)")
      fi
    done
  done
done

python3 - "$bin" "$root" <<'PY'
import os, statistics, subprocess, sys, time
bin, root = sys.argv[1], sys.argv[2]
print("| stages | workspace | output | median wall ms | peak RSS MiB | stdout bytes |")
print("|---|---|---|---|---|---|")
runs = sorted((int(os.listdir(f"{root}/{d}/.autocode/runs")[0].split("-")[1]), d.startswith("g"),
               f"{root}/{d}") for d in os.listdir(root) if d.startswith(("ws-", "gws-")))
for n, in_git, ws in runs:
    for mode, flag in (("human", []), ("json", ["--json"])):
        walls, rss = [], []
        for _ in range(11):
            with open(f"{root}/out", "wb") as out:
                started = time.perf_counter()
                # Through /usr/bin/time: a child forked from Python itself would report
                # Python's peak RSS (~13 MiB here; exec keeps the maximum), not autocode's.
                subprocess.run(["/usr/bin/time", "-f", "%M", "-o", f"{root}/rss", bin, "status",
                                "--workspace", ws, *flag], stdout=out, stderr=subprocess.DEVNULL)
                walls.append((time.perf_counter() - started) * 1000)
                with open(f"{root}/rss") as f:
                    rss.append(int(f.read().split()[-1]) / 1024)
        print(f"| {n} | {'git' if in_git else 'plain'} | {mode} | {statistics.median(walls):.1f} | {statistics.median(rss):.1f} "
              f"| {os.path.getsize(root + '/out')} |")
PY
echo
printf '%s\n' "${commits[@]}"
