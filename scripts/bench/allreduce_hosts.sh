#!/usr/bin/env bash
# Several machines: shared memory inside each plus Gloo between them ("hier", libaccel's
# default for CPU jobs on several machines) against Gloo alone, float32 all-reduce 1 KiB to
# 64 MiB, 2 hosts x 2 ranks: two network namespaces joined by a veth pair
# (tests/e2e/netns_lib.sh), one `accel launch` agent each, in one run.
#   scripts/bench/allreduce_hosts.sh [--min-seconds S | --quick]   (root: it creates network namespaces)
# --quick (ctest's bench.allreduce_hosts_quick): --min-seconds 0.01; exits 77 without root.
# The hosts share this machine's cores and memory, and a veth pair is faster than a real link:
# both favour Gloo alone, which sends LOCAL_WORLD_SIZE times the bytes per machine over the link.
set -euo pipefail
cd "$(dirname "$0")/../.."
min=0.3
[[ "${1:-}" == "--min-seconds" ]] && min=$2
[[ "${1:-}" == "--quick" ]] && min=0.01
[[ $(id -u) == 0 ]] || { echo "needs root (ip netns)" >&2; [[ "${1:-}" == "--quick" ]] && exit 77; exit 1; }
accel=$(realpath "${ACCEL_BUILD_DIR:-build}")/apps/accel/accel
bench=$(realpath "${ACCEL_BUILD_DIR:-build}")/scripts/bench/allreduce_bench
[[ -x "$accel" && -x "$bench" ]] || { echo "build first: scripts/build" >&2; exit 1; }
scratch=$(mktemp -d)
source tests/e2e/netns_lib.sh
trap 'netns_down; rm -rf "$scratch"' EXIT
netns_up hosts$$
export HF_HOME=$scratch/hf OMP_NUM_THREADS=1
common=(--num_machines 2 --main_process_ip "$A" --main_process_port 29431 -n 4 --cpu --rdzv_timeout 60 -q)
ip netns exec "$NB" "$accel" launch "${common[@]}" --machine_rank 1 "$bench" --min-seconds "$min" shm gloo \
  >"$scratch/b" 2>&1 &
other=$!
ip netns exec "$NA" "$accel" launch "${common[@]}" --machine_rank 0 "$bench" --min-seconds "$min" shm gloo \
  >"$scratch/a" 2>&1 || { cat "$scratch/a" "$scratch/b" >&2; exit 1; }
wait $other || { cat "$scratch/b" >&2; exit 1; }
awk '
  { line = $0; if (sub(/^.*allreduce /, "", line)) { split(line, f, " "); us[f[1], f[2]] = f[3] } }
  END {
    printf "%10s | %10s %10s | %9s\n", "bytes", "hier us", "gloo us", "gloo/hier"
    for (s = 1024; s <= 67108864; s *= 4) {
      if (!(("hier", s) in us)) continue
      printf "%10d | %10.1f %10.1f | %8.2fx\n", s, us["hier", s], us["gloo", s], us["gloo", s] / us["hier", s]
    }
  }' "$scratch/a"
