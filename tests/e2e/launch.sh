#!/usr/bin/env bash
# End-to-end tests of `accel launch` with real processes:
#   launch.sh CASE /path/to/accel /path/to/rdzv_wait
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
RDZV_WAIT=${3:-}   # workers/rdzv_wait.cc: waits for an agent's registration in the job's store
W=$(cd "$(dirname "$0")/workers" && pwd)
export OUT_DIR=$SCRATCH/out
mkdir -p "$OUT_DIR"
export MARKER="accel-e2e-$$-$RANDOM"
PYARGS=(--python /usr/bin/python3)   # Debian's python3, the one with torch
BEH=("$W/behave.sh" "$MARKER")        # the marker makes this test's workers findable
# A failed case leaves nothing running: its agents and workers carry the marker.
trap 'pkill -KILL -f "$MARKER" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT

leftovers() { pgrep -f "$MARKER" || true; }
expect_no_leftovers() {
  local i
  for i in $(seq 1 40); do [[ -z "$(leftovers)" ]] && return 0; sleep 0.05; done
  fail "processes survived: $(ps -o pid,ppid,pgid,args -p "$(leftovers | paste -sd,)")"
}

# start_master LOG ARGS...: starts machine 0's agent (`accel launch --main_process_port P ARGS`)
# in the background on the first port P of random tries that it can bind, and returns once it
# listens; sets PORT and MASTER. A port someone else holds makes that agent stop at once ("port P
# is already in use"); then the next is tried. No port is picked by binding and closing.
start_master() {
  local log=$1 try state; shift
  for try in $(seq 1 50); do
    PORT=$((20000 + RANDOM % 30000))
    "$ACCEL" launch --main_process_port "$PORT" "$@" >"$log" 2>&1 &
    MASTER=$!
    while ! ss -ltnpH "sport = :$PORT" | grep -q "pid=$MASTER,"; do
      state=$(cut -d' ' -f3 "/proc/$MASTER/stat" 2>/dev/null || true)
      [[ -z $state || $state == Z ]] && break
      sleep 0.02
    done
    ss -ltnpH "sport = :$PORT" | grep -q "pid=$MASTER," && return 0
    wait $MASTER || true
    [[ $log == /dev/null ]] || grep -q "already in use" "$log" || fail "machine 0's agent failed: $(cat "$log")"
  done
  fail "no port free in 50 tries"
}

