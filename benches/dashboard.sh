#!/usr/bin/env bash
# `autocode dashboard` under load: the runs page with RUNS synthetic runs (median of 11 GETs of
# /api/runs), one stage of EVENTS events streamed whole over SSE (time, events received), and
# the server's peak RSS (VmHWM) after both. The runs are written by benches/dashboard_runs.rs
# with autocode's own types and key (their tags verify), in a git workspace.
# Usage: benches/dashboard.sh [RUNS] [EVENTS]   (default: 1000 100000)
# AUTOCODE_BIN=path measures that binary (default: target/dist/autocode, built if missing);
# DASHBOARD_RUNS_BIN=path runs an already built generator instead of `cargo bench`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-1000}
events=${2:-100000}
bin=${AUTOCODE_BIN:-target/dist/autocode}
[ -x "$bin" ] || cargo build --profile dist --locked -q
root=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$root"' EXIT
export RUSTUP_HOME=${RUSTUP_HOME:-$HOME/.rustup} CARGO_HOME=${CARGO_HOME:-$HOME/.cargo}
export HOME=$root/home XDG_STATE_HOME=$root/home/.local/state
mkdir -p "$HOME" "$root/ws"
git -C "$root/ws" init -q
if [ -n "${DASHBOARD_RUNS_BIN:-}" ]; then
  first=$("$DASHBOARD_RUNS_BIN" "$root/ws" "$runs" "$events" | tail -1)
else
  first=$(cargo bench -q --bench dashboard_runs -- "$root/ws" "$runs" "$events" 2>/dev/null | tail -1)
fi
"$bin" dashboard --workspace "$root/ws" --json > "$root/started.json" 2> "$root/stderr" &
server=$!
python3 - "$root" "$server" "$first" "$runs" "$events" <<'PY'
import json, os, statistics, sys, time, urllib.request
root, pid, first, runs, events = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
run, stage = first.split()
deadline = time.time() + 30
while True:
    try:
        started = json.load(open(os.path.join(root, "started.json")))
        break
    except (ValueError, OSError):
        if time.time() > deadline:
            sys.exit("the dashboard did not start: " + open(os.path.join(root, "stderr")).read())
        time.sleep(0.05)
url = started["login_url"]
base, token = url.split("/login?token=")
def get(path):
    request = urllib.request.Request(base + path, headers={"Cookie": "autocode_dashboard=" + token})
    return urllib.request.urlopen(request, timeout=600)
times = []
for _ in range(11):
    t = time.perf_counter()
    body = json.load(get("/api/runs"))
    times.append((time.perf_counter() - t) * 1000)
assert len(body["runs"]) == runs, len(body["runs"])
refused = sum(1 for r in body["runs"] if r.get("refused"))
t = time.perf_counter()
received = 0
with get(f"/api/ws/0/runs/{run}/stages/{stage}/events") as stream:
    for line in stream:
        if line.startswith(b"event: line"):
            received += 1
stream_s = time.perf_counter() - t
hwm = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM")][0].split()[1]
print("| measure | value |\n|---|---|")
print(f"| runs page, {runs} runs ({refused} refused): median of 11 | {statistics.median(times):.0f} ms (min {min(times):.0f}, max {max(times):.0f}) |")
print(f"| SSE, one stage of {events} events streamed whole | {stream_s:.2f} s, {received} events received |")
print(f"| server peak RSS after both | {int(hwm) / 1024:.1f} MB |")
PY
