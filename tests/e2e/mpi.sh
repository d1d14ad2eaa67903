#!/usr/bin/env bash
# accel launch under Open MPI's mpirun: every MPI process becomes one rank (no --no_spawn
# needed), rank 0 hosts the store, the failing rank's exit code reaches mpirun.
#   mpi.sh CASE /path/to/accel [/path/to/fashion_mnist]   CASE: python_gloo | env_and_exit | example | mpirun_hostfile
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
W=$(cd "$(dirname "$0")/workers" && pwd)
command -v mpirun >/dev/null || { echo "SKIPPED: mpirun not installed (scripts/setup.sh installs openmpi-bin)"; exit 77; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1   # CI runs as root
export OMPI_MCA_btl=self,tcp   # no shared-memory transport warnings in small containers
export OUT_DIR=$SCRATCH/out MARKER=accel-mpi-$$-$RANDOM
mkdir -p "$OUT_DIR"
MPIRUN=(mpirun --oversubscribe -np 4)

case $CASE in
python_gloo)
  expect_exit 0 "${MPIRUN[@]}" "$ACCEL" launch --python /usr/bin/python3 "$W/ddp_gloo.py"
  for r in 0 1 2 3; do expect_contains "$OUT" "ok rank=$r world=4 allreduce=10"; done
  expect_contains "$ERR" "Open MPI: 4 ranks, one per task, on 1 node(s); rank 0 hosts the store at 127.0.0.1:"
  ;;
env_and_exit)
  expect_exit 0 "${MPIRUN[@]}" "$ACCEL" launch "$W/env_dump.sh"
  port=$(env_of 0 MASTER_PORT)
  for r in 0 1 2 3; do
    check_env $r RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 LOCAL_WORLD_SIZE=4 GROUP_RANK=0 GROUP_WORLD_SIZE=1 \
      MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_USE_AGENT_STORE=False OMPI_COMM_WORLD_RANK=$r
  done
  BEHAVE_2=exit:6 expect_exit 6 "${MPIRUN[@]}" "$ACCEL" launch "$W/behave.sh" "$MARKER"
  expect_contains "$ERR" "rank 2 failing"
  ;;
example)
  # libaccel's rank 0 hosts the store itself when no agent does.
  expect_exit 0 mpirun --oversubscribe -np 2 "$ACCEL" launch "$3" --model mlp --steps 30 --no-progress
  expect_contains "$OUT" "model mlp, 2 processes (shm), fp32: 30 steps"
  expect_contains "$OUT" "test accuracy"
  ;;
mpirun_hostfile)
  # --mpirun_hostfile: as accelerate, the job is `mpirun --hostfile H --npernode K -n N --bind-to
  # socket <worker>`, one process the agent supervises; ranks come from MPI, not from RANK.
  echo "localhost slots=2" >"$SCRATCH/hosts"
  cat >"$SCRATCH/mpi_env.sh" <<'EOF2'
#!/usr/bin/env bash
env | sort >"$OUT_DIR/mpi_$OMPI_COMM_WORLD_RANK.env"
echo "MPI rank $OMPI_COMM_WORLD_RANK of $OMPI_COMM_WORLD_SIZE"
exit "${MPI_EXIT:-0}"
EOF2
  chmod +x "$SCRATCH/mpi_env.sh"
  expect_exit 0 "$ACCEL" launch --cpu --num_processes 2 --mpirun_hostfile "$SCRATCH/hosts" "$SCRATCH/mpi_env.sh"
  # Each MPI rank's output labelled by its rank (mpirun --tag-output), not all as the agent's rank 0.
  expect_contains "$OUT" "[rank 0] MPI rank 0 of 2"
  expect_contains "$OUT" "[rank 1] MPI rank 1 of 2"
  for r in 0 1; do
    f="$OUT_DIR/mpi_$r.env"
    [[ -f $f ]] || fail "MPI rank $r did not run: $(ls "$OUT_DIR")"
    for kv in ACCELERATE_USE_CPU=True MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 OMPI_COMM_WORLD_SIZE=2; do
      grep -qx "$kv" "$f" || fail "rank $r lacks $kv: $(cat "$f")"
    done
    ! grep -q '^RANK=' "$f" || fail "rank $r got torchrun's RANK under mpirun"
  done
  [[ ! -f "$OUT_DIR/mpi_2.env" ]] || fail "more than 2 MPI ranks"
  MPI_EXIT=5 expect_exit 5 "$ACCEL" launch --cpu --num_processes 2 --mpirun_hostfile "$SCRATCH/hosts" "$SCRATCH/mpi_env.sh"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: mpi $CASE"
