# A C++ worker on libaccel, launched by torch's own torchrun, joins torchrun's agent store
# (TORCHELASTIC_USE_AGENT_STORE=True) and runs every collective: Debian 12's torchrun 1.13 in the
# main build, Debian trixie's torchrun 2.6 when the tree is built in scripts/torch2_chroot.sh's
# chroot (scripts/torch2_test.sh). Usage: torchrun_cpp.sh TORCHRUN_WRAPPER SHM_WORKER
source "$(dirname "$0")/lib.sh"
WRAPPER=$1 WORKER=$2
export OMP_NUM_THREADS=1
torch=$($PY -c 'import torch; print(torch.__version__)')
# A port torchrun's agent can bind: random tries, the next one when it was taken (never bound
# and closed by the test).
for try in $(seq 1 30); do
  port=$((20000 + RANDOM % 30000))
  set +e
  timeout -k 10 200 $PY "$WRAPPER" --nnodes 1 --nproc_per_node 2 --master_addr 127.0.0.1 --master_port $port \
    --no_python "$WORKER" compare >"$SCRATCH/out" 2>"$SCRATCH/err"
  code=$?
  set -e
  grep -qi "address already in use" "$SCRATCH/err" && ! grep -q "checks=" "$SCRATCH/out" && continue
  break
done
[[ $code == 0 ]] || fail "torchrun $torch with $WORKER exited $code:
$(tail -30 "$SCRATCH/err")"
# Both ranks ran every check (shared memory against Gloo) through torchrun's store.
[[ $(grep -c "checks=" "$SCRATCH/out") == 2 ]] || fail "want checks= from both ranks: $(cat "$SCRATCH/out")"
echo "ok: torchrun $torch ran libaccel's C++ worker: $(tr '\n' ' ' <"$SCRATCH/out")"
