#!/usr/bin/env bash
# The hello task against its floor (issue 29, item 1): `autocode demo --provider codex` (six
# stages) against the same six `codex exec` launches run bare, one after another: the argv,
# working directory, prompt (on stdin), output schema and CODEX_HOME configuration of one demo
# run's stages (its `launch.json`, `prompt.md`), against the scripted model serving the demo's
# own script (`autocode scripted-model demo-script`). Two floors: "bare", the launches sharing
# one CODEX_HOME that earlier rounds initialized (a person's second run), and "fresh", each
# launch with a pristine CODEX_HOME (only its config.toml, reset before each launch), as each
# role's HOME layer in autocode's room starts (Codex then creates its state databases anew).
# A third measurement is a person's second run: `autocode run` of the demo's objective and
# routes in a new workspace seeded as the demo's, with the home the bare rounds warmed (the
# demo's own home is new at every demo, so each of its roles' layers of HOME starts cold, as
# "fresh" does; a person's real HOME is the warm one below every role's layer). It reaches the
# scripted model through the bench's server, named to the room in SCRIPTED_MODEL_URL (a URL in
# a stage's environment is a destination its family may reach).
# Demo, bare, fresh and run rounds alternate; each row is one round, wall and CPU (user + system
# of every process waited for), then the medians and the median of the round-by-round ratios,
# and what autocode adds per stage over each floor. benches/stage_layers.sh splits one stage's launch
# into the layers autocode adds.
# Each bare launch gets the environment autocode gave the stage (the variables named in its
# `launch.json`, with this shell's values), not an empty one.
# Usage: benches/hello_bare.sh [RUNS]   (default 5). AUTOCODE names the binary (default: the
# release build of ${CARGO_TARGET_DIR:-target}).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=${1:-5}
bin=${AUTOCODE:-${CARGO_TARGET_DIR:-target}/release/autocode}
[ -x "$bin" ] || cargo build --release --locked -q
bin=$(realpath "$bin")
export PATH="$PWD/tests/clis/node_modules/.bin:$PATH"
work=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# The demo's root (`/tmp/autocode-demo-…`) from its run directory (root/workspace/.autocode/runs/ID).
demo_root() { dirname "$(dirname "$(dirname "$(dirname "$1")")")"; }

# One demo run gives the launches.
"$bin" demo --provider codex >"$work/out" 2>"$work/err"
dir=$(sed -n 's/^run directory: //p' "$work/err" | tail -1)
root=$(demo_root "$dir")
"$bin" scripted-model demo-script >"$work/script.json"
"$bin" scripted-model serve --script "$work/script.json" >"$work/address" 2>/dev/null &
server=$!
while [ ! -s "$work/address" ]; do sleep 0.1; done
address=$(head -1 "$work/address")
sed -i "s#^base_url = .*#base_url = \"http://$address/v1\"#" "$root/home/.codex/config.toml"

cp "$root/home/.codex/config.toml" "$root/codex-config.toml"

# The bare launches, as one script: each stage's codex with its argv, cwd and prompt; with
# FRESH 1, CODEX_HOME reset to its config before each launch.
bare_script() { # OUT FRESH
python3 - "$dir" "$root" "$1" "$(command -v codex)" "$2" <<'EOF'
import json, os, shlex, sys
run, root, out, codex, fresh = sys.argv[1:]
fresh = fresh == "1"
lines = ["set -e"]
for stage in sorted(os.listdir(os.path.join(run, "stages"))):
    here = os.path.join(run, "stages", stage)
    launch = json.load(open(os.path.join(here, "launch.json")))
    # The stage's environment: the variables autocode passed (their values here, where the
    # demo's came from), the demo's home and key. NODE_EXTRA_CA_CERTS alone costs each node
    # start ~40 ms here, so a floor without the stage's variables is not the same launch.
    env = {name: os.environ[name] for name in launch["env_names"]
           if name in os.environ and name not in ("PWD", "OLDPWD", "_", "SHLVL")}
    env.update({"HOME": os.path.join(root, "home"), "MOCK_API_KEY": "demo",
                "CODEX_HOME": os.path.join(root, "home", ".codex"),
                "LANG": os.environ.get("LANG", "C.UTF-8")})
    argv = [codex] + launch["args"]
    if fresh:
        home = os.path.join(root, "home", ".codex")
        lines.append("rm -rf %s && mkdir -p %s && cp %s %s" % tuple(shlex.quote(p) for p in (
            home, home, os.path.join(root, "codex-config.toml"), os.path.join(home, "config.toml"))))
    lines.append("cd %s && env -i %s %s < %s > /dev/null 2>&1" % (
        shlex.quote(launch["cwd"]),
        " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()),
        " ".join(shlex.quote(a) for a in argv),
        shlex.quote(os.path.join(here, "prompt.md"))))
open(out, "w").write("\n".join(lines) + "\n")
EOF
}
bare_script "$work/bare.sh" 0
bare_script "$work/fresh.sh" 1
stages=$(grep -c '^cd ' "$work/bare.sh")

