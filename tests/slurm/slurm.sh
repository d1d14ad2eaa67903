#!/usr/bin/env bash
# accel launch under a real SLURM (the two-node cluster of tests/slurm/cluster.sh):
#   slurm.sh CASE /path/to/accel CLUSTER_DIR README
# Cases: agent_per_node, task_per_rank, exit_codes, signals, restarts, sbatch_readme.
source "$(dirname "$0")/../e2e/lib.sh"
CASE=$1
ACCEL=$2
CLUSTER=$3
README=$4
W=$(cd "$(dirname "$0")/../e2e/workers" && pwd)

[[ -f $CLUSTER/env ]] || { echo "SKIPPED: no test cluster in $CLUSTER (its start was skipped or failed)"; exit 77; }
source "$CLUSTER/env"
export PATH=$PATH:/usr/sbin
export OUT_DIR=$SCRATCH/out MARKER=accel-slurm-$$-$RANDOM
mkdir -p "$OUT_DIR"
cd "$SCRATCH"   # job output files land here
PYARGS=(--python /usr/bin/python3)
BEH=("$W/behave.sh" "$MARKER")
job_id() { squeue -h -n "$1" -o %i; }

case $CASE in
agent_per_node)
  # One agent per node, no machine flags: machines, ranks, master and run id come from SLURM.
  expect_exit 0 srun -N2 --ntasks-per-node=1 "$ACCEL" launch --cpu "${PYARGS[@]}" "$W/ddp_gloo.py"
  for r in 0 1; do expect_contains "$OUT" "[rank $r] ok rank=$r world=2 allreduce=3"; done
  expect_contains "$ERR" "machine 1 of 2: rank 1 of 2"
  # --num_processes is the total over the nodes, as in accelerate.
  expect_exit 0 srun -J accel-env-$$ -N2 --ntasks-per-node=1 "$ACCEL" launch --cpu -n 4 "$W/env_dump.sh"
  job=$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$OUT_DIR/rank_0.env")
  [[ $job =~ ^[0-9]+$ ]] || fail "run id is not the SLURM job id: $job"
  for r in 0 1 2 3; do
    check_env $r RANK=$r LOCAL_RANK=$((r % 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 GROUP_RANK=$((r / 2)) \
      GROUP_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + job % 10000)) TORCHELASTIC_RUN_ID=$job \
      TORCHELASTIC_USE_AGENT_STORE=True
  done
  expect_contains "$ERR" "SLURM node 'n1' does not resolve here; using its NodeAddr 127.0.0.1"
  # accel env inside a step says what the agent will use.
  expect_exit 0 srun -N2 --ntasks-per-node=1 --label "$ACCEL" env
  expect_contains "$OUT" "1: - Scheduler: SLURM job"
  expect_contains "$OUT" ": node 1 of 2 (master n1), task 1 of 2 (local 0 of 1)"
  # Two tasks on one node without --no_spawn would be two agents each spawning the job.
  expect_exit 2 srun -N1 -n2 "$ACCEL" launch --cpu "$W/env_dump.sh"
  expect_contains "$ERR" "srun started 2 tasks on 1 node(s)"
  expect_contains "$ERR" "use --ntasks-per-node=1 for one agent per node, or accel launch --no_spawn"
  ;;
task_per_rank)
  # Each srun task becomes one rank (exec'd in place: srun supervises it directly).
  expect_exit 0 srun -N2 -n4 "$ACCEL" launch --no_spawn "${PYARGS[@]}" "$W/ddp_gloo.py"
  for r in 0 1 2 3; do expect_contains "$OUT" "ok rank=$r world=4 allreduce=10"; done
  expect_contains "$ERR" "SLURM: 4 ranks, one per task, on 2 node(s); rank 0 hosts the store"
  expect_exit 0 srun -N2 -n4 "$ACCEL" launch --no_spawn "$W/env_dump.sh"
  job=$(sed -n 's/^SLURM_JOB_ID=//p' "$OUT_DIR/rank_0.env")
  for r in 0 1 2 3; do
    procid=$(env_of $r SLURM_PROCID) localid=$(env_of $r SLURM_LOCALID) nodeid=$(env_of $r SLURM_NODEID)
    check_env $r RANK=$procid LOCAL_RANK=$localid GROUP_RANK=$nodeid WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 \
      GROUP_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$((20000 + job % 10000)) TORCHELASTIC_RUN_ID=$job \
      TORCHELASTIC_USE_AGENT_STORE=False
  done
  # --no_spawn where no scheduler says the rank is an error, not a guess.
  expect_exit 2 env -u SLURM_JOB_ID "$ACCEL" launch --no_spawn /bin/true
  expect_contains "$ERR" "--no_spawn: each task's rank comes from its scheduler"
  ;;
