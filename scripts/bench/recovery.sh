#!/usr/bin/env bash
# How fast a group of machines recovers, accel against torchrun 2.6 (trixie's, in
# scripts/torch2_chroot.sh's chroot), in one run, on three network-namespace hosts
# (tests/e2e/netns_lib.sh's netns3_up): each host runs one agent of
#   --nnodes 2:3 --nproc_per_node 1 --rdzv_backend c10d --rdzv_endpoint HOST1:PORT --max_restarts 3
# whose one worker records when it started and in which world, then idles (as a rank between two
# collectives does). Then:
#   loss     everything in host 3 is SIGKILLed: time until the survivors' workers run again in a
#            world of 2 (or "never" within --wait seconds)
#   arrival  host 3's agent is started again: time until the workers run in a world of 3
# Both launchers keep their default keep-alive settings (accel: 1 s x 3; torch: 5 s x 3).
#   scripts/bench/recovery.sh [--wait SECONDS] [--quick]
# --quick (ctest's bench.recovery_quick): accel only, --wait 30. Needs root (exits 77 without).
set -euo pipefail
cd "$(dirname "$0")/../.."
wait_s=60
quick=0
while (($#)); do
  case $1 in
    --wait) wait_s=$2; shift 2 ;;
    --quick) quick=1; wait_s=30; shift ;;
    *) echo "usage: scripts/bench/recovery.sh [--wait SECONDS] [--quick]" >&2; exit 2 ;;
  esac
done
((EUID == 0)) || { echo "recovery.sh: needs root (network namespaces)"; exit 77; }
build=${ACCEL_BUILD_DIR:-build}
[[ "$build" == /* ]] || build=$(pwd)/$build
accel=$build/apps/accel/accel
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
root=$(pwd)
source tests/e2e/netns_lib.sh
scratch=$(mktemp -d /tmp/accel-bench-recovery.XXXXXX)
trap 'netns3_down; [[ -n ${KEEP_SCRATCH:-} ]] || rm -rf "$scratch"' EXIT
netns3_up $$
cat >"$scratch/worker.sh" <<EOF
#!/bin/sh
echo "\$(date +%s%N) \$WORLD_SIZE" >>"$scratch/starts"
exec sleep 100000
EOF
chmod +x "$scratch/worker.sh"

# agent LAUNCHER I: host I's agent in the background (pid in $!).
agent() {
  local common=(--nnodes 2:3 --nproc_per_node 1 --rdzv_backend c10d
                --rdzv_endpoint "${ADDR3[0]}:29650" --max_restarts 3)
  if [[ $1 == accel ]]; then
    ip netns exec "${NS3[$2]}" "$accel" launch -q "${common[@]}" "$scratch/worker.sh" \
      >>"$scratch/accel.$2.log" 2>&1 &
  else
    # torch does not see that an address of this host's interfaces is its own: host 1 is told.
    (($2 == 0)) && common+=(--rdzv_conf is_host=1)
    ip netns exec "${NS3[$2]}" "$root/scripts/torch2_chroot.sh" run python3 \
      "$root/tests/e2e/workers/torchrun26.py" "${common[@]}" --local_addr "${ADDR3[$2]}" \
      --no-python /bin/sh "$scratch/worker.sh" >>"$scratch/torchrun.$2.log" 2>&1 &
  fi
}
# world_since T N: seconds from T (ns) until N workers have started in a world of N after T;
# "never" after --wait seconds.
world_since() {
  local t=$1 n=$2 deadline=$(($(date +%s) + wait_s)) got
  while (($(date +%s) < deadline)); do
    got=$(awk -v t="$t" -v n="$n" '$1 > t && $2 == n' "$scratch/starts" 2>/dev/null | sort -n)
    if (($(wc -l <<<"$got") >= n)) && [[ -n $got ]]; then
      awk -v t="$t" '{ last = $1 } END { printf "%.2f s", (last - t) / 1e9 }' <<<"$got"
      return
    fi
    sleep 0.05
  done
  echo "never (in $wait_s s)"
}

measure() {
  local launcher=$1 i t loss arrival
  rm -f "$scratch/starts"
  for i in 0 1 2; do agent "$launcher" "$i"; done
  t=$(date +%s%N)
  [[ $(world_since 0 3) != never* ]] || { echo "$launcher: the group of 3 never formed" >&2; tail "$scratch/$launcher".*.log >&2; return 1; }
  t=$(date +%s%N)
  # A process may end between the listing and the kill (kill then fails, and xargs with it).
  ip netns pids "${NS3[2]}" | xargs -r kill -KILL 2>/dev/null || true
  loss=$(world_since "$t" 2)
  t=$(date +%s%N)
  agent "$launcher" 2
  arrival=$(world_since "$t" 3)
  printf '%-9s %-22s %-22s\n' "$launcher" "$loss" "$arrival"
  for i in 0 1 2; do ip netns pids "${NS3[$i]}" | xargs -r kill -KILL 2>/dev/null || true; done
}

printf '%-9s %-22s %-22s\n' launcher "loss -> world of 2" "arrival -> world of 3"
measure accel
if ((!quick)); then
  if reason=$("$root/scripts/torch2_chroot.sh" check 2>&1); then
    measure torchrun
  else
    echo "torchrun: not run ($reason)"
  fi
fi
