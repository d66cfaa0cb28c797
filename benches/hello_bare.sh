#!/usr/bin/env bash
# The hello task against its floor (issue 29, item 1): `autocode demo --provider codex` (six
# stages) against the same six `codex exec` launches run bare, one after another: the argv,
# working directory, prompt (on stdin), output schema and CODEX_HOME configuration of one demo
# run's stages (its `launch.json`, `prompt.md`), against the scripted model serving the demo's
# own script (`autocode scripted-model demo-script`). Demo and bare rounds alternate; each row
# is one pair, wall and CPU (user + system of every process waited for), then the medians and
# the median of the pair-by-pair ratios, and what autocode adds per stage.
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

# The bare launches, as one script: each stage's codex with its argv, cwd and prompt.
python3 - "$dir" "$root" "$work/bare.sh" "$(command -v codex)" <<'EOF'
import json, os, shlex, sys
run, root, out, codex = sys.argv[1:]
lines = ["set -e"]
for stage in sorted(os.listdir(os.path.join(run, "stages"))):
    here = os.path.join(run, "stages", stage)
    launch = json.load(open(os.path.join(here, "launch.json")))
    env = {"PATH": os.environ["PATH"], "HOME": os.path.join(root, "home"),
           "CODEX_HOME": os.path.join(root, "home", ".codex"), "MOCK_API_KEY": "demo",
           "LANG": os.environ.get("LANG", "C.UTF-8")}
    argv = [codex] + launch["args"]
    lines.append("cd %s && env -i %s %s < %s > /dev/null 2>&1" % (
        shlex.quote(launch["cwd"]),
        " ".join(shlex.quote(f"{k}={v}") for k, v in env.items()),
        " ".join(shlex.quote(a) for a in argv),
        shlex.quote(os.path.join(here, "prompt.md"))))
open(out, "w").write("\n".join(lines) + "\n")
EOF
stages=$(grep -c '^cd ' "$work/bare.sh")

# "WALL CPU" seconds of one run of a command.
timed() {
  /usr/bin/time -f "%e %U %S" -o "$work/time" "$@" >"$work/out" 2>"$work/err" || true
  awk '{ print $1, $2 + $3 }' "$work/time"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "| pair | demo wall s | demo cpu s | bare wall s | bare cpu s | wall ratio | cpu ratio |"
echo "|---|---|---|---|---|---|---|"
: >"$work/pairs"
for pair in $(seq 0 "$runs"); do
  demo=$(timed "$bin" demo --provider codex)
  made=$(sed -n 's/^run directory: //p' "$work/err" | tail -1)
  [ -n "$made" ] && rm -rf "$(demo_root "$made")"
  bare=$(timed sh "$work/bare.sh")
  # Pair 0 is a warm-up.
  [ "$pair" -eq 0 ] && continue
  set -- $demo $bare
  echo "$1 $2 $3 $4" >>"$work/pairs"
  printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n' "$pair" "$1" "$2" "$3" "$4" \
    "$(awk "BEGIN { print $1 / $3 }")" "$(awk "BEGIN { print $2 / $4 }")"
done
col() { awk "{ print \$$1 }" "$work/pairs" | median; }
ratio() { awk "{ print \$$1 / \$$2 }" "$work/pairs" | median; }
dw=$(col 1) dc=$(col 2) bw=$(col 3) bc=$(col 4)
printf '| median | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n' "$dw" "$dc" "$bw" "$bc" \
  "$(ratio 1 3)" "$(ratio 2 4)"
echo
printf 'stages: %s; added per stage (median demo minus median bare, over %s): wall %.0f ms, cpu %.0f ms\n' \
  "$stages" "$stages" "$(awk "BEGIN { print ($dw - $bw) / $stages * 1000 }")" \
  "$(awk "BEGIN { print ($dc - $bc) / $stages * 1000 }")"
rm -rf "$root"
