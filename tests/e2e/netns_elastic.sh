#!/usr/bin/env bash
# An elastic job on three hosts (network namespaces on a bridge, tests/e2e/netns_lib.sh), 2 ranks
# each, with --nnodes 2:3 over a c10d endpoint on host 1:
#   netns_elastic.sh CASE /path/to/accel [/path/to/fashion_mnist]
# CASE: example — the same with the C++ example (libaccel, Gloo across hosts): a checkpoint every
# 10 steps with a global batch of 48 however many ranks there are; the final model's loss and
# test accuracy against runs that never failed (4 and 6 ranks on one machine), within the
# tolerance the README states. store_host — host 1, which hosts the job's store, dies while the group of 3
# runs: hosts 2 and 3 (still at least MIN) end within seconds naming the lost store, and leave no
# worker. partition — host 3 cut off while 3 x 2 ranks train, long enough that it gives the store
# up; it comes back as a newcomer when the link heals. health — host 3 fails its --health_check,
# stays out while the others train, and joins once it passes. full_disk — the same with host 3's
# checkpoint directory on a full filesystem. straggler — host 3's CPU capped at
# 30 %: machine 0's agent names its ranks, excludes its machine, and hosts 1 and 2 go on at full
# pace. spares — --nnodes 1:2: the first two hosts close the group at MAX, the third waits as a
# spare and leaves when the job ends. counted_once — a rank on host 3 fails: all three hosts
# restart, and the one restart is counted once for the job (TORCHELASTIC_RESTART_COUNT=1 on all
# six ranks, "1 of 1" on every host, though three agents saw it). kubeflow_elastic — three pods with the environment of a PyTorchJob's elasticPolicy run
# `torchrun` (accel) as one 3 x 2 job; training — workers/elastic_train.py (python3-torch Gloo, a checkpoint every 5 steps);
# host 3 dies mid-training (everything in its namespace SIGKILLed), hosts 1 and 2 re-form as
# 2 x 2 and resume from the last checkpoint, then host 3's agent is started again and the job
# scales back to 3 x 2 and finishes: every step done once in the final weights, and the loss of
# a run that never failed (2 ranks on one machine) within 1e-9. etcd_training, etcd_example — the
# same two on etcd (--rdzv_backend etcd, an etcd member on each host, a cluster of three) with
# host 1 killed instead: machine 0, the workers' store and an etcd member at once; hosts 2 and 3
# re-form with host 2 as machine 0, and host 1 (its etcd member, then its agent) started again
# joins as machine 2. etcd_member_faults — on etcd, while 3 x 2 ranks train, the leader and a
# follower stopped and killed for 2 s and 10 s each: no machine lost, no restart. etcd_quorum_lost — two members
# hung for 60 s (no quorum) while 3 x 2 ranks train: training goes on, each agent says so once,
# no machine lost, no restart. Needs root; skipped otherwise.
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
EXAMPLE=${3:-}
W=$(cd "$(dirname "$0")/workers" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "creating network namespaces needs root"
/usr/bin/python3 -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
source "$(dirname "$0")/netns_lib.sh"
trap 'netns3_down; [[ -n ${KEEP:-} ]] || rm -rf "$SCRATCH"' EXIT
netns3_up $$ 2>"$SCRATCH/ip.err" || skip "creating the bridge and namespaces failed: $(cat "$SCRATCH/ip.err")"

# said PATTERN [FILES...]: waits (at most 120 s) for a line matching PATTERN in the agents' output
# (default: every $SCRATCH/h*.out).
said() {
  local pattern=$1 i files; shift
  for i in $(seq 1 2400); do
    files=("$@"); ((${#files[@]})) || files=("$SCRATCH"/h*.out)  # a log appears when its agent starts
    grep -qE "$pattern" "${files[@]}" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "no line matching '$pattern' in 120 s:
$(tail -n 5 "${files[@]}" 2>&1)"
}

# step_reached PATTERN: waits (at most 120 s) for a line of $TRAIN/steps matching PATTERN.
step_reached() {
  local i
  for i in $(seq 1 2400); do
    grep -qE "$1" "$TRAIN/steps" 2>/dev/null && return 0
    sleep 0.05
  done
  fail "no step line matching '$1' in 120 s: $(tail -3 "$TRAIN/steps" 2>&1)
--- host 1: $(cat "$SCRATCH/h1.out")"
}

export OUT_DIR=$SCRATCH/out MARKER=accel-netns-elastic-$$
mkdir -p "$OUT_DIR"
# behave_host I LOG NNODES [ARGS...]: an agent on host I running workers/behave.sh in the background
# (behaviours from BEHAVE_* in the environment), its pid in $!. LAST_CALL: its last_call_timeout
# (1 s unless set).
behave_host() {
  local i=$1 log=$2 nnodes=$3; shift 3
  local conf=keep_alive_interval=0.5,keep_alive_max_attempt=3,last_call_timeout=${LAST_CALL:-1}
  ((i == 0)) && conf="is_host=1,$conf"
  ip netns exec "${NS3[$i]}" "$ACCEL" launch --nnodes "$nnodes" --nproc_per_node 2 --rdzv_backend c10d \
    --rdzv_endpoint "${ADDR3[0]}:29611" --rdzv_timeout 60 --rdzv_conf "$conf" "$@" \
    "$W/behave.sh" "$MARKER" >"$SCRATCH/$log" 2>&1 &
}
# files_count GLOB N: waits (at most 60 s) for N files in $OUT_DIR matching GLOB.
files_count() {
  local i
  for i in $(seq 1 1200); do
    (($(compgen -G "$OUT_DIR/$1" | wc -l) >= $2)) && return 0
    sleep 0.05
  done
  fail "fewer than $2 files $1 in 60 s: $(ls "$OUT_DIR")"
}
no_worker_left() { ! pgrep -f "$MARKER" >/dev/null || fail "workers left: $(pgrep -af "$MARKER")"; }

elastic_store_host() {
  export BEHAVE_DEFAULT=ready-sleep
  behave_host 0 h1.out 2:3; p1=$!
  behave_host 1 h2.out 2:3; p2=$!
  behave_host 2 h3.out 2:3; p3=$!
  files_count 'ready.*' 6
  local start=$(date +%s%N) r2 r3
  { ip netns pids "${NS3[0]}" | xargs -r kill -KILL 2>/dev/null || true; }   # host 1: its agent, its store, its workers
  set +e; wait $p2; r2=$?; wait $p3; r3=$?; set -e
  local ms=$((($(date +%s%N) - start) / 1000000))
  echo "host 1 (the store's host) killed: hosts 2 and 3 ended ${ms} ms later (exit $r2, $r3)"
  for h in h2 h3; do
    expect_contains "$(cat "$SCRATCH/$h.out")" "lost contact with the master agent's store at ${ADDR3[0]}:29611"
    expect_contains "$(cat "$SCRATCH/$h.out")" "this machine cannot go on without it"
  done
  [[ $r2 != 0 && $r3 != 0 ]] || fail "hosts 2 and 3 exited $r2 $r3 without the store"
  ((ms <= 10000)) || fail "hosts 2 and 3 took ${ms} ms to end (want <= 10000)"
  no_worker_left
  echo "host 2 said:"; grep -E "lost|culprit|exits" "$SCRATCH/h2.out" | sed 's/^/  /' 
}

elastic_spares() {
  export BEHAVE_DEFAULT=sleep-while-world:0   # never world 0: every rank finishes once go exists
  # MIN is host 1 alone: its last call starts as it registers, so a long one lets host 2 fill
  # the group (MAX closes it at once).
  export LAST_CALL=30
  behave_host 0 h1.out 1:2; p1=$!
  behave_host 1 h2.out 1:2; p2=$!
  files_count 'up.*' 4
  behave_host 2 h3.out 1:2; p3=$!
  said "spare" "$SCRATCH/h3.out"
  touch "$OUT_DIR/go"
  local r1 r2 r3
  set +e; wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?; set -e
  [[ $r1 == 0 && $r2 == 0 && $r3 == 0 ]] || fail "agents exited $r1 $r2 $r3: $(cat "$SCRATCH"/h*.out)"
  for r in 0 1 2 3; do [[ $(cat "$OUT_DIR/done.0.$r") == "world=4 restart=0" ]] || fail "rank $r: $(cat "$OUT_DIR/done.0.$r" 2>&1)"; done
  [[ ! -e $OUT_DIR/started.4 ]] || fail "the spare's workers ran"
  expect_contains "$(cat "$SCRATCH/h1.out")" "machine 0 of 2: ranks 0–1 of 4"
  echo "host 3 said:"; grep -i "spare" "$SCRATCH/h3.out" | sed 's/^/  /'
}

elastic_counted_once() {
  export BEHAVE_DEFAULT=sleep-until-attempt:1 BEHAVE_5=fail-in-attempt:0:5
  behave_host 0 h1.out 3 --max_restarts 1; p1=$!
  behave_host 1 h2.out 3 --max_restarts 1; p2=$!
  behave_host 2 h3.out 3 --max_restarts 1; p3=$!
  local r1 r2 r3
  set +e; wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?; set -e
  [[ $r1 == 0 && $r2 == 0 && $r3 == 0 ]] || fail "agents exited $r1 $r2 $r3: $(cat "$SCRATCH"/h*.out)"
  for r in 0 1 2 3 4 5; do [[ $(cat "$OUT_DIR/done.1.$r") == "world=6 restart=1" ]] || fail "rank $r: $(cat "$OUT_DIR/done.1.$r" 2>&1)"; done
  for h in h1 h2 h3; do
    expect_contains "$(cat "$SCRATCH/$h.out")" "(1 of 1 restarts, counted for the whole job)"
  done
  [[ -z $(compgen -G "$OUT_DIR/done.2.*") ]] || fail "a third attempt ran"
}

# The kill-and-rejoin cases (training, example): 3 hosts x 2 ranks, --nnodes 2:3 over a c10d
# endpoint on host 1, keep-alives every 0.5 s. Each case sets `job` (its launch flags after these)
# and `run` (the script and its arguments).
conf=keep_alive_interval=0.5,keep_alive_max_attempt=3
elastic_job=(--nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint "${ADDR3[0]}:29611"
  --max_restarts 2 --rdzv_timeout 120)
host() {  # host I LOG [RDZV_CONF]: an agent on host I, in the background; its pid in $!
  ip netns exec "${NS3[$1]}" "$ACCEL" launch "${elastic_job[@]}" "${job[@]}" --rdzv_conf "${3:-$conf}" \
    "${run[@]}" >"$SCRATCH/$2" 2>&1 &
}
three_hosts() {  # pids: the three agents' pids
  local first=$conf
  [[ -n ${ETCD3:-} ]] || first="is_host=1,$conf"
  host 0 h1.out "$first"; pids=($!)
  # On etcd the machines rank by their registrations: host I is machine I once it registered.
  [[ -z ${ETCD3:-} ]] || etcd_registered 1
  host 1 h2.out; pids+=($!)
  [[ -z ${ETCD3:-} ]] || etcd_registered 2
  host 2 h3.out; pids+=($!)
}
# The host the kill-and-rejoin cases kill (index into NS3): host 3 on c10d (host 1 holds the
# endpoint there), host 1 — machine 0, with its etcd member — on etcd.
VICTIM=2
kill_victim() {  # everything in the victim's namespace (agent, workers, etcd member); the time in KILLED_AT
  KILLED_AT=$(date +%s%N)
  { ip netns pids "${NS3[$VICTIM]}" | xargs -r kill -KILL 2>/dev/null || true; }
}
ms_since_kill() { echo $((($(date +%s%N) - KILLED_AT) / 1000000)); }
victim_back() {  # the victim's etcd member (on etcd) and agent started again; its log is hNb.out
  [[ -z ${ETCD3:-} ]] || etcd_member $VICTIM 2
  host $VICTIM "h$((VICTIM + 1))b.out"
  pv=$!
}
# three_hosts_succeed: waits for the three agents (the victim's second one); each must exit 0.
# Sets $all.
three_hosts_succeed() {
  local i p r codes="" ok=1
  all=""
  for i in 0 1 2; do
    if ((i == VICTIM)); then p=$pv; else p=${pids[$i]}; fi
    set +e; wait "$p"; r=$?; set -e
    codes+="$r "; ((r == 0)) || ok=0
  done
  all="$(cat "$SCRATCH"/h*.out)"
  ((ok)) || fail "agents exited $codes: $all"
}

# The etcd cases: an etcd member on each host (a cluster of three at ADDR3:2379), the agents
# given all three endpoints. etcd_member I [N]: host I's member in the background (its data in
# $SCRATCH/etcdI, kept when it is killed, so that a member started again rejoins; its log
# etcdI.N.log), waiting until it serves.
etcd_member() {
  local i=$1 n=${2:-1} a=${ADDR3[$1]} cluster="" m _
  for m in 0 1 2; do cluster+="${cluster:+,}h$((m + 1))=http://${ADDR3[$m]}:2380"; done
  ip netns exec "${NS3[$i]}" etcd --name "h$((i + 1))" --data-dir "$SCRATCH/etcd$i" \
    --listen-client-urls "http://$a:2379" --advertise-client-urls "http://$a:2379" \
    --listen-peer-urls "http://$a:2380" --initial-advertise-peer-urls "http://$a:2380" \
    --initial-cluster "$cluster" --initial-cluster-token "netns-$$" >"$SCRATCH/etcd$i.$n.log" 2>&1 &
  ETCD_PID[$i]=$!  # etcd itself: ip netns exec execs it
  ((n > 1)) || return 0
  for _ in $(seq 1 400); do
    grep -q "ready to serve client requests" "$SCRATCH/etcd$i.$n.log" && return 0
    sleep 0.05
  done
  fail "host $((i + 1))'s etcd member did not serve again: $(tail -3 "$SCRATCH/etcd$i.$n.log")"
}
# etcd_registered N [ENDPOINTS]: waits (at most 60 s) until N agents registered in the job's
# round (their member keys, read with etcdctl on host 2; ENDPOINTS: $ETCD3).
etcd_registered() {
  local _
  for _ in $(seq 1 1200); do
    (($(ip netns exec "${NS3[1]}" env ETCDCTL_API=3 etcdctl --endpoints "${2:-$ETCD3}" get --prefix "" \
      --keys-only 2>/dev/null | grep -c "/member/") >= $1)) && return 0
    sleep 0.05
  done
  fail "$1 agent(s) did not register in etcd in 60 s: $(cat "$SCRATCH/h1.out")"
}
# etcd_leader: the index (0-2) of the member that leads now, as the members say (asked again for
# up to 10 s while none does: an election may be on).
etcd_leader() {
  local status i _
  for _ in $(seq 1 100); do
    status=$(ip netns exec "${NS3[1]}" env ETCDCTL_API=3 etcdctl --endpoints "$ETCD3" endpoint status -w simple 2>&1)
    for i in 0 1 2; do
      grep -Eq "^(http://)?${ADDR3[$i]//./\\.}:2379, [0-9a-f]+, [^,]*, [^,]*, true," <<<"$status" && { echo "$i"; return; }
    done
    sleep 0.1
  done
  fail "no etcd member says it leads: $status"
}
# etcd_evidence: what the members said about leaders and leases (for a failure's message).
etcd_evidence() { grep -hiE "revok|became leader|lease" "$SCRATCH"/etcd*.log | tail -20; }
etcd_cluster_up() {  # three members (they wait for each other), then the job's flags for etcd
  local i _ ok
  command -v etcd >/dev/null || skip "etcd is not installed (etcd-server; scripts/setup.sh)"
  for i in 0 1 2; do etcd_member $i; done
  for _ in $(seq 1 400); do
    ok=1
    for i in 0 1 2; do grep -q "ready to serve client requests" "$SCRATCH/etcd$i.1.log" || ok=0; done
    ((ok)) && break
    sleep 0.05
  done
  ((ok)) || fail "the etcd cluster did not form: $(tail -3 "$SCRATCH"/etcd?.1.log)"
  ETCD3="${ADDR3[0]}:2379,${ADDR3[1]}:2379,${ADDR3[2]}:2379"
  VICTIM=0
  # etcd elects a new leader when host 1's member (maybe the leader) dies: a window of 3 s.
  conf=keep_alive_interval=1,keep_alive_max_attempt=3
  elastic_job=(--nnodes 2:3 --nproc_per_node 2 --rdzv_backend etcd --rdzv_endpoint "$ETCD3"
    --rdzv_id "netns-$$" --max_restarts 2 --rdzv_timeout 120)
}

etcd_training() {  # etcd_training STEPS EVERY: 3 x 2 ranks train on etcd; returns at step 10
  etcd_cluster_up
  steps=$1
  TRAIN=$SCRATCH/train CKPT=$SCRATCH/ckpt
  mkdir -p "$TRAIN" "$CKPT"
  job=(--python /usr/bin/python3)
  run=("$W/elastic_train.py" "$CKPT" "$steps" "$2" "$TRAIN" 0.1)
  three_hosts
  step_reached "^1[0-9] world=6 restart=0"
}
trained_without_loss() {  # every agent succeeded; all $steps steps at world 6, none lost or dropped
  local p worlds all
  for p in "${pids[@]}"; do
    wait "$p" || fail "an agent failed: $(cat "$SCRATCH"/h*.out); etcd: $(etcd_evidence)"
  done
  worlds=$(awk '{print $2, $3}' "$TRAIN/steps" | uniq | paste -sd,)
  [[ $worlds == "world=6 restart=0" ]] || fail "worlds: $worlds; $(cat "$SCRATCH"/h*.out)"
  [[ $(tail -1 "$TRAIN/steps" | cut -d' ' -f1) == "$steps" ]] || fail "last step: $(tail -1 "$TRAIN/steps")"
  all=$(cat "$SCRATCH"/h*.out)
  [[ $all != *"lost"* && $all != *"dropped"* ]] || fail "a machine was lost or dropped: $all; etcd: $(etcd_evidence)"
}

# member_fault ROLE SIGNAL SECONDS: etcd's leader's member or a follower's (ROLE) hangs (STOP) or
# dies (KILL) for SECONDS, then goes on or is started again (serving before this returns).
MEMBER_RUNS=(1 1 1)
member_fault() {
  local role=$1 signal=$2 seconds=$3 victim
  victim=$(etcd_leader)
  [[ $role == leader ]] || victim=$(((victim + 1) % 3))
  echo "etcd: host $((victim + 1))'s member ($role) gets SIG$signal for $seconds s"
  kill "-$signal" "${ETCD_PID[$victim]}"
  sleep "$seconds"
  if [[ $signal == STOP ]]; then
    kill -CONT "${ETCD_PID[$victim]}"
  else
    wait "${ETCD_PID[$victim]}" 2>/dev/null || true
    MEMBER_RUNS[$victim]=$((MEMBER_RUNS[$victim] + 1))
    etcd_member "$victim" "${MEMBER_RUNS[$victim]}"
  fi
}

# The Kubernetes cases: pods as the hosts, each with exactly a fixture's environment (and PATH,
# where `torchrun` is accel under that name), in $SCRATCH (where TorchX's train.py is).
FIXTURES=$(cd "$(dirname "$0")/../fixtures/kubernetes" && pwd)
mkdir -p "$SCRATCH/bin"
ln -s "$(readlink -f "$ACCEL")" "$SCRATCH/bin/torchrun"
POD_PIDS=()
pod() {  # pod I FIXTURE CMD...: pod I's command on host I in the background, output in podI.out
  local i=$1 fixture=$2; shift 2
  (cd "$SCRATCH" && exec ip netns exec "${NS3[$i]}" env -i PATH="$SCRATCH/bin:/usr/bin:/bin" \
    $(grep -v '^#' "$FIXTURES/$fixture") PYTHONPATH="$W" "$@") >"$SCRATCH/pod$i.out" 2>&1 &
  POD_PIDS+=($!)
}
# pods_formed_one_job: every pod exits 0, its ranks of one 3 x 2 job all-reduced, pod 0 machine 0;
# sets $all.
pods_formed_one_job() {
  local pid codes="" r
  for pid in "${POD_PIDS[@]}"; do set +e; wait "$pid"; codes+="$? "; set -e; done
  all=$(cat "$SCRATCH"/pod*.out)
  [[ $codes == "0 0 0 " ]] || fail "pods exited $codes: $all"
  for r in 0 1 2 3 4 5; do expect_contains "$all" "ok rank=$r world=6 allreduce=21"; done
  expect_contains "$(cat "$SCRATCH/pod0.out")" "machine 0 of 3: ranks 0–1 of 6"
}
etcd_alone() {  # etcd_alone URLS: one etcd member on host 1 serving clients at URLS
  ip netns exec "${NS3[0]}" etcd --name pod0 --data-dir "$SCRATCH/etcd-alone" \
    --listen-client-urls "$1" --advertise-client-urls "${1%%,*}" \
    --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
    --initial-cluster pod0=http://127.0.0.1:2380 >"$SCRATCH/etcd-alone.log" 2>&1 &
  local _
  for _ in $(seq 1 400); do
    grep -q "ready to serve client requests" "$SCRATCH/etcd-alone.log" && return 0
    sleep 0.05
  done
  fail "etcd did not serve: $(tail -3 "$SCRATCH/etcd-alone.log")"
}

# python_training: 80 steps of workers/elastic_train.py (a checkpoint every 5) as the job (`job`,
# `run`), and the reference's final loss in `ref`: the same training on 2 ranks of one machine
# that never fails.
python_training() {
  steps=80
  TRAIN=$SCRATCH/train CKPT=$SCRATCH/ckpt
  mkdir -p "$TRAIN" "$CKPT" "$SCRATCH/ref" "$SCRATCH/refckpt"
  expect_exit 0 "$ACCEL" launch -n 2 --cpu --python /usr/bin/python3 "$W/elastic_train.py" \
    "$SCRATCH/refckpt" $steps 5 "$SCRATCH/ref" 0
  ref=$(sed -n 's/.*loss=//p' "$SCRATCH/ref/result")
  job=(--python /usr/bin/python3)
  run=("$W/elastic_train.py" "$CKPT" $steps 5 "$TRAIN")
}

elastic_training() {
  python_training
  three_hosts
  step_reached "^1[0-9] world=6 restart=0"
  kill_victim
  step_reached "world=4 restart=1"
  echo "host $((VICTIM + 1)) killed: the survivors' next step, as 2 x 2 from the checkpoint, came $(ms_since_kill) ms later"
  victim_back
  step_reached "world=6 restart=1"
  three_hosts_succeed
  survivor=$(cat "$SCRATCH/h$((SURVIVOR + 1)).out")
  expect_contains "$survivor" "lost ($LOST_HOW)"
  expect_contains "$survivor" "(1 of 2 restarts, counted for the whole job)"
  expect_contains "$survivor" "a machine is waiting to join (the group has 2 of at most 3): the group re-forms to take it; stopping the workers here"
  expect_contains "$survivor" "accel: the group re-forms (not counted as a restart)"
  # The worlds in order: 6 ranks, 4 after the loss, 6 again; the last step is the last one.
  worlds=$(awk '{print $2, $3}' "$TRAIN/steps" | uniq | paste -sd,)
  [[ $worlds == "world=6 restart=0,world=4 restart=1,world=6 restart=1" ]] || fail "worlds: $worlds"
  [[ $(tail -1 "$TRAIN/steps" | cut -d' ' -f1) == "$steps" ]] || fail "last step: $(tail -1 "$TRAIN/steps")"
  result=$(cat "$TRAIN/result")
  expect_contains "$result" "steps=$steps "
  loss=${result#*loss=}
  /usr/bin/python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-9 * abs(b))' "$loss" "$ref" ||
    fail "loss $loss differs from the never-failed run's $ref by more than 1e-9 relative"
  echo "final loss $loss, never-failed run $ref"
  echo "host $((SURVIVOR + 1))'s agent said:"
  grep -E "machine [0-9] of|lost|restarting|waiting to join|stopping the workers" <<<"$survivor" | sed 's/^/  /'
  echo "host $((VICTIM + 1)), back:"
  grep -E "machine [0-9] of|spare" "$SCRATCH/h$((VICTIM + 1))b.out" | sed 's/^/  /'
}

# trained_as WORLDS: python_training's steps ran in WORLDS (comma-separated "world=W restart=R", in
# order), up to the last step, and the final loss is the never-failed run's ($ref) within 1e-9.
trained_as() {
  local worlds loss
  worlds=$(awk '{print $2, $3}' "$TRAIN/steps" | uniq | paste -sd,)
  [[ $worlds == "$1" ]] || fail "worlds: $worlds (want $1)"
  [[ $(tail -1 "$TRAIN/steps" | cut -d' ' -f1) == "$steps" ]] || fail "last step: $(tail -1 "$TRAIN/steps")"
  loss=$(sed -n 's/.*loss=//p' "$TRAIN/result")
  /usr/bin/python3 -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(abs(a - b) > 1e-9 * abs(b))' "$loss" "$ref" ||
    fail "loss $loss differs from the never-failed run's $ref by more than 1e-9 relative"
  echo "final loss $loss, never-failed run $ref"
}

# partition: host 3 cut off from hosts 1 and 2 (blackhole routes both ways: packets vanish, as
# in a real partition) while 3 x 2 ranks train over c10d. Hosts 1 and 2 drop it after the
# keep-alive window and go on as 2 x 2; host 3's failure watch gives up (TCP keep-alives, ~5 s),
# its knock at the store gets no answer, so it stops its workers and keeps knocking; the link
# heals, host 3's same agent joins again as a newcomer and the job finishes as 3 x 2: every step
# done once, the loss of a run that never failed.
elastic_partition() {
  python_training
  three_hosts
  step_reached "^1[0-9] world=6 restart=0"
  partition add
  local cut=$(date +%s%N)
  step_reached "world=4 restart=1"
  said "this machine tries to reach it again" "$SCRATCH/h3.out"
  echo "host 3 cut off: it gave the store up and knocks, $((($(date +%s%N) - cut) / 1000000)) ms after the cut"
  partition del
  step_reached "world=6 restart=1"
  local p codes=""
  for p in "${pids[@]}"; do set +e; wait "$p"; codes+="$? "; set -e; done
  all=$(cat "$SCRATCH"/h*.out)
  [[ $codes == "0 0 0 " ]] || fail "agents exited $codes: $all"
  h3=$(cat "$SCRATCH/h3.out")
  expect_contains "$h3" "lost contact with the master agent's store at ${ADDR3[0]}:29611"
  expect_contains "$h3" "the master agent's store at ${ADDR3[0]}:29611 does not answer; this machine tries to reach it again for up to 60 s"
  expect_contains "$h3" "reached the master agent's store at ${ADDR3[0]}:29611 again after"
  # Ranked by arrival at first; back as a newcomer, it follows the members.
  [[ $(grep -c "machine [12] of 3: " <<<"$h3") == 2 ]] || fail "host 3 was not placed twice in a group of 3: $h3"
  [[ $(grep "machine [0-9] of " <<<"$h3" | tail -1) == *"machine 2 of 3: ranks 4–5 of 6" ]] || fail "host 3 did not come back last: $h3"
  grep -qE "machine [12] \($(hostname)\): lost" "$SCRATCH/h1.out" || fail "host 1 did not say host 3 was lost: $(cat "$SCRATCH/h1.out")"
  trained_as "world=6 restart=0,world=4 restart=1,world=6 restart=1"
  echo "host 3 said:"
  grep -E "lost contact|tries to reach|reached|machine [0-9] of" <<<"$h3" | sed 's/^/  /'
}
# health: host 3's --health_check fails (its NIC "down") while hosts 1 and 2 train on c10d: host 3
# stays out saying why once, the others meet at MIN after the last call and train as 2 x 2; the
# check passes (a file appears) and host 3 joins, the group re-forms as 3 x 2, uncounted, and the
# job finishes with every step done once.
elastic_health() {
  unhealthy_host3 "touch '$SCRATCH/healthy'" \
    "this machine fails its health check (command failed: NIC eth1: link down (exit 1)): it stays out of round 0 and checks again every 0.5 s" \
    --health_check "test -e '$SCRATCH/healthy' || { echo 'NIC eth1: link down'; exit 1; }"
  expect_contains "$h3" "machine 2 of 3: ranks 4–5 of 6"
  echo "host 3 said:"
  grep -E "health|machine [0-9] of" <<<"$h3" | sed 's/^/  /'
}
# full_disk: the same with host 3's checkpoint directory (--health_check_dirs) on a filesystem
# with 10 MiB free; it joins once space is freed.
elastic_full_disk() {
  mkdir -p "$SCRATCH/ckpt3"
  mount -t tmpfs -o size=80m tmpfs "$SCRATCH/ckpt3"
  trap 'netns3_down; umount -l "$SCRATCH/ckpt3" 2>/dev/null || true; [[ -n ${KEEP:-} ]] || rm -rf "$SCRATCH"' EXIT
  head -c $((70 << 20)) /dev/zero >"$SCRATCH/ckpt3/old.pt"
  unhealthy_host3 "rm '$SCRATCH/ckpt3/old.pt'" \
    "this machine fails its health check (disk $SCRATCH/ckpt3 failed: 10 MiB free under $SCRATCH/ckpt3, below 64 MiB): it stays out of round 0" \
    --health_check_dirs "$SCRATCH/ckpt3"
}
# unhealthy_host3 FIX NOTICE FLAGS...: hosts 1 and 2 start, then host 3 with FLAGS, which fail
# its health check: it says NOTICE, once, and stays out while the others train as 2 x 2; then
# FIX (a command) makes it healthy, it joins, the group re-forms as 3 x 2, uncounted, and the job
# finishes with every step done once. Its output in $h3.
unhealthy_host3() {
  local fix=$1 notice=$2 quick=$conf,last_call_timeout=1 p codes=""
  shift 2
  python_training
  host 0 h1.out "is_host=1,$quick"; pids=($!)
  host 1 h2.out "$quick"; pids+=($!)
  job+=("$@" --health_check_interval 0.5)
  host 2 h3.out "$quick"; pids+=($!)
  said "fails its health check" "$SCRATCH/h3.out"
  step_reached "^1[0-9] world=4 restart=0"
  eval "$fix"
  step_reached "world=6 restart=0"
  for p in "${pids[@]}"; do set +e; wait "$p"; codes+="$? "; set -e; done
  all=$(cat "$SCRATCH"/h*.out)
  [[ $codes == "0 0 0 " ]] || fail "agents exited $codes: $all"
  h3=$(cat "$SCRATCH/h3.out")
  expect_contains "$h3" "$notice"
  [[ $(grep -c "fails its health check" <<<"$h3") == 1 ]] || fail "host 3 said it more than once: $h3"
  expect_contains "$h3" "health checks pass again: this machine joins the job"
  trained_as "world=4 restart=0,world=6 restart=0"
}
# cpu_cap PERCENT: a CPU cgroup capped at PERCENT of one CPU (v1's cpu controller, else v2's
# cpu.max); its directory in CGROUP, removed at exit. Skips the case where neither can be made.
cpu_cap() {
  local v1=/sys/fs/cgroup/cpu v2=/sys/fs/cgroup
  if [[ -w $v1/cgroup.procs && -e $v1/cpu.cfs_quota_us ]]; then
    CGROUP=$v1/accel-straggler-$$
    mkdir "$CGROUP" && echo 100000 >"$CGROUP/cpu.cfs_period_us" && echo $(($1 * 1000)) >"$CGROUP/cpu.cfs_quota_us"
  elif grep -qw cpu $v2/cgroup.controllers 2>/dev/null; then
    CGROUP=$v2/accel-straggler-$$
    mkdir "$CGROUP" && echo "$(($1 * 1000)) 100000" >"$CGROUP/cpu.max"
  else
    skip "no CPU cgroup to cap a host with (cgroup v1 cpu or v2 cpu.max)"
  fi
  trap 'netns3_down; rmdir "$CGROUP" 2>/dev/null || true; [[ -n ${KEEP:-} ]] || rm -rf "$SCRATCH"' EXIT
}
# The seconds per step of the lines of $TRAIN/steps at world $1 (after the first $2 of them).
seconds_per_step() {
  /usr/bin/python3 - "$TRAIN/steps" "$1" "${2:-0}" <<'PY'
import sys
t = [float(l.split("t=")[1]) for l in open(sys.argv[1]) if f" world={sys.argv[2]} " in l]
t = t[int(sys.argv[3]):]
print((t[-1] - t[0]) / (len(t) - 1))
PY
}
# Host 3's machine, capped at 30 % of a CPU, is the straggler: its ranks' matrix products take
# about three times as long as the others'. Machine 0's agent names its ranks within 30 s of the
# first step with a score that matches the slowdown the job itself shows (the step time at world
# 6 over the step time once the group went on without it), excludes its machine
# (--straggler_action exclude); host 3 leaves, and hosts 1 and 2 go on at full pace as 2 x 2,
# uncounted.
elastic_straggler() {
  cpu_cap 30
  TRAIN=$SCRATCH/train
  mkdir -p "$TRAIN"
  export WORK_ITERS=500 DONE=$SCRATCH/done STEPS_FILE=$TRAIN/steps
  job=(--python /usr/bin/python3 --straggler_window 10 --straggler_action exclude --log_dir "$SCRATCH/logs")
  run=("$W/straggler.py")
  host 0 h1.out "is_host=1,$conf"; pids=($!)
  host 1 h2.out; pids+=($!)
  # Host 3's agent starts in the capped cgroup (moved there from outside: a namespace's /sys does
  # not show it), and its workers with it.
  ip netns exec "${NS3[2]}" sh -c 'while [ ! -e "$0" ]; do sleep 0.01; done; exec "$@"' "$SCRATCH/capped" \
    "$ACCEL" launch "${elastic_job[@]}" "${job[@]}" --rdzv_conf "$conf" "${run[@]}" >"$SCRATCH/h3.out" 2>&1 &
  pids+=($!)
  echo $! >"$CGROUP/cgroup.procs"
  touch "$SCRATCH/capped"
  step_reached "^1 world=6 "
  local started=$SECONDS
  said "straggles" "$SCRATCH/h1.out"
  local named=$((SECONDS - started))
  ((named <= 30)) || fail "named $named s after the first step (want 30 s at most)"
  said "this machine leaves the job" "$SCRATCH/h3.out"
  step_reached "^[0-9]+ world=4 "
  # Twenty steps at world 4, then stop.
  local first4=$(grep -c " world=4 " "$TRAIN/steps")
  for i in $(seq 1 1200); do (($(grep -c " world=4 " "$TRAIN/steps") >= first4 + 20)) && break; sleep 0.05; done
  touch "$DONE"
  local codes=""
  for p in "${pids[@]}"; do set +e; wait "$p"; codes+="$? "; set -e; done
  all=$(cat "$SCRATCH"/h*.out)
  [[ $codes == "0 0 0 " ]] || fail "agents exited $codes: $all"
  h1=$(cat "$SCRATCH/h1.out")
  # c10d ranks machines by arrival: host 3 is machine 1 or 2.
  local m
  m=$(grep -oE "machine [12] of 3: ranks" "$SCRATCH/h3.out" | head -1 | cut -d' ' -f2)
  [[ -n $m ]] || fail "host 3 never joined: $(cat "$SCRATCH/h3.out")"
  grep -qE "^accel: rank ($((2 * m))|$((2 * m + 1))) \(machine $m\) straggles: " <<<"$h1" || fail "no rank of machine $m named: $h1"
  [[ $(grep -cE "straggles: " <<<"$h1") == $(grep -cE "\(machine $m\) straggles: " <<<"$h1") ]] || fail "a fast rank named: $h1"
  expect_contains "$h1" "machine $m is excluded as a straggler's (rank "
  expect_contains "$h1" "accel: the group re-forms (not counted as a restart)"
  expect_contains "$h1" "machine 0 of 2: ranks 0–1 of 4"
  expect_contains "$(cat "$SCRATCH/h3.out")" "accel: this machine leaves the job: machine $m is excluded as a straggler's"
  # The score: its ranks' last, as machine 0's summary.json keeps them for the attempt with it (the
  # first notice comes as soon as a window's score crosses the threshold).
  score=$(/usr/bin/python3 - "$SCRATCH/logs" "$m" <<'PY'
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/*/summary.json"):
    scores = json.load(open(path))["attempts"][0]["straggler_scores"]
    mine = [s["score"] for s in scores if s["machine"] == int(sys.argv[2])]
    if mine:
        print(sum(mine) / len(mine))
PY
)
  [[ -n $score ]] || fail "no straggler scores in any summary.json: $(cat "$SCRATCH"/logs/*/summary.json)"
  slow=$(seconds_per_step 6 2) fast=$(seconds_per_step 4 2)
  echo "host 3 (machine $m) named ${named} s after the first step, score $score; a step took $slow s at world 6 with it, $fast s at world 4 without it"
  /usr/bin/python3 -c "import sys; s, slow, fast = map(float, sys.argv[1:]); sys.exit(not abs(s - fast / slow) <= 0.15)" "$score" "$slow" "$fast" ||
    fail "score $score does not match the slowdown: 1 / ($slow / $fast) (± 0.15)"
  # Full pace without it: a step at world 4 takes at most half the time of a step with it.
  /usr/bin/python3 -c "import sys; sys.exit(not float(sys.argv[2]) <= float(sys.argv[1]) / 2)" "$slow" "$fast" ||
    fail "not at full pace without the straggler: $fast s a step against $slow s with it"
}
# partition add|del: blackhole routes between host 3 and hosts 1 and 2, both ways.
partition() {
  ip -n "${NS3[2]}" route "$1" blackhole "${ADDR3[0]}/32"
  ip -n "${NS3[2]}" route "$1" blackhole "${ADDR3[1]}/32"
  ip -n "${NS3[0]}" route "$1" blackhole "${ADDR3[2]}/32"
  ip -n "${NS3[1]}" route "$1" blackhole "${ADDR3[2]}/32"
}

elastic_example() {
  [[ -x $EXAMPLE ]] || fail "usage: netns_elastic.sh example ACCEL FASHION_MNIST"
  steps=200 CKPT=$SCRATCH/ckpt
  train=(--model mlp --global_batch 48 --steps $steps --checkpoint_every 10 --no-progress)
  expect_exit 0 "$ACCEL" launch -n 4 --cpu "$EXAMPLE" "${train[@]}" --checkpoint_dir "$SCRATCH/refckpt"
  ref=$OUT
  # The job ends on 6 processes: a never-failed run on 6 as well, whose distance from the run on 4
  # (the fp32 sums' order alone) widens the tolerance.
  expect_exit 0 "$ACCEL" launch -n 6 --cpu "$EXAMPLE" "${train[@]}" --checkpoint_dir "$SCRATCH/refckpt6"
  ref6=$OUT
  job=(--cpu)
  run=("$EXAMPLE" "${train[@]}" --checkpoint_dir "$CKPT")
  three_hosts
  said "checkpoint at step 20 on 6 processes"
  kill_victim
  said "resumed from $CKPT/latest at step [0-9]+ on 4 processes"
  echo "host $((VICTIM + 1)) killed: the survivors resumed as 2 x 2 from the checkpoint $(ms_since_kill) ms later"
  said "checkpoint at step [0-9]+ on 4 processes"
  victim_back
  said "resumed from $CKPT/latest at step [0-9]+ on 6 processes"
  three_hosts_succeed
  survivor=$(cat "$SCRATCH/h$((SURVIVOR + 1)).out")
  # Each round resumed where the last checkpoint left off, and the job ended at its last step.
  rounds=$(grep -ohE "resumed from [^ ]+ at step [0-9]+ on [0-9]+ processes" "$SCRATCH"/h*.out | sed 's/.* at //')
  echo "rounds resumed at: $(paste -sd, <<<"$rounds")"
  [[ $(wc -l <<<"$rounds") == 2 ]] || fail "expected two resumed rounds: $rounds"
  report=$(grep -h "model mlp, 6 processes ([a-z]*), fp32: " "$SCRATCH"/h*.out) || fail "no final report on 6 processes: $all"
  expect_contains "$report" "(job step $steps)"
  value() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" <<<"$2"; }
  loss=$(value "final loss" "$report") refloss=$(value "final loss" "$ref")
  accuracy=$(value "test accuracy" "$report") refaccuracy=$(value "test accuracy" "$ref")
  refloss6=$(value "final loss" "$ref6") refaccuracy6=$(value "test accuracy" "$ref6")
  echo "final loss $loss, never-failed runs $refloss (4 processes) and $refloss6 (6); test accuracy $accuracy%, never-failed $refaccuracy% and $refaccuracy6%"
  # The README's tolerance: the same samples per step, summed in another order (6 or 4 ranks,
  # Gloo or shared memory), in fp32: the final loss within 1e-3 relative of the run on 4, plus
  # how far the run on 6 is from it; the accuracy within 0.3 points, plus the same.
  awk -v a="$loss" -v b="$refloss" -v c="$refloss6" 'BEGIN { d = a - b; s = c - b; if (d < 0) d = -d; if (s < 0) s = -s; exit !(d <= 1e-3 * b + s) }' ||
    fail "final loss $loss differs from the never-failed run's $refloss by more than 1e-3 relative plus the 6-process run's distance ($refloss6)"
  awk -v a="$accuracy" -v b="$refaccuracy" -v c="$refaccuracy6" 'BEGIN { d = a - b; s = c - b; if (d < 0) d = -d; if (s < 0) s = -s; exit !(d <= 0.3 + s) }' ||
    fail "test accuracy $accuracy% differs from the never-failed run's $refaccuracy% by more than 0.3 points plus the 6-process run's distance ($refaccuracy6%)"
}

case $CASE in
training | example)
  # c10d: host 3 killed; host 1 (the endpoint's host) hears it and says so.
  SURVIVOR=0 LOST_HOW="its agent is gone"
  "elastic_$CASE"
  ;;
etcd_training | etcd_example)
  # etcd: host 1 (machine 0, its store, an etcd member) killed; host 2 carries on as machine 0.
  etcd_cluster_up
  SURVIVOR=1 LOST_HOW="its lease ended"
  "elastic_${CASE#etcd_}"
  # Machine 0 and its store moved to host 2; host 1, back, joined after the members before it.
  store="the workers' store is machine 0's ($(hostname), "
  expect_contains "$survivor" "machine 1 of 3: ranks 2–3 of 6; $store${ADDR3[0]}:"
  expect_contains "$survivor" "going on without machine 0 ($(hostname)) lost (its lease ended)"
  expect_contains "$survivor" "machine 0 of 2: ranks 0–1 of 4; $store${ADDR3[1]}:"
  expect_contains "$survivor" "machine 0 of 3: ranks 0–1 of 6; $store${ADDR3[1]}:"
  expect_contains "$(cat "$SCRATCH/h1b.out")" "machine 2 of 3: ranks 4–5 of 6; $store${ADDR3[1]}:"
  ;;
store_host|spares|counted_once|partition|health|full_disk|straggler)
  "elastic_$CASE"
  ;;
etcd_member_faults)
  # etcd's faults cost no machine: while 3 x 2 ranks train, the leader's member and then a
  # follower's hang (SIGSTOP) or die (SIGKILL, then started again), for 2 s and for 10 s each —
  # eight faults one after another. No lease ends, nobody is lost, nothing restarts: every step
  # at world 6. A leader that stalls longer than a lease and resumes may revoke leases on etcd
  # before 3.4.31 / 3.5.13 (Debian 12 has 3.4.23; etcd-io/etcd#15247): the agents' renewals,
  # spread over the endpoints with a deadline well inside the window, leave it none to revoke.
  etcd_training 700 5
  for fault in STOP KILL; do
    for role in leader follower; do
      for seconds in 2 10; do member_fault "$role" "$fault" "$seconds"; done
    done
  done
  running=$(wc -l <"$TRAIN/steps")
  ((running < steps)) || fail "training ended before the last fault did ($running steps)"
  trained_without_loss
  echo "the leader and a follower stopped and killed for 2 s and 10 s each (step $running by the last): $steps steps at world 6, no restart"
  ;;
