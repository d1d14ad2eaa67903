#!/usr/bin/env bash
# The Fashion-MNIST example (libaccel) under `accel launch`: 2 ranks learn, rank 0 reports once,
# bf16 runs, a checkpoint resumes where it left off (step count and loss; a run that ignored
# it would start at step 0 with the first run's first loss, as the seed is the same), the device
# is the one asked for, and a bad data directory fails with a clear message.
source "$(dirname "$0")/lib.sh"
ACCEL=$1
EXAMPLE=$2

accuracy() { sed -n 's/.*test accuracy \([0-9.]*\)%.*/\1/p' <<<"$1"; }
first_loss() { sed -n 's/.*first loss \([0-9.]*\),.*/\1/p' <<<"$1"; }
final_loss() { sed -n 's/.*final loss \([0-9.]*\),.*/\1/p' <<<"$1"; }

expect_exit 0 "$ACCEL" launch --cpu -n 2 "$EXAMPLE" --model mlp --steps 60 --no-progress --save_state "$SCRATCH/ckpt"
[[ $(grep -c "test accuracy" <<<"$OUT") == 1 ]] || fail "expected one report from rank 0: $OUT"
expect_contains "$OUT" "[rank 0] model mlp, 2 processes (shm), fp32: 60 steps"
acc=$(accuracy "$OUT")
awk -v a="$acc" 'BEGIN { exit !(a > 60) }' || fail "accuracy $acc% after 60 steps"
[[ -f "$SCRATCH/ckpt/model.pt" && -f "$SCRATCH/ckpt/random_states_1.pt" ]] || fail "checkpoint incomplete: $(ls "$SCRATCH/ckpt")"
OUT1=$OUT

expect_exit 0 "$ACCEL" launch --cpu -n 2 "$EXAMPLE" --model mlp --steps 80 --no-progress --load_state "$SCRATCH/ckpt"
expect_contains "$OUT" "[rank 0] resumed from $SCRATCH/ckpt at step 60 on 2 processes"
expect_contains "$OUT" "fp32: 20 steps (job step 80)"
first=$(first_loss "$OUT1") final=$(final_loss "$OUT1") resumed=$(first_loss "$OUT")
[[ -n $first && -n $final && -n $resumed ]] || fail "no losses reported: $OUT1 / $OUT"
awk -v f="$first" -v e="$final" -v r="$resumed" 'BEGIN { exit !(r < f - 0.5 && r < e + 0.5) }' ||
  fail "the resumed run started from scratch: first loss $resumed (first run: $first -> $final)"
acc2=$(accuracy "$OUT")
awk -v a="$acc" -v b="$acc2" 'BEGIN { exit !(b > a - 5) }' || fail "resumed run lost accuracy: $acc% -> $acc2%"

expect_exit 0 "$ACCEL" launch --cpu -n 2 --mixed_precision bf16 "$EXAMPLE" --model cnn --steps 20 --no-progress
expect_contains "$OUT" "model cnn, 2 processes (shm), bf16: 20 steps"

# The device: --cpu trains on the CPU; --device cuda is a GPU run where auto finds one, else an
# error that says why (this LibTorch's CUDA, or no device).
expect_contains "$OUT1" ", on cpu"
expect_exit 0 "$ACCEL" launch -n 1 "$EXAMPLE" --steps 2 --no-progress --no-eval
if grep -q ", on cuda:0" <<<"$OUT"; then
  expect_exit 0 "$ACCEL" launch -n 1 "$EXAMPLE" --device cuda --steps 2 --no-progress --no-eval
  expect_contains "$OUT" ", on cuda:0"
else
  expect_contains "$OUT" ", on cpu"
  expect_exit 1 "$ACCEL" launch -n 1 "$EXAMPLE" --device cuda --steps 2 --no-progress
  expect_contains "$ERR" "fashion_mnist: --device cuda, but this process trains on the CPU: no CUDA device is visible to this LibTorch"
fi

expect_exit 1 "$ACCEL" launch --cpu -n 1 "$EXAMPLE" --data "$SCRATCH/nowhere" --no-progress
expect_contains "$ERR" "cannot open IDX file '$SCRATCH/nowhere/train-images-idx3-ubyte.gz'"
echo "ok: example"
