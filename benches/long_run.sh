#!/usr/bin/env bash
# Orchestrator overhead per stage on a long scripted run, and whether it stays flat.
#
# Drives the real release binary through a whole run with the scripted fake agent
# (tests/fake_agent/fake_agent.py, the one tests/it/run_e2e.rs uses) on a plan of M milestones,
# so the run has 3 + 3·M stages (requirements, planner, plan review, then builder, tester and
# completion review per milestone). Per stage, from the run's own records:
#   in-runner overhead = attempt finished_at − started_at − the agent's run_ms (its receipt):
#                        launch preparation (prompt, launch files, room, snapshot) + post-exit
#                        work (receipt, events, report checks, replays, usage)
#   between stages     = next attempt's started_at − this attempt's finished_at (judging,
#                        checkpoint, flow, next prompt)
# and compares the median of the first tenth of the stages with the last tenth's.
#
# Usage: benches/long_run.sh [MILESTONES]   (default 333 → 1002 stages)
# LONG_RUN_LAYOUT=one-file: every milestone appends its line to one file instead of writing a
# file of its own, so the work under review (the completion reviewer's diff from the base) stays
# one file and the stages differ only by their number.
# Needs a release build (`cargo build --release`); prints a markdown table.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD
bin=${AUTOCODE_BIN:-target/release/autocode}
[ -x "$bin" ] || cargo build --release --locked -q
bin=$(realpath "$bin")
milestones=${1:-333}
root=$(mktemp -d)
# LONG_RUN_KEEP=1 keeps the workspace and the run for a closer look (the path is printed);
# RUST_LOG=autocode=debug logs each supervised launch, checkpoint and prompt with its time
# into the kept run.err.
if [ -n "${LONG_RUN_KEEP:-}" ]; then echo "kept in $root" >&2; else trap 'rm -rf "$root"' EXIT; fi
home=$root/home ws=$root/ws script=$root/script.json
mkdir -p "$home/.config/autocode/providers" "$ws"

python3 - "$milestones" "$script" "${LONG_RUN_LAYOUT:-file-per-milestone}" <<'EOF'
import json, sys
m, path, layout = int(sys.argv[1]), sys.argv[2], sys.argv[3]
one = layout == "one-file"
def name(i): return "m.txt" if one else f"m{i}.txt"
def check(i): return f"grep -qx m{i} {name(i)}"
script = {
    "requirements": [[{"report": {
        "summary": "One file per milestone.", "goals": ["each mN.txt says mN"],
        "constraints": [], "open_questions": [],
        "acceptance_criteria": [{"id": "AC1", "text": "every mN.txt says mN",
                                 "covers": ["Write the files"]}]}}]],
    "planner": [[{"report": {"summary": f"{m} milestones, one file each.", "milestones": [
        {"id": f"M{i}", "title": f"m{i}", "description": "",
         "acceptance_criteria": [{"id": f"AC{i}", "text": f"{name(i)} says m{i}",
                                  "check": check(i), "human_review": False,
                                  "kind": "fail_to_pass"}]}
        for i in range(1, m + 1)]}}]],
    "plan_reviewer": [[{"report": {"verdict": "approve", "summary": "Sound.", "concerns": [],
                                   "uncovered": []}}]],
    "builder": [[{"run": f"printf 'm{i}\\n' {'>>' if one else '>'} {name(i)}"}, {"run": check(i)},
                 {"report": {"status": "done", "summary": f"Wrote m{i} in {name(i)}.",
                             "files_changed": [name(i)],
                             "checks": [{"command": check(i), "exit_code": 0,
                                         "evidence_ref": "{{last_event}}"}],
                             "blockers": []}}] for i in range(1, m + 1)],
    "tester": [[{"run": check(i)},
                {"report": {"milestone_id": f"M{i}", "summary": "Holds.",
                            "criteria": [{"criterion_id": f"AC{i}", "verdict": "PASS",
                                          "notes": "",
                                          "checks": [{"command": check(i), "exit_code": 0,
                                                      "evidence_ref": "{{last_event}}"}]}]}}]
               for i in range(1, m + 1)],
    "completion_reviewer": [[{"report": {"decision": "COMPLETE" if i == m else "CONTINUE",
                                         "summary": "ok", "findings": [], "uncovered": []}}]
                            for i in range(1, m + 1)],
}
json.dump(script, open(path, "w"))
EOF

