#!/usr/bin/env bash
# A benchmark's quick mode, so that none can rot: `scripts/bench/NAME.sh --quick` must exit 0
# (77: skipped, with the reason it printed) and print its table: every PATTERN (an extended
# regular expression) must match a line of its output. Its timings are printed, never asserted.
#   bench_quick.sh NAME PATTERN...        (ACCEL_BUILD_DIR: the build to measure)
source "$(dirname "$0")/lib.sh"
name=$1
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
rc=0
bash "$root/scripts/bench/$name.sh" --quick >"$SCRATCH/out" 2>&1 || rc=$?
cat "$SCRATCH/out"
if ((rc == 77)); then exit 77; fi
((rc == 0)) || fail "scripts/bench/$name.sh --quick exited $rc"
for pattern in "$@"; do
  grep -Eq -- "$pattern" "$SCRATCH/out" || fail "scripts/bench/$name.sh --quick printed no line matching '$pattern'"
done
echo "ok: bench $name"
