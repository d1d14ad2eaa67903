#!/usr/bin/env bash
# Two hosts on one machine: network namespaces joined by a veth pair (10.200.0.1 and
# 10.200.0.2, no other route), one `accel launch` agent in each.
#   netns.sh CASE /path/to/accel /path/to/fashion_mnist /path/to/shm_worker
# CASE: python_gloo (2 machines x 2 python3-torch ranks: all_reduce, DDP step, barrier, then a
# failure on one host), example (the C++ Fashion-MNIST example), unreachable (the pre-spawn
# check). Needs root for `ip netns`; exits 77 (skipped) with the reason otherwise.
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
EXAMPLE=$3
SHM_WORKER=${4:-}
W=$(cd "$(dirname "$0")/workers" && pwd)

skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "creating network namespaces needs root"
command -v ip >/dev/null || skip "iproute2's ip is not installed"

source "$(dirname "$0")/netns_lib.sh"
# Names unique to this run, so parallel cases and leftovers of a killed run never collide.
tag=$$
trap 'netns_down; rm -rf "$SCRATCH"' EXIT
netns_up $tag 2>"$SCRATCH/ip.err" || skip "ip netns add failed: $(cat "$SCRATCH/ip.err")"

port=29517
common=(--num_machines 2 --main_process_ip $A --main_process_port $port -n 4 --cpu --rdzv_timeout 60)
# on_host NS LOGNAME CMD...: runs CMD inside NS in the background; its pid in $!.
on_host() { local ns=$1 log=$2; shift 2; ip netns exec "$ns" "$@" >"$SCRATCH/$log" 2>&1 & }
# two_hosts ARGS...: one agent per host with ARGS after the common flags; sets RA and RB to
# their exit codes and OA and OB to their output.
two_hosts() {
  on_host "$NB" b.out "$ACCEL" launch "${common[@]}" --machine_rank 1 "$@"
  local pb=$!
  on_host "$NA" a.out "$ACCEL" launch "${common[@]}" --machine_rank 0 "$@"
  local pa=$!
  set +e; wait $pa; RA=$?; wait $pb; RB=$?; set -e
  OA=$(cat "$SCRATCH/a.out"); OB=$(cat "$SCRATCH/b.out")
}
# expect_codes A B: the agents of two_hosts exited with A and B; else fail showing both outputs.
expect_codes() {
  [[ $RA == "$1" && $RB == "$2" ]] || fail "agents exited $RA $RB (want $1 $2)
--- host A:
$OA
--- host B:
$OB"
}

# Both machines run workers that trap SIGINT/SIGTERM and run on (machine 1 with --term_timeout 1);
# returns once all 4 started, with the agents' pids in pa and pb.
start_trapping_job() {
  export OUT_DIR=$SCRATCH/out MARKER="accel-netns-$$"
  mkdir -p "$OUT_DIR"
  BEHAVE_DEFAULT=traps on_host "$NA" a.out "$ACCEL" launch "${common[@]}" --machine_rank 0 "$W/behave.sh" "$MARKER"
  pa=$!
  BEHAVE_DEFAULT=traps on_host "$NB" b.out "$ACCEL" launch "${common[@]}" --machine_rank 1 --term_timeout 1 \
    "$W/behave.sh" "$MARKER"
  pb=$!
  wait_files 'started.*' 4
}

# machine1_after_master_gone WHAT: waits (at most 30 s) for machine 1's agent to exit after its
# master was WHAT ("lost", "killed"); sets GONE_MS (how long it took), RB and OB, and checks it
# failed naming the lost store and left no rank behind.
machine1_after_master_gone() {
  local start pid r
  start=$(date +%s%N)
  for _ in $(seq 1 600); do [[ -e /proc/$pb ]] || break; sleep 0.05; done
  [[ ! -e /proc/$pb ]] || fail "machine 1's agent still runs 30 s after the master was $1: $(cat "$SCRATCH/b.out")"
  GONE_MS=$((($(date +%s%N) - start) / 1000000))
  set +e; wait $pb; RB=$?; set -e
  OB=$(cat "$SCRATCH/b.out")
  [[ $RB != 0 ]] || fail "machine 1's agent exited 0 without its master: $OB"
  expect_contains "$OB" "lost contact with the master agent's store at $A:$port"
  for r in 2 3; do
    pid=$(cat "$OUT_DIR/pid.$r")
    [[ ! -e /proc/$pid || $(ps -o stat= -p "$pid") == Z* ]] || fail "rank $r outlived its agent"
  done
}

