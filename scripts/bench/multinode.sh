#!/usr/bin/env bash
# Two machines (network namespaces joined by a veth pair, tests/e2e/netns_lib.sh), one agent
# each, accel against torchrun (Debian's torch 1.13 through support/torchrun_fixed.py, static
# rendezvous, GLOO_SOCKET_IFNAME set by hand as its users must), in one run:
#   1. a whole 2 x 2 python3-torch Gloo job (init, all_reduce, a DDP step, barrier), hyperfine;
#   2. failure propagation: rank 2 on host B exits 9 after 1 s while every other rank sleeps;
#      the time until both launchers have exited (bounded at LIMIT s: torchrun never stops
#      host A's workers, which do not talk to anyone).
#   scripts/bench/multinode.sh [--runs N | --quick]  (root: it creates network namespaces)
# --quick (ctest's bench.multinode_quick): accel only, 2 runs; exits 77 without root.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=5
[[ "${1:-}" == "--runs" ]] && runs=$2
launchers=(accel torchrun)
[[ "${1:-}" == "--quick" ]] && { runs=2; launchers=(accel); }
LIMIT=${LIMIT:-15}
[[ $(id -u) == 0 ]] || { echo "needs root (ip netns)" >&2; [[ "${1:-}" == "--quick" ]] && exit 77; exit 1; }
accel=$(realpath "${ACCEL_BUILD_DIR:-build}")/apps/accel/accel
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
support=$(pwd)/scripts/bench/support
workers=$(pwd)/tests/e2e/workers
py=/usr/bin/python3
scratch=$(mktemp -d)
source tests/e2e/netns_lib.sh
trap 'netns_down; rm -rf "$scratch"' EXIT
netns_up bench$$
export HF_HOME=$scratch/hf OMP_NUM_THREADS=1

# A worker for the failure case: rank 2 fails after 1 s, the others sleep until stopped.
cat >"$scratch/fail_one.sh" <<'EOF'
#!/bin/bash
if [[ $RANK == 2 ]]; then sleep 1; echo "rank 2 fails" >&2; exit 9; fi
exec sleep 1000
EOF
chmod +x "$scratch/fail_one.sh"

# pair.sh LAUNCHER WHAT: one launcher per host, waits for both (at most LIMIT s).
cat >"$scratch/pair.sh" <<EOF
#!/bin/bash
launcher=\$1 what=\$2 port=\$((29600 + RANDOM % 300))
host() {  # NS NODE_RANK IFACE
  if [[ \$launcher == accel ]]; then
    cmd=("$accel" launch -q --num_machines 2 --machine_rank \$2 --main_process_ip $A --main_process_port \$port -n 4 --cpu)
  else
    cmd=(env GLOO_SOCKET_IFNAME=\$3 $py $support/torchrun_fixed.py --nnodes 2 --node_rank \$2 --master_addr $A
         --master_port \$port --nproc_per_node 2 --redirects 0)
  fi
  if [[ \$what == job ]]; then
    [[ \$launcher == accel ]] && cmd+=(--python $py)
    cmd+=($workers/ddp_gloo.py)
  else
    [[ \$launcher == accel ]] || cmd+=(--no_python)
    cmd+=($scratch/fail_one.sh)
  fi
  timeout -s KILL $LIMIT ip netns exec \$1 "\${cmd[@]}" >/dev/null 2>&1
}
host $NB 1 $VB & b=\$!
host $NA 0 $VA & a=\$!
wait \$a; ra=\$?; wait \$b; rb=\$?
echo "\$ra \$rb" >"$scratch/codes.\$launcher.\$what"
# Workers a launcher left behind count against it, but must not outlive the run.
ip netns pids $NA | xargs -r kill -KILL 2>/dev/null; ip netns pids $NB | xargs -r kill -KILL 2>/dev/null
exit 0
EOF
chmod +x "$scratch/pair.sh"

for l in "${launchers[@]}"; do
  "$scratch/pair.sh" "$l" job
  [[ $(cat "$scratch/codes.$l.job") == "0 0" ]] || { echo "$l: the 2x2 job failed ($(cat "$scratch/codes.$l.job"))" >&2; exit 1; }
done

jobs=() fails=()
for l in "${launchers[@]}"; do
  jobs+=(--command-name "$l: 2 hosts x 2 ranks, gloo job" "$scratch/pair.sh $l job")
  fails+=(--command-name "$l: rank 2 fails at 1 s" "$scratch/pair.sh $l fail")
done
hyperfine --warmup 1 --runs "$runs" -N --export-json "$scratch/job.json" "${jobs[@]}" >/dev/null
hyperfine --runs 3 -N --export-json "$scratch/fail.json" "${fails[@]}" >/dev/null

"$py" - "$scratch/job.json" "$scratch/fail.json" "$LIMIT" "$(cat "$scratch/codes.accel.fail")" \
  "$(cat "$scratch/codes.torchrun.fail" 2>/dev/null || echo -)" <<'PY'
import json, sys
job = json.load(open(sys.argv[1]))["results"]
fail = json.load(open(sys.argv[2]))["results"]
limit = float(sys.argv[3])
print("| command | median | min | max |")
print("|---|---|---|---|")
for r in job + fail:
    print(f"| {r['command']} | {r['median']:.3f} s | {r['min']:.3f} s | {r['max']:.3f} s |")
if len(job) < 2:  # --quick: accel only
    sys.exit(0)
a, t = job[0]["median"], job[1]["median"]
print(f"\nwhole 2x2 job: torchrun / accel = {t / a:.2f}x")
fa, ft = fail[0]["median"] - 1.0, fail[1]["median"] - 1.0
note = (f" (hit the {limit:.0f} s limit: not stopped by then; exit code 137 is the limit's SIGKILL)"
        if fail[1]["median"] >= limit - 0.5 else "")
print(f"failure on host B -> both launchers exited: accel {fa * 1000:.0f} ms after the failure, "
      f"torchrun {ft:.1f} s{note}; exit codes (A B): accel {sys.argv[4]}, torchrun {sys.argv[5]}")
PY
