#!/usr/bin/env bash
# An elastic job on three hosts (network namespaces on a bridge, tests/e2e/netns_lib.sh), 2 ranks
# each, with --nnodes 2:3 over a c10d endpoint on host 1:
#   netns_elastic.sh CASE /path/to/accel
# CASE: kubeflow_elastic — three pods with the environment of a PyTorchJob's elasticPolicy run
# `torchrun` (accel) as one 3 x 2 job; training — workers/elastic_train.py (python3-torch Gloo, a checkpoint every 5 steps);
# host 3 dies mid-training (everything in its namespace SIGKILLed), hosts 1 and 2 re-form as
# 2 x 2 and resume from the last checkpoint, then host 3's agent is started again and the job
# scales back to 3 x 2 and finishes: every step done once in the final weights, and the loss of
# a run that never failed (2 ranks on one machine) within 1e-9. Needs root; skipped otherwise.
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
W=$(cd "$(dirname "$0")/workers" && pwd)
skip() { echo "SKIPPED: $*"; exit 77; }
[[ $(id -u) == 0 ]] || skip "creating network namespaces needs root"
/usr/bin/python3 -c 'import torch' 2>/dev/null || skip "python3-torch is not installed"
source "$(dirname "$0")/netns_lib.sh"
trap 'netns3_down; rm -rf "$SCRATCH"' EXIT
netns3_up $$ 2>"$SCRATCH/ip.err" || skip "creating the bridge and namespaces failed: $(cat "$SCRATCH/ip.err")"

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

case $CASE in
training)
  steps=80
  TRAIN=$SCRATCH/train CKPT=$SCRATCH/ckpt
  mkdir -p "$TRAIN" "$CKPT" "$SCRATCH/ref" "$SCRATCH/refckpt"
  # The reference: the same training on 2 ranks of one machine that never fails.
  expect_exit 0 "$ACCEL" launch -n 2 --cpu --python /usr/bin/python3 "$W/elastic_train.py" \
    "$SCRATCH/refckpt" $steps 5 "$SCRATCH/ref" 0
  ref=$(sed -n 's/.*loss=//p' "$SCRATCH/ref/result")
  conf=keep_alive_interval=0.5,keep_alive_max_attempt=3
  job=(--nnodes 2:3 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint "${ADDR3[0]}:29611"
       --max_restarts 2 --rdzv_timeout 120 --python /usr/bin/python3)
  run=("$W/elastic_train.py" "$CKPT" $steps 5 "$TRAIN")
  host() {  # host I LOG [RDZV_CONF]: an agent on host I, in the background; its pid in $!
    ip netns exec "${NS3[$1]}" "$ACCEL" launch "${job[@]}" --rdzv_conf "${3:-$conf}" "${run[@]}" >"$SCRATCH/$2" 2>&1 &
  }
  host 0 h1.out "is_host=1,$conf"; p1=$!
  host 1 h2.out; p2=$!
  host 2 h3.out; p3=$!
  step_reached "^1[0-9] world=6 restart=0"
  start=$(date +%s%N)
  ip netns pids "${NS3[2]}" | xargs -r kill -KILL   # host 3 dies: its agent and its workers
  step_reached "world=4 restart=1"
  echo "host 3 killed: the survivors' next step, as 2 x 2 from the checkpoint, came $((($(date +%s%N) - start) / 1000000)) ms later"
  host 2 h3b.out; p3=$!   # host 3 comes back
  step_reached "world=6 restart=1"
  set +e; wait $p1; r1=$?; wait $p2; r2=$?; wait $p3; r3=$?; set -e
  all="$(cat "$SCRATCH/h1.out") $(cat "$SCRATCH/h2.out") $(cat "$SCRATCH/h3b.out")"
  [[ $r1 == 0 && $r2 == 0 && $r3 == 0 ]] || fail "agents exited $r1 $r2 $r3: $all"
  expect_contains "$(cat "$SCRATCH/h1.out")" "lost (no keep-alive)"
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
  expect_contains "$(cat "$SCRATCH/pod0.out")" "machine 0 of 3: ranks 0..1 of 6"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: netns_elastic $CASE"
