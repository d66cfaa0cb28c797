#!/usr/bin/env bash
# The hello task against its floor (issue 29, item 1): `autocode demo --provider codex` (six
# stages) against the same six `codex exec` launches run bare, one after another: the argv,
# working directory, prompt (on stdin), output schema and CODEX_HOME configuration of one demo
# run's stages (its `launch.json`, `prompt.md`), against the scripted model serving the demo's
# own script (`autocode scripted-model demo-script`). Two floors: "bare", the launches sharing
# one CODEX_HOME that earlier rounds initialized (a person's second run), and "fresh", each
# launch with a pristine CODEX_HOME (only its config.toml, reset before each launch), as each
# role's HOME layer in autocode's room starts (Codex then creates its state databases anew).
# Demo and bare rounds alternate; each row is one round, wall and CPU (user + system of every
# process waited for), then the medians and the median of the round-by-round ratios, and what
# autocode adds per stage over each floor. benches/stage_layers.sh splits one stage's launch
# into the layers autocode adds.
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
    env = {"PATH": os.environ["PATH"], "HOME": os.path.join(root, "home"),
           "CODEX_HOME": os.path.join(root, "home", ".codex"), "MOCK_API_KEY": "demo",
           "LANG": os.environ.get("LANG", "C.UTF-8")}
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

echo "| round | demo wall s | demo cpu s | bare wall s | bare cpu s | fresh wall s | fresh cpu s | wall ratio bare / fresh | cpu ratio bare / fresh |"
echo "|---|---|---|---|---|---|---|---|---|"
: >"$work/pairs"
for pair in $(seq 0 "$runs"); do
  demo=$(timed "$bin" demo --provider codex)
  made=$(sed -n 's/^run directory: //p' "$work/err" | tail -1)
  [ -n "$made" ] && rm -rf "$(demo_root "$made")"
  bare=$(timed sh "$work/bare.sh")
  fresh=$(timed sh "$work/fresh.sh")
  # Round 0 is a warm-up.
  [ "$pair" -eq 0 ] && continue
  set -- $demo $bare $fresh
  echo "$1 $2 $3 $4 $5 $6" >>"$work/pairs"
  printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | %.2f / %.2f |\n' "$pair" \
    "$1" "$2" "$3" "$4" "$5" "$6" \
    "$(awk "BEGIN { print $1 / $3 }")" "$(awk "BEGIN { print $1 / $5 }")" \
    "$(awk "BEGIN { print $2 / $4 }")" "$(awk "BEGIN { print $2 / $6 }")"
done
col() { awk "{ print \$$1 }" "$work/pairs" | median; }
ratio() { awk "{ print \$$1 / \$$2 }" "$work/pairs" | median; }
dw=$(col 1) dc=$(col 2) bw=$(col 3) bc=$(col 4) fw=$(col 5) fc=$(col 6)
printf '| median | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f / %.2f | %.2f / %.2f |\n' \
  "$dw" "$dc" "$bw" "$bc" "$fw" "$fc" "$(ratio 1 3)" "$(ratio 1 5)" "$(ratio 2 4)" "$(ratio 2 6)"
echo
per() { awk "BEGIN { print ($1 - $2) / $stages * 1000 }"; }
printf 'stages: %s; added per stage (median demo minus median floor): over bare, wall %.0f ms, cpu %.0f ms; over fresh, wall %.0f ms, cpu %.0f ms\n' \
  "$stages" "$(per "$dw" "$bw")" "$(per "$dc" "$bc")" "$(per "$dw" "$fw")" "$(per "$dc" "$fc")"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$root"
