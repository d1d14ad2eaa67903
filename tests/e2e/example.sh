#!/usr/bin/env bash
# The Fashion-MNIST example (libaccel) under `accel launch`: 2 ranks learn, rank 0 reports once,
# bf16 runs, a checkpoint resumes, and a bad data directory fails with a clear message.
source "$(dirname "$0")/lib.sh"
ACCEL=$1
EXAMPLE=$2

accuracy() { sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' <<<"$1"; }

expect_exit 0 "$ACCEL" launch --cpu -n 2 "$EXAMPLE" --model mlp --steps 60 --no-progress --save_state "$SCRATCH/ckpt"
[[ $(grep -c "test accuracy" <<<"$OUT") == 1 ]] || fail "expected one report from rank 0: $OUT"
expect_contains "$OUT" "[rank 0] model mlp, 2 processes, fp32: 60 steps"
acc=$(accuracy "$OUT")
awk -v a="$acc" 'BEGIN { exit !(a > 60) }' || fail "accuracy $acc% after 60 steps"
[[ -f "$SCRATCH/ckpt/model.pt" && -f "$SCRATCH/ckpt/random_states_1.pt" ]] || fail "checkpoint incomplete: $(ls "$SCRATCH/ckpt")"

expect_exit 0 "$ACCEL" launch --cpu -n 2 "$EXAMPLE" --model mlp --steps 20 --no-progress --load_state "$SCRATCH/ckpt"
acc2=$(accuracy "$OUT")
awk -v a="$acc" -v b="$acc2" 'BEGIN { exit !(b > a - 5) }' || fail "resumed run lost accuracy: $acc% -> $acc2%"

expect_exit 0 "$ACCEL" launch --cpu -n 2 --mixed_precision bf16 "$EXAMPLE" --model cnn --steps 20 --no-progress
expect_contains "$OUT" "model cnn, 2 processes, bf16: 20 steps"

expect_exit 1 "$ACCEL" launch --cpu -n 1 "$EXAMPLE" --data "$SCRATCH/nowhere" --no-progress
expect_contains "$ERR" "cannot open IDX file '$SCRATCH/nowhere/train-images-idx3-ubyte.gz'"
echo "ok: example"