etcd_quorum_lost)
  # etcd out of reach for a minute costs nothing: while 3 x 2 ranks train, two of the three
  # members hang (SIGSTOP) for 60 s — the cluster has no quorum, so no request of any agent
  # lands. The workers need no etcd: they train on (steps are written meanwhile); each agent says
  # once that etcd is out of reach and once that it answers again; no lease ends (etcd expires
  # none without a leader, and the next leader gives each its TTL again), nobody is lost, nothing
  # restarts. The two hung are followers: a leader that stalls and resumes revokes leases on
  # Debian 12's etcd 3.4.23 (etcd-io/etcd#15247; etcd_member_faults above).
  etcd_training 1000 50
  leader=$(etcd_leader)
  a=$(((leader + 1) % 3)) b=$(((leader + 2) % 3))
  echo "etcd: host $((leader + 1))'s member leads; hosts $((a + 1)) and $((b + 1))'s hang for 60 s"
  kill -STOP "${ETCD_PID[$a]}" "${ETCD_PID[$b]}"
  before=$(wc -l <"$TRAIN/steps")
  sleep 60
  during=$(($(wc -l <"$TRAIN/steps") - before))
  kill -CONT "${ETCD_PID[$a]}" "${ETCD_PID[$b]}"
  trained_without_loss
  ((during >= 300)) || fail "only $during steps in the 60 s without etcd"
  for h in 1 2 3; do
    out=$(grep -c "etcd is out of reach" "$SCRATCH/h$h.out")
    back=$(grep -c "etcd answers again" "$SCRATCH/h$h.out")
    [[ $out == 1 && $back == 1 ]] || fail "host $h said 'out of reach' $out times and 'answers again' $back times: $(cat "$SCRATCH/h$h.out")"
  done
  echo "quorum lost for 60 s: $during steps meanwhile, $steps at world 6, no restart; each agent said so once"
  ;;
