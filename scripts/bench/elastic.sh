#!/usr/bin/env bash
# torchrun's elastic command line, the same on every "machine": two agents on this host (each one
# machine of --nnodes 2) started with the identical command
#   --nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:PORT SCRIPT
# under accel run and under torchrun (Debian's torch 1.13 through support/torchrun_fixed.py), for
# the same 2 x 2 python3-torch Gloo job (init, all_reduce, a DDP step, barrier), in one run with
# hyperfine. Both launchers find the endpoint is this host; the second agent finds the port taken
# and joins. (Across network namespaces torch 1.13's c10d cannot run this job: its workers are
# sent to the rank-0 agent's host name, which the namespaces share; it has no --local_addr.)
#   scripts/bench/elastic.sh [--runs N | --quick]   (--quick, ctest's bench.elastic_quick: accel
#                                                   only, 2 runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=5
[[ "${1:-}" == "--runs" ]] && runs=$2
launchers=(accel torchrun)
[[ "${1:-}" == "--quick" ]] && { runs=2; launchers=(accel); }
accel=$(realpath "${ACCEL_BUILD_DIR:-build}")/apps/accel/accel
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
command -v hyperfine >/dev/null || { echo "hyperfine missing: scripts/setup.sh" >&2; exit 1; }
py=/usr/bin/python3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export HF_HOME=$scratch/hf OMP_NUM_THREADS=1 PYTHON_EXEC=$py

# pair.sh LAUNCHER: both agents with the same command, waits for both (at most 60 s each); a line
# with their exit codes and the count of the ranks' "ok" lines (counted as matches: two workers'
# prints may share a line) is added to $scratch/result.LAUNCHER.
cat >"$scratch/pair.sh" <<EOF
#!/bin/bash
launcher=\$1 port=\$((29700 + RANDOM % 200))
elastic=(--nnodes 2 --nproc_per_node 2 --rdzv_backend c10d --rdzv_endpoint 127.0.0.1:\$port)
if [[ \$launcher == accel ]]; then
  cmd=("$accel" run -q "\${elastic[@]}")
else
  cmd=($py $(pwd)/scripts/bench/support/torchrun_fixed.py "\${elastic[@]}")
fi
cmd+=($(pwd)/tests/e2e/workers/ddp_gloo.py)
timeout -s KILL 60 "\${cmd[@]}" >"$scratch/a.out" 2>&1 & a=\$!
timeout -s KILL 60 "\${cmd[@]}" >"$scratch/b.out" 2>&1 & b=\$!
wait \$a; ra=\$?; wait \$b; rb=\$?
echo "\$ra \$rb \$(cat "$scratch/a.out" "$scratch/b.out" | grep -o 'ok rank=' | wc -l)" >>"$scratch/result.\$launcher"
EOF
chmod +x "$scratch/pair.sh"

for l in "${launchers[@]}"; do
  "$scratch/pair.sh" $l
  [[ $(cat "$scratch/result.$l") == "0 0 4" ]] ||
    { echo "$l: the elastic 2x2 job failed (exit codes, ok lines: $(cat "$scratch/result.$l"))" >&2; exit 1; }
done

commands=()
for l in "${launchers[@]}"; do
  commands+=(--command-name "$([[ $l == accel ]] && echo "accel run" || echo torchrun): 2 agents x 2 ranks, c10d, same command" "$scratch/pair.sh $l")
done
hyperfine --warmup 1 --runs "$runs" -N --export-json "$scratch/r.json" "${commands[@]}" >/dev/null
for l in "${launchers[@]}"; do  # every timed run ran the whole job
  [[ -z $(grep -vx "0 0 4" "$scratch/result.$l") ]] || { echo "$l failed in a timed run: $(cat "$scratch/result.$l")" >&2; exit 1; }
done

"$py" - "$scratch/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
print("| command | median | min | max |")
print("|---|---|---|---|")
for x in r:
    print(f"| {x['command']} | {x['median']:.3f} s | {x['min']:.3f} s | {x['max']:.3f} s |")
if len(r) == 2:  # not with --quick (accel only)
    print(f"\nwhole elastic 2x2 job: torchrun / accel = {r[1]['median'] / r[0]['median']:.2f}x")
PY
