# Helpers for end-to-end tests. Each test runs in its own scratch HF_HOME so the user's
# config is never read or written.
set -euo pipefail

SCRATCH=$(mktemp -d /tmp/accel-e2e-XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
export HF_HOME=$SCRATCH/hf
# Each case's agents answer `accel status` from a directory of their own: a case that asks sees
# only its own jobs, never those of a case beside it (ctest -j), one that another case froze or
# whose store it killed among them (an agent that does not answer is a problem: exit 1).
export XDG_RUNTIME_DIR=$SCRATCH/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
unset XDG_CACHE_HOME ACCELERATE_CONFIG_FILE
PY=/usr/bin/python3   # Debian's python3 (has PyYAML and torch); the PATH one may not

fail() { echo "FAIL: $*" >&2; exit 1; }

# expect_exit CODE CMD...: runs CMD, captures stdout/stderr in $OUT/$ERR, checks the code.
expect_exit() {
  local want=$1; shift
  set +e
  "$@" >"$SCRATCH/.stdout" 2>"$SCRATCH/.stderr"
  local got=$?
  set -e
  OUT=$(cat "$SCRATCH/.stdout"); ERR=$(cat "$SCRATCH/.stderr")
  [[ $got == "$want" ]] || fail "exit $got (want $want) from: $*
--- stdout:
$OUT
--- stderr:
$ERR"
}

expect_contains() {  # HAYSTACK NEEDLE
  [[ "$1" == *"$2"* ]] || fail "expected to find:
$2
--- in:
$1"
}

# Workers that write files into $OUT_DIR (workers/env_dump.sh, workers/behave.sh):
# wait_files PATTERN COUNT: until COUNT files match $OUT_DIR/PATTERN (≤ 10 s).
wait_files() {
  local i
  for i in $(seq 1 200); do
    [[ $(compgen -G "$OUT_DIR/$1" | wc -l) -ge $2 ]] && return 0
    sleep 0.05
  done
  fail "timed out waiting for $2 files $1; have: $(ls "$OUT_DIR")"
}
# wait_for_line PATTERN FILE: waits (at most 60 s) for a line of FILE matching PATTERN (grep -E).
wait_for_line() {
  local _
  for _ in $(seq 1 1200); do
    grep -qE -- "$1" "$2" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "no line matching '$1' in $2 within 60 s: $(tail -5 "$2" 2>&1)"
}
# env_of RANK KEY: KEY's value in rank RANK's environment as env_dump.sh wrote it.
env_of() { grep "^$2=" "$OUT_DIR/rank_$1.env" | cut -d= -f2-; }
# check_env RANK KEY=VALUE...: every KEY has exactly VALUE in rank RANK's environment.
check_env() {
  local r=$1 kv; shift
  for kv in "$@"; do
    [[ "$(env_of "$r" "${kv%%=*}")" == "${kv#*=}" ]] || fail "rank $r: want $kv, got '$(env_of "$r" "${kv%%=*}")'"
  done
}