kubeflow_elastic)
  # Three pods of a PyTorchJob with elasticPolicy (min 2, max 3, c10d, maxRestarts 3, 2 processes
  # per pod), each with exactly the environment the v1 operator gives it
  # (tests/fixtures/kubernetes/pytorchjob_v1_elastic_worker1.env, and PATH) and the command
  # `torchrun train.py` — torchrun being accel under that name. The rendezvous endpoint is pod
  # train-worker-0's name (host 1 here); the pods form one 3 x 2 job.
  for ns in "${NS3[@]}"; do netns_hosts "$ns" "${ADDR3[0]} train-worker-0"; done
  for i in 0 1 2; do pod $i pytorchjob_v1_elastic_worker1.env "$SCRATCH/bin/torchrun" "$W/ddp_gloo.py"; done
  pods_formed_one_job
  ;;
kubeflow_etcd)
  # The same PyTorchJob with rdzvBackend etcd, rdzvHost etcd-service, rdzvPort 2379: an etcd pod
  # (a member on host 1 here, named etcd-service) and three workers that meet on it.
  command -v etcd >/dev/null || skip "etcd is not installed (etcd-server; scripts/setup.sh)"
  etcd_alone "http://${ADDR3[0]}:2379"
  for ns in "${NS3[@]}"; do netns_hosts "$ns" "${ADDR3[0]} etcd-service"; done
  for i in 0 1 2; do
    pod $i pytorchjob_v1_elastic_etcd_worker1.env "$SCRATCH/bin/torchrun" "$W/ddp_gloo.py"
    # On etcd the pods rank by arrival: pod 0 registers first, to be machine 0.
    ((i > 0)) || etcd_registered 1 "${ADDR3[0]}:2379"
  done
  pods_formed_one_job
  expect_contains "$all" "the machines meet on etcd at etcd-service:2379"
  ;;