cat >"$home/.config/autocode/providers/fake.toml" <<EOF
name = "fake"
command = ["python3", "$repo/tests/fake_agent/fake_agent.py", "--script", "$script", "--role", "{role}", "--workspace", "{workspace}", "--model", "{model}"]
resume = ["--session", "{session}"]
prompt = "stdin"
output = "opencode_events"

[roles]
glm = { model = "alpha-large" }
requirements = { model = "alpha-large" }
plan_reviewer = { model = "beta-large" }
terra = { model = "alpha-large" }
sol = { model = "beta-large" }
completion = { model = "beta-large" }
astra = { model = "alpha-large" }

[confine]
writable = ["$script.state/"]
EOF

ac() {
  env -i PATH="$PATH" HOME="$home" XDG_CONFIG_HOME="$home/.config" \
    XDG_DATA_HOME="$home/.local/share" XDG_CACHE_HOME="$home/.cache" \
    XDG_STATE_HOME="$home/.local/state" LANG=C.UTF-8 GIT_CONFIG_NOSYSTEM=1 \
    ${RUST_LOG:+RUST_LOG=$RUST_LOG} NO_COLOR=1 "$bin" "$@" </dev/null
}
git -C "$ws" init -q
echo seed >"$ws/README.md"
git -C "$ws" add -A
git -C "$ws" -c user.name=b -c user.email=b@b commit -qm seed

start=$(date +%s.%N)
ac run "Write the files" --workspace "$ws" --provider fake --yes --json >"$root/run.json" 2>"$root/run.err" || {
  echo "the run did not complete:" >&2
  tail -20 "$root/run.err" >&2
  cat "$root/run.json" >&2
  exit 1
}
end=$(date +%s.%N)
ac status --workspace "$ws" --json >"$root/status.json"
run_dir=$(ls -d "$ws"/.autocode/runs/*)

python3 - "$root/status.json" "$run_dir" "$start" "$end" <<'EOF'
import json, os, statistics, sys
from datetime import datetime
state = json.load(open(sys.argv[1]))
run_dir = sys.argv[2]
wall = float(sys.argv[4]) - float(sys.argv[3])
def t(s): return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()
rows = []
attempts = state["attempts"]
for i, a in enumerate(attempts):
    receipt = json.load(open(os.path.join(run_dir, "stages", a["dir"], "supervision.json")))
    run_ms = receipt["run_ms"]
    in_runner = (t(a["finished_at"]) - t(a["started_at"])) * 1000 - run_ms
    between = (t(attempts[i + 1]["started_at"]) - t(a["finished_at"])) * 1000 if i + 1 < len(attempts) else None
    rows.append((a["role"], run_ms, in_runner, between))
n = len(rows)
tenth = max(1, n // 10)
def med(xs): return statistics.median(xs) if xs else float("nan")
def part(sel):
    total = [r[2] + r[3] for r in sel if r[3] is not None]
    return (med([r[1] for r in sel]), med([r[2] for r in sel]),
            med([r[3] for r in sel if r[3] is not None]), med(total))
first, last, whole = part(rows[:tenth]), part(rows[-tenth - 1:-1]), part(rows)
print(f"{n} stages, {state['phase']['phase']}, {wall:.0f} s wall; attempts.jsonl "
      f"{os.path.getsize(os.path.join(run_dir, 'attempts.jsonl'))/1e6:.2f} MB, run.json "
      f"{os.path.getsize(os.path.join(run_dir, 'run.json'))/1e3:.1f} kB\n")
print("| stages | agent run ms | in-runner overhead ms | between stages ms | overhead per stage ms |")
print("|---|---|---|---|---|")
for name, p in (("first tenth", first), ("last tenth", last), ("all", whole)):
    print(f"| {name} | {p[0]:.1f} | {p[1]:.1f} | {p[2]:.1f} | {p[3]:.1f} |")
print(f"\nlast tenth / first tenth (overhead per stage, medians): {last[3] / first[3]:.2f}")
print("\nBy role (first tenth → last tenth, medians: in-runner ms, between ms):\n")
print("| role | in-runner first | in-runner last | between first | between last |")
print("|---|---|---|---|---|")
for role in sorted({r[0] for r in rows}):
    f = [r for r in rows[:tenth] if r[0] == role]
    l = [r for r in rows[-tenth - 1:-1] if r[0] == role]
    if not f or not l:
        continue
    fb = [r[3] for r in f if r[3] is not None]
    lb = [r[3] for r in l if r[3] is not None]
    print(f"| {role} | {med([r[2] for r in f]):.1f} | {med([r[2] for r in l]):.1f} | "
          f"{med(fb):.1f} | {med(lb):.1f} |")
EOF
