#!/usr/bin/env bash
# Rendezvous of N agents on loopback (N simulated machines, one /bin/sh rank each), accel's
# static rendezvous against torchrun 2.6's c10d (Debian trixie's, in scripts/torch2_chroot.sh's
# chroot), in one run:
#   first rank  time from starting the N agents to the first rank running (the round closed)
#   all done    time until every agent exited
#   peak RSS    the agents' summed resident memory at its peak (sampled every 20 ms: a job
#               shorter than that is under-counted)
# and how each grows with N. Every agent is started at once; on 2 cores starting the processes
# is part of the cost, for both launchers alike: for accel, where the time to the first rank goes
# is printed below the table — starting N accel processes the same way (`accel --version`,
# measured in the same run) against the rest (the rendezvous, the rank's spawn).
#   scripts/bench/rendezvous.sh [--sizes "16 64 256 1024"] [--torchrun-max N] [--quick]
# --torchrun-max (default 64): the largest N run under torchrun (each of its agents is a Python
# process with torch imported: about 250 MiB and 1.6 s of CPU on the 2-core VM). --quick (ctest's bench.rendezvous_quick): N = 4, accel only.
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes="16 64 256 1024"
torchrun_max=64
quick=0
while (($#)); do
  case $1 in
    --sizes) sizes=$2; shift 2 ;;
    --torchrun-max) torchrun_max=$2; shift 2 ;;
    --quick) quick=1; sizes=4; shift ;;
    *) echo "usage: scripts/bench/rendezvous.sh [--sizes \"N ...\"] [--torchrun-max N] [--quick]" >&2; exit 2 ;;
  esac
