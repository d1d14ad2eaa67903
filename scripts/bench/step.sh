#!/usr/bin/env bash
# Where one training step's time goes, the C++ example (libaccel) beside torch's own loop on the
# same model, data and batch (support/ddp_fashion_mnist.py), one rank under accel launch, on a
# GPU (--device cuda: the device's time per phase from CUDA events) or the CPU (the wall clock).
# Each run prints samples/s over the whole run (the first step's loading and autotuning in it)
# and, from its --profile, at the pace of the steps after the first, with ms per step in data,
# forward, backward, sync, optimizer and other (the loop's own work between steps). Variants:
#   cpp        the example as it ships (on a GPU: libaccel's multi-tensor Adam step)
#   cpp-loop   the example with --no-foreach (LibTorch's per-parameter Adam step; the CNN only)
#   py         torch's loop as a user writes it (Adam's default: foreach on CUDA)
#   py-fused   the same with Adam(fused=True) (the CNN on a GPU only)
#   before     --before DIR: another build's example (samples/s only), e.g. the last release's
# Medians of --rounds rounds, the variants alternating within a round; ratios against py.
#   scripts/bench/step.sh [--device cuda|cpu] [--steps S] [--rounds R] [--configs "cnn:no ..."]
#                         [--before BUILD_DIR]    (defaults: cuda if visible, 1000, 3,
#                                                  "cnn:no cnn:bf16 mlp:no")
#   scripts/bench/step.sh --quick    (ctest's bench.step_quick: the CPU, mlp, 12 steps, 1 round)
# PYTHON: the interpreter with torch (default: /usr/bin/python3 where it has torch, else python3).
set -euo pipefail
cd "$(dirname "$0")/../.."
device= steps=1000 rounds=3 configs="cnn:no cnn:bf16 mlp:no" before=
usage="usage: step.sh [--device cuda|cpu] [--steps S] [--rounds R] [--configs \"MODEL:PRECISION ...\"] [--before BUILD_DIR] [--quick]"
while (($#)); do
  case $1 in
    --device) [[ ${2:-} =~ ^(cuda|cpu)$ ]] || { echo "step.sh: --device is cuda or cpu, not '${2:-}'" >&2; exit 2; }
              device=$2; shift 2 ;;
    --steps) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "step.sh: --steps needs a positive integer, not '${2:-}'" >&2; exit 2; }
             steps=$2; shift 2 ;;
    --rounds) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "step.sh: --rounds needs a positive integer, not '${2:-}'" >&2; exit 2; }
              rounds=$2; shift 2 ;;
    --configs) [[ ${2:-} =~ ^((mlp|cnn):(no|bf16|fp16) ?)+$ ]] || { echo "step.sh: --configs takes MODEL:PRECISION pairs like \"cnn:no mlp:bf16\", not '${2:-}'" >&2; exit 2; }
               configs=$2; shift 2 ;;
    --before) [[ -x ${2:-}/apps/examples/fashion_mnist/fashion_mnist ]] || { echo "step.sh: --before: no example in build directory '${2:-}'" >&2; exit 2; }
              before=$2; shift 2 ;;
    --quick) device=cpu steps=12 rounds=1 configs=mlp:no; shift ;;
    *) echo "step.sh: unknown argument '$1' ($usage)" >&2; exit 2 ;;
  esac
done
source scripts/bench/support/example_build.sh
py=${PYTHON:-}
if [[ -z $py ]]; then
  for candidate in /usr/bin/python3 python3; do
    if "$candidate" -c 'import torch' 2>/dev/null; then py=$candidate; break; fi
  done
