#!/usr/bin/env bash
# Planning a launch: the time from the command line to every rank's environment, for accel and
# for accelerate's own code computing the same job (an FSDP job of 2 GPUs, flags only: the case
# fsdp_flags of scripts/accelerate_fixtures/cases.json). accelerate's side is its launch_command
# run from its source at a tag (parser, _validate_launch_command, prepare_multi_gpu_env, torch's
# config_from_args) through scripts/accelerate_fixtures/record.py with Debian's torch 1.13, in
# one run with accel's `launch --dry_run_json --dry_run_gpus 2`. Prints the table and the ratio.
#   scripts/bench/plan.sh ACCELERATE_SRC_ROOT [--runs N]   (ACCELERATE_SRC_ROOT/v0.27.2/src/accelerate)
#   scripts/bench/plan.sh --quick [ACCELERATE_SRC_ROOT]   (ctest's bench.plan_quick: 3 runs; without
#                                   the source, accel's row alone, and a line saying so)
# The reference includes the recorder's own small parent interpreter (no torch import there).
set -euo pipefail
cd "$(dirname "$0")/../.."
quick=0 runs=10
if [[ "${1:-}" == "--quick" ]]; then
  quick=1 runs=3 src=${2:-}
else
  src=${1:?usage: scripts/bench/plan.sh ACCELERATE_SRC_ROOT [--runs N]}
  [[ "${2:-}" == "--runs" ]] && runs=$3
fi
accel=$(realpath "${ACCEL_BUILD_DIR:-build}")/apps/accel/accel
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
reference=1
if [[ ! -d "$src/v0.27.2/src/accelerate" ]]; then
  ((quick)) || { echo "no accelerate v0.27.2 source under $src" >&2; exit 1; }
  reference=0
  echo "plan: no accelerate v0.27.2 source${src:+ under $src}: accel's row only (fetch huggingface/accelerate for the reference)"
fi
command -v hyperfine >/dev/null || { echo "hyperfine missing: scripts/setup.sh" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/hf" "$scratch/job" "$scratch/out"
echo 'print(1)' >"$scratch/job/train.py"
argv=$(/usr/bin/python3 -c 'import json,shlex,sys; print(shlex.join(json.load(open(sys.argv[1]))["argv"]))' \
  tests/fixtures/accelerate/v0.27.2/fsdp_flags.json)

reference_cmd=()
((reference)) && reference_cmd=(--command-name "accelerate 0.27.2 launch_command (reference)"
  "/usr/bin/python3 $(pwd)/scripts/accelerate_fixtures/record.py --accelerate-src $src/v0.27.2 --out $scratch/out $(pwd)/scripts/accelerate_fixtures/cases.json --case fsdp_flags")
hyperfine --warmup 1 --runs "$runs" -N --export-json "$scratch/r.json" "${reference_cmd[@]}" \
  --command-name "accel launch --dry_run_json" \
  "env HF_HOME=$scratch/hf sh -c 'cd $scratch/job && exec $accel launch --dry_run_json --dry_run_gpus 2 $argv'" >/dev/null

/usr/bin/python3 scripts/bench/support/ratio_table.py "$scratch/r.json" 46
