#!/usr/bin/env bash
# The real-project catalog's commands by hand (issue 29, point 5: "real projects at ≤ 2× by hand").
#
#   benches/real_by_hand.sh [CASE...]        (default: every scenarios-real/real-* case)
#   REAL_BY_HAND_HOME=cold benches/real_by_hand.sh [CASE...]
#
# Per case, from its scripted-codex script: the seed in a fresh git repository (one commit, as
# the scenario harness makes it), the builder's files written, then the builder's shell commands
# in order ("builder"); then another fresh repository of the seed with the builder's files and
# the tester's shell commands ("tester"). Each with a fresh CARGO_TARGET_DIR and the machine's
# own HOME (its warm ~/.cargo, ~/.npm and pip caches), as a person would. With
# REAL_BY_HAND_HOME=cold, each of the two runs gets a new empty HOME (and XDG directories) in
# an environment of only PATH, the host's Rust toolchain homes, LANG and the variables that
# reach the registries, as the scenario harness gives a case (its replays and its roles'
# layers of HOME start from that empty HOME): the same caches as the scenario's run, so the
# ratio is autocode's, not the caches'. Prints one line per
# case: `case builder_s tester_s sum_s` (wall, seconds). Compare with the case's wall time in
# `autocode scenario run --catalog scenarios-real --profile scripted-codex --out DIR`
# (DIR/<profile>/<case>/result.json's duration) — docs/performance.md, "Real projects against
# by hand".
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v uv >/dev/null || echo "note: uv is not on PATH (real-python-uv needs it)" >&2

cases=("$@")
if [[ ${#cases[@]} -eq 0 ]]; then
  for dir in scenarios-real/real-*/; do cases+=("$(basename "$dir")"); done
fi

work=$(mktemp -d /var/tmp/real-by-hand.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Writes the steps of ROLE in the case's script: `write_file` steps as files under DIR (when
# WRITE is 1), `shell` steps as lines of DIR.cmds.
steps() { # CASE ROLE DIR WRITE
  python3 - "$@" <<'EOF'
import json, os, sys
case, role, out, write = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
script = json.load(open(f"scenarios-real/{case}/scripts/scripted-codex.json"))
with open(out + ".cmds", "w") as cmds:
    for turn in script["conversation"]:
        if turn["name"] != role:
            continue
        for step in turn["step"]:
            if step["kind"] == "write_file" and write:
                path = os.path.join(out, step["path"])
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "w").write(step["content"])
            elif step["kind"] == "shell":
                cmds.write(step["command"].replace("\n", " ") + "\n")
EOF
}

seed() { # CASE DIR
  cp -a "scenarios-real/$1/seed" "$2"
  git -C "$2" init -q -b main
  git -C "$2" add -A
  git -C "$2" -c user.name=bench -c user.email=bench@invalid -c commit.gpgsign=false \
    commit -q --allow-empty -m seed
}

# The environment of the commands: nothing added (the machine's own HOME), or with
# REAL_BY_HAND_HOME=cold a new empty HOME under DIR.home as the scenario harness makes it.
home_env=()
cold_home() { # DIR
  home_env=()
  [[ "${REAL_BY_HAND_HOME:-}" == cold ]] || return 0
  local h="$1.home" name
  mkdir -p "$h/.config" "$h/.local/share" "$h/.cache" "$h/.local/state"
  home_env=(env -i PATH="$PATH" HOME="$h" XDG_CONFIG_HOME="$h/.config" XDG_DATA_HOME="$h/.local/share"
    XDG_CACHE_HOME="$h/.cache" XDG_STATE_HOME="$h/.local/state" LANG=C.UTF-8
    CARGO_HOME="${CARGO_HOME:-$HOME/.cargo}" RUSTUP_HOME="${RUSTUP_HOME:-$HOME/.rustup}")
  # What reaches the registries, exactly as the harness passes them
  # (`scenario::oracle::REGISTRY_VARIABLES`, each also in lower case).
  for name in SSL_CERT_FILE SSL_CERT_DIR NIX_SSL_CERT_FILE REQUESTS_CA_BUNDLE CURL_CA_BUNDLE \
    NODE_EXTRA_CA_CERTS PIP_CERT CARGO_HTTP_CAINFO UV_NATIVE_TLS HTTP_PROXY HTTPS_PROXY ALL_PROXY \
    NO_PROXY GOPROXY GOFLAGS PIP_INDEX_URL UV_INDEX_URL RUSTUP_TOOLCHAIN; do
    for n in "$name" "${name,,}"; do
      [[ -n "${!n+set}" ]] && home_env+=("$n=${!n}")
    done
  done
}

# Runs DIR.cmds in DIR, one `sh -c` each, and prints the wall seconds.
run_cmds() { # DIR
  local start end
  cold_home "$1"
  start=$(date +%s.%N)
  while IFS= read -r cmd; do
    (cd "$1" && CARGO_TARGET_DIR="$1.target" "${home_env[@]}" sh -c "$cmd" </dev/null >"$1.log" 2>&1) \
      || echo "  ($1: \`$cmd\` failed, see the log)" >&2
  done <"$1.cmds"
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

printf '%-26s %9s %9s %9s\n' case builder_s tester_s sum_s
for case in "${cases[@]}"; do
  b="$work/$case-builder" t="$work/$case-tester"
  seed "$case" "$b"
  steps "$case" builder "$b" 1
  builder=$(run_cmds "$b")
  seed "$case" "$t"
  steps "$case" builder "$t" 1 # the builder's files, not its commands
  steps "$case" tester "$t" 0
  tester=$(run_cmds "$t")
  printf '%-26s %9.1f %9.1f %9.1f\n' "$case" "$builder" "$tester" "$(echo "$builder + $tester" | bc)"
  rm -rf "$b" "$t" "$b.target" "$t.target" "$b.home" "$t.home"
done
