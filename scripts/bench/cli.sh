#!/usr/bin/env bash
# CLI start-up: hyperfine of `accel env`, `accel config show` and `accel --help` against the
# floor a Python-based tool pays (`python3 -c 'import torch'`, Debian's torch), in one run.
# Prints the table and each command's ratio to the reference.
#   scripts/bench/cli.sh [--runs N | --quick]       (--quick, ctest's bench.cli_quick: 3 runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=30
[[ "${1:-}" == "--runs" ]] && runs=$2
[[ "${1:-}" == "--quick" ]] && runs=3
accel=${ACCEL_BUILD_DIR:-build}/apps/accel/accel
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine missing: scripts/setup.sh" >&2; exit 1; }

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export HF_HOME=$scratch/hf
"$accel" config default >/dev/null

hyperfine --warmup 1 --runs "$runs" -N --export-json "$scratch/r.json" \
  --command-name "python3 -c 'import torch' (reference)" "/usr/bin/python3 -c 'import torch'" \
  --command-name "accel env" "$accel env" \
  --command-name "accel config show" "$accel config show" \
  --command-name "accel --help" "$accel --help" >/dev/null

/usr/bin/python3 scripts/bench/support/ratio_table.py "$scratch/r.json" 40
