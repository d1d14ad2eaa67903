#!/usr/bin/env bash
# Store throughput: N clients (non-blocking sockets in 2 processes) each do what a rank does in
# init_process_group over TCPStore — connect, `set` its address, `add` to a counter and `wait` on
# a barrier key the count's last add sets; time to the last client released, and the server's
# resident memory per connection (KiB, with every connection open), in one run:
#   accel (1.13)   accel's store (hosted by `accel run`, torchrun's command line, the load
#                  generator its one worker: `accel launch -n 1` is accelerate's single process,
#                  which gets no MASTER_PORT), clients speaking torch 1.13's protocol
#   accel (2.x)    the same with torch 2.x's clients (VALIDATE first, 2.x codes)
#   torch 1.13     python3-torch 1.13's own TCPStore server, 1.13 clients
#   torch 2.6      Debian trixie's torch 2.6 server (legacy backend: no libuv in that build),
#                  2.x clients, in the scripts/torch2_chroot.sh chroot (n/a without it)
# Each run gets a fresh server; ratios are torch's time over accel's for the same clients. A size
# whose server would need more descriptors than this machine allows a process prints its row with
# the reason; a connection refused, reset or closed fails that cell ("failed").
#   scripts/bench/store.sh [--repeat R] [N ...]      (default: 256 1024 4096 16384 65536, best of 3)
#   scripts/bench/store.sh --quick                   (ctest's bench.store_quick: 64 clients, once)
set -euo pipefail
cd "$(dirname "$0")/../.."
repeat=3
[[ "${1:-}" == "--repeat" ]] && { repeat=$2; shift 2; }
[[ "${1:-}" == "--quick" ]] && { repeat=1; set -- 64; }
sizes=("$@")
((${#sizes[@]})) || sizes=(256 1024 4096 16384 65536)
build=${ACCEL_BUILD_DIR:-build}
accel=$build/apps/accel/accel
load=$build/scripts/bench/store_load
[[ -x "$accel" && -x "$load" ]] || { echo "build first: scripts/build" >&2; exit 1; }

best() { sort -g | head -1; }
ours() {  # N PROTOCOL
  for _ in $(seq 1 "$repeat"); do "$accel" run --nproc_per_node 1 "$load" --clients "$1" --protocol "$2" --memory-of parent; done |
    sed 's/^\[rank 0\] //' | best
}
theirs() {  # N PROTOCOL PYTHON...: a fresh server for every run, as accel's is
  local n=$1 protocol=$2
  shift 2
  for _ in $(seq 1 "$repeat"); do
    local dir port server
    dir=$(mktemp -d); mkfifo "$dir/in"
    "$@" scripts/bench/support/torch_store_server.py <"$dir/in" >"$dir/port" &
    server=$!
    exec 9>"$dir/in"
    for _ in $(seq 1 600); do [[ -s "$dir/port" ]] && break; sleep 0.05; done
    port=$(cut -d' ' -f1 "$dir/port")
    timeout 120 "$load" --clients "$n" --port "$port" --protocol "$protocol" --memory-of "$server" || echo "failed"
    exec 9>&-; wait "$server" 2>/dev/null || true; rm -rf "$dir"
  done | best
}
ratio() {  # ACCEL THEIRS: "SECONDS KIB" each
  awk -v a="${1%% *}" -v t="${2%% *}" 'BEGIN { if (t ~ /^[0-9.]+$/ && a ~ /^[0-9.]+$/) printf "%.1fx", t / a; else print "n/a" }'
}
cell() { awk '{ printf "%s s %s KiB", $1, ($2 == "" ? "?" : $2) }' <<<"$1"; }  # "0.09 s 1.0 KiB"

torch2=(env ACCEL_CHROOT_BINDS="$PWD" scripts/torch2_chroot.sh run /usr/bin/python3)
have_torch2=1
scripts/torch2_chroot.sh check 2>/dev/null || have_torch2=0
printf '%-8s %20s %20s %9s %20s %20s %9s\n' clients "accel (1.13)" "torch 1.13" speed-up "accel (2.x)" "torch 2.6" speed-up
limit=$(ulimit -Hn)
for n in "${sizes[@]}"; do
  if ((n + 64 > limit)); then
    echo "$n  n/a: the server needs $n descriptors, one per client; this machine allows a process $limit (ulimit -Hn)"
    continue
  fi
  a1=$(ours "$n" legacy); t1=$(theirs "$n" legacy /usr/bin/python3)
  a2=$(ours "$n" validated); t2=n/a
  ((have_torch2)) && t2=$(theirs "$n" validated "${torch2[@]}")
  printf '%-8s %20s %20s %9s %20s %20s %9s\n' "$n" "$(cell "$a1")" "$(cell "$t1")" "$(ratio "$a1" "$t1")" \
    "$(cell "$a2")" "$(cell "$t2")" "$(ratio "$a2" "$t2")"
done