case $CASE in
python_gloo)
  two_hosts --python /usr/bin/python3 "$W/ddp_gloo.py"
  expect_codes 0 0
  for r in 0 1; do expect_contains "$OA" "[rank $r] ok rank=$r world=4 allreduce=10"; done
  for r in 2 3; do expect_contains "$OB" "[rank $r] ok rank=$r world=4 allreduce=10"; done
  # Gloo ran over the veth pair: each agent chose the interface that reaches the other host.
  expect_contains "$OA" "workers use GLOO_SOCKET_IFNAME=$VA"
  expect_contains "$OB" "workers use GLOO_SOCKET_IFNAME=$VB"
  expect_contains "$OB" "machine 1 of 2: ranks 2–3 of 4"

  # The master named by a host name that resolves to 127.0.1.1 on the master itself (Debian's
  # /etc/hosts for its own name) and to its real address elsewhere.
  netns_hosts "$NA" "127.0.1.1 node-a" "$B node-b"
  netns_hosts "$NB" "$A node-a" "$B node-b"
  common=(--num_machines 2 --main_process_ip node-a --main_process_port $port -n 4 --cpu --rdzv_timeout 60)
  two_hosts --python /usr/bin/python3 "$W/ddp_gloo.py"
  expect_codes 0 0
  for r in 0 1; do expect_contains "$OA" "[rank $r] ok rank=$r world=4 allreduce=10"; done
  for r in 2 3; do expect_contains "$OB" "[rank $r] ok rank=$r world=4 allreduce=10"; done
  expect_contains "$OA" "workers use GLOO_SOCKET_IFNAME=$VA"
  common=(--num_machines 2 --main_process_ip $A --main_process_port $port -n 4 --cpu --rdzv_timeout 60)

  # A failure on host B stops host A's workers; both name rank 2 on machine 1 and exit with its code.
  export OUT_DIR=$SCRATCH/out MARKER=accel-netns-$tag
  mkdir -p "$OUT_DIR"
  BEHAVE_DEFAULT=sleep BEHAVE_2=exit:9 two_hosts "$W/behave.sh" "$MARKER"
  expect_codes 9 9
  expect_contains "$OA" "culprit: rank 2 on machine 1"
  expect_contains "$OA" "    | rank 2 failing"
  expect_contains "$OB" "culprit: rank 2 (local rank 0"
  ;;
example)
  two_hosts "$EXAMPLE" --model mlp --steps 40 --no-progress
  expect_codes 0 0
  expect_contains "$OA" "[rank 0] model mlp, 4 processes (hier), fp32: 40 steps"
  expect_contains "$OA" "test accuracy"
  ;;
shm_hier)
  # Shared memory inside each host, Gloo between them: the default for CPU jobs on several
  # machines; every collective checked against Gloo alone (tests/e2e/workers/shm_worker.cc).
  two_hosts "$SHM_WORKER" backend
  expect_codes 0 0
  for r in 0 1; do expect_contains "$OA" "[rank $r] backend=hier"; done
  for r in 2 3; do expect_contains "$OB" "[rank $r] backend=hier"; done
  two_hosts "$SHM_WORKER" compare
  expect_codes 0 0
  # 8 dtypes x 3 ops x 4 sizes, 4 random sizes x 3 checks, a broadcast per root (4), all-gather, barrier.
  for r in 0 1; do expect_contains "$OA" "[rank $r] checks=114"; done
  for r in 2 3; do expect_contains "$OB" "[rank $r] checks=114"; done
  ;;
status)
  # `accel status` on host A shows machine 1's ranks too, read from the job's store.
  export OUT_DIR=$SCRATCH/out
  mkdir -p "$OUT_DIR"
  cat >"$SCRATCH/w.py" <<'PY'
import os, sys, time, torch.distributed as dist
r, out = int(os.environ["RANK"]), sys.argv[1]
hb = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
for _ in range(r + 1):
    hb.add(os.environ["ACCEL_HEARTBEAT_KEY"], 1)
open(f"{out}/pid.{r}.tmp", "w").write(str(os.getpid()))
os.rename(f"{out}/pid.{r}.tmp", f"{out}/ready.{r}")
while not os.path.exists(f"{out}/release"):
    time.sleep(0.05)
