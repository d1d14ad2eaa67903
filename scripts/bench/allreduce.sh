#!/usr/bin/env bash
# All-reduce latency, in one run, 2 ranks under `accel launch --cpu` on this machine: libaccel's
# shared-memory communicator (the default for one-machine CPU jobs) against libaccel's Gloo and
# python3-torch's Gloo (Debian's torch), float32 sum, 1 KiB to 64 MiB. Each size runs until it
# took --min-seconds (rank 0 decides the count). Prints µs per all-reduce, the bus bandwidth
# (bytes × 2(N-1)/N ÷ time) and the speed-up of shared memory over each Gloo; and, measured in
# the same run, the floor: a memcpy of the same bytes on every rank at once (the memory's speed
# with every rank busy), and shared memory's time over 2 memcpys — for 2 ranks the least an
# all-reduce between processes can move is 4 bytes of memory traffic per byte and rank (publish
# the half the other reduces, reduce its own half into its output and for the other, fetch the
# other's reduced half), a memcpy 2: small sizes are latency, large ones this ratio. For 2 ranks,
# also the exchange: that data movement alone, between the two processes and with no arithmetic
# (each publishes half into shared memory, copies the other's half after a barrier; twice), and
# shared memory's time over it — what the all-reduce adds to moving its bytes. Last, the
# shared-memory all-reduce with plain and with streaming stores forced (ACCEL_SHM_STORES). A
# second table: what gradient sync runs over shared memory — the average with each rank's part
# divided on its way in (allreduceMeanAsync) and with the division in a pass of its own (mul_,
# then the sum), and float32 with bf16 on the wire (allreduceBf16WireAsync) — beside the sum.
#   scripts/bench/allreduce.sh [--min-seconds S] [--nproc N] [--quick]
# --quick (ctest's bench.allreduce_quick): --min-seconds 0.01.
set -euo pipefail
cd "$(dirname "$0")/../.."
min=0.3
n=2
while (($#)); do
  case $1 in
    --min-seconds) min=$2; shift 2 ;;
    --nproc) n=$2; shift 2 ;;
    --quick) min=0.01; shift ;;
    *) echo "usage: $0 [--min-seconds S] [--nproc N] [--quick]" >&2; exit 2 ;;
  esac
done
build=${ACCEL_BUILD_DIR:-build}
accel=$build/apps/accel/accel
bench=$build/scripts/bench/allreduce_bench
[[ -x "$accel" && -x "$bench" ]] || { echo "build first: scripts/build" >&2; exit 1; }
export OMP_NUM_THREADS=1
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$accel" launch -q --cpu -n "$n" --no_python "$bench" --min-seconds "$min" memcpy exchange shm mean mean-pass bf16wire bf16wire-mean bf16wire-mean-pass gloo >>"$out" 2>&1
# The shared-memory all-reduce with each kind of store forced (ACCEL_SHM_STORES): what the default
# (auto: timed when the group forms) chose between.
for stores in plain streaming; do
  ACCEL_SHM_STORES=$stores "$accel" launch -q --cpu -n "$n" --no_python "$bench" --min-seconds "$min" shm 2>&1 |
    sed "s/allreduce shm /allreduce $stores /" >>"$out"
done
"$accel" launch -q --cpu -n "$n" /usr/bin/python3 scripts/bench/support/allreduce_gloo.py --min-seconds "$min" \
  >>"$out" 2>&1 || { cat "$out" >&2; exit 1; }
awk -v n="$n" '
  { line = $0; if (sub(/^.*allreduce /, "", line)) { split(line, f, " "); us[f[1], f[2]] = f[3] } }
  END {
    printf "%10s | %10s %10s %10s | %9s | %9s %9s | %10s %9s | %10s %9s | %9s %9s\n", "bytes", "shm us", "gloo us", "py us", "shm GB/s", "vs gloo", "vs py", "memcpy us", "shm/floor", "exch us", "shm/exch", "plain us", "stream us"
    for (s = 1024; s <= 67108864; s *= 4) {
      if (!(("shm", s) in us)) continue
      bw = s * 2 * (n - 1) / n / (us["shm", s] * 1e3)
      floor = us["memcpy", s] > 0 ? sprintf("%8.2fx", us["shm", s] / (2 * us["memcpy", s])) : "       -"
      exch = us["exchange", s] > 0 ? sprintf("%8.2fx", us["shm", s] / us["exchange", s]) : "       -"
      printf "%10d | %10.1f %10.1f %10.1f | %9.2f | %8.1fx %8.1fx | %10.2f %s | %10.1f %s | %9.1f %9.1f\n", s, us["shm", s], us["gloo", s], us["pygloo", s], bw,
             us["gloo", s] / us["shm", s], us["pygloo", s] / us["shm", s], us["memcpy", s], floor, us["exchange", s], exch, us["plain", s], us["streaming", s]
    }
  }' "$out"
echo
awk '
  { line = $0; if (sub(/^.*allreduce /, "", line)) { split(line, f, " "); us[f[1], f[2]] = f[3] } }
  END {
    printf "%10s | %10s | %10s %10s %9s | %10s %9s | %10s %10s %9s\n", "bytes", "sum us", "mean us", "pass us", "mean/pass", "bf16w us", "bf16w/sum", "b16 mean", "b16 pass", "mean/pass"
    for (s = 1024; s <= 67108864; s *= 4) {
      if (!(("mean", s) in us)) continue
      printf "%10d | %10.1f | %10.1f %10.1f %8.2fx | %10.1f %8.2fx | %10.1f %10.1f %8.2fx\n", s, us["shm", s], us["mean", s], us["mean-pass", s],
             us["mean", s] / us["mean-pass", s], us["bf16wire", s], us["bf16wire", s] / us["shm", s],
             us["bf16wire-mean", s], us["bf16wire-mean-pass", s], us["bf16wire-mean", s] / us["bf16wire-mean-pass", s]
    }
  }' "$out"
