#!/usr/bin/env bash
# Machine 0 lost on etcd: accel (--rdzv_backend etcd, etcd's v3 API) against torchrun 1.13
# (Debian's python3-torch with python3-etcd, through tests/e2e/workers/torchrun113.py: --rdzv_backend
# etcd-v2) on the same etcd member, in
# one run. Issue 34's point 7(a). Three agents on this machine, each of
#   --nnodes 2:3 --nproc_per_node 1 --max_restarts 3 --rdzv_conf last_call_timeout=3
# whose one worker (torch 1.13) all-reduces with the others over Gloo and records when its first
# all-reduce went through, in which world and under which agent.
# Once the group of 3 runs, the agent of global rank 0 (machine 0) and its worker are SIGKILLed:
# the time until both survivors' workers all-reduce again in a world of 2, and of it the launcher's
# part: until the later survivor's worker began, its first line, before torch's import (the rest is
# the same Python under both launchers). Each launcher keeps its
# default keep-alive settings (accel: 1 s x 3; torch: 5 s x 3). etcd (Debian's etcd-server) is
# started by this script with --enable-v2 (for torch's backend), loopback, its own data directory.
#   scripts/bench/etcd_recovery.sh [--runs N] [--quick]
# --quick (ctest's bench.etcd_recovery_quick): accel only, one run.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=3
quick=0
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --quick) quick=1; runs=1; shift ;;
    *) echo "usage: scripts/bench/etcd_recovery.sh [--runs N] [--quick]" >&2; exit 2 ;;
  esac