torchx_etcd)
  # TorchX's dist.ddp on Kubernetes with --rdzv_backend etcd, its container command run as
  # written (`bash -c "torchrun ... --rdzv_endpoint ${TORCHX_RANK0_HOST:=localhost}:2379 ..."`):
  # etcd on the first pod (host 1, also on its loopback), which reaches it as localhost, the
  # others by Volcano's name for it. The first pod must tell the others an address they reach.
  command -v etcd >/dev/null || skip "etcd is not installed (etcd-server; scripts/setup.sh)"
  etcd_alone "http://${ADDR3[0]}:2379,http://127.0.0.1:2379"
  for ns in "${NS3[@]}"; do netns_hosts "$ns" "${ADDR3[0]} train-0"; done
  ln -s "$W/ddp_gloo.py" "$SCRATCH/train.py"
  for i in 0 1 2; do
    replica=$((i == 0 ? 0 : 1))
    pod $i "torchx_ddp_etcd_replica$replica.env" bash -c "$(cat "$FIXTURES/torchx_ddp_etcd_replica$replica.cmd")"
    ((i > 0)) || etcd_registered 1 "${ADDR3[0]}:2379"  # pod 0 first: machine 0, whose store is the workers'
  done
  pods_formed_one_job
  expect_contains "$(cat "$SCRATCH/pod0.out")" "etcd (localhost) is reached through loopback here: the other machines are told to reach this one at v1$$ (${ADDR3[0]})"
  expect_contains "$(cat "$SCRATCH/pod1.out")" "the workers' store is machine 0's ($(hostname), ${ADDR3[0]}:"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: netns_elastic $CASE"
