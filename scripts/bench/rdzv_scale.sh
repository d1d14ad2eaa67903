#!/usr/bin/env bash
# One round of N simulated machines (the agents' own rendezvous clients, no workers; over several
# processes with real sockets: scripts/bench/rdzv_scale.cc), per backend and N, issue 52:
#   store  accel's store (its server process holds machine 0's agent, as in a job)
#   etcd   a three-member etcd cluster on loopback that this script starts (Debian's etcd-server)
# One row per backend and N, whitespace-separated:
#   BACKEND N CLOSE_S REQUESTS_PER_MACHINE BYTES_PER_MACHINE EVENTS_PER_MACHINE SERVER_CPU_S SERVER_PEAK_MIB
# close: from every machine connected to the last one placed; requests, bytes (both ways) and
# events during the round, per machine — store: as its server counted them (WAITs answered);
# etcd: as the agents counted them (HTTP requests, watches included; watch events received);
# the server's CPU seconds and peak resident MiB (etcd: its three members, summed). A size this machine
# cannot hold (file descriptors) prints its row with "-" and why.
#   scripts/bench/rdzv_scale.sh [--backend store|etcd] [--sizes "N ..."] [--quick] [--loss] [--end]
# Default sizes: store 1024 4096 16384, etcd 1024 4096. --quick (ctest's bench.rdzv_scale_quick):
# N = 64 on both (etcd: its round, its end, its loss), then the store's --loss at 64.
# --loss: the round, then the group idles 5 s and one machine goes silent (store: its keep-alives
# stop; etcd: its lease is no longer renewed); per backend and N a row
#   store-loss N FOUND_S REFORMED_S IDLE_SERVER_CPU_PER_S    (etcd-loss: the same columns)
# (from the silence to the loss published, and to the last machine met again as N-1; the
# server's CPU per second while the group idled), then the same for the reference measured in the
# same run, a master that reads each member's keep-alive with a request (store-loss-tcp-reads),
# and the ratio of the two idle costs. Default sizes 1024 4096.
# --end (etcd): the end of a round in which the last machine was lost, every other agent's
#   RoundCloser over etcd (report, the decider's reads, the decision); per N a row
#   etcd-end N DECIDED_S REQUESTS_PER_MACHINE BYTES_PER_MACHINE SERVER_CPU_S SERVER_PEAK_MIB
# Default sizes 1024 4096; --quick runs it at 64 too.
# --renewals (etcd): what an idle group costs etcd — every machine's lease renewed every keep-alive
#   interval on its kept gRPC stream, then through etcd's JSON gateway (the reference, in the same
#   run); per N a row, then the ratio of the two
#   etcd-renewals N GRPC_SERVER_CPU_PER_S GATEWAY_SERVER_CPU_PER_S
# Default sizes 256 1024 4096; --quick runs it at 64 too.
set -euo pipefail
cd "$(dirname "$0")/../.."
backends="store etcd" sizes="" loss="" quick="" end="" renewals=""
while (($#)); do
  case $1 in
    --backend) backends=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --quick) sizes=64 quick=1; shift ;;
    --loss) loss=1; shift ;;
    --end) end=1 backends=etcd; shift ;;
    --renewals) renewals=1 backends=etcd; shift ;;
    *) echo "usage: scripts/bench/rdzv_scale.sh [--backend store|etcd] [--sizes \"N ...\"] [--quick] [--loss] [--end] [--renewals]" >&2; exit 2 ;;
  esac
done
build=${ACCEL_BUILD_DIR:-build}
bench=$build/scripts/bench/rdzv_scale_bench
[[ -x $bench ]] || { echo "build first: scripts/build rdzv_scale_bench" >&2; exit 1; }
scratch=$(mktemp -d /tmp/accel-bench-scale.XXXXXX)
trap 'kill -KILL ${ETCD_MEMBER_PIDS[@]:-} 2>/dev/null || true; rm -rf "$scratch"' EXIT
echo "$(nproc) cores; $(ulimit -Hn) descriptors per process at most"
loss_rows() {  # loss_rows N...: the --loss table
  local n ours ref
  echo "BACKEND N FOUND_S REFORMED_S IDLE_SERVER_CPU_PER_S"
  for n in "$@"; do
    ours=$("$bench" store --machines "$n" --procs 4 --loss 2>"$scratch/err") || { echo "store-loss $n - - -  ($(head -1 "$scratch/err"))"; continue; }
    ref=$("$bench" store --machines "$n" --procs 4 --loss --tcp-reads 2>"$scratch/err") || { echo "$ours"; echo "store-loss-tcp-reads $n - - -  ($(head -1 "$scratch/err"))"; continue; }
    echo "$ours"; echo "$ref"
    awk -v a="$(cut -d' ' -f5 <<<"$ours")" -v b="$(cut -d' ' -f5 <<<"$ref")" -v n="$n" \
      'BEGIN { printf "idle master at %d machines: %.3f of the reference'"'"'s CPU\n", n, (b > 0 ? a / b : 0) }'
  done
}

