#!/usr/bin/env bash
# libaccel's shared-memory communicator under the real `accel launch`, ranks as processes.
#   shm.sh CASE /path/to/accel /path/to/shm_worker
# CASE: vs_gloo_N (every collective against Gloo with N ranks), auto_choice (the backend workers
# get), kill9_agent (a segment still named when the agent is SIGKILLed is removed by its guard),
# stale_swept (a dead job's segment is removed when the next launch starts; a live one is kept).
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
WORKER=$3
export OMP_NUM_THREADS=1
tag=shm$$   # this run's segments carry it in their names (TORCHELASTIC_RUN_ID)

segments() { compgen -G "/dev/shm/accel-shm-$(id -u)-*-$tag-*" || true; }

case $CASE in
vs_gloo_*)
  n=${CASE#vs_gloo_}
  expect_exit 0 "$ACCEL" launch --cpu -n "$n" --rdzv_id $tag "$WORKER" compare
  # 8 dtypes x 3 ops x 4 sizes, 4 random sizes x 3 checks, a broadcast per root, all-gather, barrier.
  for r in $(seq 0 $((n - 1))); do expect_contains "$OUT" "[rank $r] checks=$((96 + 12 + n + 2))"; done
  [[ -z "$(segments)" ]] || fail "segments left behind: $(segments)"
  ;;
auto_choice)
  expect_exit 0 "$ACCEL" launch --cpu -n 2 "$WORKER" backend
  for r in 0 1; do expect_contains "$OUT" "[rank $r] backend=shm"; done
  ACCEL_CPU_BACKEND=gloo expect_exit 0 "$ACCEL" launch --cpu -n 2 "$WORKER" backend
  for r in 0 1; do expect_contains "$OUT" "[rank $r] backend=gloo"; done
  expect_exit 0 "$ACCEL" launch --cpu -n 1 "$WORKER" backend
  expect_contains "$OUT" "backend=single"
  ACCEL_CPU_BACKEND=bogus expect_exit 1 "$ACCEL" launch --cpu -n 2 "$WORKER" backend
  expect_contains "$OUT$ERR" "ACCEL_CPU_BACKEND='bogus' is not one of auto, shm, gloo"
  ;;
kill9_agent)
  hold=$SCRATCH/hold
  mkdir -p "$hold"
  "$ACCEL" launch --cpu -n 2 --rdzv_id $tag "$WORKER" hold "$hold" >"$SCRATCH/o" 2>&1 &
  agent=$!
  # Rank 0 has created the segment and waits for rank 1, which waits for $hold/release.
  for _ in $(seq 1 400); do [[ -n "$(segments)" && -e $hold/pid.0 && -e $hold/pid.1 ]] && break; sleep 0.05; done
  segment=$(segments)
  [[ -n $segment ]] || fail "no segment appeared: $(cat "$SCRATCH/o")"
  pids="$(cat "$hold/pid.0") $(cat "$hold/pid.1")"
  kill -9 $agent
  wait $agent 2>/dev/null || true
  for pid in $pids; do
    for _ in $(seq 1 200); do [[ -e /proc/$pid ]] || break; sleep 0.05; done
    [[ ! -e /proc/$pid ]] || fail "worker $pid survived its SIGKILLed agent"
  done
  for _ in $(seq 1 200); do [[ -e $segment ]] || break; sleep 0.05; done
  [[ ! -e $segment ]] || fail "the SIGKILLed agent's segment $segment is left behind"
  ;;
stale_swept)
  # A dead creator (a reaped child's pid) and a live one (this shell, with its real start time).
  sh -c 'exit 0' & dead=$!
  wait $dead
  start=$(sed 's/.*) //' /proc/$$/stat | cut -d' ' -f20)
  stale=/dev/shm/accel-shm-$(id -u)-$dead-1-$tag-0
  live=/dev/shm/accel-shm-$(id -u)-$$-$start-$tag-1
  trap 'rm -f "$live" "$stale"; rm -rf "$SCRATCH"' EXIT
  touch "$stale" "$live"
  # The rank itself checks that the sweep at the start of the job already ran (the one at its
  # end would remove the stale segment too, too late for a job that needs the space).
  expect_exit 0 "$ACCEL" launch --cpu -n 1 /usr/bin/test ! -e "$stale" -a -e "$live"
  [[ ! -e $stale ]] || fail "the dead job's segment $stale was not swept"
  [[ -e $live ]] || fail "the live creator's segment $live was removed"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "PASS: shm $CASE"