# "WALL CPU" seconds of one run of a command.
timed() {
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$@" >"$work/out" 2>"$work/err" || true
  awk '{ print $1, $2 + $3 }' "$work/time"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

# A person's second run (a script, so that `timed` can run it): in a new workspace seeded as the
# demo's (not timed), the warm home, the demo's objective and routes.
objective=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["objective"])' "$dir/run.json")
seed() {
  rm -rf "$work/ws" && mkdir -p "$work/ws"
  printf '# autocode demo\n\nThe agents are asked to create hello.txt.\n' >"$work/ws/README.md"
  git -C "$work/ws" init -q -b main && git -C "$work/ws" add README.md
  git -C "$work/ws" -c user.name='autocode demo' -c user.email=demo@autocode.invalid commit -q -m 'demo seed'
}
cat >"$work/run.sh" <<EOF
cd $(printf %q "$work/ws")
exec env HOME=$(printf %q "$root/home") CODEX_HOME=$(printf %q "$root/home/.codex") MOCK_API_KEY=demo \\
  SCRIPTED_MODEL_URL=http://$address/v1 AUTOCODE_PASS_ENV=MOCK_API_KEY,SCRIPTED_MODEL_URL \\
  $(printf %q "$bin") run $(printf %q "$objective") --provider codex --yes -q --scripted-local-endpoint \\
  --requirements-model alpha-model --planner-model alpha-model --builder-model alpha-model \\
  --resolver-model alpha-model --plan-reviewer-model beta-model --tester-model beta-model \\
  --completion-model beta-model
EOF

echo "| round | demo wall s | demo cpu s | bare wall s | bare cpu s | fresh wall s | fresh cpu s | run wall s | run cpu s | wall ratio bare / fresh, run / bare | cpu ratio bare / fresh, run / bare |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
: >"$work/pairs"
for pair in $(seq 0 "$runs"); do
  demo=$(timed "$bin" demo --provider codex)
  made=$(sed -n 's/^run directory: //p' "$work/err" | tail -1)
  [ -n "$made" ] && rm -rf "$(demo_root "$made")"
  bare=$(timed sh "$work/bare.sh")
  fresh=$(timed sh "$work/fresh.sh")
  seed
  run=$(timed bash "$work/run.sh")
  grep -q 'COMPLETE' "$work/out" "$work/err" || { echo "the person's run did not complete:" >&2; cat "$work/err" >&2; exit 1; }
  # Round 0 is a warm-up.
  [ "$pair" -eq 0 ] && continue
  set -- $demo $bare $fresh $run
  echo "$1 $2 $3 $4 $5 $6 $7 $8" >>"$work/pairs"
  printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f, %.2f | %.2f / %.2f, %.2f |\n' "$pair" \
    "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" \
    "$(awk "BEGIN { print $1 / $3 }")" "$(awk "BEGIN { print $1 / $5 }")" "$(awk "BEGIN { print $7 / $3 }")" \
    "$(awk "BEGIN { print $2 / $4 }")" "$(awk "BEGIN { print $2 / $6 }")" "$(awk "BEGIN { print $8 / $4 }")"
done
col() { awk "{ print \$$1 }" "$work/pairs" | median; }
ratio() { awk "{ print \$$1 / \$$2 }" "$work/pairs" | median; }
dw=$(col 1) dc=$(col 2) bw=$(col 3) bc=$(col 4) fw=$(col 5) fc=$(col 6) rw=$(col 7) rc=$(col 8)
printf '| median | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f, %.2f | %.2f / %.2f, %.2f |\n' \
  "$dw" "$dc" "$bw" "$bc" "$fw" "$fc" "$rw" "$rc" "$(ratio 1 3)" "$(ratio 1 5)" "$(ratio 7 3)" \
  "$(ratio 2 4)" "$(ratio 2 6)" "$(ratio 8 4)"
echo
per() { awk "BEGIN { print ($1 - $2) / $stages * 1000 }"; }
printf 'stages: %s; added per stage (median minus median floor): demo over bare, wall %.0f ms, cpu %.0f ms; demo over fresh, wall %.0f ms, cpu %.0f ms; run over bare, wall %.0f ms, cpu %.0f ms\n' \
  "$stages" "$(per "$dw" "$bw")" "$(per "$dc" "$bc")" "$(per "$dw" "$fw")" "$(per "$dc" "$fc")" "$(per "$rw" "$bw")" "$(per "$rc" "$bc")"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$root"