done
build=${ACCEL_BUILD_DIR:-build}
[[ "$build" == /* ]] || build=$(pwd)/$build
accel=$build/apps/accel/accel
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
command -v etcd >/dev/null || { echo "SKIPPED: etcd is not installed (etcd-server; scripts/setup.sh)"; exit 77; }
scratch=$(mktemp -d /tmp/accel-bench-etcd-recovery.XXXXXX)
pids=()
# Every command of the clean-up tolerates what is gone already (set -e holds in the trap too).
trap 'kill -KILL ${etcd_pid:-} 2>/dev/null || true; for p in "${pids[@]}"; do pkill -KILL -P "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done; [[ -n ${KEEP_SCRATCH:-} ]] || rm -rf "$scratch"' EXIT

source tests/e2e/etcd_lib.sh
etcd_start "$scratch" $((37000 + ($$ % 1000) * 2)) --enable-v2 || exit 1
etcd_pid=$ETCD_PID
endpoint=$ETCD_ENDPOINT

# The worker: joins the others over Gloo, records once its first all-reduce went through (the
# job running, in which world, under which agent), then all-reduces every 50 ms (a peer's death
# fails the collective: torchrun learns of a lost machine only so).
cat >"$scratch/worker.py" <<EOF
import os, time
began = time.time_ns()  # before torch's import: where the launcher's part ends
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
with open("$scratch/starts", "a") as f:
    f.write(f"{time.time_ns()} {os.environ['WORLD_SIZE']} {os.environ['RANK']} {os.getppid()} {began}\\n")
while True:
    dist.all_reduce(t)
    time.sleep(0.05)
EOF

# agent LAUNCHER ID: one agent in the background (its pid in pids).
agent() {
  local common=(--nnodes 2:3 --nproc_per_node 1 --max_restarts 3 --rdzv_endpoint "$endpoint"
                --rdzv_id "$2" --rdzv_conf last_call_timeout=3)
  if [[ $1 == accel ]]; then
    "$accel" run -q --rdzv_backend etcd "${common[@]}" --python /usr/bin/python3 "$scratch/worker.py" \
      >>"$scratch/accel.log" 2>&1 &
  else
    /usr/bin/python3 tests/e2e/workers/torchrun113.py --rdzv_backend etcd-v2 "${common[@]}" \
      "$scratch/worker.py" >>"$scratch/torchrun.log" 2>&1 &
  fi
  pids+=($!)
}

# starts_since T N: the lines of workers started after T (ns) in a world of N, once N did (at
# most 120 s; nothing then).
starts_since() {
  local deadline=$(($(date +%s) + ${WAIT_S:-120})) got
  while (($(date +%s) < deadline)); do
    got=$(awk -v t="$1" -v n="$2" '$1 > t && $2 == n' "$scratch/starts" 2>/dev/null | sort -n)
    [[ -n $got ]] && (($(wc -l <<<"$got") >= $2)) && { echo "$got"; return; }
    sleep 0.05
  done
}

# One run: seconds from machine 0's loss to both survivors running again ("never" past 120 s).
measure() {
  local launcher=$1 id=$1-$2-$$ t formed zero got
  rm -f "$scratch/starts"
  pids=()
  for _ in 0 1 2; do agent "$launcher" "$id"; done
  formed=$(starts_since 0 3)
  [[ -n $formed ]] || { echo "$launcher: the group of 3 never formed" >&2; tail -20 "$scratch/$launcher.log" >&2; return 1; }
  zero=$(awk '$3 == 0 { print $4 }' <<<"$formed" | head -1)  # the agent of global rank 0
  t=$(date +%s%N)
  pkill -KILL -P "$zero" 2>/dev/null || true
  kill -KILL "$zero"
  got=$(starts_since "$t" 2)
  # Both the total and the launcher's part: until the later survivor's worker began, before its
  # import of torch (the rest, torch's import and Gloo's start, is the same Python for both).
  if [[ -z $got ]]; then
    echo never never
  else
    awk -v t="$t" '{ last = $1; if ($5 > began) began = $5 } END { printf "%.2f %.2f\n", (last - t) / 1e9, (began - t) / 1e9 }' <<<"$got"
  fi
  # pkill finds no children of the agent killed above: `|| true`, or set -e ends the clean-up there.
  for p in "${pids[@]}"; do pkill -KILL -P "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do { wait "$p" || true; } 2>/dev/null; done
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : "never") }'; }
echo "etcd $(etcd --version | head -1 | awk '{print $3}') at $endpoint; $(nproc) cores; $runs run(s) each"
printf '%-9s | %s | %s\n' launcher "machine 0 killed -> survivors running again in a world of 2 (s): runs; median" \
  "of which the launcher's, until the later worker began (before torch's import): runs; median"
declare -A med part
for launcher in ${LAUNCHERS:-accel torchrun}; do
  if [[ $launcher == torchrun ]]; then
    ((quick)) && break
    /usr/bin/python3 -c 'import etcd, torch' 2>/dev/null || { echo "torchrun: not run (python3-torch and python3-etcd: scripts/setup.sh)"; break; }
  fi
  totals=() parts=()
  for r in $(seq 1 "$runs"); do
    # In this shell, not a subshell: its agents are in `pids` for the EXIT trap too. (Run in a
    # process substitution whose clean-up set -e cut short, the survivors outlived the script:
    # ctest's run left two agents and their workers running for an hour.)
    measure "$launcher" "$r" >"$scratch/measured"
    read -r total own <"$scratch/measured"
    totals+=("$total") parts+=("$own")
  done
  med[$launcher]=$(printf '%s\n' "${totals[@]}" | median)
  part[$launcher]=$(printf '%s\n' "${parts[@]}" | median)
  printf '%-9s | %s; %s | %s; %s\n' "$launcher" "${totals[*]}" "${med[$launcher]}" "${parts[*]}" \
    "${part[$launcher]}"
done
ratio() { awk -v a="$2" -v t="$3" -v what="$1" 'BEGIN { printf "torchrun / accel (%s): %.1fx\n", what, t / a }'; }
if [[ -n ${med[torchrun]:-} && ${med[torchrun]} != never && ${med[accel]} != never ]]; then
  ratio "to the world of 2" "${med[accel]}" "${med[torchrun]}"
  ratio "the launcher's part" "${part[accel]}" "${part[torchrun]}"
fi