# run_dir_in LOG_DIR: the one run directory (<run_id>_<random>, torchrun's layout) in LOG_DIR.
run_dir_in() {
  local dirs=("$1"/*/)
  [[ ${#dirs[@]} == 1 && -d ${dirs[0]} ]] || fail "want one run directory in $1, have: $(ls -a "$1")"
  echo "${dirs[0]%/}"
}

# summary_of LOG_DIR KEY: KEY of the one summary.json kept in log directory LOG_DIR.
summary_of() {
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$(run_dir_in "$1")/summary.json" "$2"
}

# unhealthy_second_agent ARGS...: two agents of one job (--nnodes 1:2, a rank each running a
# worker that logs "rank=R world=W" to $SCRATCH/starts and waits for $SCRATCH/done): machine 0
# (output in $SCRATCH/a, pid pa), then one more with ARGS (in $SCRATCH/b, pid pb), which fails its
# health check: returns once machine 0 runs alone and the other said why it stays out.
unhealthy_second_agent() {
  cat >"$SCRATCH/w.sh" <<SH
#!/bin/sh
echo "rank=\$RANK world=\$WORLD_SIZE" >>"$SCRATCH/starts"
while [ ! -e "$SCRATCH/done" ]; do sleep 0.05; done
SH
  chmod +x "$SCRATCH/w.sh"
  local port=$((20000 + RANDOM % 10000))
  local common=(--nproc_per_node 1 --nnodes 1:2 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" --no_python)
  "$ACCEL" run "${common[@]}" --rdzv_conf is_host=1,last_call_timeout=1 "$SCRATCH/w.sh" >"$SCRATCH/a" 2>&1 &
  pa=$!
  wait_for_line "hosts the rendezvous" "$SCRATCH/a"
  "$ACCEL" run "${common[@]}" --rdzv_conf last_call_timeout=1 --health_check_interval 0.2 "$@" \
    "$SCRATCH/w.sh" >"$SCRATCH/b" 2>&1 &
  pb=$!
  wait_for_line "world=1" "$SCRATCH/starts"
  wait_for_line "fails its health check" "$SCRATCH/b"
}
# joins_once_healthy: (after the cause was fixed) the second agent joins, the group re-forms as
# two, uncounted, and both agents end well once the workers are told they are done.
joins_once_healthy() {
  wait_for_line "world=2" "$SCRATCH/starts"
  touch "$SCRATCH/done"
  set +e; wait $pa; ra=$?; wait $pb; rb=$?; set -e
  ((ra == 0 && rb == 0)) || fail "agents exited $ra $rb: $(cat "$SCRATCH/a" "$SCRATCH/b")"
  [[ $(sort "$SCRATCH/starts" | paste -sd,) == "rank=0 world=1,rank=0 world=2,rank=1 world=2" ]] ||
    fail "ranks started: $(cat "$SCRATCH/starts")"
  [[ $(grep -c "fails its health check" "$SCRATCH/b") == 1 ]] || fail "said more than once: $(cat "$SCRATCH/b")"
  expect_contains "$(cat "$SCRATCH/b")" "accel: health checks pass again: this machine joins the job"
  expect_contains "$(cat "$SCRATCH/b")" "machine 1 of 2: rank 1 of 2"
  expect_contains "$(cat "$SCRATCH/a")" "the group re-forms (not counted as a restart)"
}

case $CASE in
env_contract)
  export FOO_FROM_PARENT=kept
  unset OMP_NUM_THREADS
  expect_exit 0 "$ACCEL" launch --cpu -n 4 --mixed_precision bf16 --gradient_accumulation_steps 4 \
    "$W/env_dump.sh" --num_processes 9 -- "a b" ''
  expect_contains "$ERR" "OMP_NUM_THREADS was unset; each of the 4 processes gets OMP_NUM_THREADS=1"
  [[ $(grep -c OMP_NUM_THREADS <<<"$ERR") == 1 ]] || fail "notice printed more than once: $ERR"
  port=$(env_of 0 MASTER_PORT)
  [[ $port =~ ^[0-9]+$ && $port -gt 0 ]] || fail "MASTER_PORT=$port"
  for r in 0 1 2 3; do
    check_env $r RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 GROUP_RANK=0 GROUP_WORLD_SIZE=1 \
      ROLE_RANK=$r ROLE_WORLD_SIZE=4 ROLE_NAME=default MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 TORCHELASTIC_USE_AGENT_STORE=True \
      ACCELERATE_MIXED_PRECISION=bf16 ACCELERATE_USE_CPU=True ACCELERATE_GRADIENT_ACCUMULATION_STEPS=4 \
      ACCELERATE_DYNAMO_BACKEND=NO OMP_NUM_THREADS=1 FOO_FROM_PARENT=kept TORCH_NCCL_ASYNC_ERROR_HANDLING=1
    [[ -n "$(env_of $r TORCHELASTIC_RUN_ID)" ]] || fail "no run id"
    [[ "$(env_of $r TORCHELASTIC_RUN_ID)" == "$(env_of 0 TORCHELASTIC_RUN_ID)" ]] || fail "run ids differ"
    [[ -z "$(env_of $r CUDA_VISIBLE_DEVICES)" ]] || fail "CUDA_VISIBLE_DEVICES set on a CPU job"
    # Everything after the script reaches it untouched, flags and empty strings included.
    [[ "$(cat "$OUT_DIR/rank_$r.args"; echo .)" == $'--num_processes\n9\n--\na b\n\n.' ]] || fail "args: $(cat -A "$OUT_DIR/rank_$r.args")"
  done
  # The user's OMP_NUM_THREADS is kept; --num_cpu_threads_per_process wins over it.
  OMP_NUM_THREADS=5 expect_exit 0 "$ACCEL" launch -n 2 "$W/env_dump.sh"
  [[ "$(env_of 1 OMP_NUM_THREADS)" == 5 ]] || fail "parent OMP_NUM_THREADS not kept"
  [[ "$ERR" != *OMP_NUM_THREADS* ]] || fail "notice although OMP_NUM_THREADS was set"
  OMP_NUM_THREADS=5 expect_exit 0 "$ACCEL" launch -n 2 --num-cpu-threads-per-process 3 "$W/env_dump.sh"
  [[ "$(env_of 1 OMP_NUM_THREADS)" == 3 ]] || fail "--num_cpu_threads_per_process ignored"
  # Values from the config file apply when no flag is given.
  mkdir -p "$HF_HOME/accelerate"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 3\nmixed_precision: bf16\nuse_cpu: true\nmain_process_port: 0\n' \
    >"$HF_HOME/accelerate/default_config.yaml"
  rm -f "$OUT_DIR"/rank_*
  expect_exit 0 "$ACCEL" launch "$W/env_dump.sh"
  [[ -f "$OUT_DIR/rank_2.env" && ! -f "$OUT_DIR/rank_3.env" ]] || fail "config num_processes 3 not used: $(ls "$OUT_DIR")"
  [[ "$(env_of 2 WORLD_SIZE)" == 3 && "$(env_of 0 ACCELERATE_MIXED_PRECISION)" == bf16 ]] || fail "config not applied"
  ;;
python_gloo)
  for n in 2 4; do
    expect_exit 0 "$ACCEL" launch "${PYARGS[@]}" --cpu -n $n "$W/ddp_gloo.py"
    for r in $(seq 0 $((n - 1))); do
      expect_contains "$OUT" "[rank $r] ok rank=$r world=$n allreduce=$((n * (n + 1) / 2))"
    done
  done
  ;;
python_module)
  mkdir -p "$SCRATCH/pkg/mymod"
  printf 'import os, sys\nprint("module rank", os.environ["RANK"], sys.argv[1:])\n' >"$SCRATCH/pkg/mymod/__main__.py"
  PYTHONPATH=$SCRATCH/pkg expect_exit 0 "$ACCEL" launch "${PYARGS[@]}" -n 2 -m mymod --flag x
  expect_contains "$OUT" "[rank 1] module rank 1 ['--flag', 'x']"
  ;;
exit_codes)
  BEHAVE_DEFAULT=sleep BEHAVE_2=exit:3 expect_exit 3 "$ACCEL" launch -n 4 "${BEH[@]}"
  expect_contains "$ERR" "culprit: rank 2 (local rank 2, pid"
  expect_contains "$ERR" "exit code 3"
  expect_contains "$ERR" "    | rank 2 failing"
  expect_contains "$ERR" "stopped by the agent (collateral): ranks 0, 1, 3"
  BEHAVE_DEFAULT=sleep BEHAVE_1=segv expect_exit 139 "$ACCEL" launch -n 2 "${BEH[@]}"
  expect_contains "$ERR" "rank 1 failed with signal SIGSEGV (exit code 139)"
  expect_contains "$ERR" "stopped by the agent (collateral): rank 0 in "
  BEHAVE_DEFAULT=ok expect_exit 0 "$ACCEL" launch -n 3 "${BEH[@]}"
  [[ "$ERR" != *"job failed"* ]] || fail "failure summary on success"
  ;;
collateral_stop)
  # The others are stopped right after the culprit fails (SIGTERM), well within the grace period...
  start=$(date +%s%N)
  BEHAVE_DEFAULT=sleep BEHAVE_0=exit:7 expect_exit 7 "$ACCEL" launch -n 4 --term_timeout 10 "${BEH[@]}"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  (( ms < 3000 )) || fail "stopping the collateral took ${ms} ms"
  [[ "$ERR" != *"SIGKILL needed"* ]] || fail "SIGKILL was needed: $ERR"
  # ...and a worker that ignores SIGTERM is killed when the grace period ends.
  start=$(date +%s%N)
  BEHAVE_DEFAULT=sleep-ignore-term BEHAVE_0=exit-when-ready:7 expect_exit 7 "$ACCEL" launch -n 3 --term_timeout 0.5 "${BEH[@]}"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  (( ms >= 450 && ms < 3000 )) || fail "grace period not honoured: ${ms} ms"
  expect_contains "$ERR" "SIGKILL needed for ranks 1, 2"
  ;;
no_orphans)
  # A grandchild left sleeping is killed on success, on failure, and when it left the group.
  BEHAVE_DEFAULT=grandchild expect_exit 0 "$ACCEL" launch -n 2 "${BEH[@]}"
  expect_no_leftovers
  BEHAVE_DEFAULT=grandchild GRANDCHILD_THEN=fail expect_exit 4 "$ACCEL" launch -n 2 "${BEH[@]}"
  expect_no_leftovers
  BEHAVE_DEFAULT=setsid-grandchild expect_exit 0 "$ACCEL" launch -n 2 "${BEH[@]}"
  expect_no_leftovers
  ;;
kill9_agent)
  BEHAVE_DEFAULT=grandchild GRANDCHILD_THEN=sleep "$ACCEL" launch -n 3 "${BEH[@]}" >/dev/null 2>&1 &
  agent=$!
  wait_files 'grandchild.*' 3
  [[ -n "$(leftovers)" ]] || fail "grandchildren not running"
  # The agent's temporary run directory, from a worker's TORCHELASTIC_ERROR_FILE.
  worker=$(pgrep -f "^bash .*behave.sh $MARKER" | head -1)
  run_dir=$(tr '\0' '\n' <"/proc/$worker/environ" | sed -n 's|^TORCHELASTIC_ERROR_FILE=\(.*\)/attempt_0/.*|\1|p')
  [[ -d $run_dir ]] || fail "no run directory '$run_dir'"
  kill -9 $agent
  wait $agent 2>/dev/null || true
  expect_no_leftovers
  for _ in $(seq 1 40); do [[ -e $run_dir ]] || break; sleep 0.05; done
  [[ ! -e $run_dir ]] || fail "the SIGKILLed agent's run directory $run_dir is left behind"

  ;;
sigint_escalation)
  BEHAVE_DEFAULT=traps "$ACCEL" launch -n 2 --term_timeout 30 "${BEH[@]}" >"$SCRATCH/o" 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 2  # their traps are set
  kill -INT $agent; wait_files 'int.*' 2
  kill -INT $agent; wait_files 'term.*' 2
  [[ -e /proc/$agent ]] || fail "agent exited before the third SIGINT"
  kill -INT $agent
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 130 ]] || fail "exit $rc after Ctrl-C (want 130): $(cat "$SCRATCH/e")"
  expect_contains "$(cat "$SCRATCH/e")" "second SIGINT: sending SIGTERM"
  expect_contains "$(cat "$SCRATCH/e")" "third SIGINT: sending SIGKILL"
  expect_contains "$(cat "$SCRATCH/e")" "stopped by SIGINT sent to the agent"
  expect_contains "$(cat "$SCRATCH/e")" "= accel: job interrupted (Ctrl-C) ="
  expect_contains "$(cat "$SCRATCH/e")" "no logs kept (--log_dir DIR keeps each rank's output and summary.json)"
  expect_no_leftovers
  # One Ctrl-C, and a rank ends of it while another handles it and runs on: the job cannot go on,
  # so the survivor gets --term_timeout, then SIGKILL (no second Ctrl-C needed).
  rm -f "$OUT_DIR"/*
  BEHAVE_0=traps BEHAVE_1=int-exit "$ACCEL" launch -n 2 --term_timeout 1 "${BEH[@]}" >"$SCRATCH/o" 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 2
  kill -INT $agent
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 130 ]] || fail "exit $rc after one Ctrl-C with a surviving rank (want 130): $(cat "$SCRATCH/e")"
  expect_contains "$(cat "$SCRATCH/e")" "local rank 1 ended after SIGINT; local rank 0 still runs: it gets 1 s from then (--term_timeout) to finish, then SIGKILL"
  [[ -e "$OUT_DIR/int.0" && ! -e "$OUT_DIR/term.0" ]] || fail "rank 0 should have seen SIGINT only: $(ls "$OUT_DIR")"
  expect_no_leftovers
  # Two Ctrl-Cs, workers that ignore SIGINT and SIGTERM (as ranks blocked in a collective do):
  # SIGKILL --term_timeout after the second, with no third Ctrl-C.
  rm -f "$OUT_DIR"/*
  BEHAVE_DEFAULT=traps "$ACCEL" launch -n 2 --term_timeout 1 "${BEH[@]}" >"$SCRATCH/o" 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 2
  kill -INT $agent; wait_files 'int.*' 2
  kill -INT $agent
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 130 ]] || fail "exit $rc after two Ctrl-Cs (want 130): $(cat "$SCRATCH/e")"
  expect_contains "$(cat "$SCRATCH/e")" "a rank blocked in a collective may not see it); Ctrl-C again sends SIGTERM, and SIGKILL follows 1 s (--term_timeout) later"
  expect_contains "$(cat "$SCRATCH/e")" "second SIGINT: sending SIGTERM to the workers; SIGKILL to those still running 1 s (--term_timeout) later"
  expect_contains "$(cat "$SCRATCH/e")" "SIGKILL needed for ranks 0, 1 (alive after --term_timeout)"
  [[ "$(cat "$SCRATCH/e")" != *"third SIGINT"* ]] || fail "a third SIGINT was counted: $(cat "$SCRATCH/e")"
  expect_no_leftovers
  # Rank 0 blocked in a real Gloo all_reduce (rank 1 never comes: it ignores SIGINT and sleeps):
  # the first Ctrl-C cannot reach rank 0's Python, the second's SIGTERM ends both at once — well
  # before --term_timeout's SIGKILL.
  rm -f "$OUT_DIR"/*
  cat >"$SCRATCH/blocked.py" <<'PY'
import signal, sys, time
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, out = dist.get_rank(), sys.argv[1]
if rank == 1:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    open(f"{out}/ready.1", "w").close()
    time.sleep(600)
# A SIGINT before the collective is noted and ignored; inside it, Python never runs the handler.
signal.signal(signal.SIGINT, lambda *_: open(f"{out}/int.0", "w").close())
open(f"{out}/ready.0", "w").close()
dist.all_reduce(torch.ones(1))
PY
  "$ACCEL" launch --cpu -n 2 --term_timeout 60 "${PYARGS[@]}" "$SCRATCH/blocked.py" "$OUT_DIR" >"$SCRATCH/o" 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 2
  kill -INT $agent
  for _ in $(seq 1 100); do grep -q "may not see it" "$SCRATCH/e" && break; sleep 0.05; done
  expect_contains "$(cat "$SCRATCH/e")" "a rank blocked in a collective may not see it"
  [[ -e /proc/$agent ]] || fail "the first Ctrl-C ended a job whose rank 0 is blocked in a collective: $(cat "$SCRATCH/e")"
  start=$SECONDS
  kill -INT $agent
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 130 ]] || fail "exit $rc after two Ctrl-Cs with a rank in all_reduce (want 130): $(cat "$SCRATCH/e")"
  (( SECONDS - start < 30 )) || fail "the second Ctrl-C took $((SECONDS - start)) s: $(cat "$SCRATCH/e")"
  [[ "$(cat "$SCRATCH/e")" != *"SIGKILL needed"* ]] || fail "SIGTERM did not end them: $(cat "$SCRATCH/e")"
  expect_no_leftovers
  ;;
elastic_wait_speaks)
  # A lone elastic agent (--nnodes 1:2) hosting the rendezvous waits out the last call (7 s):
  # every 5 s it says when the round closes, instead of 7 s of silence — at 5 s, once.
  for _ in 1 2 3 4 5; do
    port=$((20000 + RANDOM % 30000))
    set +e
    "$ACCEL" run --nproc_per_node 1 --nnodes 1:2 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port" \
      --rdzv_conf last_call_timeout=7 --no_python /bin/true >"$SCRATCH/o" 2>&1
    rc=$?
    set -e
    ((rc == 0)) && break
    grep -q "$port" "$SCRATCH/o" || break  # not a taken port: a failure
  done
  ((rc == 0)) || fail "exit $rc: $(cat "$SCRATCH/o")"
  expect_contains "$(cat "$SCRATCH/o")" "accel: rendezvous: 1 of 1–2 machines; the round closes in 2 s unless more come (the last call)"
  # Once: not again as the last call ends ("closes in 0 s", said up to 6 times before).
  [[ $(grep -c "unless more come" "$SCRATCH/o") == 1 ]] || fail "said more than once: $(cat "$SCRATCH/o")"
  expect_contains "$(cat "$SCRATCH/o")" "machine 0 of 1: rank 0 of 1"
  ;;
health_check)
  # A machine that fails its health check stays out (--nnodes 1:2): machine 0 runs alone, saying
  # nothing of it; once the check passes (the file appears) the machine joins and the group
  # re-forms as two, uncounted. Its workers never started while it was unhealthy.
  unhealthy_second_agent --log_dir "$SCRATCH/logs" \
    --health_check "test -e '$SCRATCH/ok' || { echo 'GPU 3: 2 uncorrectable ECC errors'; exit 1; }"
  touch "$SCRATCH/ok"
  wait_for_line "world=2" "$SCRATCH/starts"
  # `accel status` shows each agent's checks before its round.
  "$ACCEL" status >"$SCRATCH/status" 2>&1 || fail "accel status failed: $(cat "$SCRATCH/status")"
  grep -qE "^  health checks before this round: disk .* passed \([0-9]+ ms\), /dev/shm passed \([0-9]+ ms\), link lo passed \([0-9]+ ms\), rendezvous passed \([0-9]+ ms\), command passed \([0-9]+ ms\)$" "$SCRATCH/status" ||
    fail "accel status shows no passed command check: $(cat "$SCRATCH/status")"
  joins_once_healthy
  expect_contains "$(cat "$SCRATCH/b")" "accel: this machine fails its health check (command failed: GPU 3: 2 uncorrectable ECC errors (exit 1)): it stays out of round 0 and checks again every 0.2 s"
  # summary.json keeps the checks before the last round: each passed, with its time.
  summary=$(find "$SCRATCH/logs" -name summary.json | head -1)
  [[ -n $summary ]] || fail "no summary.json under $SCRATCH/logs"
  python3 - "$summary" "$SCRATCH/logs" <<'PY' || fail "summary.json's health_checks: $(cat "$summary")"
import json, sys
checks = json.load(open(sys.argv[1]))["health_checks"]
names = [c["name"] for c in checks]
assert names == ["disk " + sys.argv[2], "/dev/shm", "link lo", "rendezvous", "command"], names
assert all(c["passed"] and c["took_ms"] >= 0 for c in checks), checks
assert checks[2]["detail"] == "operstate unknown", checks[2]
assert checks[3]["detail"].startswith("127.0.0.1:") and checks[3]["detail"].endswith(" answers"), checks[3]
assert checks[4]["detail"] == "no output (exit 0)", checks[4]
PY
  ;;
health_check_full_disk)
  # The checkpoint directory a user names (--health_check_dirs) is full: the second machine stays
  # out, saying which directory and how much is free; once space is freed it joins, uncounted.
  ((EUID == 0)) || { echo "SKIPPED: mounting a small filesystem needs root"; exit 77; }
  mkdir -p "$SCRATCH/ckpt"
  mount -t tmpfs -o size=80m tmpfs "$SCRATCH/ckpt"
  trap 'pkill -KILL -f "$MARKER" 2>/dev/null || true; umount -l "$SCRATCH/ckpt" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT
  head -c $((70 << 20)) /dev/zero >"$SCRATCH/ckpt/old.pt"  # 10 MiB left: under 64 MiB
  unhealthy_second_agent --health_check_dirs "$SCRATCH/ckpt"
  rm "$SCRATCH/ckpt/old.pt"
  joins_once_healthy
  grep -qE "^accel: this machine fails its health check \(disk $SCRATCH/ckpt failed: [0-9.]+ MiB free under $SCRATCH/ckpt, below 64 MiB\): it stays out of round 0" "$SCRATCH/b" ||
    fail "no full-disk notice: $(cat "$SCRATCH/b")"
  ;;
stragglers)
  # Three lock-step Python ranks report their own work per step (README's line); rank 2 works 3x
  # as long. The agent names it once, with a score near 1/3, shows the scores in `accel status`
  # and keeps them in summary.json; the other ranks are never named.
  export SLOW_RANK=2 SLOWDOWN=3 BASE_S=0.02 DONE=$SCRATCH/done
  "$ACCEL" launch -n 3 "${PYARGS[@]}" --straggler_window 10 --log_dir "$SCRATCH/logs" \
    "$W/straggler.py" >"$SCRATCH/o" 2>&1 &
  pid=$!
  wait_for_line "straggles" "$SCRATCH/o"
  "$ACCEL" status >"$SCRATCH/status" 2>&1 || fail "accel status failed: $(cat "$SCRATCH/status")"
  touch "$DONE"
  wait $pid || fail "accel launch failed: $(cat "$SCRATCH/o")"
  grep -qE "^  straggler scores \(last 10 steps, threshold 0\.70\): rank 0 1\.00, rank 1 1\.00, rank 2 0\.[1-4][0-9] straggles$" "$SCRATCH/status" ||
    fail "accel status shows no scores: $(cat "$SCRATCH/status")"
  [[ $(grep -c "straggles" "$SCRATCH/o") == 1 ]] || fail "named more or less than once: $(cat "$SCRATCH/o")"
  grep -qE "^accel: rank 2 \(machine 0\) straggles: its own work takes [0-9]+ ms a step, the job's median [0-9]+ ms \(score 0\.[0-9]+ over steps [0-9]+–[0-9]+, below --straggler_threshold 0\.70\)$" "$SCRATCH/o" ||
    fail "no straggler notice for rank 2: $(cat "$SCRATCH/o")"
  /usr/bin/python3 - "$(run_dir_in "$SCRATCH/logs")/summary.json" <<'PY' || fail "summary.json: $(cat "$(run_dir_in "$SCRATCH/logs")/summary.json")"
import json, sys
a = json.load(open(sys.argv[1]))["attempts"][0]
assert a["stragglers"] == [2], a["stragglers"]
scores = {s["rank"]: s for s in a["straggler_scores"]}
assert sorted(scores) == [0, 1, 2], scores
assert scores[0]["score"] == 1.0 and scores[1]["score"] == 1.0, scores
assert abs(scores[2]["score"] - 1 / 3) <= 0.15, scores[2]
assert abs(scores[2]["work_s"] - 0.06) <= 0.02, scores[2]
assert scores[2]["to_step"] - scores[2]["from_step"] >= 10, scores[2]
PY
  ;;
straggler_exclude)
  # --straggler_action exclude on two agents (--nnodes 1:2): machine 1's rank works 3x as long.
  # Machine 0's agent, which sees every rank's work, names it and excludes its machine; machine 1
  # leaves (exit 0, saying why), and machine 0 re-forms alone, uncounted, and trains on.
  export SLOW_RANK=1 SLOWDOWN=3 BASE_S=0.02 DONE=$SCRATCH/done
  port=$((20000 + RANDOM % 10000))
  common=(--nproc_per_node 1 --nnodes 1:2 --rdzv_backend c10d --rdzv_endpoint "127.0.0.1:$port"
    "${PYARGS[@]}" --straggler_window 10 --straggler_action exclude)
  "$ACCEL" run "${common[@]}" --rdzv_conf is_host=1 --log_dir "$SCRATCH/logs" "$W/straggler.py" >"$SCRATCH/a" 2>&1 &
  pa=$!
  wait_for_line "hosts the rendezvous" "$SCRATCH/a"
  "$ACCEL" run "${common[@]}" "$W/straggler.py" >"$SCRATCH/b" 2>&1 &
  pb=$!
  set +e; wait $pb; rb=$?; set -e
  ((rb == 0)) || fail "machine 1 exited $rb: $(cat "$SCRATCH/b")"
  wait_for_line "machine 0 of 1: rank 0 of 1" "$SCRATCH/a"
  touch "$DONE"
  wait $pa || fail "machine 0 failed: $(cat "$SCRATCH/a")"
  expect_contains "$(cat "$SCRATCH/a")" "accel: rank 1 (machine 1) straggles: its own work takes "
  expect_contains "$(cat "$SCRATCH/a")" "machine 1 is excluded as a straggler's (rank 1, score 0."
  expect_contains "$(cat "$SCRATCH/a")" "the group re-forms without it; stopping the workers here"
  expect_contains "$(cat "$SCRATCH/a")" "accel: the group re-forms (not counted as a restart)"
  expect_contains "$(cat "$SCRATCH/b")" "accel: this machine leaves the job: machine 1 is excluded as a straggler's (rank 1, score 0."
  [[ $(grep -c "Traceback" "$SCRATCH/a" "$SCRATCH/b" | awk -F: '{s+=$2} END {print s}') == 0 ]] ||
    fail "a worker failed: $(cat "$SCRATCH/a" "$SCRATCH/b")"
  /usr/bin/python3 - "$(run_dir_in "$SCRATCH/logs")/summary.json" <<'PY' || fail "summary.json: $(cat "$(run_dir_in "$SCRATCH/logs")/summary.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["restarts_used"] == 0 and s["exit_code"] == 0, s
a = s["attempts"]
assert len(a) == 2, a
assert a[0]["stragglers"] == [1], a[0]["stragglers"]
assert a[1]["succeeded"], a[1]
PY
  ;;
substitution_reader)
  # `accel ... > >(tee log)`: bash makes the substitution's reader a child of the shell and then
  # execs accel, which inherits it. The agent never signals a process it did not start: every
  # attempt's lines and the summary reach the log.
  cat >"$SCRATCH/fail.sh" <<'SH'
#!/bin/bash
for i in 1 2 3; do echo "line $i of attempt $TORCHELASTIC_RESTART_COUNT"; done
exit 1
SH
  chmod +x "$SCRATCH/fail.sh"
  set +e
  "$ACCEL" run --nproc_per_node 1 --max_restarts 1 --no_python "$SCRATCH/fail.sh" \
    > >(cat >"$SCRATCH/log"; touch "$OUT_DIR/reader.done") 2>&1
  rc=$?
  set -e
  wait_files reader.done 1  # the reader ends once accel's output closed
  [[ $rc == 1 ]] || fail "exit $rc (want 1): $(cat "$SCRATCH/log")"
  for a in 0 1; do
    for i in 1 2 3; do expect_contains "$(cat "$SCRATCH/log")" "line $i of attempt $a"; done
  done
  expect_contains "$(cat "$SCRATCH/log")" "accel run exits with 1"
  ;;
signal_forwarding)
  # SIGUSR1 (SLURM's preemption warning) reaches the workers and the job goes on.
  BEHAVE_DEFAULT=usr1-then-exit "$ACCEL" launch -n 2 "${BEH[@]}" >/dev/null 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 2
  kill -USR1 $agent
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 0 ]] || fail "exit $rc after SIGUSR1: $(cat "$SCRATCH/e")"
  wait_files 'usr1.*' 2
  # SIGTERM and SIGHUP are forwarded and end the job with 128+N.
  for sig in TERM HUP; do
    rm -f "$OUT_DIR"/*
    BEHAVE_DEFAULT=traps "$ACCEL" launch -n 2 --term_timeout 0.5 "${BEH[@]}" >/dev/null 2>"$SCRATCH/e" &
    agent=$!
    wait_files 'ready.*' 2
    kill -$sig $agent
    set +e; wait $agent; rc=$?; set -e
    want=$(( 128 + $(kill -l $sig) ))
    [[ $rc == "$want" ]] || fail "exit $rc after SIG$sig (want $want): $(cat "$SCRATCH/e")"
    wait_files "$(tr 'A-Z' 'a-z' <<<"$sig").*" 2
    expect_no_leftovers
  done
  ;;
concurrent_launches)
  # Two jobs started at the same moment, no port given: each gets its own free port.
  "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 "$W/ddp_gloo.py" >"$SCRATCH/a.out" 2>&1 &
  a=$!
  "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 "$W/ddp_gloo.py" >"$SCRATCH/b.out" 2>&1 &
  b=$!
  set +e; wait $a; ra=$?; wait $b; rb=$?; set -e
  [[ $ra == 0 && $rb == 0 ]] || fail "exit codes $ra $rb
$(cat "$SCRATCH/a.out" "$SCRATCH/b.out")"
  expect_contains "$(cat "$SCRATCH/a.out")" "[rank 1] ok rank=1 world=2"
  expect_contains "$(cat "$SCRATCH/b.out")" "[rank 1] ok rank=1 world=2"
  ;;
port_taken)
  /usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(30)' >"$SCRATCH/port" &
holder=$!
for _ in $(seq 1 100); do [[ -s "$SCRATCH/port" ]] && break; sleep 0.05; done
port=$(cat "$SCRATCH/port")
expect_exit 2 "$ACCEL" launch -n 2 --main_process_port "$port" "${BEH[@]}"
expect_contains "$ERR" "--main_process_port: port $port is already in use by pid $holder (python3)"
# Each names what the user wrote: torchrun's flag under accel run, the config file's key.
expect_exit 2 "$ACCEL" run --nproc_per_node 2 --master_port "$port" "${BEH[@]}"
expect_contains "$ERR" "--master_port: port $port is already in use by pid $holder"
printf 'distributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: %s\n' "$port" >"$SCRATCH/p.yaml"
expect_exit 2 "$ACCEL" launch --config_file "$SCRATCH/p.yaml" "${BEH[@]}"
expect_contains "$ERR" "'main_process_port' in $SCRATCH/p.yaml: port $port is already in use by pid $holder"
kill $holder
[[ ! -e "$OUT_DIR/started.0" ]] || fail "a worker was started"
  ;;
restarts)
  BEHAVE_0=fail-first-attempt BEHAVE_1=ok expect_exit 0 "$ACCEL" launch -n 2 --max_restarts 2 \
    --log_dir "$SCRATCH/logs" "${BEH[@]}"
  expect_contains "$ERR" "attempt 0 failed (rank 0: exit code 5); restarting (1 of 2)"
  run=$(run_dir_in "$SCRATCH/logs")
  expect_contains "$(cat "$run/attempt_0/0/stdout.log")" "attempt 0"
  expect_contains "$(cat "$run/attempt_1/0/stdout.log")" "attempt 1"
  [[ ! -d "$run/attempt_2" ]] || fail "a third attempt ran"
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["exit_code"]==0 and len(d["attempts"])==2 and not d["attempts"][0]["succeeded"], d' "$run/summary.json"
  # Out of restarts: the summary lists every attempt and the job fails with the culprit's code.
  BEHAVE_DEFAULT=exit:6 expect_exit 6 "$ACCEL" launch -n 2 --max_restarts 1 "${BEH[@]}"
  expect_contains "$ERR" "attempt 0 ("
  expect_contains "$ERR" "attempt 1 ("
  expect_contains "$ERR" "restarts used: 1"
  ;;
logs)
  # Whole lines only, never interleaved, even when ranks write a lot at once.
  BEHAVE_DEFAULT=print-lines:300 expect_exit 0 "$ACCEL" launch -n 4 "${BEH[@]}"
  bad=$(grep -cvE '^\[rank ([0-3])\] rank=\1 line=[0-9]+ x{200}$' <<<"$OUT" || true)
  [[ $bad == 0 ]] || fail "$bad malformed console lines"
  [[ $(wc -l <<<"$OUT") == 1200 ]] || fail "expected 1200 lines, got $(wc -l <<<"$OUT")"
  # A last line without newline and \r progress bars keep their prefix.
  BEHAVE_0=partial expect_exit 0 "$ACCEL" launch -n 1 "${BEH[@]}"
  [[ "$OUT" == "[rank 0] no newline at the end" ]] || fail "partial line: $(cat -A <<<"$OUT")"
  # Each piece is shown as it is read (ending in \r); the final '\n', when read apart from the
  # last piece, repeats that piece as a line: the same on a terminal.
  BEHAVE_0=progress expect_exit 0 "$ACCEL" launch -n 1 "${BEH[@]}"
  [[ "$OUT" == $'[rank 0] progress 1/3\r[rank 0] progress 2/3\r[rank 0] progress 3/3' ||
     "$OUT" == $'[rank 0] progress 1/3\r[rank 0] progress 2/3\r[rank 0] progress 3/3\r[rank 0] progress 3/3' ]] ||
    fail "progress bar: $(cat -A <<<"$OUT")"
  # --local_ranks_filter limits the console; --log_dir keeps everything, in torchrun's layout.
  BEHAVE_DEFAULT=exit:0 expect_exit 0 "$ACCEL" launch -n 3 --local_ranks_filter 0 --log_dir "$SCRATCH/logs" --rdzv_id job7 "${BEH[@]}"
  [[ "$ERR" == *"[rank 0] rank 0 failing"* && "$ERR" != *"[rank 1]"* && "$ERR" != *"[rank 2]"* ]] || fail "filter: $ERR"
  run=$(run_dir_in "$SCRATCH/logs")
  [[ $run =~ /logs/job7_[A-Za-z0-9]{6}$ ]] || fail "run directory $run is not <rdzv_id>_<random>"
  expect_contains "$ERR" "accel: logs in $run/attempt_K/<local rank>/"
  for r in 0 1 2; do
    [[ "$(cat "$run/attempt_0/$r/stderr.log")" == $"rank $r failing"$'\n'"second line" ]] || fail "log of rank $r"
    [[ -f "$run/attempt_0/$r/stdout.log" && ! -s "$run/attempt_0/$r/stdout.log" ]] || fail "stdout.log of rank $r"
  done
  $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["exit_code"]==0, d' "$run/summary.json"
  # --console_streams 0: nothing from the workers on the console; 2: only their stderr.
  BEHAVE_DEFAULT=both expect_exit 0 "$ACCEL" launch -n 2 --console_streams 0 "${BEH[@]}"
  [[ -z "$OUT" && "$ERR" != *"[rank"* ]] || fail "--console_streams 0 printed: $OUT $ERR"
  BEHAVE_DEFAULT=both expect_exit 0 "$ACCEL" launch -n 2 --console_streams 2 "${BEH[@]}"
  [[ -z "$OUT" && "$ERR" == *"[rank 1] rank 1 err"* ]] || fail "--console_streams 2 printed: $OUT $ERR"
  ;;
redirects_tee)
  # torchrun's meaning: --redirects sends a stream to its log file instead of the console, --tee
  # to both. Without --log_dir the files go to a directory the agent keeps, named in a notice.
  export TMPDIR=$SCRATCH/tmp
  mkdir -p "$TMPDIR"
  BEHAVE_DEFAULT=both expect_exit 0 "$ACCEL" launch -n 2 --redirects 3 --rdzv_id r3 "${BEH[@]}"
  [[ -z "$OUT" && "$ERR" != *"[rank"* ]] || fail "--redirects 3 reached the console: $OUT $ERR"
  base=$(run_dir_in "$TMPDIR")
  run=$(run_dir_in "$base")
  [[ $base == "$TMPDIR"/accel-run-* && $run == "$base"/r3_* ]] || fail "kept run directory $run"
  expect_contains "$ERR" "accel: --redirects/--tee without --log_dir: the workers' log files are kept in $run/attempt_K/<local rank>/"
  for r in 0 1; do
    [[ "$(cat "$run/attempt_0/$r/stdout.log")" == "rank $r out" ]] || fail "stdout.log of rank $r"
    [[ "$(cat "$run/attempt_0/$r/stderr.log")" == "rank $r err" ]] || fail "stderr.log of rank $r"
  done
  [[ -f $run/summary.json ]] || fail "no summary.json in $run"
  rm -rf "${TMPDIR:?}"/*
  # Per local rank: 0 redirects stdout and tees stderr; 1 tees stdout; only those streams get files.
  BEHAVE_DEFAULT=both expect_exit 0 "$ACCEL" launch -n 2 --redirects 0:1 --tee 0:2,1:1 "${BEH[@]}"
  [[ "$OUT" == "[rank 1] rank 1 out" ]] || fail "stdout: $OUT"
  expect_contains "$ERR" "[rank 0] rank 0 err"
  expect_contains "$ERR" "[rank 1] rank 1 err"
  run=$(run_dir_in "$(run_dir_in "$TMPDIR")")
  [[ "$(cd "$run/attempt_0" && find . -type f | sort | paste -sd' ')" == "./0/stderr.log ./0/stdout.log ./1/stdout.log" ]] ||
    fail "files: $(cd "$run/attempt_0" && find . -type f)"
  [[ "$(cat "$run/attempt_0/0/stdout.log")" == "rank 0 out" && "$(cat "$run/attempt_0/1/stdout.log")" == "rank 1 out" ]] ||
    fail "logs: $(tail -n+1 "$run"/attempt_0/*/*.log)"
  rm -rf "${TMPDIR:?}"/*
  # Neither: no files, and the temporary run directory is gone at the end.
  BEHAVE_DEFAULT=both expect_exit 0 "$ACCEL" launch -n 2 "${BEH[@]}"
  [[ -z "$(ls -A "$TMPDIR")" ]] || fail "left behind: $(ls -A "$TMPDIR")"
  # --log_dir keeps every stream in files, --redirects still keeps stdout off the console.
  BEHAVE_DEFAULT=both expect_exit 0 "$ACCEL" launch -n 2 --redirects 1 --log_dir "$SCRATCH/logs" "${BEH[@]}"
  [[ -z "$OUT" ]] || fail "redirected stdout printed: $OUT"
  expect_contains "$ERR" "[rank 1] rank 1 err"
  run=$(run_dir_in "$SCRATCH/logs")
  [[ "$(cat "$run/attempt_0/1/stderr.log")" == "rank 1 err" && "$(cat "$run/attempt_0/1/stdout.log")" == "rank 1 out" ]] ||
    fail "log_dir files"
  [[ -z "$(ls -A "$TMPDIR")" ]] || fail "--log_dir still made $(ls -A "$TMPDIR")"
  ;;
failure_summary_json)
  BEHAVE_DEFAULT=sleep BEHAVE_1=exit:3 expect_exit 3 "$ACCEL" launch -n 3 --log_dir "$SCRATCH/logs" "${BEH[@]}"
  $PY - "$(run_dir_in "$SCRATCH/logs")/summary.json" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["exit_code"] == 3 and not d["succeeded"]
a = d["attempts"][0]
assert a["culprit"]["rank"] == 1 and a["culprit"]["exit_code"] == 3
assert a["workers"][1]["stderr_tail"] == ["rank 1 failing", "second line"], a["workers"][1]
assert [w["stopped_by_agent"] for w in a["workers"]] == [True, False, True]
assert a["workers"][0]["signal"] == "SIGTERM"
PYEOF
  ;;
oom_hint)
  # A worker killed by the kernel's OOM killer in a memory-limited cgroup (needs root and a
  # writable cgroup-v1 memory hierarchy).
  base=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
  cg=$base/accel-oom-$$
  if ! mkdir "$cg" 2>/dev/null; then echo "SKIPPED: cannot create a memory cgroup under $base"; exit 77; fi
  trap 'rmdir "$cg" 2>/dev/null; rm -rf "$SCRATCH"' EXIT
  echo $((300 * 1024 * 1024)) >"$cg/memory.limit_in_bytes"
  echo 0 >"$cg/memory.swappiness" 2>/dev/null || true
  set +e
  BEHAVE_DEFAULT=sleep BEHAVE_1=oom bash -c "echo \$\$ >'$cg/cgroup.procs'; exec '$ACCEL' launch -n 2 '$W/behave.sh' '$MARKER'" \
    >"$SCRATCH/o" 2>"$SCRATCH/e"
  rc=$?
  set -e
  [[ $rc == 137 ]] || fail "exit $rc (want 137): $(cat "$SCRATCH/e")"
  expect_contains "$(cat "$SCRATCH/e")" "likely killed by the OOM killer"
  ;;
progress_at_once)
  # tqdm's way: rank 0 writes "\rstep i" and waits until the test saw it on the console (so the
  # next redraw, which would push it out, never comes first); each must show within 0.5 s of
  # being written. Then rank 1 fails: rank 0's last piece is above the failure report.
  cat >"$SCRATCH/bar.sh" <<'SH'
#!/usr/bin/env bash
await() { for _ in $(seq 1 400); do [[ -e $1 ]] && return 0; sleep 0.025; done; exit 9; }
if [[ $RANK == 1 ]]; then await "$OUT_DIR/seen.3"; exit 3; fi
for i in 1 2 3; do printf '\rstep %d' "$i"; touch "$OUT_DIR/wrote.$i"; await "$OUT_DIR/seen.$i"; done
sleep 30
SH
  chmod +x "$SCRATCH/bar.sh"
  "$ACCEL" launch -n 2 --term_timeout 1 "$SCRATCH/bar.sh" "$MARKER" >"$SCRATCH/console" 2>&1 &
  agent=$!
  for i in 1 2 3; do
    wait_files "wrote.$i" 1
    shown=
    for _ in $(seq 1 25); do  # 25 × 20 ms
      grep -qa "\[rank 0\] step $i" "$SCRATCH/console" && { shown=1; break; }
      sleep 0.02
    done
    [[ -n $shown ]] || fail "'step $i' not shown within 0.5 s of being written: $(cat -A "$SCRATCH/console")"
    touch "$OUT_DIR/seen.$i"
  done
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 3 ]] || fail "exit $rc (want rank 1's 3): $(cat "$SCRATCH/console")"
  console=$(cat "$SCRATCH/console")
  expect_contains "$console" $'[rank 0] step 1\r[rank 0] step 2\r[rank 0] step 3\r'
  before=${console%%job failed*}
  [[ "$before" == *"[rank 0] step 3"* ]] || fail "rank 0's last piece came after the failure report: $console"
  expect_no_leftovers
  ;;
accel_test)
  # accelerate test's counterpart: each rank's checks, then the verdict.
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\n' >"$SCRATCH/c.yaml"
  expect_exit 0 "$ACCEL" test --config_file "$SCRATCH/c.yaml" --python /usr/bin/python3
  expect_contains "$OUT" "Running: accel launch --config_file $SCRATCH/c.yaml --python /usr/bin/python3 "
  for r in 0 1; do
    expect_contains "$OUT" "[rank $r] torch: ok (torch "
    expect_contains "$OUT" "[rank $r] environment: ok (rank $r of 2, local rank $r of 2, store 127.0.0.1:"
    expect_contains "$OUT" "[rank $r] init_process_group: ok (gloo, 2 rank(s))"
    expect_contains "$OUT" "[rank $r] all_reduce: ok (sum of rank+1 over 2 rank(s): 3, want 3)"
    expect_contains "$OUT" "[rank $r] barrier: ok (every rank arrived)"
  done
  # Then libaccel's checks with the same config, through accel-check beside this accel.
  expect_contains "$OUT" "Running: accel launch --config_file $SCRATCH/c.yaml --no_python $(realpath "$(dirname "$ACCEL")/../accel_check/accel-check")"
  for r in 0 1; do
    expect_contains "$OUT" "[rank $r] libaccel communicator: ok (shm, rank $r of 2 on cpu)"
    expect_contains "$OUT" "[rank $r] libaccel all_reduce: ok (sum of rank+1 over 2 rank(s): 3, want 3)"
    expect_contains "$OUT" "[rank $r] libaccel gather: ok (rank order 0..1)"
    expect_contains "$OUT" "[rank $r] libaccel barrier: ok (every rank arrived)"
  done
  expect_contains "$OUT" "Test is a success! You are ready for your distributed training!"
  # libaccel's check failing (a CPU backend it does not know): said per rank, and the test fails.
  ACCEL_CPU_BACKEND=bogus expect_exit 1 "$ACCEL" test --config_file "$SCRATCH/c.yaml" --python /usr/bin/python3
  expect_contains "$OUT" "] libaccel communicator: FAILED (ACCEL_CPU_BACKEND='bogus' is not one of auto, shm, gloo)"
  expect_contains "$ERR" "accel: error: accel test failed: libaccel's check exited 1 (the lines above say which check failed on which rank)"
  [[ "$OUT" != *"Test is a success"* ]] || fail "success claimed with libaccel failing: $OUT"
  # An accel with no accel-check beside it says so, and the python checks decide.
  mkdir -p "$SCRATCH/alone/bin" && cp "$ACCEL" "$SCRATCH/alone/bin/accel"
  expect_exit 0 "$SCRATCH/alone/bin/accel" test --config_file "$SCRATCH/c.yaml" --python /usr/bin/python3
  expect_contains "$OUT" "libaccel: skipped (no accel-check beside this accel; looked at $SCRATCH/alone/bin/../libexec/accel/accel-check, $SCRATCH/alone/bin/../accel_check/accel-check)"
  # No config file: one process without RANK, as accelerate starts it, tested as a group of one.
  expect_exit 0 "$ACCEL" test --python /usr/bin/python3
  expect_contains "$OUT" "[rank 0] environment: ok (one process without RANK, as accelerate starts one: a group of one)"
  expect_contains "$OUT" "[rank 0] all_reduce: ok (sum of rank+1 over 1 rank(s): 1, want 1)"
  expect_contains "$OUT" "[rank 0] libaccel all_reduce: ok (sum of rank+1 over 1 rank(s): 1, want 1)"
  # An interpreter that cannot import torch (Debian's, without site-packages, under another
  # name): the check says so, the summary names one that has torch, and the test stops there.
  ln -s /usr/bin/python3 "$SCRATCH/py-link"
  printf '#!/bin/sh\nexec %s -S "$@"\n' "$SCRATCH/py-link" >"$SCRATCH/python-no-site" && chmod +x "$SCRATCH/python-no-site"
  expect_exit 1 "$ACCEL" test --config_file "$SCRATCH/c.yaml" --python "$SCRATCH/python-no-site"
  expect_contains "$OUT" "torch: FAILED ($SCRATCH/py-link cannot import torch: No module named 'torch')"
  expect_contains "$ERR" "has torch $($PY -c 'import torch; print(torch.__version__)'): run with --python "
  expect_contains "$ERR" "accel: error: accel test failed: accel launch exited 1 (the lines above say which check failed on which rank)"
  [[ "$OUT" != *"Test is a success"* ]] || fail "success claimed: $OUT"
  [[ "$OUT" != *"libaccel communicator"* && "$OUT" != *"Running: accel launch --no_python"* ]] ||
    fail "went on after the failed part: $OUT"
  expect_exit 2 "$ACCEL" test --config_file "$SCRATCH/missing.yaml"
  expect_contains "$ERR" "'$SCRATCH/missing.yaml' does not exist"
  ;;
python_choice)
  # Nobody chose the interpreter and python3 (first on PATH) has no torch: launch, run and env
  # --check take one that has, saying so once; the config's accel_python and --python choose.
  mkdir -p "$SCRATCH/bin"
  ln -s /usr/bin/python3 "$SCRATCH/py-link"
  printf '#!/bin/sh\nexec %s -S "$@"\n' "$SCRATCH/py-link" >"$SCRATCH/bin/python3" && chmod +x "$SCRATCH/bin/python3"
  printf 'import sys\ntry:\n    import torch\n    t = torch.__version__\nexcept ImportError:\n    t = "none"\nprint(f"{sys.executable} torch {t}")\n' >"$SCRATCH/which.py"
  torch=$($PY -c 'import torch; print(torch.__version__)')
  notice="accel: python3 ($SCRATCH/py-link) has no torch: .py scripts run with /usr/bin/python3, which has torch $torch (--python, or accel_python in the config file, chooses)"
  unset PYTHON_EXEC
  PATH=$SCRATCH/bin:$PATH expect_exit 0 "$ACCEL" launch --cpu -n 1 "$SCRATCH/which.py"
  expect_contains "$ERR" "$notice"
  [[ $(grep -c "has no torch" <<<"$ERR") == 1 ]] || fail "want the notice once: $ERR"
  expect_contains "$OUT" "/usr/bin/python3 torch $torch"
  PATH=$SCRATCH/bin:$PATH expect_exit 0 "$ACCEL" run --nproc_per_node 1 "$SCRATCH/which.py"
  expect_contains "$ERR" "$notice"
  expect_contains "$OUT" "/usr/bin/python3 torch $torch"
  # The config's key: that interpreter, no notice (here the one without torch, to tell them apart).
  printf 'distributed_type: NO\nuse_cpu: true\naccel_python: %s\n' "$SCRATCH/bin/python3" >"$SCRATCH/c.yaml"
  PATH=$SCRATCH/bin:$PATH expect_exit 0 "$ACCEL" launch --config_file "$SCRATCH/c.yaml" "$SCRATCH/which.py"
  expect_contains "$OUT" "$SCRATCH/py-link torch none"
  [[ "$ERR" != *"has no torch"* ]] || fail "a notice although the config chose: $ERR"
  # --python beats the key.
  PATH=$SCRATCH/bin:$PATH expect_exit 0 "$ACCEL" launch --config_file "$SCRATCH/c.yaml" --python /usr/bin/python3 "$SCRATCH/which.py"
  expect_contains "$OUT" "/usr/bin/python3 torch $torch"
  # env --check checks the one launch would use, and says why.
  PATH=$SCRATCH/bin:$PATH expect_exit 0 "$ACCEL" env --check
  expect_contains "$OUT" "OK    python: /usr/bin/python3 (/usr/bin/python3, Python"
  expect_contains "$OUT" "; launch chose it: python3 ($SCRATCH/py-link) has no torch"
  ;;
defaults_notice)
  # accelerate's warning without a config file, and the hint when one process finds no RANK.
  printf 'import torch.distributed as dist\ndist.init_process_group("gloo")\n' >"$SCRATCH/hello.py"
  expect_exit 1 "$ACCEL" launch "${PYARGS[@]}" "$SCRATCH/hello.py"
  expect_contains "$ERR" "accel: The following values were not passed to \`accel launch\` and had defaults used instead:
	\`--num_processes\` was set to a value of \`1\`
	\`--num_machines\` was set to a value of \`1\`
	\`--mixed_precision\` was set to a value of \`'no'\`
	\`--dynamo_backend\` was set to a value of \`'no'\`
To avoid this warning pass in values for each of the problematic parameters or run \`accel config\`."
  expect_contains "$ERR" "environment variable RANK expected, but not set"
  expect_contains "$ERR" "hint: one process gets no RANK or WORLD_SIZE (as under accelerate launch), so init_process_group has no group to join: run several with --num_processes 2 (-n 2), or write a config with \`accel config\`"
  # Values given by flags are not listed; a config file gives them all.
  expect_exit 0 "$ACCEL" launch -n 2 --mixed_precision no "${BEH[@]}"
  expect_contains "$ERR" "defaults used instead:
	\`--num_machines\` was set to a value of \`1\`
	\`--dynamo_backend\` was set to a value of \`'no'\`
To avoid"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 2\n' >"$SCRATCH/c.yaml"
  expect_exit 0 "$ACCEL" launch --config_file "$SCRATCH/c.yaml" "${BEH[@]}"
  [[ "$ERR" != *"defaults used instead"* ]] || fail "defaults notice with a config file: $ERR"
  ;;
errors_before_notices)
  # An error that ends the run comes before (here: instead of) any notice about the run: the
  # OMP and defaults notices of this -n 2 job never show.
  touch "$SCRATCH/file"
  expect_exit 2 "$ACCEL" launch -n 2 --log_dir "$SCRATCH/file/logs" "${BEH[@]}"
  [[ "$ERR" == "accel: error: --log_dir: '$SCRATCH/file' exists and is not a directory" ]] ||
    fail "want the --log_dir error alone: $ERR"
  # The same for a temporary directory where no run directory can be made.
  TMPDIR=$SCRATCH/file expect_exit 2 "$ACCEL" launch -n 2 "${BEH[@]}"
  [[ "$ERR" == "accel: error: cannot create a run directory in $SCRATCH/file: Not a directory (set TMPDIR to a writable directory, or pass --log_dir)" ]] ||
    fail "want the run directory's error alone: $ERR"
  [[ -z "$(ls "$OUT_DIR")" ]] || fail "workers started: $(ls "$OUT_DIR")"
  ;;
validation)
  cp "$W/behave.sh" "$SCRATCH/noexec.sh"; chmod -x "$SCRATCH/noexec.sh"
  expect_exit 2 "$ACCEL" launch -n 2 "$SCRATCH/noexec.sh"
  expect_contains "$ERR" "training script '$SCRATCH/noexec.sh' is not executable"
  expect_exit 2 "$ACCEL" launch -n 2 "$SCRATCH/missing.py"
  expect_contains "$ERR" "training script '$SCRATCH/missing.py' not found"
  expect_exit 2 "$ACCEL" launch -n 2 no-such-program-xyz
  expect_contains "$ERR" "training script 'no-such-program-xyz' not found (not a file here and not in PATH)"
  # A script in the current directory, named without ./ (looked up in PATH, as by a shell).
  cp "$W/behave.sh" "$SCRATCH/run.sh"
  (cd "$SCRATCH" && expect_exit 2 "$ACCEL" launch -n 2 run.sh && expect_contains "$ERR" "training script 'run.sh' is not in PATH; for the file in the current directory, run './run.sh'") || exit 1
  chmod -x "$SCRATCH/run.sh"
  (cd "$SCRATCH" && expect_exit 2 "$ACCEL" launch -n 2 run.sh && expect_contains "$ERR" "run './run.sh' (after chmod +x run.sh)") || exit 1
  expect_exit 2 "$ACCEL" launch --cpu --multi_gpu -n 2 "${BEH[@]}"
  expect_contains "$ERR" "You can only use one of \`--cpu\`, \`--multi_gpu\`"
  expect_exit 2 "$ACCEL" launch --gpu_ids 0,,1 -n 2 "${BEH[@]}"
  expect_contains "$ERR" "--gpu_ids: '0,,1': empty id at position 2"
  if [[ -z "$(ldconfig -p | grep libcuda.so.1)" ]]; then
    expect_exit 2 "$ACCEL" launch --multi_gpu -n 2 "${BEH[@]}"
    expect_contains "$ERR" "multi-GPU training was requested (--multi_gpu) but no GPU is usable on this machine"
    expect_exit 2 "$ACCEL" launch --use_fsdp -n 2 "${BEH[@]}"
    expect_contains "$ERR" "FSDP was requested (--use_fsdp) but no GPU is usable on this machine; use --cpu instead of --use_fsdp"
    printf 'distributed_type: DEEPSPEED\nnum_processes: 2\n' >"$SCRATCH/ds.yaml"
    expect_exit 2 "$ACCEL" launch --config_file "$SCRATCH/ds.yaml" "${BEH[@]}"
    expect_contains "$ERR" "DeepSpeed was requested (distributed_type DEEPSPEED in $SCRATCH/ds.yaml) but no GPU is usable"
    expect_exit 2 "$ACCEL" launch --mixed_precision fp16 -n 2 "${BEH[@]}"
    expect_contains "$ERR" "mixed_precision fp16 needs a GPU and none is usable here"
  fi
  expect_exit 2 "$ACCEL" launch --cpu --mixed_precision fp8 -n 2 "${BEH[@]}"
  expect_contains "$ERR" "mixed_precision fp8 needs a GPU but the job is CPU-only (--cpu / use_cpu); use bf16 or no"
  expect_exit 2 "$ACCEL" launch --num_proceses 2 "${BEH[@]}"
  expect_contains "$ERR" "unknown flag --num_proceses (did you mean --num_processes?)"
  expect_exit 2 "$ACCEL" launch -n 2 --local_ranks_filter 5 "${BEH[@]}"
  expect_contains "$ERR" "--local_ranks_filter: '5' is not a local rank (0..1)"
  expect_exit 2 "$ACCEL" launch -n 2 --console_streams 7 "${BEH[@]}"
  expect_contains "$ERR" "--console_streams: 7 is out of range 0..3"
  expect_exit 2 "$ACCEL" launch -n 2 --tee 0:3,2:1 "${BEH[@]}"
  expect_contains "$ERR" "--tee: '0:3,2:1': local rank 2 does not exist (0..1)"
  expect_exit 2 "$ACCEL" launch -n 2 --redirects 1:x "${BEH[@]}"
  expect_contains "$ERR" "--redirects: '1:x': '1:x' is not LOCAL_RANK:MASK"
  expect_exit 2 "$ACCEL" launch -n 2 --python /nonexistent/python "$SCRATCH/x.py" 2>/dev/null || true
  touch "$SCRATCH/x.py"
  expect_exit 2 "$ACCEL" launch -n 2 --python /nonexistent/python "$SCRATCH/x.py"
  expect_contains "$ERR" "python interpreter '/nonexistent/python' not found"
  expect_exit 2 "$ACCEL" launch
  expect_contains "$ERR" "no training script given"
  # A rank that dies importing torch: the summary names an interpreter here that has it.
  /usr/bin/python3 -m venv --without-pip "$SCRATCH/venv"
  echo "import torch" >"$SCRATCH/needs_torch.py"
  expect_exit 1 "$ACCEL" launch -n 2 --python "$SCRATCH/venv/bin/python3" "$SCRATCH/needs_torch.py"
  expect_contains "$ERR" "No module named 'torch'"
  expect_contains "$ERR" "hint: "
  expect_contains "$ERR" " has torch "
  expect_contains "$ERR" "(${SCRATCH}/venv/bin/python3 is ${SCRATCH}/venv/bin/python3, without torch)"
  [[ -z "$(ls "$OUT_DIR")" ]] || fail "something was spawned: $(ls "$OUT_DIR")"
  ;;
store_python_client)
  expect_exit 0 "$ACCEL" launch "${PYARGS[@]}" -n 2 "$W/store_client.py"
  expect_contains "$OUT" "[rank 0] rank 0 store ok"
  expect_contains "$OUT" "[rank 1] rank 1 read rank 0's key"
  ;;
restart_gloo)
  expect_exit 0 "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 --max_restarts 1 --term_timeout 2 "$W/restart_gloo.py"
  expect_contains "$ERR" "attempt 0 failed (rank 1: exit code 3); restarting (1 of 1)"
  expect_contains "$OUT" "[rank 0] attempt 1 rank 0 allreduce=4"
  expect_contains "$OUT" "[rank 1] attempt 1 rank 1 allreduce=4"
  ;;
culprit_first_to_end)
  # Two ranks end while the agent is stopped (SIGSTOP), rank 1 first: their SIGCHLDs merge into
  # one, and the culprit is still the first to end (rank 1, exit 3), not the lower rank.
  mkdir -p "$OUT_DIR"
  "$ACCEL" launch -n 2 --term_timeout 1 /bin/sh -c \
    'echo $$ >"$OUT_DIR/pid.$RANK"; while [ ! -e "$OUT_DIR/go.$RANK" ]; do sleep 0.01; done; exit $((RANK * 2 + 1))' \
    >"$SCRATCH/agent.out" 2>"$SCRATCH/agent.err" &
  agent=$!
  wait_for_file() { for _ in $(seq 1 500); do [[ -e $1 ]] && return 0; sleep 0.01; done; fail "no $1"; }
  zombie() { for _ in $(seq 1 500); do [[ $(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) == Z ]] && return 0; sleep 0.01; done; fail "pid $1 did not end"; }
  wait_for_file "$OUT_DIR/pid.0"; wait_for_file "$OUT_DIR/pid.1"
  kill -STOP $agent
  touch "$OUT_DIR/go.1"; zombie "$(cat "$OUT_DIR/pid.1")"
  touch "$OUT_DIR/go.0"; zombie "$(cat "$OUT_DIR/pid.0")"
  kill -CONT $agent
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 3 ]] || fail "the job exited $rc (want 3, rank 1's code): $(cat "$SCRATCH/agent.err")"
  expect_contains "$(cat "$SCRATCH/agent.err")" "culprit: rank 1"
  ;;
duplicate_filters)
  # torch 2.12's --duplicate_stdout_filters under accel run: teed lines that match, every rank,
  # in attempt_0/filtered_stdout.log with torchrun's "[<role><local rank>]:" prefix.
  expect_exit 0 "$ACCEL" run --nproc_per_node 2 --tee 1 --log_dir "$SCRATCH/logs" \
    --duplicate_stdout_filters "loss,acc" /bin/sh -c 'echo "rank $RANK loss 0.$RANK"; echo "rank $RANK other"'
  run=$(run_dir_in "$SCRATCH/logs")
  filtered=$(sort "$run/attempt_0/filtered_stdout.log")
  [[ $filtered == $'[default0]:rank 0 loss 0.0\n[default1]:rank 1 loss 0.1' ]] || fail "filtered_stdout.log: $filtered"
  expect_contains "$OUT" "[rank 1] rank 1 other"
  ;;
no_blind_retry)
  # A crash at import repeats itself: after two identical attempts the agent stops restarting.
  # (Rank 0 crashes; rank 1 waits, so the culprit is the same rank in every attempt.)
  cat >"$SCRATCH/crash.py" <<'PY'
import os, time
if os.environ["RANK"] == "0":
    import accel_no_such_module_xyz  # noqa: F401
time.sleep(60)
PY
  expect_exit 1 "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 --max_restarts 3 --term_timeout 1 "$SCRATCH/crash.py"
  expect_contains "$ERR" "attempt 0 failed (rank 0: exit code 1); restarting (1 of 3)"
  expect_contains "$ERR" "not restarting: attempts 0 and 1 failed the same way before any rank wrote to stdout (no heartbeats: the agent sees no steps) (rank 0: exit code 1; last stderr line: ModuleNotFoundError: No module named 'accel_no_such_module_xyz'); a restart would fail again (--retry_identical_failures retries)"
  [[ "$ERR" != *"restarting (2 of 3)"* ]] || fail "a third attempt ran: $ERR"
  # --retry_identical_failures spends the whole budget.
  expect_exit 1 "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 --max_restarts 2 --term_timeout 1 \
    --retry_identical_failures "$SCRATCH/crash.py"
  expect_contains "$ERR" "restarting (2 of 2)"
  expect_contains "$ERR" "not restarting: the job's 2 restarts are spent"
  [[ "$ERR" != *"the same way"* ]] || fail "stopped although asked to retry: $ERR"
  # Every rank crashes at import: whichever ends first is the culprit, rank 0 in one attempt
  # and rank 1 in the next maybe — the same failure all the same, not tried a third time.
  cat >"$SCRATCH/all_crash.py" <<'PY'
import accel_no_such_module_xyz  # noqa: F401
PY
  expect_exit 1 "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 --max_restarts 5 "$SCRATCH/all_crash.py"
  expect_contains "$ERR" "restarting (1 of 5)"
  expect_contains "$ERR" "not restarting: attempts 0 and 1 failed the same way before any rank wrote to stdout (no heartbeats: the agent sees no steps) (rank "
  [[ "$ERR" != *"restarting (2 of 5)"* ]] || fail "a third attempt ran: $ERR"
  expect_contains "$ERR" "restarts used: 1"
  # A plain script (no heartbeats) that trains and prints, then crashes at step 10 every time:
  # the agent cannot tell that no step completed, so the budget decides, as under torchrun.
  cat >"$SCRATCH/step10.py" <<'PY'
import os, sys
for step in range(10):
    print(f"step {step} loss 0.3578", flush=True)
if os.environ["RANK"] == "1":
    sys.exit("RuntimeError: boom at step 10")
PY
  expect_exit 1 "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 --max_restarts 3 "$SCRATCH/step10.py"
  expect_contains "$ERR" "restarting (3 of 3)"
  expect_contains "$ERR" "not restarting: the job's 3 restarts are spent"
  [[ "$ERR" != *"the same way"* ]] || fail "stopped by the same-failure rule: $ERR"
  # A failure of the first attempt only is restarted, and the job succeeds.
  cat >"$SCRATCH/first.py" <<'PY'
import os, sys
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["RANK"] == "1":
    sys.exit("first attempt fails")
PY
  expect_exit 0 "$ACCEL" launch "${PYARGS[@]}" --cpu -n 2 --max_restarts 3 "$SCRATCH/first.py"
  expect_contains "$ERR" "attempt 0 failed (rank 1: exit code 1); restarting (1 of 3)"
  [[ "$ERR" != *"not restarting"* ]] || fail "$ERR"
  ;;
rank0_exits_first)
  expect_exit 0 "$ACCEL" launch "${PYARGS[@]}" --cpu -n 3 "$W/rank0_exits_first.py"
  expect_contains "$OUT" "[rank 0] rank 0 leaving"
  expect_contains "$OUT" "[rank 1] rank 1 used the store after rank 0 left"
  expect_contains "$OUT" "[rank 2] rank 2 used the store after rank 0 left"
  ;;
multi_agent)
  # Three agents on one machine form one job of 3 x 2 ranks through machine 0's store.
  common=(--num_machines 3 --main_process_ip 127.0.0.1 -n 6 --cpu "${PYARGS[@]}")
  start_master "$SCRATCH/m0.out" "${common[@]}" --machine_rank 0 "$W/ddp_gloo.py"
  for r in 2 1; do
    "$ACCEL" launch "${common[@]}" --main_process_port "$PORT" --machine_rank $r "$W/ddp_gloo.py" >"$SCRATCH/m$r.out" 2>&1 &
    eval "pid$r=\$!"
  done
  set +e; wait $MASTER; r0=$?; wait $pid1; r1=$?; wait $pid2; r2=$?; set -e
  all=$(cat "$SCRATCH/m0.out" "$SCRATCH/m1.out" "$SCRATCH/m2.out")
  [[ $r0 == 0 && $r1 == 0 && $r2 == 0 ]] || fail "agents exited $r0 $r1 $r2: $all"
  for rank in 0 1 2 3 4 5; do expect_contains "$all" "[rank $rank] ok rank=$rank world=6 allreduce=21"; done
  expect_contains "$(cat "$SCRATCH/m0.out")" "machine 0 of 3: ranks 0–1 of 6"
  expect_contains "$(cat "$SCRATCH/m2.out")" "machine 2 of 3: ranks 4–5 of 6"
  # Environment of a non-master machine; the master named by a host name.
  start_master "$SCRATCH/m0.out" --num_machines 2 --main_process_ip localhost -n 4 --machine_rank 0 "$W/env_dump.sh"
  expect_exit 0 "$ACCEL" launch --num_machines 2 --main_process_ip localhost --main_process_port "$PORT" -n 4 \
    --machine_rank 1 "$W/env_dump.sh"
  wait $MASTER
  expect_contains "$(cat "$SCRATCH/m0.out")" "workers use GLOO_SOCKET_IFNAME=lo"
  check_env 3 RANK=3 LOCAL_RANK=1 WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=1 GROUP_WORLD_SIZE=2 \
    MASTER_ADDR=localhost MASTER_PORT=$PORT TORCHELASTIC_RUN_ID=accel-localhost-$PORT GLOO_SOCKET_IFNAME=lo
  # torchrun's spellings join the same job: machine 1 as `accel run --nnodes 2 --node_rank 1
  # --rdzv_endpoint HOST:PORT --nproc_per_node 2` (no accelerate variables there).
  rm -f "$OUT_DIR"/rank_*
  start_master "$SCRATCH/m0.out" --num_machines 2 --main_process_ip localhost -n 4 --machine_rank 0 "$W/env_dump.sh"
  expect_exit 0 "$ACCEL" run --nnodes 2 --node-rank 1 --rdzv_endpoint "localhost:$PORT" --nproc_per_node 2 \
    --local_addr 127.0.0.1 "$W/env_dump.sh"
  wait $MASTER
  check_env 2 RANK=2 LOCAL_RANK=0 WORLD_SIZE=4 GROUP_RANK=1 MASTER_ADDR=localhost MASTER_PORT=$PORT
  check_env 1 RANK=1 GROUP_RANK=0 ACCELERATE_MIXED_PRECISION=no
  [[ -z "$(env_of 3 ACCELERATE_MIXED_PRECISION)" ]] || fail "accel run gave accelerate's variables"
  ;;
rdzv_id_mismatch)
  # Job B's machine reaches job A's store (the same endpoint, another --rdzv_id): it is told
  # which job the store serves and which it is, and joins nothing; job A's machine 0 then times
  # out alone (it never counted B's agent).
  start_master "$SCRATCH/a0.out" --num_machines 2 --main_process_ip 127.0.0.1 -n 2 --cpu \
    --machine_rank 0 --rdzv_id jobA --rdzv_timeout 5 /bin/true
  expect_exit 2 "$ACCEL" run --nnodes 2 --node_rank 1 --rdzv_endpoint "127.0.0.1:$PORT" \
    --nproc_per_node 1 --rdzv_id jobB --rdzv_timeout 5 /bin/true
  expect_contains "$ERR" "the store at 127.0.0.1:$PORT serves job 'jobA', but this machine's job is 'jobB' (--rdzv_id): two jobs on one endpoint"
  [[ "$ERR" != *"machine 1 of 2"* ]] || fail "job B's machine joined job A: $ERR"
  set +e; wait $MASTER; r0=$?; set -e
  [[ $r0 != 0 ]] || fail "job A formed with job B's machine: $(cat "$SCRATCH/a0.out")"
  expect_contains "$(cat "$SCRATCH/a0.out")" "1/2 machines joined"
  # The same id on both machines meets as before. Machine 1 finishes first and its agent leaves
  # while machine 0's worker still runs: a machine that said it finished is not lost.
  start_master "$SCRATCH/a0.out" --num_machines 2 --main_process_ip 127.0.0.1 -n 2 --cpu \
    --machine_rank 0 --rdzv_id jobA /bin/sh -c 'sleep 1.5'
  expect_exit 0 "$ACCEL" run --nnodes 2 --node_rank 1 --rdzv_endpoint "127.0.0.1:$PORT" \
    --nproc_per_node 1 --rdzv_id jobA /bin/true
  expect_contains "$ERR" "machine 1 of 2"
  set +e; wait $MASTER; r0=$?; set -e
  [[ $r0 == 0 ]] || fail "machine 0 failed after machine 1 finished first: $(cat "$SCRATCH/a0.out")"
  ;;
c10d_arrival)
  # torchrun's elastic command line, the same on every machine and without --node_rank: the agent
  # holding the endpoint's port hosts the rendezvous as machine 0 (the first, told so by is_host=1
  # so that a port someone else holds is an error start_master retries); the others find the port
  # taken on this host, join, and are ranked in the order they join. Each joiner starts only once
  # the one before it has registered (its slot's key in the store), so that order is known.
  cat >"$SCRATCH/arrival.py" <<'PY'
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(t)
print(f"ok rank={os.environ['RANK']} group={os.environ['GROUP_RANK']} world={dist.get_world_size()} sum={t.item():.0f}",
      flush=True)
PY
  wait_registered() {  # wait_registered SLOT: the agent of registration slot SLOT is in the store
    "$RDZV_WAIT" "$PORT" elastic-job 0 "$1"
  }
  export PYTHON_EXEC=/usr/bin/python3
  elastic=(--nnodes 3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_id elastic-job --rdzv_timeout 60)
  start_master "$SCRATCH/m0.out" "${elastic[@]}" --rdzv_endpoint 127.0.0.1 --rdzv_conf is_host=1 "$SCRATCH/arrival.py"
  wait_registered 0
  "$ACCEL" run "${elastic[@]}" --rdzv_endpoint "127.0.0.1:$PORT" "$SCRATCH/arrival.py" >"$SCRATCH/j1.out" 2>&1 &
  j1=$!
  wait_registered 1
  "$ACCEL" launch "${elastic[@]}" --rdzv_endpoint "127.0.0.1:$PORT" "$SCRATCH/arrival.py" >"$SCRATCH/j2.out" 2>&1 &
  j2=$!
  set +e; wait $MASTER; r0=$?; wait $j1; r1=$?; wait $j2; r2=$?; set -e
  m0=$(cat "$SCRATCH/m0.out"); o1=$(cat "$SCRATCH/j1.out"); o2=$(cat "$SCRATCH/j2.out")
  [[ $r0 == 0 && $r1 == 0 && $r2 == 0 ]] || fail "agents exited $r0 $r1 $r2: $m0
--- first joiner:
$o1
--- second joiner:
$o2"
  expect_contains "$m0" "this machine hosts the rendezvous at 127.0.0.1:$PORT (is_host in --rdzv_conf) and is machine 0"
  expect_contains "$m0" "machine 0 of 3: ranks 0–1 of 6"
  for o in "$o1" "$o2"; do
    expect_contains "$o" "port $PORT is taken here: another agent on this machine hosts the rendezvous; joining it"
    [[ $o != *"hosts the rendezvous at"* ]] || fail "a joiner also said it hosts: $o"
  done
  expect_contains "$o1" "machine 1 of 3: ranks 2–3 of 6"
  expect_contains "$o2" "machine 2 of 3: ranks 4–5 of 6"
  for r in 0 1; do expect_contains "$m0" "[rank $r] ok rank=$r group=0 world=6 sum=21"; done
  for r in 2 3; do expect_contains "$o1" "[rank $r] ok rank=$r group=1 world=6 sum=21"; done
  for r in 4 5; do expect_contains "$o2" "[rank $r] ok rank=$r group=2 world=6 sum=21"; done
  # The plan before the rendezvous: the endpoint's host is machine 0; elsewhere the rank is open.
  expect_exit 0 "$ACCEL" run --dry_run --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1 /bin/true
  expect_contains "$OUT" "this machine hosts the rendezvous at 127.0.0.1:29400 (the endpoint is this machine)"
  expect_contains "$OUT" "rank 1 (local rank 1)"
  expect_exit 0 "$ACCEL" run --dry_run --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 192.0.2.7:29400 \
    /bin/true
  expect_contains "$OUT" "this machine joins the rendezvous at 192.0.2.7:29400; its machine rank is the order in which it joins"
  expect_contains "$OUT" "the dry run shows it as machine 1"
  expect_contains "$OUT" "rank 3 (local rank 1)"
  expect_contains "$OUT" "GROUP_RANK=1"
  ;;
torchrun_entry)
  # A link named torchrun is torchrun's drop-in (accel run): its flags, its defaults, PET_* variables.
  ln -s "$(readlink -f "$ACCEL")" "$SCRATCH/torchrun"
  expect_exit 0 "$SCRATCH/torchrun" --standalone --nproc-per-node=2 "$W/env_dump.sh" a
  check_env 1 RANK=1 LOCAL_RANK=1 WORLD_SIZE=2 OMP_NUM_THREADS=1 TORCHELASTIC_USE_AGENT_STORE=True
  [[ -z "$(env_of 0 ACCELERATE_MIXED_PRECISION)" ]] || fail "torchrun's entry gave accelerate's variables"
  expect_exit 2 "$SCRATCH/torchrun" --num_processes 2 "$W/env_dump.sh"
  expect_contains "$ERR" "unknown flag --num_processes: torchrun has no such flag (accel launch takes it)"
  rm -f "$OUT_DIR"/rank_*
  PET_NPROC_PER_NODE=3 PET_RDZV_ID=pet-job expect_exit 0 "$ACCEL" run "$W/env_dump.sh"
  check_env 2 RANK=2 WORLD_SIZE=3 TORCHELASTIC_RUN_ID=pet-job
  expect_exit 0 "$SCRATCH/torchrun" --help
  expect_contains "$OUT" "--nproc_per_node"
  # One process under accel run still gets torchrun's variables; under accel launch it does not.
  rm -f "$OUT_DIR"/rank_*
  expect_exit 0 "$ACCEL" run "$W/env_dump.sh"
  check_env 0 RANK=0 WORLD_SIZE=1
  rm -f "$OUT_DIR"/rank_*
  expect_exit 0 "$ACCEL" launch "$W/env_dump.sh"
  [[ -f "$OUT_DIR/rank_.env" ]] && ! grep -q '^RANK=' "$OUT_DIR/rank_.env" || fail "accel launch's single process got RANK"
  # --nproc_per_node cpu: a rank per online CPU; --role names the workers' role (ROLE_NAME).
  rm -f "$OUT_DIR"/rank_*
  cpus=$(getconf _NPROCESSORS_ONLN)
  expect_exit 0 "$SCRATCH/torchrun" --nproc_per_node cpu --role trainer "$W/env_dump.sh"
  [[ $(ls "$OUT_DIR"/rank_*.env | wc -l) == "$cpus" ]] || fail "want $cpus ranks, have: $(ls "$OUT_DIR")"
  check_env $((cpus - 1)) RANK=$((cpus - 1)) WORLD_SIZE=$cpus LOCAL_WORLD_SIZE=$cpus ROLE_NAME=trainer \
    ROLE_WORLD_SIZE=$cpus ROLE_RANK=$((cpus - 1))
  # --run_path: a script without the .py suffix (and not executable) still runs under python.
  printf 'import os, sys\nopen(os.environ["OUT_DIR"] + "/ran." + os.environ["RANK"], "w").write(" ".join(sys.argv[1:]))\n' \
    >"$SCRATCH/train_script"
  PYTHON_EXEC=/usr/bin/python3 expect_exit 0 "$SCRATCH/torchrun" --nproc_per_node 2 --run_path "$SCRATCH/train_script" x y
  [[ $(cat "$OUT_DIR/ran.0") == "x y" && $(cat "$OUT_DIR/ran.1") == "x y" ]] || fail "--run_path: $(ls "$OUT_DIR")"
  expect_exit 2 "$SCRATCH/torchrun" --nproc_per_node 1 "$SCRATCH/train_script"
  expect_contains "$ERR" "training script '$SCRATCH/train_script' is not executable (chmod +x it, or give a .py file)"
  ;;
multi_machine_restart)
  # Restarts across machines: a failure anywhere stops every machine, all agents meet again in
  # a new round, and the budget is the job's — one count, the same TORCHELASTIC_RESTART_COUNT
  # everywhere, whichever machine failed.
  common=(--num_machines 2 --main_process_ip 127.0.0.1 -n 4 --cpu --max_restarts 2)
  run_two_machines() {  # BEHAVE_* in the environment; sets r0, r1, M0, M1
    start_master "$SCRATCH/m0.out" "${common[@]}" --machine_rank 0 "$@" "${BEH[@]}"
    set +e
    "$ACCEL" launch "${common[@]}" --main_process_port "$PORT" --machine_rank 1 "$@" "${BEH[@]}" >"$SCRATCH/m1.out" 2>&1
    r1=$?; wait $MASTER; r0=$?
    set -e
    M0=$(cat "$SCRATCH/m0.out") M1=$(cat "$SCRATCH/m1.out")
  }
  # Rank 3 (machine 1) fails in attempt 0: both machines restart once and finish. One count
  # everywhere: the notices' "1 of 2", TORCHELASTIC_RESTART_COUNT=1, both summary.json files.
  BEHAVE_DEFAULT=sleep-until-attempt:1 BEHAVE_3=fail-in-attempt:0:5 run_two_machines --log_dir "$SCRATCH/logsf"
  [[ $r0 == 0 && $r1 == 0 ]] || fail "agents exited $r0 $r1: $M0 $M1"
  for M in "$M0" "$M1"; do
    expect_contains "$M" "attempt 0 failed (rank 3 on machine 1 ($(hostname)) failed with exit code 5); restarting every machine (1 of 2 restarts, counted for the whole job)"
  done
  # Clearing the job's store between attempts is routine: nothing said.
  [[ $M0 != *"earlier attempts' workers left"* ]] || fail "the store's clearing was announced: $M0"
  expect_contains "$M1" "machine 1 of 2: ranks 2–3 of 4"
  for rank in 0 1 2 3; do [[ $(cat "$OUT_DIR/done.1.$rank") == "world=4 restart=1" ]] || fail "rank $rank: $(cat "$OUT_DIR/done.1.$rank" 2>&1)"; done
  [[ -z $(compgen -G "$OUT_DIR/done.0.*") ]] || fail "attempt 0 finished a rank: $(ls "$OUT_DIR")"
  # Both agents keep their run directories under the one --log_dir, each its own.
  for d in "$SCRATCH"/logsf/*/; do
    used=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["restarts_used"])' "$d/summary.json")
    [[ $used == 1 ]] || fail "restarts_used in $d: $used"
  done
  [[ $(compgen -G "$SCRATCH/logsf/*/summary.json" | wc -l) == 2 ]] || fail "summaries: $(ls "$SCRATCH/logsf")"
  expect_no_leftovers
  # One budget for the job: machine 0 fails attempt 0, machine 1 attempt 1, and with
  # --max_restarts 1 the job ends there on both (per-agent budgets would restart machine 1).
  rm -f "$OUT_DIR"/*
  common=(--num_machines 2 --main_process_ip 127.0.0.1 -n 4 --cpu --max_restarts 1)
  BEHAVE_DEFAULT=sleep-until-attempt:2 BEHAVE_1=fail-in-attempt:0:5 BEHAVE_3=fail-in-attempt:1:6 run_two_machines
  [[ $r0 == 6 && $r1 == 6 ]] || fail "agents exited $r0 $r1: $M0 $M1"
  for M in "$M0" "$M1"; do
    expect_contains "$M" "attempt 0 failed (rank 1 on machine 0 ($(hostname)) failed with exit code 5); restarting every machine (1 of 1 restarts"
    expect_contains "$M" "attempt 0 ("
    expect_contains "$M" "): rank 1 on machine 0 ($(hostname)) failed with exit code 5"
    expect_contains "$M" "): rank 3 on machine 1 ($(hostname)) failed with exit code 6"
    expect_contains "$M" "restarts used: 1"
    expect_contains "$M" "accel launch exits with 6"
  done
  expect_contains "$M0" "not restarting: the job's 1 restart is spent"
  expect_contains "$M1" "not restarting: the job's 1 restart is spent"
  expect_no_leftovers
  # No blind retries: rank 2 fails the same way at start-up twice; both agents stop there.
  rm -f "$OUT_DIR"/*
  common=(--num_machines 2 --main_process_ip 127.0.0.1 -n 4 --cpu --max_restarts 3)
  BEHAVE_DEFAULT=sleep BEHAVE_2=exit:3 run_two_machines
  [[ $r0 == 3 && $r1 == 3 ]] || fail "agents exited $r0 $r1: $M0 $M1"
  for M in "$M0" "$M1"; do
    expect_contains "$M" "not restarting: attempts 0 and 1 failed the same way before any rank wrote to stdout (no heartbeats: the agent sees no steps) (rank 2 on machine 1 ($(hostname)) failed with exit code 3; last stderr line: second line)"
    expect_contains "$M" "restarts used: 1"
  done
  expect_no_leftovers
  ;;
elastic_membership)
  # --nnodes MIN:MAX on loopback agents ranked by arrival. (1) Scale down: machine 2's agent is
  # SIGKILLed mid-job; the master misses its keep-alives (0.5 s x 3), every survivor stops its
  # workers, and the two re-form at once (they are all the group expects) as 2 x 2 ranks,
  # counting one restart. (2) Scale up: two machines start (the round closes 1 s after MIN
  # joined), a third arrives while they run: the group re-forms as 3 x 2 without counting a
  # restart; a fourth finds the group full and waits as a spare, and leaves when the job ends.
  wait_registered() {  # wait_registered ROUND SLOT: that registration is in the store
    "$RDZV_WAIT" "$PORT" none "$1" "$2"
  }
  # (1) closes when MAX (3) joined: torch's last call of 30 s never ends it first.
  conf=keep_alive_interval=0.5,keep_alive_max_attempt=3
  elastic=(--nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_timeout 60 --max_restarts 1)
  join_job() {  # join_job LOG [ARGS...]: another machine's agent, in the background; sets JOINED
    local log=$1; shift
    "$ACCEL" launch "${elastic[@]}" --rdzv_endpoint "127.0.0.1:$PORT" --rdzv_conf "$conf" "$@" "${BEH[@]}" >"$log" 2>&1 &
    JOINED=$!
  }
  # start_three LOG_DIR: the master (keeping its logs in LOG_DIR) and two machines joining it in
  # that order, their 6 workers of attempt 0 running; sets j1 and j2.
  start_three() {
    start_master "$SCRATCH/m0.out" "${elastic[@]}" --rdzv_endpoint 127.0.0.1 --rdzv_conf "is_host=1,$conf" \
      --log_dir "$1" "${BEH[@]}"
    wait_registered 0 0
    join_job "$SCRATCH/j1.out"; j1=$JOINED
    wait_registered 0 1
    join_job "$SCRATCH/j2.out"; j2=$JOINED
    wait_files 'ready.*' 6
  }
  export BEHAVE_DEFAULT=sleep-until-attempt:1
  start_three "$SCRATCH/logs1"
  start=$(date +%s%N)
  kill -KILL $j2
  wait_files 'done.1.*' 4
  echo "machine 2 SIGKILLed: the survivors' workers of the next round finished $((($(date +%s%N) - start) / 1000000)) ms later"
  set +e; wait $MASTER; r0=$?; wait $j1; r1=$?; set -e
  m0=$(cat "$SCRATCH/m0.out") o1=$(cat "$SCRATCH/j1.out")
  [[ $r0 == 0 && $r1 == 0 ]] || fail "survivors exited $r0 $r1: $m0
--- machine 1:
$o1"
  # Its agent's connection to the store closed: known at once, not after the keep-alive window.
  for M in "$m0" "$o1"; do
    expect_contains "$M" "machine 2 ($(hostname)): lost: its agent is gone (its connection to the job's store closed); stopping the workers here"
    expect_contains "$M" "going on without machine 2 ($(hostname)) lost (its agent is gone); restarting every machine (1 of 1 restarts, counted for the whole job)"
  done
  expect_contains "$m0" "machine 0 of 2: ranks 0–1 of 4"
  expect_contains "$o1" "machine 1 of 2: ranks 2–3 of 4"
  for rank in 0 1 2 3; do [[ $(cat "$OUT_DIR/done.1.$rank") == "world=4 restart=1" ]] || fail "rank $rank: $(cat "$OUT_DIR/done.1.$rank" 2>&1)"; done
  [[ ! -e $OUT_DIR/done.1.4 ]] || fail "a rank beyond the survivors ran"
  # One count everywhere: the notice's "1 of 1", TORCHELASTIC_RESTART_COUNT=1 (restart=1 above)
  # and summary.json's restarts_used, over 2 attempts.
  [[ $(summary_of "$SCRATCH/logs1" restarts_used) == 1 ]] || fail "restarts_used: $(summary_of "$SCRATCH/logs1" restarts_used)"
  [[ $(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))["attempts"]))' "$(run_dir_in "$SCRATCH/logs1")/summary.json") == 2 ]] || fail "attempts in summary.json"
  expect_no_leftovers
  # (2) Scale up, and a spare.
  rm -f "$OUT_DIR"/*
  conf=keep_alive_interval=0.5,keep_alive_max_attempt=3,last_call_timeout=1
  export BEHAVE_DEFAULT=sleep-while-world:4
  start_master "$SCRATCH/m0.out" "${elastic[@]}" --rdzv_endpoint 127.0.0.1 --rdzv_conf "is_host=1,$conf" \
    --log_dir "$SCRATCH/logs2" "${BEH[@]}"
  wait_registered 0 0
  join_job "$SCRATCH/j1.out"; j1=$JOINED
  wait_files 'ready.*' 4
  join_job "$SCRATCH/j2.out"; j2=$JOINED
  wait_files 'up.*' 6
  join_job "$SCRATCH/j3.out"; j3=$JOINED
  wait_registered 2 0  # the fourth waits for the round after the group of 3
  touch "$OUT_DIR/go"
  set +e; wait $MASTER; r0=$?; wait $j1; r1=$?; wait $j2; r2=$?; wait $j3; r3=$?; set -e
  m0=$(cat "$SCRATCH/m0.out") o2=$(cat "$SCRATCH/j2.out") o3=$(cat "$SCRATCH/j3.out")
  [[ $r0 == 0 && $r1 == 0 && $r2 == 0 && $r3 == 0 ]] || fail "agents exited $r0 $r1 $r2 $r3: $m0
--- machine 2:
$o2
--- spare:
$o3"
  expect_contains "$m0" "machine 0 of 2: ranks 0–1 of 4"
  # The cause once, where the workers are stopped; the decision adds only what follows.
  expect_contains "$m0" "a machine is waiting to join (the group has 2 of at most 3): the group re-forms to take it; stopping the workers here
accel: the group re-forms (not counted as a restart)"
  [[ $(grep -c "waiting to join" <<<"$m0") == 1 ]] || fail "the cause said more than once: $m0"
  expect_contains "$m0" "machine 0 of 3: ranks 0–1 of 6"
  # The round before's members keep their order (machine 1 stays machine 1); the newcomer, which
  # registered for the round first, follows them.
  expect_contains "$(cat "$SCRATCH/j1.out")" "machine 1 of 3: ranks 2–3 of 6"
  expect_contains "$o2" "machine 2 of 3: ranks 4–5 of 6"
  for rank in 0 1 2 3 4 5; do [[ $(cat "$OUT_DIR/done.0.$rank") == "world=6 restart=0" ]] || fail "rank $rank: $(cat "$OUT_DIR/done.0.$rank" 2>&1)"; done
  # "spare" only for a full group; a round that closed with room is joined in the next one.
  expect_contains "$o2" "round 0 closed with 2 of at most 3 machines just before this machine joined it: it joins the next round, which the group forms to take it"
  [[ $o2 != *spare* ]] || fail "called a spare while the group had room: $o2"
  expect_contains "$o3" "round 1 is full (3 machines, the most the job takes): this machine waits as a spare for a later round"
  expect_contains "$o3" "the job ended before this machine could join it: the job finished"
  # The group grew and a spare came: two attempts, no restart (restart=0 above, and here).
  [[ $(summary_of "$SCRATCH/logs2" restarts_used) == 0 ]] || fail "restarts_used: $(summary_of "$SCRATCH/logs2" restarts_used)"
  [[ $m0 != *"restarts used"* ]] || fail "$m0"
  # A machine that joins is no failure: attempt 0 regrouped, with no failure and no culprit.
  first=$(/usr/bin/python3 -c 'import json, sys; a = json.load(open(sys.argv[1]))["attempts"][0]
print(a["regrouped"], a["job_failure"], a["remote_culprit"], a["culprit"], sep="|")' "$(run_dir_in "$SCRATCH/logs2")/summary.json")
  [[ $first == "a machine is waiting to join (the group has 2 of at most 3): the group re-forms to take it|None|None|None" ]] || fail "attempt 0 in summary.json: $first"
  expect_contains "$m0" "a machine is waiting to join (the group has 2 of at most 3): the group re-forms to take it; stopping the workers here"
  expect_no_leftovers
  # (3) A machine that joins and dies before the round closes (--nnodes 2:4, a last call of
  # 8 s, long enough for this script's python3 to see the third registration): the round
  # closes at the last call with the two that are there — no wait for the rendezvous timeout,
  # no restart.
  elastic=(--nnodes 2:4 --nproc_per_node 2 --rdzv_backend c10d --rdzv_timeout 60 --max_restarts 1)
  conf=last_call_timeout=8
  start_master "$SCRATCH/m0.out" "${elastic[@]}" --rdzv_endpoint 127.0.0.1 --rdzv_conf "is_host=1,$conf" /bin/true
  wait_registered 0 0
  "$ACCEL" launch "${elastic[@]}" --rdzv_endpoint "127.0.0.1:$PORT" --rdzv_conf "$conf" /bin/true >"$SCRATCH/j1.out" 2>&1 &
  j1=$!
  wait_registered 0 1
  "$ACCEL" launch "${elastic[@]}" --rdzv_endpoint "127.0.0.1:$PORT" --rdzv_conf "$conf" /bin/true >"$SCRATCH/j2.out" 2>&1 &
  j2=$!
  wait_registered 0 2
  start=$(date +%s%N)
  kill -KILL $j2
  set +e; wait $MASTER; r0=$?; wait $j1; r1=$?; set -e
  took=$((($(date +%s%N) - start) / 1000000))
  m0=$(cat "$SCRATCH/m0.out")
  [[ $r0 == 0 && $r1 == 0 ]] || fail "agents exited $r0 $r1: $m0"
  expect_contains "$m0" "machine 0 of 2: ranks 0–1 of 4"
  expect_contains "$(cat "$SCRATCH/j1.out")" "machine 1 of 2: ranks 2–3 of 4"
  [[ $m0 != *restart* ]] || fail "a restart for a machine that never ran: $m0"
  ((took < 30000)) || fail "the job took $took ms after the joined machine died"
  echo "a machine that joined died: the job of the two others ended $took ms later"
  # (4) A spare enters after a loss: three machines (MAX) run, a fourth waits as a spare; machine
  # 2 is SIGKILLed and the group re-forms with the spare, counting one restart — the spare's
  # workers get TORCHELASTIC_RESTART_COUNT=1 and its summary.json says 1, as the master's does.
  rm -f "$OUT_DIR"/*
  elastic=(--nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_timeout 60 --max_restarts 1)
  conf=keep_alive_interval=0.5,keep_alive_max_attempt=3
  export BEHAVE_DEFAULT=sleep-until-attempt:1
  start_three "$SCRATCH/logs4"
  join_job "$SCRATCH/j3.out" --log_dir "$SCRATCH/logs4s"; j3=$JOINED
  wait_registered 1 0  # the spare waits for round 1
  kill -KILL $j2
  set +e; wait $MASTER; r0=$?; wait $j1; r1=$?; wait $j3; r3=$?; set -e
  m0=$(cat "$SCRATCH/m0.out") o3=$(cat "$SCRATCH/j3.out")
  [[ $r0 == 0 && $r1 == 0 && $r3 == 0 ]] || fail "agents exited $r0 $r1 $r3: $m0
--- spare:
$o3"
  expect_contains "$o3" "round 0 is full (3 machines, the most the job takes): this machine waits as a spare for a later round"
  expect_contains "$m0" "restarting every machine (1 of 1 restarts, counted for the whole job)"
  expect_contains "$m0" "machine 0 of 3: ranks 0–1 of 6"
  expect_contains "$o3" "of 3: ranks"
  for rank in 0 1 2 3 4 5; do [[ $(cat "$OUT_DIR/done.1.$rank") == "world=6 restart=1" ]] || fail "rank $rank: $(cat "$OUT_DIR/done.1.$rank" 2>&1)"; done
  [[ $(summary_of "$SCRATCH/logs4" restarts_used) == 1 ]] || fail "master's restarts_used: $(summary_of "$SCRATCH/logs4" restarts_used)"
  [[ $(summary_of "$SCRATCH/logs4s" restarts_used) == 1 ]] || fail "the spare's restarts_used: $(summary_of "$SCRATCH/logs4s" restarts_used)"
  expect_no_leftovers
  # (5) A spare that dies while it waits is no member of the next round: as (4), but the spare's
  # agent is SIGKILLed before machine 2. The survivors re-form as 2 x 2 at once — with a last
  # call of 60 s, counting the dead spare would leave the round waiting for it.
  rm -f "$OUT_DIR"/*
  conf=keep_alive_interval=0.5,keep_alive_max_attempt=3,last_call_timeout=60
  start_three "$SCRATCH/logs5"
  join_job "$SCRATCH/j3.out"; j3=$JOINED
  wait_registered 1 0
  kill -KILL $j3
  wait $j3 || true
  start=$(date +%s%N)
  kill -KILL $j2
  set +e; wait $MASTER; r0=$?; wait $j1; r1=$?; set -e
  took=$((($(date +%s%N) - start) / 1000000))
  m0=$(cat "$SCRATCH/m0.out")
  [[ $r0 == 0 && $r1 == 0 ]] || fail "survivors exited $r0 $r1: $m0"
  expect_contains "$m0" "machine 0 of 2: ranks 0–1 of 4"
  expect_contains "$m0" "restarting every machine (1 of 1 restarts, counted for the whole job)"
  for rank in 0 1 2 3; do [[ $(cat "$OUT_DIR/done.1.$rank") == "world=4 restart=1" ]] || fail "rank $rank: $(cat "$OUT_DIR/done.1.$rank" 2>&1)"; done
  ((took < 30000)) || fail "the survivors took $took ms: the dead spare was waited for"
  echo "a spare died, then machine 2: the survivors' job ended $took ms after machine 2's kill"
  expect_no_leftovers
  ;;
multi_machine_failure)
  # Rank 3 on machine 1 fails while every other rank runs: both machines stop, both name it,
  # both agents exit with its code.
  common=(--num_machines 2 --main_process_ip 127.0.0.1 -n 4 --cpu)
  BEHAVE_DEFAULT=ready-sleep BEHAVE_3=exit-when-ready:7 start_master "$SCRATCH/m0.out" "${common[@]}" --machine_rank 0 "${BEH[@]}"
  BEHAVE_DEFAULT=ready-sleep BEHAVE_3=exit-when-ready:7 expect_exit 7 \
    "$ACCEL" launch "${common[@]}" --main_process_port "$PORT" --machine_rank 1 "${BEH[@]}"
  M1="$OUT$ERR"
  set +e; wait $MASTER; r0=$?; set -e
  ERR=$(cat "$SCRATCH/m0.out")
  [[ $r0 == 7 ]] || fail "machine 0's agent exited $r0: $ERR"
  expect_contains "$ERR" "rank 3 on machine 1 ($(hostname)) failed with exit code 7; stopping the workers here"
  expect_contains "$ERR" "culprit: rank 3 on machine 1 ($(hostname)), local rank 1, pid"
  expect_contains "$ERR" "    | rank 3 failing"
  expect_contains "$ERR" "stopped by the agent (collateral): ranks 0, 1"
  expect_contains "$ERR" "accel launch exits with 7"
  expect_contains "$M1" "culprit: rank 3 (local rank 1, pid"
  expect_contains "$M1" "first to fail in the job, exit code 7"
  expect_contains "$M1" "the agents of the other machines were told to stop their workers"
  expect_contains "$M1" "stopped by the agent (collateral): rank 2"
  expect_no_leftovers
  # The master agent killed outright: the other machine loses its store and stops its workers.
  rm -f "$OUT_DIR"/*
  BEHAVE_DEFAULT=ready-sleep start_master /dev/null "${common[@]}" --machine_rank 0 "${BEH[@]}"
  BEHAVE_DEFAULT=ready-sleep "$ACCEL" launch "${common[@]}" --main_process_port "$PORT" --machine_rank 1 "${BEH[@]}" \
    >"$SCRATCH/m1.out" 2>&1 &
  m1=$!
  wait_files 'ready.*' 4
  kill -KILL $MASTER
  set +e; wait $m1; r1=$?; set -e
  M1=$(cat "$SCRATCH/m1.out")
  [[ $r1 == 1 ]] || fail "machine 1's agent exited $r1 after losing the master: $M1"
  expect_contains "$M1" "culprit: machine 0 ($(hostname)): lost contact with the master agent's store at 127.0.0.1:$PORT"
  expect_no_leftovers
  # A machine that finishes long after the master (beyond --rdzv_timeout) still has its store:
  # the master waits while the other agents live.
  start_master "$SCRATCH/m0.out" "${common[@]}" --rdzv_timeout 2 --machine_rank 0 "${BEH[@]}"
  BEHAVE_2=ok-after:3 BEHAVE_3=ok-after:3 expect_exit 0 \
    "$ACCEL" launch "${common[@]}" --main_process_port "$PORT" --rdzv_timeout 2 --machine_rank 1 "${BEH[@]}"
  set +e; wait $MASTER; r0=$?; set -e
  [[ $r0 == 0 ]] || fail "machine 0 exited $r0: $(cat "$SCRATCH/m0.out")"
  [[ "$(cat "$SCRATCH/m0.out")" != *"stopping the job's store although"* ]] || fail "the master did not wait: $(cat "$SCRATCH/m0.out")"
  # The master exits when it says it exits: its summary comes at once, but machine 1 needs its
  # --term_timeout (4 s) to stop a rank that ignores SIGTERM, so the master says why it waits, and
  # "accel launch exits with 5" is its last line but the rule, written when it goes.
  rm -f "$OUT_DIR"/*
  BEHAVE_DEFAULT=ready-sleep BEHAVE_0=exit-when-ready:5 start_master "$SCRATCH/m0.out" "${common[@]}" --term_timeout 4 --machine_rank 0 "${BEH[@]}"
  BEHAVE_DEFAULT=sleep-ignore-term expect_exit 5 \
    "$ACCEL" launch "${common[@]}" --main_process_port "$PORT" --term_timeout 4 --machine_rank 1 "${BEH[@]}"
  set +e; wait $MASTER; r0=$?; set -e
  m0=$(cat "$SCRATCH/m0.out")
  [[ $r0 == 5 ]] || fail "machine 0 exited $r0: $m0"
  waited=$(grep -n "1/2 machines reported their workers finished: this machine keeps the job's store up for the others, at most" <<<"$m0" | cut -d: -f1)
  exits=$(grep -n "accel launch exits with 5" <<<"$m0" | cut -d: -f1)
  [[ -n $waited && -n $exits ]] || fail "the master did not say why it waits, or how it exits: $m0"
  ((waited < exits)) || fail "the master said it exits before it waited: $m0"
  [[ $(tail -n 2 <<<"$m0" | head -n 1) == "accel launch exits with 5" ]] || fail "the master wrote after its exit line: $m0"
  expect_no_leftovers
  ;;
rendezvous_timeout)
  start_master "$SCRATCH/m0.out" --num_machines 3 --machine_rank 0 --main_process_ip 127.0.0.1 -n 3 --rdzv_timeout 1 "${BEH[@]}"
  set +e; wait $MASTER; r0=$?; set -e
  [[ $r0 == 2 ]] || fail "exit $r0 (want 2): $(cat "$SCRATCH/m0.out")"
  expect_contains "$(cat "$SCRATCH/m0.out")" "rendezvous at 127.0.0.1:$PORT timed out after 1 s: 1/3 machines joined; waiting for machine_rank 1, 2"
  # A machine whose master never comes: the error names the address. (The port is held, bound
  # but not listening, by a process of the test's: connections to it are refused.)
  $PY -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1], flush=True); time.sleep(600)' >"$SCRATCH/held" &
  holder=$!
  until [[ -s "$SCRATCH/held" ]]; do sleep 0.02; done
  held=$(cat "$SCRATCH/held")
  expect_exit 2 "$ACCEL" launch --num_machines 2 --machine_rank 1 --main_process_ip 127.0.0.1 \
    --main_process_port "$held" -n 2 --rdzv_timeout 1 "${BEH[@]}"
  expect_contains "$ERR" "cannot reach the master agent (machine_rank 0) at 127.0.0.1:$held from local interface lo (127.0.0.1): Connection refused (tried for 1 s"
  expect_contains "$ERR" "is --main_process_ip an address the other machines can reach?"
  # The same with torchrun's flags: the error names the flag the user gave.
  expect_exit 2 "$ACCEL" run --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$held" --rdzv_conf is_host=0 --rdzv_timeout 1 /bin/true
  kill $holder
  expect_contains "$ERR" "Connection refused (tried for 1 s; is machine 0's agent running, and is --rdzv_endpoint an address the other machines can reach?)"
  # An endpoint where another kind of server answers (an HTTP server's 400, then it closes): the
  # error names the endpoint and its flag.
  $PY -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8); print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); c.recv(4096)
    c.sendall(b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n"); c.close()' >"$SCRATCH/http" &
  server=$!
  until [[ -s "$SCRATCH/http" ]]; do sleep 0.02; done
  expect_exit 2 "$ACCEL" run --nnodes 2 --nproc_per_node 1 --rdzv_backend c10d \
    --rdzv_endpoint "127.0.0.1:$(cat "$SCRATCH/http")" --rdzv_conf is_host=0 --rdzv_timeout 1 /bin/true
  kill $server
  expect_contains "$ERR" "cannot reach the master agent (machine_rank 0) at 127.0.0.1:$(cat "$SCRATCH/http") (--rdzv_endpoint): "
  [[ -z "$(ls "$OUT_DIR")" ]] || fail "workers started: $(ls "$OUT_DIR")"
  # SIGTERM (or Ctrl-C) while the agents wait for each other ends the agent at once.
  start_master /dev/null --num_machines 2 --machine_rank 0 --main_process_ip 127.0.0.1 -n 2 "${BEH[@]}"
  kill -TERM $MASTER
  for _ in $(seq 1 40); do [[ -e /proc/$MASTER ]] && [[ $(cut -d' ' -f3 /proc/$MASTER/stat) != Z ]] || break; sleep 0.05; done
  [[ $(cut -d' ' -f3 /proc/$MASTER/stat 2>/dev/null) =~ ^Z?$ ]] || { kill -9 $MASTER; fail "agent ignored SIGTERM during the rendezvous"; }
  # --nnodes 1:2 alone, a last call as long as the rendezvous timeout: MIN is met, so the round
  # closes at the last call (it failed "1/2 machines joined (1 needed)" at the timeout).
  start_master "$SCRATCH/m0.out" --nnodes 1:2 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1 \
    --rdzv_conf is_host=1,last_call_timeout=2 --rdzv_timeout 2 /bin/true
  set +e; wait $MASTER; r0=$?; set -e
  [[ $r0 == 0 ]] || fail "exit $r0 (want 0): $(cat "$SCRATCH/m0.out")"
  expect_contains "$(cat "$SCRATCH/m0.out")" "machine 0 of 1: rank 0 of 1"
  ;;
worker_stdin)
  # As under torchrun, a worker can read the agent's stdin (pdb, breakpoint()): global rank 0
  # only; the others read /dev/null.
  BEHAVE_DEFAULT=read-stdin expect_exit 0 "$ACCEL" launch -n 2 "${BEH[@]}" <<<"typed line"
  expect_contains "$OUT" "[rank 0] stdin=[typed line]"
  expect_contains "$OUT" "[rank 1] stdin=[]"
  ;;
no_leaked_fds)
  # Nothing of the agent's reaches a worker (ls in a worker sees 0 1 2 and its own directory),
  # even with descriptors the agent inherited without close-on-exec (7 here) and while the
  # store's thread runs.
  BEHAVE_DEFAULT=list-fds expect_exit 0 "$ACCEL" launch -n 2 "${BEH[@]}" 7</dev/null
  # The whole line: a leaked descriptor would follow ls's own 3 ("fds=0 1 2 3 7 ").
  for r in 0 1; do
    grep -Fxq "[rank $r] fds=0 1 2 3 " <<<"$OUT" || fail "rank $r sees descriptors of the agent's: $(grep -F "[rank $r] fds=" <<<"$OUT")"
  done
  # The guard keeps 0, 1, 2, its command pipe and its own pidfds of the two workers, nothing else.
  BEHAVE_DEFAULT=ready-sleep "$ACCEL" launch -n 2 "${BEH[@]}" >/dev/null 2>&1 7</dev/null &
  agent=$!
  wait_files 'ready.*' 2
  workers=" $(cat "$OUT_DIR"/pid.* | tr '\n' ' ') "
  guard=
  for child in $(cat /proc/$agent/task/*/children); do [[ $workers == *" $child "* ]] || guard=$child; done
  [[ -n $guard ]] || fail "no guard among the agent's children: $(cat /proc/$agent/task/*/children)"
  fds=$(for fd in $(ls /proc/$guard/fd | sort -n); do
    target=$(readlink /proc/$guard/fd/$fd); case $target in pipe:*) echo -n "pipe ";; anon_inode:\[pidfd\]) echo -n "pidfd ";; *) echo -n "$fd ";; esac
  done)
  [[ $(tr ' ' '\n' <<<"$fds" | sort | paste -sd' ') == " 0 1 2 pidfd pidfd pipe" ]] ||
    fail "the guard holds descriptors $fds: $(ls -l /proc/$guard/fd)"
  kill -TERM $agent; wait $agent || true
  expect_no_leftovers
  ;;
