# What the agent sees of a running job: `accel status`, heartbeats, hang detection with the
# ranks' stacks, the exit guard. Usage: watch.sh CASE ACCEL HANG_WORKER
source "$(dirname "$0")/lib.sh"
CASE=$1 ACCEL=$2 HANG_WORKER=$3
OUT_DIR=$SCRATCH/out
mkdir -p "$OUT_DIR"
export OMP_NUM_THREADS=1
LAUNCH=("$ACCEL" launch --cpu --python "$PY" --log_dir "$SCRATCH/logs")

summary() { cat "$SCRATCH"/logs/*/summary.json; }
# jq-like access to summary.json: sumq 'EXPR' evaluates a Python expression over `s`.
sumq() { $PY -c "import json,sys; s=json.load(open(sys.argv[1])); print($1)" "$(ls "$SCRATCH"/logs/*/summary.json)"; }
# The line of $1 that holds the marker comment $2.
line_of() { grep -n "$2" "$1" | head -1 | cut -d: -f1; }
# Seconds between the time written in file $1 and the hang's detected_at in summary.json. The
# hang timeout runs from the stuck rank's last heartbeat, a moment (under a step) before it
# wrote the file: the delays are checked against S - 0.5 .. S + 2.
detection_delay() { $PY -c "import sys; print(float(sys.argv[2]) - float(open(sys.argv[1]).read()))" "$1" "$(sumq 's["attempts"][0]["hang"]["detected_at"]')"; }

case "$CASE" in
status_json)
  # Rank r reports r+1 steps, prints a line, says it is ready; rank 3 then exits 0, the others
  # wait for the release file.
  cat >"$SCRATCH/w.py" <<'PY'
import os, sys, time, torch.distributed as dist
r, out = int(os.environ["RANK"]), sys.argv[1]
hb = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
for _ in range(r + 1):
    hb.add(os.environ["ACCEL_HEARTBEAT_KEY"], 1)
print("hello from", r, flush=True)
open(f"{out}/pid.{r}.tmp", "w").write(str(os.getpid()))
os.rename(f"{out}/pid.{r}.tmp", f"{out}/ready.{r}")
while r != 3 and not os.path.exists(f"{out}/release"):
    time.sleep(0.05)
PY
  "${LAUNCH[@]}" -n 4 "$SCRATCH/w.py" "$OUT_DIR" >"$SCRATCH/o" 2>"$SCRATCH/e" &
  agent=$!
  wait_files 'ready.*' 4
  # Rank 3 has exited once its pid is gone (its zombie stays until the attempt ends: the agent's).
  for _ in $(seq 1 200); do [[ $(ps -o stat= -p "$(cat "$OUT_DIR/ready.3")" 2>/dev/null) == Z* ]] && break; sleep 0.05; done
  expect_exit 0 "$ACCEL" status --json
  $PY - "$OUT" "$agent" "$OUT_DIR" "$SCRATCH/w.py" <<'PY' || fail "accel status --json: $OUT"
import json, sys
status, agent, out, script = json.loads(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
assert status["problems"] == [], status["problems"]
assert len(status["jobs"]) == 1, status["jobs"]
job = status["jobs"][0]
assert job["agent_pid"] == agent, (job["agent_pid"], agent)
assert script in job["command"], job["command"]
assert job["attempt"] == 0 and job["world_size"] == 4 and job["num_machines"] == 1 and job["machine_rank"] == 0, job
assert job["run_id"] and job["uptime_s"] > 0, job
ranks = job["ranks"]
assert [r["rank"] for r in ranks] == [0, 1, 2, 3], ranks
for r in ranks:
    assert r["pid"] == int(open(f"{out}/ready.{r['rank']}").read()), r
    assert r["step"] == r["rank"] + 1, r
    assert 0 <= r["seconds_since_output"] < 60, r
    assert 0 <= r["seconds_since_step"] < 60, r
    if r["rank"] == 3:
        assert r["state"] == "exited" and r["exit_code"] == 0, r
    else:
        assert r["state"] in ("S", "R"), r
        assert r["exit_code"] is None, r
        assert r["rss_bytes"] > 1 << 20, r
        assert 0 <= r["cpu_percent"] <= 200, r
PY
  expect_exit 0 "$ACCEL" status
  expect_contains "$OUT" "agent pid $agent"
  [[ $(grep -c '^ *[0-3] *[0-3] ' <<<"$OUT") == 4 ]] || fail "want 4 rank rows: $OUT"
  touch "$OUT_DIR/release"
  wait $agent || fail "job failed: $(cat "$SCRATCH/e")"
  expect_exit 0 "$ACCEL" status
  expect_contains "$OUT" "no accel job of this user is running"
  [[ -z $(ls "$XDG_RUNTIME_DIR/accel") ]] || fail "socket left behind: $(ls "$XDG_RUNTIME_DIR/accel")"
  ;;
hang_python)
  # Rank 2 sleeps before its heartbeat and all_reduce of step 5; the others wait in all_reduce.
  cat >"$SCRATCH/w.py" <<'PY'
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
hb = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
t = torch.ones(4)
for step in range(1, 100000):
    if rank == 2 and step == 5:
        open(sys.argv[1] + ".tmp", "w").write(str(time.time())); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
        time.sleep(600)  # STUCK HERE
    hb.add(os.environ["ACCEL_HEARTBEAT_KEY"], 1)
    dist.all_reduce(t)
