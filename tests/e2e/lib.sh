# Helpers for end-to-end tests. Each test runs in its own scratch HF_HOME so the user's
# config is never read or written.
set -euo pipefail

SCRATCH=$(mktemp -d /tmp/accel-e2e-XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
export HF_HOME=$SCRATCH/hf
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