PY
  on_host "$NB" b.out "$ACCEL" launch "${common[@]}" --machine_rank 1 --python /usr/bin/python3 "$SCRATCH/w.py" "$OUT_DIR"
  pb=$!
  on_host "$NA" a.out "$ACCEL" launch "${common[@]}" --machine_rank 0 --python /usr/bin/python3 "$SCRATCH/w.py" "$OUT_DIR"
  pa=$!
  wait_files 'ready.*' 4
  # Machine 1 shares its status every 2 s: until it has, `accel status` lists it as not shared
  # yet (no error).
  for _ in $(seq 1 100); do
    ip netns exec "$NA" "$ACCEL" status --json >"$SCRATCH/status.json" || fail "accel status exited $?: $(cat "$SCRATCH/status.json")"
    $PY -c 'import json, sys; sys.exit(any(j["machines_not_shared_yet"] for j in json.load(open(sys.argv[1]))["jobs"]))' "$SCRATCH/status.json" && break
    sleep 0.1
  done
  $PY - "$SCRATCH/status.json" "$OUT_DIR" <<'PY' || fail "accel status on host A: $(cat "$SCRATCH/status.json")"
import json, sys
status, out = json.load(open(sys.argv[1])), sys.argv[2]
assert status["problems"] == [], status["problems"]
master = [j for j in status["jobs"] if j["machine_rank"] == 0]
assert len(master) == 1, status["jobs"]
job = master[0]
assert job["num_machines"] == 2 and job["world_size"] == 4, job
assert [r["rank"] for r in job["ranks"]] == [0, 1], job["ranks"]
others = job["other_machines"]
assert [o["machine_rank"] for o in others] == [1], others
ranks = others[0]["ranks"]
assert [r["rank"] for r in ranks] == [2, 3], ranks
for r in job["ranks"] + ranks:
    assert r["pid"] == int(open(f"{out}/ready.{r['rank']}").read()), r
for r in job["ranks"]:
    assert r["step"] == r["rank"] + 1, r  # heartbeats reach machine 0's agent, which hosts the store
PY
  touch "$OUT_DIR/release"
  set +e; wait $pa; RA=$?; wait $pb; RB=$?; set -e
  OA=$(cat "$SCRATCH/a.out"); OB=$(cat "$SCRATCH/b.out")
  expect_codes 0 0
  ;;
c10d_arrival)
  # torchrun's elastic command line, word for word the same on both hosts (no --node_rank): the
  # host the endpoint names finds its own address and hosts the rendezvous as machine 0; the
  # other joins as machine 1. By address, then by a name that is 127.0.1.1 on host A itself.
  elastic=(--nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_id netns-elastic --rdzv_conf join_timeout=60)
  export PYTHON_EXEC=/usr/bin/python3
  for endpoint in "$A:$port" "node-a:$port"; do
    netns_hosts "$NA" "127.0.1.1 node-a" "$B node-b"
    netns_hosts "$NB" "$A node-a" "$B node-b"
    on_host "$NB" b.out "$ACCEL" run "${elastic[@]}" --rdzv_endpoint "$endpoint" "$W/ddp_gloo.py"
    pb=$!
    on_host "$NA" a.out "$ACCEL" run "${elastic[@]}" --rdzv_endpoint "$endpoint" "$W/ddp_gloo.py"
    pa=$!
    set +e; wait $pa; RA=$?; wait $pb; RB=$?; set -e
    OA=$(cat "$SCRATCH/a.out"); OB=$(cat "$SCRATCH/b.out")
    expect_codes 0 0
    expect_contains "$OA" "this machine hosts the rendezvous at $endpoint (the endpoint is this machine) and is machine 0"
    expect_contains "$OB" "this machine joins the rendezvous at $endpoint; its machine rank is the order in which it joins"
    expect_contains "$OB" "machine 1 of 2: ranks 2–3 of 4"
    for r in 0 1; do expect_contains "$OA" "[rank $r] ok rank=$r world=4 allreduce=10"; done
    for r in 2 3; do expect_contains "$OB" "[rank $r] ok rank=$r world=4 allreduce=10"; done
  done
  ;;
master_lost)
  # The master's machine vanishes mid-job — its link goes down, nothing is closed or signalled:
  # machine 1 notices through the failure watch's TCP keep-alives (~5 s), stops its workers and
  # exits with a line naming the lost master, within seconds, never waiting in the exit barrier.
  start_trapping_job
  ip -n "$NA" link set "$VA" down
  machine1_after_master_gone lost
  lost_s=$((GONE_MS / 1000))
  echo "machine 1's agent exited ${lost_s} s after the master's link went down (rc $RB)"
  ((lost_s <= 15)) || fail "machine 1 took ${lost_s} s to notice the lost master (want <= 15): $OB"
  kill -KILL $pa 2>/dev/null || true
  ;;
