#!/usr/bin/env bash
# torch 2.x workers under `accel launch`: Debian trixie's python3-torch 2.6 in the chroot that
# scripts/torch2_chroot.sh makes (scripts/test builds it when run as root). Skipped (77), with
# the reason, when the chroot cannot be used here.
#   torch2.sh CASE /path/to/accel
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
W=$(cd "$(dirname "$0")/workers" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
if ! reason=$("$ROOT/scripts/torch2_chroot.sh" check 2>&1); then
  echo "SKIPPED: $reason"
  exit 77
fi
T2=(--python "$W/torch2_python")  # python3 with torch 2.6

case $CASE in
store_methods)
  # Every TCPStore method 2.6 has, timeouts and cancelled waits, against the agent's store.
  expect_exit 0 "$ACCEL" launch "${T2[@]}" -n 2 "$W/store_client_torch2.py"
  expect_contains "$OUT" "[rank 0] torch 2.6"
  expect_contains "$OUT" "[rank 1] rank 1 read rank 0's keys"
  expect_contains "$OUT" "[rank 0] rank 0 store ok"
  ;;
ddp_gloo)
  # init_process_group("gloo") through the agent's store, all_reduce, a DDP step, a barrier.
  for n in 2 4; do
    expect_exit 0 "$ACCEL" launch "${T2[@]}" --cpu -n $n "$W/ddp_gloo.py"
    for ((r = 0; r < n; r++)); do
      expect_contains "$OUT" "[rank $r] ok rank=$r world=$n allreduce=$((n * (n + 1) / 2))"
    done
  done
  ;;
rank0_exits_first)
  expect_exit 0 "$ACCEL" launch "${T2[@]}" --cpu -n 3 "$W/rank0_exits_first.py"
  expect_contains "$OUT" "[rank 0] rank 0 leaving"
  expect_contains "$OUT" "[rank 1] rank 1 used the store after rank 0 left"
  expect_contains "$OUT" "[rank 2] rank 2 used the store after rank 0 left"
  ;;
restart)
  # torch 2.x adds no per-attempt prefix: attempt 1 completes only once attempt 0's keys are gone.
  expect_exit 0 "$ACCEL" launch "${T2[@]}" --cpu -n 2 --max_restarts 1 --term_timeout 2 "$W/restart_gloo.py"
  expect_contains "$ERR" "attempt 0 failed (rank 1: exit code 3); restarting (1 of 1)"
  expect_contains "$OUT" "[rank 0] attempt 1 rank 0 allreduce=4"
  expect_contains "$OUT" "[rank 1] attempt 1 rank 1 allreduce=4"
  ;;
mixed_generations)
  # One store serving torch 1.13 (even ranks) and torch 2.6 (odd ranks) clients at once.
  expect_exit 0 "$ACCEL" launch --python "$W/mixed_python" -n 4 "$W/mixed_store.py"
  want="['1.13.0a0', '2.6.0+debian', '1.13.0a0', '2.6.0+debian']"
  for r in 0 1 2 3; do expect_contains "$OUT" "[rank $r] rank $r (torch"; expect_contains "$OUT" "read versions $want"; done
  [[ $(grep -cF "read versions $want" <<<"$OUT") == 4 ]] || fail "not every rank read every version: $OUT"
  ;;
hang_background_thread)
  # As watch.sh's case of that name, with torch 2.6: background threads busy, rank 0's main
  # thread stopped -> called within 2x the timeout; main threads computing -> never.
  logs=$SCRATCH/logs
  expect_exit 124 "$ACCEL" launch "${T2[@]}" --cpu -n 2 --hang_timeout 3 --log_dir "$logs" "$W/busy_thread.py" stuck "$SCRATCH/stuck"
  expect_contains "$ERR" "the job hangs (--hang_timeout 3 s)"
  summary=$(ls "$logs"/*/summary.json)
  "$PY" - "$summary" "$SCRATCH/stuck" <<'PY' || fail "hang verdict: $(cat "$summary")"
import json, sys
hang = json.load(open(sys.argv[1]))["attempts"][0]["hang"]
delay = hang["detected_at"] - float(open(sys.argv[2]).read())
assert hang["stuck_ranks"] == [0], hang
# From the rank's last progress, which can precede its marker (see watch.sh's case).
assert 1 <= delay <= 6, f"detected {delay} s after rank 0 stopped (want 1..6 s)"
PY
  expect_exit 0 "$ACCEL" launch "${T2[@]}" --cpu -n 2 --hang_timeout 2 "$W/busy_thread.py" compute 6
  expect_contains "$OUT" "[rank 1] rank 1 computed"
  [[ $ERR != *hangs* ]] || fail "ranks computing in their main threads were called hung: $ERR"
  ;;
hang_ddp_backward|hang_ddp_step|hang_ddp_loader)
  # As watch.sh's cases of these names, with torch 2.6's DDP.
  logs=$SCRATCH/logs
  expect_exit 124 "$ACCEL" launch "${T2[@]}" --cpu -n 3 --hang_timeout 3 --log_dir "$logs" "$W/ddp_hang.py" "${CASE#hang_ddp_}" "$SCRATCH/stuck"
  expect_contains "$ERR" "by their stacks rank 1 outside any collective, 0, 2 waiting in one"
  expect_contains "$ERR" "culprit: rank 1 (local rank 1"
  ;;
accel_test)
  # Debian's torch 2.6 has no libuv, which torch's env:// rendezvous under an agent store asks
  # for (torchrun fails the same way): accel test shows it, and the summary says what to do.
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\n' >"$SCRATCH/c.yaml"
  libuv=$(cd "$W" && "$W/torch2_python" -c 'import torch_quirks; print(torch_quirks.USE_LIBUV)')
  if [[ $libuv == False ]]; then
    expect_exit 1 "$ACCEL" test --config_file "$SCRATCH/c.yaml" "${T2[@]}"
    # Whichever rank fails first stops the other, maybe before it printed: one rank's line.
    expect_contains "$OUT" "] torch: ok (torch 2.6"
    expect_contains "$ERR" "hint: this torch was built without libuv (Debian's python3-torch 2.x)"
  else
    expect_exit 0 "$ACCEL" test --config_file "$SCRATCH/c.yaml" "${T2[@]}"
    expect_contains "$OUT" "Test is a success!"
  fi
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
echo "PASS: torch2 $CASE"
