#!/usr/bin/env bash
# Store throughput: N clients (non-blocking sockets in 2 processes) each connect, `add` a
# counter and `wait` on a barrier key; time to the last client released, for accel's store
# (hosted by `accel launch`, the load generator being its one worker) and, in the same run, for
# python3-torch 1.13's own TCPStore server under the same load. Each run gets a fresh server.
#   scripts/bench/store.sh [--repeat R] [N ...]      (default: 256 1024 4096, best of 3)
set -euo pipefail
cd "$(dirname "$0")/../.."
repeat=3
[[ "${1:-}" == "--repeat" ]] && { repeat=$2; shift 2; }
sizes=("$@")
((${#sizes[@]})) || sizes=(256 1024 4096)
build=${ACCEL_BUILD_DIR:-build}
accel=$build/apps/accel/accel
load=$build/scripts/bench/store_load
[[ -x "$accel" && -x "$load" ]] || { echo "build first: scripts/build" >&2; exit 1; }

best() { sort -g | head -1; }
ours() {  # N
  for _ in $(seq 1 "$repeat"); do "$accel" launch -q -n 1 "$load" --clients "$1"; done | sed 's/^\[rank 0\] //' | best
}
theirs() {  # N: a fresh server for every run, as accel's is
  for _ in $(seq 1 "$repeat"); do
    local dir port server
    dir=$(mktemp -d); mkfifo "$dir/in"
    /usr/bin/python3 scripts/bench/support/torch_store_server.py <"$dir/in" >"$dir/port" &
    server=$!
    exec 9>"$dir/in"
    for _ in $(seq 1 100); do [[ -s "$dir/port" ]] && break; sleep 0.05; done
    port=$(cat "$dir/port")
    timeout 120 "$load" --clients "$1" --port "$port" || echo "failed"
    exec 9>&-; wait "$server" 2>/dev/null || true; rm -rf "$dir"
  done | best
}

printf '%-8s %14s %22s %10s\n' clients "accel (s)" "torch 1.13 TCPStore (s)" speed-up
for n in "${sizes[@]}"; do
  a=$(ours "$n"); t=$(theirs "$n")
  ratio=$(awk -v a="$a" -v t="$t" 'BEGIN { if (t ~ /^[0-9.]+$/) printf "%.1fx", t / a; else print "n/a" }')
  printf '%-8s %14s %22s %10s\n' "$n" "$a" "$t" "$ratio"
done