exit_codes)
  # The culprit's exit code reaches srun, in both modes, and sbatch --wait.
  BEHAVE_1=exit:7 expect_exit 7 srun -N2 --ntasks-per-node=1 "$ACCEL" launch --cpu "${BEH[@]}"
  expect_contains "$ERR" "culprit: rank 1 (local rank 0"
  # srun exits with the highest code of its tasks, 143 for one its kill-on-bad-exit terminated:
  # the culprit fails once the others ended (one, slow to start, was once still running).
  rm -f "$OUT_DIR"/pid.*  # the run above's
  BEHAVE_2=exit-after-others:5 expect_exit 5 srun -N2 -n4 --kill-on-bad-exit=1 "$ACCEL" launch --no_spawn "${BEH[@]}"
  cat >"$SCRATCH/job.sh" <<EOF
#!/bin/bash
srun "$ACCEL" launch --cpu -n 4 "${BEH[0]}" "${BEH[1]}"
EOF
  set +e
  OUT=$(BEHAVE_3=exit:3 sbatch --wait -N2 --ntasks-per-node=1 -o "$SCRATCH/job-%j.out" "$SCRATCH/job.sh")
  rc=$?
  set -e
  job=$(sed -n 's/^Submitted batch job //p' <<<"$OUT")
  [[ $rc == 3 ]] || fail "sbatch --wait exited $rc (want 3): $(cat "$SCRATCH/job-$job.out")"
  expect_contains "$(scontrol show job "$job")" "ExitCode=3:0"
  expect_contains "$(cat "$SCRATCH/job-$job.out")" "culprit: rank 3"
  ;;
signals)
  # SIGUSR1 from SLURM reaches every worker and the job goes on; SIGTERM (scancel) stops it.
  name=accel-sig-$$
  BEHAVE_DEFAULT=traps srun -J $name -N2 --ntasks-per-node=1 "$ACCEL" launch --cpu -n 4 --term_timeout 1 "${BEH[@]}" \
    >"$SCRATCH/srun.out" 2>&1 &
  srun_pid=$!
  wait_files 'started.*' 4
  sleep 0.2   # the traps are set right after the started marks
  scancel --signal=USR1 "$(job_id $name)"
  wait_files 'usr1.*' 4
  [[ -z "$(compgen -G "$OUT_DIR/term.*")" ]] || fail "SIGUSR1 stopped the job"
  scancel "$(job_id $name)"
  set +e; wait $srun_pid; rc=$?; set -e
  wait_files 'term.*' 4
  [[ $rc == 143 ]] || fail "srun exited $rc after scancel: $(cat "$SCRATCH/srun.out")"
  expect_contains "$(cat "$SCRATCH/srun.out")" "The agent received SIGTERM and forwarded it to the workers."
  [[ -z "$(pgrep -f "$MARKER")" ]] || fail "workers survived: $(pgrep -af "$MARKER")"
  ;;
restarts)
  # --max_restarts across SLURM nodes: rank 3 (node 1) fails the first attempt; both agents meet
  # again and every rank runs attempt 1 with the same TORCHELASTIC_RESTART_COUNT.
  BEHAVE_DEFAULT=sleep-until-attempt:1 BEHAVE_3=fail-in-attempt:0:5 expect_exit 0 \
    srun -N2 --ntasks-per-node=1 "$ACCEL" launch --cpu -n 4 --max_restarts 1 "${BEH[@]}"
  [[ $(grep -c "attempt 0 failed (rank 3 on machine 1 ($(hostname)) failed with exit code 5); restarting every machine (1 of 1 restarts, counted for the whole job)" <<<"$ERR") == 2 ]] ||
    fail "both agents should say the restart: $ERR"
  for r in 0 1 2 3; do [[ $(cat "$OUT_DIR/done.1.$r") == "world=4 restart=1" ]] || fail "rank $r: $(cat "$OUT_DIR/done.1.$r" 2>&1)"; done
  ;;
sbatch_readme)
  # The sbatch script of the README's "Multi-node" section, as written, with accel on PATH.
  sed -n '/^<!-- sbatch-example -->$/,/^<!-- end -->$/p' "$README" | sed '1,2d;$d' | sed '$d' >"$SCRATCH/train.sbatch"
  head -1 "$SCRATCH/train.sbatch" | grep -q '^#!' || fail "no sbatch script between the README's markers"
  cp "$W/ddp_gloo.py" "$SCRATCH/train.py"
  cp "$W/torch_quirks.py" "$SCRATCH/"  # train.py imports it (a no-op on Debian 12's torch 1.13)
  PATH=$(dirname "$ACCEL"):$PATH PYTHON_EXEC=/usr/bin/python3 expect_exit 0 sbatch --wait "$SCRATCH/train.sbatch"
  job=$(sed -n 's/^Submitted batch job //p' <<<"$OUT")
  log=$(cat "$SCRATCH"/*-"$job".out)
  for r in 0 1 2 3; do expect_contains "$log" "[rank $r] ok rank=$r world=4 allreduce=10"; done
  expect_contains "$log" "machine 1 of 2: ranks 2–3 of 4"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: slurm $CASE"