# One row, or the row's "-" and the bench's reason.
row() {  # row BACKEND N CMD...
  local out
  if out=$("${@:3}" 2>"$scratch/err"); then
    echo "$out"
  else
    echo "$1 $2 - - - - - -  ($(head -1 "$scratch/err"))"
  fi
}

cpu_s() {  # the members' CPU seconds so far
  local p t=0
  for p in "${ETCD_MEMBER_PIDS[@]}"; do
    t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  awk -v t="$t" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", t / hz }'
}
peak_mib() {  # the members' peak resident memory, summed
  local p k=0
  for p in "${ETCD_MEMBER_PIDS[@]}"; do k=$((k + $(awk '/^VmHWM/ { print $2 }' "/proc/$p/status"))); done
  awk -v k="$k" 'BEGIN { printf "%.1f", k / 1024 }'
}

etcd_row() {  # etcd_row N [MODE]: a fresh cluster per size, so that each member's peak is this round's
  local n=$1 mode=${2:-etcd} out
  source tests/e2e/etcd_lib.sh
  rm -rf "$scratch"/etcd*
  etcd_cluster_start "$scratch" $((21000 + ($$ % 1000) * 6)) || { echo "$mode $n - - - - - -  (etcd did not start)"; return; }
  local pids=${ETCD_MEMBER_PIDS[*]}
  if [[ $mode == etcd-loss ]]; then
    out=$("$bench" etcd --loss --server-pids "${pids// /,}" --endpoints "$ETCD_CLUSTER" --machines "$n" --procs 4 2>"$scratch/err") &&
      echo "$out" || echo "$mode $n - - -  ($(head -1 "$scratch/err"))"
  elif [[ $mode == etcd-renewals ]]; then
    if out=$("$bench" etcd-renewals --server-pids "${pids// /,}" --endpoints "$ETCD_CLUSTER" --machines "$n" --procs 4 2>"$scratch/err"); then
      echo "$out"
      awk '{ printf "renewals of %d leases on gRPC streams: %.2f of the gateway'"'"'s CPU\n", $2, ($4 > 0 ? $3 / $4 : 0) }' <<<"$out"
      [[ ! -s $scratch/err ]] || sed 's/^/  /' "$scratch/err"
    else
      echo "$mode $n - -  ($(head -1 "$scratch/err"))"
    fi
  elif out=$("$bench" "$mode" --endpoints "$ETCD_CLUSTER" --machines "$n" --procs 4 2>"$scratch/err"); then
    echo "$out $(cpu_s) $(peak_mib)"
  else
    echo "$mode $n - - - - - -  ($(head -1 "$scratch/err"))"
  fi
  kill -KILL "${ETCD_MEMBER_PIDS[@]}" 2>/dev/null || true
  wait "${ETCD_MEMBER_PIDS[@]}" 2>/dev/null || true
  ETCD_MEMBER_PIDS=()
}

if [[ -n $loss ]]; then
  for backend in $backends; do
    case $backend in
      store) loss_rows ${sizes:-1024 4096} ;;
      etcd)
        command -v etcd >/dev/null || { echo "etcd: SKIPPED, etcd is not installed (etcd-server; scripts/setup.sh)"; continue; }
        echo "BACKEND N FOUND_S REFORMED_S IDLE_SERVER_CPU_PER_S"
        for n in ${sizes:-1024 4096}; do etcd_row "$n" etcd-loss; done
        ;;
    esac
  done
  exit 0
fi
[[ -n $end$renewals ]] ||
  echo "BACKEND N CLOSE_S REQUESTS_PER_MACHINE BYTES_PER_MACHINE EVENTS_PER_MACHINE SERVER_CPU_S SERVER_PEAK_MIB"
for backend in $backends; do
  case $backend in
    store)
      for n in ${sizes:-1024 4096 16384}; do row store "$n" "$bench" store --machines "$n" --procs 4; done
      ;;
    etcd)
      command -v etcd >/dev/null || { echo "etcd: SKIPPED, etcd is not installed (etcd-server; scripts/setup.sh)"; continue; }
      if [[ -n $renewals ]]; then
        echo "BACKEND N GRPC_SERVER_CPU_PER_S GATEWAY_SERVER_CPU_PER_S"
        for n in ${sizes:-256 1024 4096}; do etcd_row "$n" etcd-renewals; done
        continue
      fi
      if [[ -n $end ]]; then
        echo "BACKEND N DECIDED_S REQUESTS_PER_MACHINE BYTES_PER_MACHINE SERVER_CPU_S SERVER_PEAK_MIB"
        for n in ${sizes:-1024 4096}; do etcd_row "$n" etcd-end; done
        continue
      fi
      for n in ${sizes:-1024 4096}; do etcd_row "$n"; done
      [[ -z $quick ]] || etcd_row 64 etcd-end
      [[ -z $quick ]] || etcd_row 64 etcd-loss
      [[ -z $quick ]] || etcd_row 64 etcd-renewals
      ;;
    *) echo "--backend: store or etcd, not '$backend'" >&2; exit 2 ;;
  esac
done
# --quick: the loss phase too, at 64.
[[ -z $quick || $backends != *store* ]] || loss_rows 64
