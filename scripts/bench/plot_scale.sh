#!/usr/bin/env bash
# Plots scripts/bench/rdzv_scale.sh's rows (issue 52): a round's close time and the bytes each
# machine moves, against N, for accel's store and etcd, log-log, with the published anchors beside
# them (torchrun's c10d rendezvous at 4,000 hosts before and after pytorch#124982, TCPStore's libuv
# backend at 96K ranks, MegaScale's start of 2,048 GPUs). Needs gnuplot (gnuplot-nox,
# scripts/setup.sh).
#   scripts/bench/plot_scale.sh [ROWS [OUT.png]]
#     ROWS: rdzv_scale.sh's output (default scripts/bench/results/rdzv_scale.txt, README's table);
#     OUT: default scripts/bench/results/rdzv_scale.png, the plot README shows.
#   scripts/bench/plot_scale.sh --quick   (ctest's bench.plot_scale_quick: into a scratch file)
set -euo pipefail
cd "$(dirname "$0")/../.."
rows=scripts/bench/results/rdzv_scale.txt out=scripts/bench/results/rdzv_scale.png
scratch=$(mktemp -d /tmp/accel-plot.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
if [[ ${1:-} == --quick ]]; then
  out=$scratch/rdzv_scale.png
else
  rows=${1:-$rows} out=${2:-$out}
fi
command -v gnuplot >/dev/null || { echo "SKIPPED: gnuplot is not installed (gnuplot-nox; scripts/setup.sh)"; exit 77; }
[[ -r $rows ]] || { echo "plot_scale.sh: cannot read $rows" >&2; exit 1; }
# One data file per backend, only complete rows (a size that could not run has "-").
for b in store etcd; do
  awk -v b="$b" '$1 == b && $3 ~ /^[0-9.]+$/ { print $2, $3, $5 }' "$rows" >"$scratch/$b.dat"
  [[ -s $scratch/$b.dat ]] || { echo "plot_scale.sh: no $b rows in $rows" >&2; exit 1; }
done
cat >"$scratch/anchors.dat" <<'DATA'
4000 373 "torchrun c10d, before #124982"
4000 10 "torchrun c10d, after"
96000 100 "TCPStore libuv"
2048 5 "MegaScale"
DATA
gnuplot <<GP
set terminal pngcairo size 1100,450 font ",10"
set output "$out"
set multiplot layout 1,2 title "One rendezvous round of N simulated machines (scripts/bench/rdzv_scale.sh, 2-core VM)" noenhanced
set logscale xy
set grid
set key top left
set xlabel "machines (N)"
set ylabel "round closed after (s)"
set xrange [32:200000]
plot "$scratch/store.dat" using 1:2 with linespoints lw 2 pt 7 title "accel store", \
     "$scratch/etcd.dat" using 1:2 with linespoints lw 2 pt 5 title "etcd (3 members)", \
     "$scratch/anchors.dat" using 1:2 with points pt 2 ps 1.5 lc rgb "black" title "published (their hardware)", \
     "$scratch/anchors.dat" using 1:2:3 with labels offset char 1,0.8 left font ",8" notitle
set ylabel "bytes per machine"
set xrange [32:20000]
unset key
set key top left
plot "$scratch/store.dat" using 1:3 with linespoints lw 2 pt 7 title "accel store", \
     "$scratch/etcd.dat" using 1:3 with linespoints lw 2 pt 5 title "etcd (3 members)"
unset multiplot
GP
[[ $(head -c 4 "$out" | od -An -c | tr -d ' ') == "211PNG" ]] || { echo "plot_scale.sh: $out is not a PNG" >&2; exit 1; }
echo "wrote $out ($(stat -c %s "$out") bytes) from $rows"