usr1_to_process)
  # SIGUSR1 goes to each worker process, not its group: a child of the worker that has no
  # handler (a DataLoader worker forked before one was installed) survives it.
  BEHAVE_DEFAULT=usr1-child "$ACCEL" launch -n 2 "${BEH[@]}" >/dev/null 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 2
  kill -USR1 $agent
  set +e; wait $agent; rc=$?; set -e
  [[ $rc == 0 ]] || fail "exit $rc after SIGUSR1: $(cat "$SCRATCH/e")"
  [[ -e $OUT_DIR/child-alive.0 && -e $OUT_DIR/child-alive.1 ]] || fail "SIGUSR1 reached the workers' children: $(ls "$OUT_DIR")"
  expect_no_leftovers
  ;;
no_stranger_killed)
  # A worker that exits early stays a zombie until the attempt ends, so its process-group id
  # cannot be given to a stranger that the end of the job would then SIGKILL. In a private pid
  # namespace, ns_last_pid steers the stranger's pid to the early worker's, which only an agent
  # that reaped the worker early lets it have.
  [[ $(id -u) == 0 ]] && command -v unshare >/dev/null || { echo "SKIPPED: needs root and unshare"; exit 77; }
  BEHAVE_DEFAULT=exec-sleep BEHAVE_1=ok unshare --pid --fork --mount-proc bash -c '
    "$0" launch -n 3 "$1" "$2" >/dev/null 2>&1 & agent=$!
    until [[ -e $OUT_DIR/ready.0 && -e $OUT_DIR/ready.2 && -s $OUT_DIR/pid.1 ]]; do sleep 0.01; done
    early=$(cat "$OUT_DIR/pid.1")
    until [[ ! -e /proc/$early || $(cut -d" " -f3 /proc/$early/stat) == Z ]]; do sleep 0.01; done
    echo $((early - 1)) >/proc/sys/kernel/ns_last_pid
    setsid sleep 1000 & stranger=$!
    until [[ $(cut -d" " -f5 /proc/$stranger/stat) == "$stranger" ]]; do sleep 0.01; done  # its own group
    echo "early=$early stranger=$stranger" >"$OUT_DIR/pids"
    kill -TERM $agent; wait $agent
    state=$(cut -d" " -f3 /proc/$stranger/stat 2>/dev/null)  # killed: a zombie, or reaped by bash
    [[ -n $state && $state != Z ]] && echo alive >"$OUT_DIR/stranger" || echo dead >"$OUT_DIR/stranger"
    kill -KILL $stranger 2>/dev/null; true' "$ACCEL" "${BEH[@]}"
  [[ $(cat "$OUT_DIR/stranger") == alive ]] || fail "the stranger was killed ($(cat "$OUT_DIR/pids"))"
  read -r e s <<<"$(sed 's/[a-z]*=//g' "$OUT_DIR/pids")"
  [[ $e != "$s" ]] || fail "the stranger got the early worker's pid $e: it had been reaped"
  ;;