fi
[[ -n $py ]] || { echo "step.sh: no python with torch (set PYTHON)" >&2; exit 1; }
if [[ -z $device ]]; then
  device=cpu
  "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && device=cuda
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
data=${ACCEL_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
launch=("$accel" launch -q -n 1)
[[ $device == cpu ]] && launch+=(--cpu)

# run VARIANT MODEL PRECISION: one line "run_sps steady_sps data fwd bwd sync opt other step"
run() {
  local variant=$1 model=$2 precision=$3 out=$scratch/out cmd
  case $variant in
    cpp|cpp-loop|before)
      local bin=$example
      [[ $variant == before ]] && bin=$before/apps/examples/fashion_mnist/fashion_mnist
      cmd=("$bin" --model "$model" --steps "$steps" --no-shuffle --no-progress --no-eval --device "$device" --data "$data")
      [[ $variant == before ]] || cmd+=(--profile)
      [[ $variant == cpp-loop ]] && cmd+=(--no-foreach) ;;
    py|py-fused)
      cmd=("$py" scripts/bench/support/ddp_fashion_mnist.py --model "$model" --steps "$steps" --device "$device" --data "$data" --profile)
      [[ $variant == py-fused ]] && cmd+=(--fused_adam) ;;
  esac
  # A variant that fails is reported and left out (a dash); the others still run.
  PYTHONUNBUFFERED=1 "${launch[@]}" --mixed_precision "$precision" --no_python -- "${cmd[@]}" >"$out" 2>&1 || {
    echo "step.sh: $variant $model $precision failed:" >&2; tail -20 "$out" >&2; : >"$scratch/failed"; echo "- - - - - - - - -"; return; }
  local sps steady phases
  sps=$(grep -v '^\[rank [0-9]*\] profile' "$out" | sed -n 's/.* \([0-9][0-9]*\) samples\/s.*/\1/p' | head -1)
  steady=$(sed -n 's/.*: \([0-9][0-9]*\) samples\/s at that pace.*/\1/p' "$out" | head -1)
  phases=$(sed -n 's/.*data \([0-9.]*\), forward \([0-9.]*\), backward \([0-9.]*\), sync \([0-9.]*\), optimizer \([0-9.]*\), other \(-*[0-9.]*\) (step \([0-9.]*\)).*/\1 \2 \3 \4 \5 \6 \7/p' "$out" | head -1)
  echo "${sps:--} ${steady:--} ${phases:-- - - - - - -}"
}

median() { sort -g | awk '{v[NR]=$1} END {if (NR) printf "%.6g\n", (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

echo "step.sh: one rank on $device, $steps steps per run, medians of $rounds rounds ($("$py" -c 'import torch; print("torch", torch.__version__)'; [[ $device == cuda ]] && "$py" -c 'import torch; print("on", torch.cuda.get_device_name(0))' || true))"
printf '%-5s %-5s %-9s | %9s %9s | %7s %7s %7s %7s %7s %7s %7s | %s\n' model prec variant "run sps" "steady" data fwd bwd sync opt other step "steady ÷ py"
for config in $configs; do
  model=${config%%:*} precision=${config##*:}
  variants="cpp py"
  [[ $model == cnn ]] && variants="cpp cpp-loop py"
  [[ $model == cnn && $device == cuda ]] && variants+=" py-fused"
  [[ -n $before ]] && variants+=" before"
  declare -A rows=()
  for ((r = 0; r < rounds; r++)); do
    for v in $variants; do rows[$v]+="$(run "$v" "$model" "$precision")"$'\n'; done
  done
  py_steady=$(printf '%s' "${rows[py]}" | awk '{print $2}' | median)
  for v in $variants; do
    cols=()
    for c in 1 2 3 4 5 6 7 8 9; do
      cols+=("$(printf '%s' "${rows[$v]}" | awk -v c=$c '$c != "-" {print $c}' | median)")
    done
    ratio=$(awk -v a="${cols[1]}" -v b="$py_steady" 'BEGIN {if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-"}')
    printf '%-5s %-5s %-9s | %9s %9s | %7s %7s %7s %7s %7s %7s %7s | %s\n' "$model" "$precision" "$v" \
      "${cols[0]}" "${cols[1]}" "${cols[2]:--}" "${cols[3]:--}" "${cols[4]:--}" "${cols[5]:--}" "${cols[6]:--}" "${cols[7]:--}" "${cols[8]:--}" "$ratio"
  done
  unset rows
done
[[ ! -e $scratch/failed ]]
