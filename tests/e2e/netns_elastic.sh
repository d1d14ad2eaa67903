#!/usr/bin/env bash
# An elastic job on three hosts (network namespaces on a bridge, tests/e2e/netns_lib.sh), 2 ranks
# each, with --nnodes 2:3 over a c10d endpoint on host 1:
#   netns_elastic.sh CASE /path/to/accel [/path/to/fashion_mnist]
# CASE: example — the same with the C++ example (libaccel, Gloo across hosts): a checkpoint every
# 10 steps with a global batch of 48 however many ranks there are; the final model's loss and
# test accuracy against a run that never failed (4 ranks on one machine), within the tolerance
# the README states. store_host — host 1, which hosts the job's store, dies while the group of 3
# runs: hosts 2 and 3 (still at least MIN) end within seconds naming the lost store, and leave no
# worker. spares — --nnodes 1:2: the first two hosts close the group at MAX, the third waits as a
# spare and leaves when the job ends. counted_once — a rank on host 3 fails: all three hosts
# restart, and the one restart is counted once for the job (TORCHELASTIC_RESTART_COUNT=1 on all
# six ranks, "1 of 1" on every host, though three agents saw it). kubeflow_elastic — three pods with the environment of a PyTorchJob's elasticPolicy run
# `torchrun` (accel) as one 3 x 2 job; training — workers/elastic_train.py (python3-torch Gloo, a checkpoint every 5 steps);
# host 3 dies mid-training (everything in its namespace SIGKILLed), hosts 1 and 2 re-form as
# 2 x 2 and resume from the last checkpoint, then host 3's agent is started again and the job
# scales back to 3 x 2 and finishes: every step done once in the final weights, and the loss of
# a run that never failed (2 ranks on one machine) within 1e-9. Needs root; skipped otherwise.
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
three_hosts() { host 0 h1.out "is_host=1,$conf"; p1=$!; host 1 h2.out; p2=$!; host 2 h3.out; p3=$!; }
kill_host3() {  # everything in host 3's namespace, its agent and its workers; the time in KILLED_AT
  KILLED_AT=$(date +%s%N)
  { ip netns pids "${NS3[2]}" | xargs -r kill -KILL 2>/dev/null || true; }
}
ms_since_kill() { echo $((($(date +%s%N) - KILLED_AT) / 1000000)); }
host3_back() { host 2 h3b.out; p3=$!; }
# three_hosts_succeed: waits for the three agents (host 3's second one); each must exit 0. Sets $all.
three_hosts_succeed() {
  local r1 r2 r3
  set +e; wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?; set -e
  all="$(cat "$SCRATCH/h1.out") $(cat "$SCRATCH/h2.out") $(cat "$SCRATCH/h3b.out")"
  [[ $r1 == 0 && $r2 == 0 && $r3 == 0 ]] || fail "agents exited $r1 $r2 $r3: $all"
}

case $CASE in
training)
  steps=80
  TRAIN=$SCRATCH/train CKPT=$SCRATCH/ckpt
  mkdir -p "$TRAIN" "$CKPT" "$SCRATCH/ref" "$SCRATCH/refckpt"
  # The reference: the same training on 2 ranks of one machine that never fails.
  expect_exit 0 "$ACCEL" launch -n 2 --cpu --python /usr/bin/python3 "$W/elastic_train.py" \
    "$SCRATCH/refckpt" $steps 5 "$SCRATCH/ref" 0
  ref=$(sed -n 's/.*loss=//p' "$SCRATCH/ref/result")
  job=(--python /usr/bin/python3)
  run=("$W/elastic_train.py" "$CKPT" $steps 5 "$TRAIN")
  three_hosts
  step_reached "^1[0-9] world=6 restart=0"
  kill_host3
  step_reached "world=4 restart=1"
  echo "host 3 killed: the survivors' next step, as 2 x 2 from the checkpoint, came $(ms_since_kill) ms later"
  host3_back
  step_reached "world=6 restart=1"
  three_hosts_succeed
  expect_contains "$(cat "$SCRATCH/h1.out")" "lost (its agent is gone)"
  expect_contains "$(cat "$SCRATCH/h1.out")" "(1 of 2 restarts, counted for the whole job)"
  expect_contains "$(cat "$SCRATCH/h1.out")" "a machine is waiting to join (the group has 2 of at most 3): the group re-forms to take it (not counted as a restart)"
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
  echo "host 1's agent said:"
  grep -E "machine [0-9] of|lost|restarting|waiting to join|stopping the workers" "$SCRATCH/h1.out" | sed 's/^/  /'
  echo "host 3, back:"
  grep -E "machine [0-9] of|spare" "$SCRATCH/h3b.out" | sed 's/^/  /'
  ;;
