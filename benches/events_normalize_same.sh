#!/usr/bin/env bash
# Checks that two builds of `autocode events normalize` print byte-identical output (stdout,
# stderr and exit status), human and --json, for every transport on: every fixture stream
# (tests/fixtures/real-clis/*/*/stdout.jsonl, read as each of the three formats, Codex also
# with its `-o` report), a generated stream of MB megabytes per format (the fixtures repeated,
# as benches/events_normalize.sh makes them), and a mutated stream (fixture lines with bytes
# flipped, cut, re-escaped, plus hand-written odd lines: duplicate keys, escaped keys,
# surrogates, invalid UTF-8, deep nesting, floats and negatives where integers go).
# Usage: benches/events_normalize_same.sh OLD_BINARY [NEW_BINARY] [MB]
#   (NEW_BINARY defaults to target/release/autocode, MB to 50). Exits 1 on any difference.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
old=${1:?usage: $0 OLD_BINARY [NEW_BINARY] [MB]}
new=${2:-target/release/autocode}
mb=${3:-50}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
compared=0
differ=0

same() { # input transport [extra args...]
  local input=$1 transport=$2
  shift 2
  for mode in human json; do
    local flag=()
    [ "$mode" = json ] && flag=(--json)
    local ra=0 rb=0
    "$old" events normalize --transport "$transport" "$input" "${flag[@]}" "$@" >"$work/a.out" 2>"$work/a.err" || ra=$?
    "$new" events normalize --transport "$transport" "$input" "${flag[@]}" "$@" >"$work/b.out" 2>"$work/b.err" || rb=$?
    compared=$((compared + 1))
    if [ "$ra" != "$rb" ] || ! cmp -s "$work/a.out" "$work/b.out" || ! cmp -s "$work/a.err" "$work/b.err"; then
      differ=$((differ + 1))
      echo "DIFFERENT: --transport $transport $mode $input $*" >&2
    fi
  done
}

for stream in tests/fixtures/real-clis/*/*/stdout.jsonl; do
  for transport in opencode codex claude; do
    same "$stream" "$transport"
  done
  report=$(dirname "$stream")/report.json
  [ -f "$report" ] && same "$stream" codex --report "$report"
done

declare -A samples=(
  [opencode]="thinking failcmd err429"
  [codex]="happy failcmd err429"
  [claude]="happy failcmd err429once"
)
pool="$work/pool.jsonl"
: >"$pool"
for format in opencode codex claude; do
  unit="$work/$format.unit"
  : >"$unit"
  for case in ${samples[$format]}; do
    cat "tests/fixtures/real-clis/$format/$case/stdout.jsonl" >>"$unit"
  done
  cat "$unit" >>"$pool"
  while [ "$(stat -c %s "$unit")" -lt 1000000 ]; do cat "$unit" "$unit" >"$unit.2" && mv "$unit.2" "$unit"; done
  big="$work/$format-$mb.jsonl"
  : >"$big"
  size=0
  unit_size=$(stat -c %s "$unit")
  while [ "$size" -lt $((mb * 1000 * 1000)) ]; do cat "$unit" >>"$big"; size=$((size + unit_size)); done
  same "$big" "$format"
  rm -f "$big"
done

# Odd lines the real streams do not have.
{
  printf '%s\n' \
    '{"type":"item.completed","item":{"id":"i","type":"command_execution","command":"x","aggregated_output":"\u001b[31m\ud83e\udd80 \u00e9\n","exit_code":-1,"status":"failed"}}' \
    '{"type":"item.completed","item":{"id":"i","type":"file_change","changes":[{"path":"a","kind":"add"},{"path":"b","kind":"delete"}],"status":"completed"}}' \
    '{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"a","text":"b"}}' \
    '{"type":"turn.completed","usage":{"input_tokens":1e3}}' \
    '{"type":"turn.completed","usage":{"input_tokens":-3}}' \
    '{"type":"turn.completed","usage":{"input_tokens":18446744073709551615,"output_tokens":99999999999999999999}}' \
    '{"typ\u0065":"turn.started"}' \
    '{"type":"item.completed","item":{"id":7,"type":"reasoning","text":{"a":[1,2,{"b":null}]}}}' \
    '  {"type" : "thread.started" , "thread_id" : "t2" }' \
    '{"type":"turn.failed","error":{"message":"rate limit; try again in 20s | 1767225600"}}' \
    '{"type":"item.completed","item":{"id":"x","type":"command_execution","command":"c","exit_code":0,"status":"declined"}}' \
    '{"type":"item.updated"}' '{"type":"weird"}' '{}' '[]' 'null' '{"type":"turn.started"'
  printf '{"type":"error","message":"Reconnecting... 2/5 (status: 503 \xff\xfe)"}\n'
  printf '\xef\xbb\xbf{"type":"turn.started"}\n'
  printf '{"type":"x","a":"\x01"}\n'
  printf '{"type":"item.started","item":%s%s}\n' "$(printf '[%.0s' {1..150})" "$(printf ']%.0s' {1..150})"
} >>"$pool"
# Mutate: per line, sometimes flip one byte, cut it, or escape its first quote (C locale:
# awk works on bytes). Deterministic (fixed seed).
mutated="$work/mutated.jsonl"
for round in $(seq 40); do
  LC_ALL=C awk -v seed="$round" 'BEGIN { srand(seed); split("{ } [ ] \" : , \\ 0 - . e n u l a", alphabet, " ") }
    { line = $0; r = rand(); n = length(line)
      if (r < 0.1 && n > 2) { p = int(rand() * n) + 1; c = alphabet[int(rand() * 16) + 1]; line = substr(line, 1, p - 1) c substr(line, p + 1) }
      else if (r < 0.15) { line = substr(line, 1, int(rand() * (n + 1))) }
      else if (r < 0.2) { sub(/"/, "\\\"", line) }
      else if (r < 0.25) { print "" }
      print line }' "$pool"
done >"$mutated"
for transport in opencode codex claude; do
  same "$mutated" "$transport"
done

echo "$compared comparisons, $differ different"
[ "$differ" -eq 0 ]