partition_short)
  # A partition shorter than the keep-alive window loses nobody: the hosts are cut for 2 s of a
  # 3 s window (keep_alive_interval 0.5 s x 6). A keep-alive sent into the partition is not
  # left to TCP's retransmission backoff (its next try would land 3 s after it was sent, past the
  # window): it is replaced on a fresh connection, tried every 200 ms, so one lands right after
  # the link returns. The job then finishes as if nothing happened.
  export OUT_DIR=$SCRATCH/out
  mkdir -p "$OUT_DIR"
  conf=(--rdzv_conf keep_alive_interval=0.5,keep_alive_max_attempt=6)
  BEHAVE_DEFAULT=ready-until-go on_host "$NB" b.out "$ACCEL" launch "${common[@]}" "${conf[@]}" \
    --machine_rank 1 "$W/behave.sh" accel-netns-$$
  pb=$!
  BEHAVE_DEFAULT=ready-until-go on_host "$NA" a.out "$ACCEL" launch "${common[@]}" "${conf[@]}" \
    --machine_rank 0 "$W/behave.sh" accel-netns-$$
  pa=$!
  wait_files 'ready.*' 4
  # Packets vanish between the hosts, as in a real partition: a blackhole route on each, so both
  # TCPs back off as over a lost path (a link set down drops locally, where TCP retries every
  # 500 ms without backoff and the delay under test does not arise).
  ip -n "$NA" route add blackhole "$B/32"
  ip -n "$NB" route add blackhole "$A/32"
  sleep 2  # the partition's length: what is tested
  ip -n "$NA" route del blackhole "$B/32"
  ip -n "$NB" route del blackhole "$A/32"
  # The window of a keep-alive sent just before the link went down ends 1 s after it returned:
  # let it pass before the workers finish, so that a machine found lost would have been.
  sleep 1.5
  touch "$OUT_DIR/go"
  set +e; wait $pa; RA=$?; wait $pb; RB=$?; set -e
  OA=$(cat "$SCRATCH/a.out"); OB=$(cat "$SCRATCH/b.out")
  expect_codes 0 0
  [[ $OA != *lost* && $OB != *lost* ]] || fail "a machine was lost in a 2 s partition:
$OA
---
$OB"
  for r in 0 1 2 3; do grep -q "rank $r ok" "$SCRATCH"/[ab].out || fail "rank $r did not finish"; done
  ;;
master_killed)
  # The whole master machine killed (SIGKILL to its agent and both its workers): machine 1 sees
  # the failure watch's connection closed, stops its workers and exits, naming the lost master.
  start_trapping_job
  kill -KILL $pa "$(cat "$OUT_DIR/pid.0")" "$(cat "$OUT_DIR/pid.1")"
  machine1_after_master_gone killed
  echo "machine 1's agent exited ${GONE_MS} ms after machine 0 was killed (rc $RB)"
  ((GONE_MS <= 5000)) || fail "machine 1 took ${GONE_MS} ms to notice the killed master (want <= 5000): $OB"
  ;;
master_name_later)
  # Kubernetes: the master's name resolves only once its pod is ready. Machine 1 starts with a
  # name its hosts file does not have yet: it waits, saying so, and joins once the name resolves
  # (the entry is appended to the file `ip netns exec` bind-mounts over /etc/hosts).
  netns_hosts "$NA" "$A master-pod"
  netns_hosts "$NB"
  named=(--num_machines 2 --main_process_ip master-pod --main_process_port $port -n 4 --cpu --rdzv_timeout 60)
  export OUT_DIR=$SCRATCH/out
  mkdir -p "$OUT_DIR"
  on_host "$NB" b.out "$ACCEL" launch "${named[@]}" --machine_rank 1 "$W/env_dump.sh"
  pb=$!
  for _ in $(seq 1 600); do grep -q "cannot resolve 'master-pod'" "$SCRATCH/b.out" && break; sleep 0.05; done
  expect_contains "$(cat "$SCRATCH/b.out")" "waiting for the master agent at master-pod:$port: cannot resolve 'master-pod'"
  echo "$A master-pod" >>"/etc/netns/$NB/hosts"
  on_host "$NA" a.out "$ACCEL" launch "${named[@]}" --machine_rank 0 "$W/env_dump.sh"
  pa=$!
  set +e; wait $pa; RA=$?; wait $pb; RB=$?; set -e
  OA=$(cat "$SCRATCH/a.out"); OB=$(cat "$SCRATCH/b.out")
  expect_codes 0 0
  expect_contains "$OB" "machine 1 of 2: ranks 2–3 of 4"
  check_env 3 RANK=3 MASTER_ADDR=master-pod
  ;;