example)
  [[ -x $EXAMPLE ]] || fail "usage: netns_elastic.sh example ACCEL FASHION_MNIST"
  steps=200 CKPT=$SCRATCH/ckpt
  train=(--model mlp --global_batch 48 --steps $steps --checkpoint_every 10 --no-progress)
  expect_exit 0 "$ACCEL" launch -n 4 --cpu "$EXAMPLE" "${train[@]}" --checkpoint_dir "$SCRATCH/refckpt"
  ref=$OUT
  job=(--cpu)
  run=("$EXAMPLE" "${train[@]}" --checkpoint_dir "$CKPT")
  three_hosts
  said "checkpoint at step 20 on 6 processes"
  kill_host3
  said "resumed from $CKPT/latest at step [0-9]+ on 4 processes"
  echo "host 3 killed: the survivors resumed as 2 x 2 from the checkpoint $(ms_since_kill) ms later"
  said "checkpoint at step [0-9]+ on 4 processes"
  host3_back
  said "resumed from $CKPT/latest at step [0-9]+ on 6 processes"
  three_hosts_succeed
  # Each round resumed where the last checkpoint left off, and the job ended at its last step.
  rounds=$(grep -ohE "resumed from [^ ]+ at step [0-9]+ on [0-9]+ processes" "$SCRATCH"/h*.out | sed 's/.* at //')
  echo "rounds resumed at: $(paste -sd, <<<"$rounds")"
  [[ $(wc -l <<<"$rounds") == 2 ]] || fail "expected two resumed rounds: $rounds"
  report=$(grep -h "model mlp, 6 processes ([a-z]*), fp32: " "$SCRATCH"/h*.out) || fail "no final report on 6 processes: $all"
  expect_contains "$report" "(job step $steps)"
  value() { sed -n "s/.*$1 \([0-9.]*\).*/\1/p" <<<"$2"; }
  loss=$(value "final loss" "$report") refloss=$(value "final loss" "$ref")
  accuracy=$(value "test accuracy" "$report") refaccuracy=$(value "test accuracy" "$ref")
  echo "final loss $loss, never-failed run $refloss; test accuracy $accuracy%, never-failed $refaccuracy%"
  # The README's tolerance: the same samples per step, summed in another order (6 or 4 ranks,
  # Gloo or shared memory), in fp32: the final loss within 1e-3 relative, accuracy within 0.3 points.
  awk -v a="$loss" -v b="$refloss" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-3 * b) }' ||
    fail "final loss $loss differs from the never-failed run's $refloss by more than 1e-3 relative"
  awk -v a="$accuracy" -v b="$refaccuracy" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.3) }' ||
    fail "test accuracy $accuracy% differs from the never-failed run's $refaccuracy% by more than 0.3"
  ;;
store_host|spares|counted_once)
  "elastic_$CASE"
  ;;
kubeflow_elastic)
  # Three pods of a PyTorchJob with elasticPolicy (min 2, max 3, c10d, maxRestarts 3, 2 processes
  # per pod), each with exactly the environment the v1 operator gives it
  # (tests/fixtures/kubernetes/pytorchjob_v1_elastic_worker1.env, and PATH) and the command
  # `torchrun train.py` — torchrun being accel under that name. The rendezvous endpoint is pod
  # train-worker-0's name (host 1 here); the pods form one 3 x 2 job.
  fixture=$(cd "$(dirname "$0")/../fixtures/kubernetes" && pwd)/pytorchjob_v1_elastic_worker1.env
  ln -s "$(readlink -f "$ACCEL")" "$SCRATCH/torchrun"
  for ns in "${NS3[@]}"; do netns_hosts "$ns" "${ADDR3[0]} train-worker-0"; done
  pids=()
  for i in 0 1 2; do
    ip netns exec "${NS3[$i]}" env -i PATH=/usr/bin:/bin $(grep -v '^#' "$fixture") PYTHONPATH="$W" \
      "$SCRATCH/torchrun" "$W/ddp_gloo.py" >"$SCRATCH/pod$i.out" 2>&1 &
    pids+=($!)
  done
  codes=""
  for pid in "${pids[@]}"; do set +e; wait "$pid"; codes+="$? "; set -e; done
  all=$(cat "$SCRATCH"/pod*.out)
  [[ $codes == "0 0 0 " ]] || fail "pods exited $codes: $all"
  for r in 0 1 2 3 4 5; do expect_contains "$all" "ok rank=$r world=6 allreduce=21"; done
  expect_contains "$(cat "$SCRATCH/pod0.out")" "machine 0 of 3: ranks 0–1 of 6"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: netns_elastic $CASE"
