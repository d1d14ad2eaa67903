#!/usr/bin/env bash
# One round of N agents, in one run (scripts/bench/rdzv_store.cc: the agents are threads,
# connected before they all start at once), three ways:
#   store       the rounds' own rules (agent_rendezvous.h) over accel's own TCP store
#   etcd store  the same rules over etcd (EtcdStore): every agent adds to one counter
#   etcd round  the meeting made for etcd (etcd_round.h): a put under a lease, one watch, one
#               transaction closes the round
# on an etcd member this script starts (Debian's etcd-server, loopback, its own data directory):
#   close     seconds until the last agent is placed
#   requests  requests per agent (etcd: HTTP requests, tries and watches included)
# and each etcd way's time over the TCP store's. Issue 34's point 7(b): how the cost grows with N.
#   scripts/bench/rdzv_store.sh [--sizes "16 64 256 1024"] [--quick]
# --quick (ctest's bench.rdzv_store_quick): N = 4.
set -euo pipefail
cd "$(dirname "$0")/../.."
sizes="16 64 256 1024"
while (($#)); do
  case $1 in
    --sizes) sizes=$2; shift 2 ;;
    --quick) sizes=4; shift ;;
    *) echo "usage: scripts/bench/rdzv_store.sh [--sizes \"N ...\"] [--quick]" >&2; exit 2 ;;
  esac
done
build=${ACCEL_BUILD_DIR:-build}
bench=$build/scripts/bench/rdzv_store_bench
[[ -x $bench ]] || { echo "build first: scripts/build" >&2; exit 1; }
command -v etcd >/dev/null || { echo "SKIPPED: etcd is not installed (etcd-server; scripts/setup.sh)"; exit 77; }
scratch=$(mktemp -d /tmp/accel-bench-etcd.XXXXXX)
trap '[[ -n ${etcd_pid:-} ]] && kill -KILL $etcd_pid 2>/dev/null || true; rm -rf "$scratch"' EXIT
ulimit -n 65536 2>/dev/null || true

source tests/e2e/etcd_lib.sh
etcd_start "$scratch" $((33000 + ($$ % 1000) * 2)) || exit 1
etcd_pid=$ETCD_PID
port=${ETCD_ENDPOINT##*:}
echo "etcd $(etcd --version | head -1 | awk '{print $3}') at 127.0.0.1:$port; $(nproc) cores"
printf '%-7s | %-18s | %-18s | %-18s | %s\n' agents "store (s, req)" "etcd store (s, req)" \
  "etcd round (s, req)" "etcd store / store, etcd round / store"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }'; }
for n in $sizes; do
  read -r _ _ _ tcp_s _ tcp_r < <("$bench" --agents "$n" --tcp)
  read -r _ _ _ es_s _ es_r < <("$bench" --agents "$n" --etcd "127.0.0.1:$port")
  read -r _ _ _ er_s _ er_r < <("$bench" --agents "$n" --etcd-round "127.0.0.1:$port")
  printf '%-7s | %8.3f %9.1f | %8.3f %9.1f | %8.3f %9.1f | %s, %s\n' "$n" "$tcp_s" "$tcp_r" \
    "$es_s" "$es_r" "$er_s" "$er_r" "$(ratio "$es_s" "$tcp_s")" "$(ratio "$er_s" "$tcp_s")"
done