PY
  expect_exit 124 "${LAUNCH[@]}" -n 4 --hang_timeout 3 "$SCRATCH/w.py" "$OUT_DIR/stuck"
  expect_contains "$ERR" "the job hangs (--hang_timeout 3 s): rank 2 at step 4 for 3 s; ranks 0, 1, 3 at step 5"
  expect_contains "$ERR" "culprit: rank 2 (local rank 2"
  expect_contains "$ERR" "logs: $(dirname "$(ls "$SCRATCH"/logs/*/summary.json)") (each rank's output, summary.json)"
  expect_contains "$ERR" "accel launch exits with 124"
  [[ $(sumq 's["attempts"][0]["hang"]["stuck_ranks"]') == "[2]" ]] || fail "stuck ranks: $(summary)"
  [[ $(sumq 's["attempts"][0]["culprit"]["rank"]') == 2 ]] || fail "culprit: $(summary)"
  line=$(line_of "$SCRATCH/w.py" "STUCK HERE")
  expect_contains "$(sumq 's["attempts"][0]["workers"][2]["stack"]')" "w.py\", line $line in <module>"
  for r in 0 1 3; do expect_contains "$(sumq "s['attempts'][0]['workers'][$r]['stack']")" "in all_reduce"; done
  delay=$(detection_delay "$OUT_DIR/stuck")
  $PY -c "import sys; sys.exit(not (2.5 <= $delay <= 5))" || fail "detected $delay s after rank 2 stopped (want 2.5..5 s)"
  ;;
hang_ddp_backward|hang_ddp_step|hang_ddp_loader)
  # DDP without heartbeats (issue 36): rank 1 of 3 stops before backward, before
  # optimizer.step() or in its data loader; the others wait inside DDP's backward (not in
  # torch/distributed): they count as waiting, and rank 1, the one outside, is the culprit.
  where=${CASE#hang_ddp_}
  W=$(cd "$(dirname "$0")/workers" && pwd)
  expect_exit 124 "${LAUNCH[@]}" -n 3 --hang_timeout 3 "$W/ddp_hang.py" "$where" "$OUT_DIR/stuck"
  expect_contains "$ERR" "by their stacks rank 1 outside any collective, 0, 2 waiting in one"
  expect_contains "$ERR" "culprit: rank 1 (local rank 1"
  [[ $(sumq 's["attempts"][0]["hang"]["stuck_ranks"]') == "[1]" ]] || fail "stuck ranks: $(summary)"
  line=$(line_of "$W/ddp_hang.py" "STUCK HERE")
  expect_contains "$(sumq 's["attempts"][0]["workers"][1]["stack"]')" "ddp_hang.py\", line $line in stop"
  for r in 0 2; do expect_contains "$(sumq "s['attempts'][0]['workers'][$r]['stack']")" "in backward"; done
  ;;
hang_cpp)
  # libaccel: the heartbeat is the Accelerator's; rank 2 stops before its backward of step 5.
  expect_exit 124 "${LAUNCH[@]}" -n 4 --hang_timeout 3 "$HANG_WORKER" 2 5 "$OUT_DIR/stuck"
  expect_contains "$ERR" "rank 2 at step 5 for 3 s; ranks 0, 1, 3 at step 6"
  [[ $(sumq 's["attempts"][0]["hang"]["stuck_ranks"]') == "[2]" ]] || fail "stuck ranks: $(summary)"
  stack=$(sumq 's["attempts"][0]["workers"][2]["stack"]')
  expect_contains "$stack" "accel: stack of pid"
  expect_contains "$stack" "stuckBeforeBackward"
  expect_contains "$ERR" "stuckBeforeBackward"  # demangled in the summary too
  # The others wait in the gradient sync: named by the first frame outside libc, demangled —
  # not libaccel's SIGABRT handler, whose frames the dump leaves out.
  expect_contains "$ERR" "rank 0 was in: $HANG_WORKER(accel::"
  [[ $(grep "rank 0 was in: " <<<"$ERR") != *"(+0x"* ]] || fail "a frame without its name: $ERR"
  delay=$(detection_delay "$OUT_DIR/stuck")
  $PY -c "import sys; sys.exit(not (2.5 <= $delay <= 5))" || fail "detected $delay s after rank 2 stopped (want 2.5..5 s)"
  ;;
straggler_cpp)
  # libaccel measures each rank's own work per step, its waits in the gradient sync taken out:
  # rank 1 works 60 ms a step, rank 0 20 ms; in lock-step both steps take 60 ms, and only the
  # waits tell them apart. The agent names rank 1 once, with a score near 1/3.
  SLOW_RANK=1 STEPS=80 expect_exit 0 "${LAUNCH[@]}" -n 2 --straggler_window 10 "$HANG_WORKER" -1 -1 "$OUT_DIR/x"
  [[ $(grep -c "straggles" <<<"$ERR") == 1 ]] || fail "named more or less than once: $ERR"
  expect_contains "$ERR" "accel: rank 1 (machine 0) straggles: its own work takes "
  [[ $(sumq 's["attempts"][0]["stragglers"]') == "[1]" ]] || fail "stragglers: $(summary)"
  score=$(sumq '[x["score"] for x in s["attempts"][0]["straggler_scores"] if x["rank"] == 1][0]')
  $PY -c "import sys; sys.exit(not abs($score - 1 / 3) <= 0.15)" || fail "rank 1's score $score (want 1/3 ± 0.15): $(summary)"
  ;;
hang_from_config)
  # No heartbeats: output and CPU time stand still everywhere, and the stacks tell the stuck
  # rank (outside any collective) from those waiting in all_reduce. The timeout is the config's.
  cat >"$SCRATCH/w.py" <<'PY'
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(4)
for step in range(1, 100000):
    if dist.get_rank() == 1 and step == 5:
        time.sleep(600)  # STUCK HERE
    dist.all_reduce(t)
PY
  printf 'distributed_type: MULTI_CPU\nnum_processes: 3\nhang_timeout: 3\n' >"$SCRATCH/c.yaml"
  expect_exit 124 "${LAUNCH[@]}" --config_file "$SCRATCH/c.yaml" "$SCRATCH/w.py"
  expect_contains "$ERR" "the job hangs (--hang_timeout 3 s): ranks 0–2 made no progress for "
  expect_contains "$ERR" " s (no heartbeats: neither output nor their main thread's CPU time moved); by their stacks rank 1 outside any collective, 0, 2 waiting in one"
  [[ $(sumq 's["attempts"][0]["hang"]["stuck_ranks"]') == "[1]" ]] || fail "stuck ranks: $(summary)"
  [[ $(sumq 's["attempts"][0]["culprit"]["rank"]') == 1 ]] || fail "culprit: $(summary)"
  ;;
hang_background_thread)
  # No heartbeats; each rank's background thread uses about a fifth of a core all along. Rank 0's
  # main thread stops: called within 2x the timeout. Then ranks that compute silently in their
  # main threads for 3x the timeout: never called.
  expect_exit 124 "${LAUNCH[@]}" -n 2 --hang_timeout 3 "$(dirname "$0")/workers/busy_thread.py" stuck "$OUT_DIR/stuck"
  expect_contains "$ERR" "the job hangs (--hang_timeout 3 s)"
  [[ $(sumq 's["attempts"][0]["hang"]["stuck_ranks"]') == "[0]" ]] || fail "stuck ranks: $(summary)"
  delay=$(detection_delay "$OUT_DIR/stuck")
  # Counted from the rank's last progress, which can come before its marker by the time it sat
  # in the all_reduce before it (no CPU moves there): so not a timeout after the marker, but not
  # at once either.
  $PY -c "import sys; sys.exit(not (1 <= $delay <= 6))" || fail "detected $delay s after rank 0 stopped (want 1..6 s)"
  rm -rf "$SCRATCH/logs"
  expect_exit 0 "${LAUNCH[@]}" -n 2 --hang_timeout 2 "$(dirname "$0")/workers/busy_thread.py" compute 6
  expect_contains "$OUT" "[rank 1] rank 1 computed"
  [[ $ERR != *hangs* ]] || fail "ranks computing in their main threads were called hung: $ERR"
  ;;
exit_guard)
  # Rank 0 finishes; ranks 1-3 linger (as torch 1.13's DDP was seen spinning in teardown).
  cat >"$SCRATCH/w.py" <<'PY'
import os, sys, time
def linger():
    while True:
        time.sleep(0.05)  # LINGER
if os.environ["RANK"] == "0":
    open(sys.argv[1] + ".tmp", "w").write(str(time.time())); os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    sys.exit(0)
linger()
PY
  expect_exit 124 "${LAUNCH[@]}" -n 4 --exit_timeout 2 "$SCRATCH/w.py" "$OUT_DIR/done"
  expect_contains "$ERR" "ranks 1" 
  expect_contains "$ERR" "still running 2 s after a rank exited 0 (--exit_timeout)"
  expect_contains "$ERR" "attempt 0"
  [[ $(sumq 's["attempts"][0]["hang"]["kind"]') == exit ]] || fail "kind: $(summary)"
  [[ $(sumq 's["attempts"][0]["hang"]["stuck_ranks"]') == "[1, 2, 3]" ]] || fail "stuck ranks: $(summary)"
  [[ $(sumq 's["attempts"][0]["workers"][0]["exit_code"]') == 0 ]] || fail "rank 0: $(summary)"
  line=$(line_of "$SCRATCH/w.py" "# LINGER")
  for r in 1 2 3; do expect_contains "$(sumq "s['attempts'][0]['workers'][$r]['stack']")" "line $line in linger"; done
  delay=$(detection_delay "$OUT_DIR/done")
  $PY -c "import sys; sys.exit(not (2 <= $delay <= 4))" || fail "stopped $delay s after rank 0 exited (want 2..4 s)"
  ;;
status_dead_agent)
  # A SIGKILLed agent's socket is found dead and removed; so is one of a pid that does not exist.
  cat >"$SCRATCH/w.py" <<'PY'
import os, sys, time
open(f"{sys.argv[1]}/ready.{os.environ['RANK']}", "w").close()
time.sleep(600)
PY
  "${LAUNCH[@]}" -n 2 "$SCRATCH/w.py" "$OUT_DIR" >/dev/null 2>&1 &
  agent=$!
  wait_files 'ready.*' 2
  [[ -S $XDG_RUNTIME_DIR/accel/$agent.sock ]] || fail "no socket $agent.sock: $(ls "$XDG_RUNTIME_DIR/accel")"
  $PY -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])" "$XDG_RUNTIME_DIR/accel/999999999.sock"
  kill -9 $agent
  wait $agent 2>/dev/null || true
  expect_exit 0 "$ACCEL" status
  expect_contains "$OUT" "no accel job of this user is running"
  [[ -z $(ls "$XDG_RUNTIME_DIR/accel") ]] || fail "dead sockets left: $(ls "$XDG_RUNTIME_DIR/accel")"
  # A directory others could write to is refused, by name.
  chmod 777 "$XDG_RUNTIME_DIR/accel"
  expect_exit 1 "$ACCEL" status
  expect_contains "$ERR" "$XDG_RUNTIME_DIR/accel is not a directory of this user with mode 0700"
  ;;
bad_timeouts)
  echo 'import sys' >"$SCRATCH/w.py"
  expect_exit 2 "${LAUNCH[@]}" -n 2 --hang_timeout 0 "$SCRATCH/w.py"
  expect_contains "$ERR" "--hang_timeout: must be more than 0 seconds"
  expect_exit 2 "${LAUNCH[@]}" -n 2 --exit_timeout -3 "$SCRATCH/w.py"
  expect_contains "$ERR" "--exit_timeout: must be more than 0 seconds"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 2\nhang_timeout: 0\n' >"$SCRATCH/c.yaml"
  expect_exit 2 "${LAUNCH[@]}" --config_file "$SCRATCH/c.yaml" "$SCRATCH/w.py"
  expect_contains "$ERR" "c.yaml:3:15: 'hang_timeout' is 0, out of range 1..1073741824"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok $CASE"