master_unreachable)
  # The master's link goes down mid-job, then machine 1's agent gets SIGINT and SIGTERM: its
  # event loop still forwards both at once and SIGKILLs its workers when --term_timeout ends
  # (publishing the failure to the unreachable master happens beside it, not in its way); the
  # agent then waits for the master no longer than its exit barrier's bound after a failure
  # (--term_timeout + 10 s) and exits.
  start_trapping_job
  ip -n "$NA" link set "$VA" down
  kill -INT $pb
  wait_files 'int.[23]' 2
  kill -TERM $pb
  wait_files 'term.[23]' 2
  # On time: machine 1's workers (they trap SIGTERM and run on) are SIGKILLed once --term_timeout
  # (1 s) ends, whatever the unreachable master does; 4 s allows for this 2-core VM.
  start=$(date +%s%N)
  for r in 2 3; do
    pid=$(cat "$OUT_DIR/pid.$r")
    for _ in $(seq 1 200); do [[ -e /proc/$pid && $(ps -o stat= -p "$pid") != Z* ]] || break; sleep 0.02; done
  done
  killed_ms=$((($(date +%s%N) - start) / 1000000))
  ((killed_ms <= 4000)) || fail "machine 1's workers were still running ${killed_ms} ms after SIGTERM (--term_timeout 1)"
  echo "machine 1's workers were gone ${killed_ms} ms after SIGTERM (--term_timeout 1)"
  SECONDS=0
  for _ in $(seq 1 600); do [[ -e /proc/$pb ]] || break; sleep 0.05; done
  [[ ! -e /proc/$pb ]] || fail "machine 1's agent still runs 30 s after SIGTERM: $(cat "$SCRATCH/b.out")"
  set +e; wait $pb; RB=$?; set -e
  OB=$(cat "$SCRATCH/b.out")
  echo "machine 1's agent exited ${SECONDS} s after SIGTERM (--term_timeout 1)"
  [[ $RB == 143 ]] || fail "machine 1's agent exited $RB (want 143): $OB"
  expect_contains "$OB" "SIGKILL needed for ranks 2, 3"
  # Nothing reached machine 0 over the link that is down (no SIGINT): its agent stops its own
  # workers because machine 1's keep-alives stopped (1 s x 3), naming the lost machine.
  wait_files 'term.[01]' 2
  [[ ! -e $OUT_DIR/int.0 && ! -e $OUT_DIR/int.1 ]] || fail "machine 0's workers got SIGINT over a link that is down"
  expect_contains "$(cat "$SCRATCH/a.out")" "machine 1 ($(hostname)): lost: no keep-alive for 3 s (keep_alive_interval 1 s x keep_alive_max_attempt 3); stopping the workers here"
  kill -KILL $pa 2>/dev/null || true
  ;;
unreachable)
  # Machine 1 pointed at an address nobody has: the error names host, port and interface,
  # and nothing is spawned.
  ip netns exec "$NB" "$ACCEL" launch --num_machines 2 --machine_rank 1 --main_process_ip 10.200.0.9 \
    --main_process_port $port -n 4 --cpu --rdzv_timeout 2 /bin/echo spawned >"$SCRATCH/b.out" 2>&1 && fail "succeeded"
  OB=$(cat "$SCRATCH/b.out")
  expect_contains "$OB" "cannot reach the master agent (machine_rank 0) at 10.200.0.9:$port from local interface $VB ($B)"
  [[ "$OB" != *spawned* ]] || fail "a worker was spawned: $OB"
  # No route at all (another subnet): said at once, not after the timeout (an hour here: an
  # agent that waited for it would run into the test's own time limit).
  ip netns exec "$NB" "$ACCEL" launch --num_machines 2 --machine_rank 1 --main_process_ip 192.0.2.1 \
    --main_process_port $port -n 4 --cpu --rdzv_timeout 3600 /bin/echo spawned >"$SCRATCH/b.out" 2>&1 && fail "succeeded"
  expect_contains "$(cat "$SCRATCH/b.out")" "at 192.0.2.1:$port: no route from this machine to '192.0.2.1': Network is unreachable"
  ;;
*) fail "unknown case $CASE" ;;
esac
[[ -n "${NETNS_VERBOSE:-}" ]] && printf "%s\n--- B:\n%s\n" "$OA" "$OB"
echo "ok: netns $CASE"