console_blocked)
  # The agent's stdout is a pipe nobody reads (a paused terminal): supervision goes on. SIGTERM
  # is forwarded and the workers are SIGKILLed after --term_timeout while the console is still
  # stuck; once someone reads, the agent finishes with every line it had and the summary.
  mkfifo "$SCRATCH/console"
  exec 8<>"$SCRATCH/console"  # a reader that never reads: opening for writing does not block
  BEHAVE_DEFAULT=spam-ignore-term "$ACCEL" launch -n 2 --term_timeout 0.5 "${BEH[@]}" >"$SCRATCH/console" 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 2
  until grep -qs pipe_write /proc/$agent/task/*/wchan; do sleep 0.01; done  # its console is stuck
  kill -TERM $agent
  wait_files 'term.*' 2
  for pid in $(cat "$OUT_DIR"/pid.*); do
    for _ in $(seq 1 200); do [[ -e /proc/$pid ]] || break; sleep 0.05; done
    [[ ! -e /proc/$pid ]] || fail "worker $pid outlived --term_timeout while the console was stuck"
  done
  [[ -e /proc/$agent ]] || fail "the agent exited although its console was not read"
  cat "$SCRATCH/console" >"$SCRATCH/o" 8<&- &  # not a writer itself
  exec 8<&-
  set +e; wait $agent; rc=$?; set -e
  wait
  [[ $rc == 143 ]] || fail "exit $rc (want 143): $(cat "$SCRATCH/e")"
  expect_contains "$(cat "$SCRATCH/e")" "SIGKILL needed for ranks 0, 1"
  bad=$(grep -cvE '^\[rank [01]\] y{200}$' "$SCRATCH/o" || true)
  [[ $bad == 0 ]] || fail "$bad malformed console lines of $(wc -l <"$SCRATCH/o"), the first:
$(grep -nvE '^\[rank [01]\] y{200}$' "$SCRATCH/o" | head -3 | cut -c1-300 | cat -A)"
  ;;
store_limits)
  # --store_connection_input_limit reaches the job's store: a 2 x 40 MB compare_set passes under
  # the default (128M) and is cut off, with one line naming the limit, under 70M; bad sizes are
  # refused before anything starts.
  cat >"$SCRATCH/big.py" <<'PYEOF'
import os, sys, datetime
import torch.distributed as dist
store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), 1, False,
                      timeout=datetime.timedelta(seconds=30))
value = b"x" * (40 << 20)
try:
    store.compare_set("big", value, value)
    print("compare_set passed", flush=True)
except Exception as e:
    print("compare_set failed:", type(e).__name__, flush=True)
    sys.exit(3)
PYEOF
  # accel run (torchrun's drop-in) gives even one process the store's address; accel launch, as
  # accelerate, starts a single process without torchrun's variables.
  expect_exit 0 "$ACCEL" run "${PYARGS[@]}" --nproc_per_node 1 "$SCRATCH/big.py"
  expect_contains "$OUT" "[rank 0] compare_set passed"
  expect_exit 3 "$ACCEL" run "${PYARGS[@]}" --nproc_per_node 1 --store_connection_input_limit 70M "$SCRATCH/big.py"
  expect_contains "$OUT" "[rank 0] compare_set failed"
  expect_contains "$ERR" "bytes, over the limit of 73400320 bytes per connection"
  expect_exit 2 "$ACCEL" launch -n 1 --store_input_budget 1K "${BEH[@]}"
  expect_contains "$ERR" "--store_input_budget: 1024 bytes is less than one connection may hold"
  [[ -z "$(ls "$OUT_DIR")" ]] || fail "something was spawned: $(ls "$OUT_DIR")"
  ;;
cpu_affinity)
  # The agent runs on CPUs 0 and 1 (taskset), as on a 2-core machine; each worker reads its own
  # CPUs back with sched_getaffinity. Unpinned workers would see 0,1 everywhere.
  taskset -c 0,1 true 2>/dev/null || { echo "SKIPPED: needs taskset and CPUs 0 and 1"; exit 77; }
  unset OMP_NUM_THREADS
  AFF=("$W/affinity.py")
  cpus_of() { cat "$OUT_DIR/rank_$1.cpus"; }
  expect_exit 0 taskset -c 0,1 "$ACCEL" launch --cpu -n 2 --enable_cpu_affinity "${AFF[@]}"
  [[ "$(cpus_of 0)" == "0 1" && "$(cpus_of 1)" == "1 1" ]] || fail "pinned: rank 0 '$(cpus_of 0)', rank 1 '$(cpus_of 1)' (want CPU 0 and CPU 1, OMP_NUM_THREADS=1)"
  expect_contains "$ERR" "CPU affinity (CPUs 0-1 of this agent, "
  expect_contains "$ERR" "local rank 0 on CPUs 0 (OMP_NUM_THREADS=1); local rank 1 on CPUs 1 (OMP_NUM_THREADS=1)"
  [[ "$ERR" != *"OMP_NUM_THREADS was unset"* ]] || fail "the OMP_NUM_THREADS=1 notice although the cores decide: $ERR"
  # One rank: every CPU of the agent, and as many threads.
  rm -f "$OUT_DIR"/rank_*
  expect_exit 0 taskset -c 0,1 "$ACCEL" launch --cpu -n 1 --enable-cpu-affinity "${AFF[@]}"
  [[ "$(cpus_of 0)" == "0,1 2" ]] || fail "one rank: '$(cpus_of 0)' (want 0,1 and OMP_NUM_THREADS=2)"
  # Without the flag nothing is pinned.
  rm -f "$OUT_DIR"/rank_*
  expect_exit 0 taskset -c 0,1 "$ACCEL" launch --cpu -n 2 "${AFF[@]}"
  [[ "$(cpus_of 0)" == "0,1 1" && "$(cpus_of 1)" == "0,1 1" ]] || fail "unpinned: '$(cpus_of 0)' '$(cpus_of 1)'"
  [[ "$ERR" != *"CPU affinity"* ]] || fail "affinity notice without the flag: $ERR"
  # The config file's key does the same as the flag; the user's OMP_NUM_THREADS is kept.
  mkdir -p "$HF_HOME/accelerate"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\nenable_cpu_affinity: true\n' \
    >"$HF_HOME/accelerate/default_config.yaml"
  rm -f "$OUT_DIR"/rank_*
  OMP_NUM_THREADS=3 expect_exit 0 taskset -c 0,1 "$ACCEL" launch "${AFF[@]}"
  [[ "$(cpus_of 0)" == "0 3" && "$(cpus_of 1)" == "1 3" ]] || fail "config key: '$(cpus_of 0)' '$(cpus_of 1)'"
  rm "$HF_HOME/accelerate/default_config.yaml"
  # An agent confined to CPU 1 (a cpuset without CPU 0): both ranks share it, said once.
  rm -f "$OUT_DIR"/rank_*
  expect_exit 0 taskset -c 1 "$ACCEL" launch --cpu -n 2 --enable_cpu_affinity "${AFF[@]}"
  [[ "$(cpus_of 0)" == "1 1" && "$(cpus_of 1)" == "1 1" ]] || fail "cpuset of CPU 1: '$(cpus_of 0)' '$(cpus_of 1)'"
  [[ $(grep -c "ranks share CPUs" <<<"$ERR") == 1 ]] || fail "want one sharing notice: $ERR"
  # The dry run shows each rank's set on its line.
  expect_exit 0 taskset -c 0,1 "$ACCEL" launch --dry_run --cpu -n 2 --enable_cpu_affinity "${AFF[@]}"
  [[ $(grep -c ' cpus ' <<<"$OUT") == 2 ]] || fail "dry run: want 2 lines with cpus: $OUT"
  [[ $(grep '^rank 0 ' <<<"$OUT") == "rank 0 (local rank 0): cpus 0; "* ]] || fail "dry run rank 0: $OUT"
  [[ $(grep '^rank 1 ' <<<"$OUT") == "rank 1 (local rank 1): cpus 1; "* ]] || fail "dry run rank 1: $OUT"
  ;;
colour)
  # Colour only on a terminal (a pseudo-terminal from script(1)): the banner bold red, notices'
  # "accel:" yellow; never when piped, nor with NO_COLOR set.
  script -qec "'$ACCEL' launch -n 2 /bin/false" /dev/null >"$SCRATCH/tty" 2>&1 || true
  grep -q $'\033\[1;31m=====' "$SCRATCH/tty" || fail "no red banner on a terminal: $(cat -v "$SCRATCH/tty")"
  grep -q $'\033\[33maccel:\033\[0m ' "$SCRATCH/tty" || fail "no yellow notice on a terminal: $(cat -v "$SCRATCH/tty")"
  grep -q "accel: job failed" "$SCRATCH/tty" || fail "no summary on a terminal: $(cat -v "$SCRATCH/tty")"
  NO_COLOR=1 script -qec "'$ACCEL' launch -n 2 /bin/false" /dev/null >"$SCRATCH/nocolour" 2>&1 || true
  grep -q "accel: job failed" "$SCRATCH/nocolour" || fail "no summary with NO_COLOR: $(cat -v "$SCRATCH/nocolour")"
  ! grep -q $'\033\[' "$SCRATCH/nocolour" || fail "colour despite NO_COLOR: $(cat -v "$SCRATCH/nocolour")"
  expect_exit 1 "$ACCEL" launch -n 2 /bin/false
  [[ $ERR != *$'\033['* ]] || fail "colour in a pipe: $(cat -v <<<"$ERR")"
  ;;
dry_run)
  expect_exit 0 "$ACCEL" launch --dry_run --cpu -n 2 --main_process_port 29555 "${BEH[@]}" arg1
  expect_contains "$OUT" "rank 1 (local rank 1):"
  expect_contains "$OUT" "command: $W/behave.sh $MARKER arg1"
  expect_contains "$OUT" "    MASTER_PORT=29555"
  expect_contains "$OUT" "    WORLD_SIZE=2"
  [[ -z "$(ls "$OUT_DIR")" ]] || fail "dry run spawned something"
  # Readable at 8 ranks: the command and the shared variables once, one line per rank with what
  # is its own; the port the agent will choose said as such.
  expect_exit 0 "$ACCEL" launch --dry_run --cpu -n 8 "${BEH[@]}"
  [[ $(grep -c '^command: ' <<<"$OUT") == 1 ]] || fail "the command more than once: $OUT"
  [[ $(wc -l <<<"$OUT") -le 50 ]] || fail "dry run of 8 ranks has $(wc -l <<<"$OUT") lines: $OUT"
  expect_contains "$OUT" "    MASTER_PORT=<a free port, chosen at launch>"
  expect_contains "$OUT" "    WORLD_SIZE=8"
  line=$(grep '^rank 7 ' <<<"$OUT")
  for kv in LOCAL_RANK=7 RANK=7 ROLE_RANK=7 ACCEL_HEARTBEAT_KEY=accel_step/7; do expect_contains "$line" " $kv"; done
  [[ $line != *WORLD_SIZE* ]] || fail "a shared variable on rank 7's line: $line"
  # --virtual_local_rank (torch 2.12): each worker sees LOCAL_RANK=0 and one GPU of its own, out
  # of 2 local ranks — what libaccel's device rule puts on that GPU's cuda:0 (DeviceChoiceTest).
  CUDA_VISIBLE_DEVICES=4,6 expect_exit 0 "$ACCEL" run --virtual_local_rank --nproc_per_node 2 --no_python \
    --dry_run_json /bin/true
  ranks=$(/usr/bin/python3 -c 'import json, sys
for r in json.load(sys.stdin)["ranks"]:
    e = r["env"]; print(e["RANK"], e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"], e["CUDA_VISIBLE_DEVICES"])' <<<"$OUT")
  [[ $ranks == $'0 0 2 4\n1 0 2 6' ]] || fail "--virtual_local_rank gave: $ranks"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
