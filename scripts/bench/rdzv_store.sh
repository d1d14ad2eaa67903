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
trap '[[ -n ${etcd_pid:-} ]] && kill -KILL $etcd_pid 2>/dev/null; rm -rf "$scratch"' EXIT
ulimit -n 65536 2>/dev/null || true

# One member on the next pair of ports from one picked by this script's pid; a pair taken makes
# etcd exit saying so, and the next is tried (no port is bound and closed to find a free one).
port=$((33000 + ($$ % 1000) * 2))
for _ in $(seq 1 20); do
  rm -rf "$scratch/data"
  etcd --data-dir "$scratch/data" --listen-client-urls "http://127.0.0.1:$port" \
    --advertise-client-urls "http://127.0.0.1:$port" --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
    --initial-cluster "default=http://127.0.0.1:$((port + 1))" >"$scratch/etcd.log" 2>&1 &
  etcd_pid=$!
  for _ in $(seq 1 300); do
    grep -q "ready to serve client requests" "$scratch/etcd.log" && break
    kill -0 $etcd_pid 2>/dev/null || break
    sleep 0.05
  done
  grep -q "ready to serve client requests" "$scratch/etcd.log" && break
  grep -q "address already in use" "$scratch/etcd.log" || { tail -5 "$scratch/etcd.log"; exit 1; }
  port=$((port + 2))
done
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