done
build=${ACCEL_BUILD_DIR:-build}
[[ "$build" == /* ]] || build=$(pwd)/$build
accel=$build/apps/accel/accel
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
root=$(pwd)
scratch=$(mktemp -d /tmp/accel-bench-rdzv.XXXXXX)
trap 'pkill -KILL -f "$scratch" 2>/dev/null || true; rm -rf "$scratch"' EXIT
ulimit -n 65536 2>/dev/null || true
# A rank: records when it started (ns since the epoch).
cat >"$scratch/stamp.sh" <<EOF
#!/bin/sh
date +%s%N >>"$scratch/starts"
EOF
chmod +x "$scratch/stamp.sh"

# sample_rss PATTERN: the peak of the summed RSS (KiB) of the processes whose command line
# matches PATTERN, until $scratch/stop exists; written to $scratch/peak.
sample_rss() {
  local peak=0 now
  while [[ ! -e $scratch/stop ]]; do
    now=$(ps -eo rss=,args= | awk -v p="$1" 'index($0, p) && !/awk/ {s += $1} END {print s + 0}')
    ((now > peak)) && peak=$now
    sleep 0.02
  done
  echo "$peak" >"$scratch/peak"
}

# measure NAME N COMMAND...: runs COMMAND (which starts the N agents and waits for them) with the
# sampler beside it; prints one row.
measure() {
  local name=$1 n=$2
  shift 2
  rm -f "$scratch/starts" "$scratch/stop" "$scratch/peak"
  sample_rss "$scratch/stamp.sh" &
  local sampler=$! t0
  t0=$(date +%s%N)
  "$@" >"$scratch/$name.$n.log" 2>&1 || { echo "$name with N=$n failed:" >&2; tail -20 "$scratch/$name.$n.log" >&2; touch "$scratch/stop"; exit 1; }
  local t1
  t1=$(date +%s%N)
  touch "$scratch/stop"
  wait $sampler
  local ranks first
  ranks=$(cat "$scratch/starts" 2>/dev/null | wc -l)
  ((ranks == n)) || { echo "$name with N=$n: $ranks of $n ranks ran" >&2; exit 1; }
  first=$(sort -n "$scratch/starts" | head -1)
  awk -v name="$name" -v n="$n" -v first=$(((first - t0) / 1000000)) -v done=$(((t1 - t0) / 1000000)) \
    -v peak="$(cat "$scratch/peak")" 'BEGIN {
      printf "%-9s %6d %15.2f %13.2f %15.1f %10.2f\n", name, n, first / 1000, done / 1000, peak / 1024, peak / 1024 / n
    }' | tee -a "$scratch/rows"
}

# A port for the job's store, below the kernel's ephemeral range: a thousand agents' connections
# (and those of the size before, waiting out TIME_WAIT) hold ports in that range, and the master
# must be able to bind its own.
store_port() {
  local low
  low=$(awk '{ print $1 }' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  echo $((10000 + RANDOM % (low - 10000)))
}

# accel: machine 0 hosts the store, machines 1..N-1 join it (static ranks).
accel_agents() {
  local n=$1 port i pids=()
  port=$(store_port)
  for ((i = 0; i < n; i++)); do
    "$accel" launch -q --num_machines "$n" --machine_rank "$i" --main_process_ip 127.0.0.1 \
      --main_process_port "$port" -n "$n" --cpu --rdzv_timeout 600 "$scratch/stamp.sh" &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i"; done
}

# torchrun 2.6: N agents with the same c10d command line (the first to bind the port hosts it).
torchrun_agents() {
  local n=$1 port
  port=$(store_port)
  "$root/scripts/torch2_chroot.sh" run /bin/bash -c '
    n=$1 port=$2 wrapper=$3 rank=$4
    for ((i = 0; i < n; i++)); do
      USE_LIBUV=0 python3 "$wrapper" --nnodes "$n" --nproc_per_node 1 --rdzv_backend c10d \
        --rdzv_endpoint 127.0.0.1:$port --rdzv_conf join_timeout=600 --no-python "$rank" &
    done
    wait' sh "$n" "$port" "$root/tests/e2e/workers/torchrun26.py" "$scratch/stamp.sh"
}

# start_only N: seconds to start N accel processes at once and see them all exit (`--version`):
# the process start alone, the way accel_agents starts the agents.
start_only() {
  local n=$1 i t0 pids=()
  t0=$(date +%s%N)
  for ((i = 0; i < n; i++)); do "$accel" --version >/dev/null & pids+=($!); done
  for i in "${pids[@]}"; do wait "$i"; done
  awk -v ns=$(($(date +%s%N) - t0)) 'BEGIN { printf "%.2f", ns / 1e9 }'
}

printf '%-9s %6s %15s %13s %15s %10s\n' launcher N "first rank (s)" "all done (s)" "peak RSS (MiB)" "MiB/agent"
for n in $sizes; do
  measure accel "$n" accel_agents "$n"
  start=$(start_only "$n")
  first=$(awk -v n="$n" '$1 == "accel" && $2 == n { print $3 }' "$scratch/rows")
  echo "$start $first" >>"$scratch/where.$n"
  if ((!quick && n <= torchrun_max)); then
    if reason=$("$root/scripts/torch2_chroot.sh" check 2>&1); then
      measure torchrun "$n" torchrun_agents "$n"
    else
      echo "torchrun  $n: not run ($reason)"
    fi
  fi
done
# How the cost grows: each launcher's figures at its largest N against its smallest.
awk '{ if (!($1 in n0)) { n0[$1] = $2; f0[$1] = $4; r0[$1] = $5 } n1[$1] = $2; f1[$1] = $4; r1[$1] = $5 }
  END { for (l in n0) if (n1[l] > n0[l])
    printf "%s: N x%.0f (%d -> %d): all done x%.1f, peak RSS x%.1f\n", l, n1[l] / n0[l], n0[l], n1[l], f1[l] / f0[l], r1[l] / r0[l] }' "$scratch/rows"
# Where accel's time to the first rank goes, per N.
for n in $sizes; do
  read -r start first <"$scratch/where.$n"
  awk -v n="$n" -v s="$start" -v f="$first" 'BEGIN {
    printf "accel N=%d: starting %d accel processes at once takes %.2f s of the %.2f s to the first rank; the rendezvous and the rank'"'"'s spawn %.2f s\n", n, n, s, f, (f > s ? f - s : 0) }'
done
# accel against torchrun at each N both ran.
awk '{ t[$1 " " $2] = $4; r[$1 " " $2] = $5; ns[$2] = 1 }
  END { for (n in ns) if (("torchrun " n) in t)
    printf "N=%d: torchrun took %.0fx accel'"'"'s time and %.0fx its peak memory\n", n, t["torchrun " n] / t["accel " n], r["torchrun " n] / r["accel " n] }' "$scratch/rows"
