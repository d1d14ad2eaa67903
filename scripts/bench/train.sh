#!/usr/bin/env bash
# Training throughput, in one run: the C++ Fashion-MNIST example (libaccel) against the same
# models, data order (file order, batch i to rank i mod N) and batch (64 per rank) in Python
# (python3-torch DDP over gloo, support/ddp_fashion_mnist.py), both under accel launch with
# OMP_NUM_THREADS=1, for N = 1 and 2 (--ranks), MLP and CNN, fp32 and bf16. The C++ example runs
# with libaccel's default (shared memory for ranks on one machine) and, for N > 1, also over Gloo
# (ACCEL_CPU_BACKEND=gloo). Reports samples/s, scaling efficiency (N=2 / 2×N=1), time to the
# first step, whole-command wall time and peak RSS per rank. With N=2, also the ceiling: two
# independent 1-rank C++ runs at once (no communication), and the 2-rank runs' share of it
# (C++: the median of --rounds rounds, each measuring the ceiling and the 2-rank run together),
# and the lock-step bound: the 2-rank C++ job with --barrier_only (gradients not averaged, the
# ranks meeting at one barrier per step), what any synchronous data parallelism can reach here
# at best — lock-step runs at the slower CPU's pace and waits out each step's jitter; and the
# 2-rank C++ job with its gradients on the wire as bf16 (ACCEL_GRADIENT_COMPRESSION=bf16, DDP's
# bf16_compress_hook), against the uncompressed run of the same round; and the 2-rank C++ job
# copying its gradients into the buckets (ACCEL_GRADIENT_AS_BUCKET_VIEW=0) against the default,
# gradients as bucket views: their shares of the ceiling, their peak RSS per rank, and the RSS the
# training phase adds (the example resets the peak when training starts: the data set hides the
# gradient copy that views save in the whole-run peak).
#   scripts/bench/train.sh [--steps S] [--ranks "N..."] [--rounds R]
#     (steps: 900 for the MLP — a 3 ms step, so that a run lasts seconds, not the VM's noise — and
#     200 for the CNN; an epoch at most; N = 1 2, R = 3)
#   scripts/bench/train.sh --quick          (ctest's bench.train_quick: MLP fp32, 10 steps, 1 round)
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=
ranks="1 2"
rounds=3
while (($#)); do
  case $1 in
    --steps) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "train.sh: --steps needs a positive integer, not '${2:-}'" >&2; exit 2; }
             steps=$2; shift 2 ;;
    --ranks) [[ ${2:-} =~ ^[1-9][0-9]*( [1-9][0-9]*)*$ ]] || { echo "train.sh: --ranks needs process counts like \"1 2\", not '${2:-}'" >&2; exit 2; }
             ranks=$2; shift 2 ;;
    --rounds) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "train.sh: --rounds needs a positive integer, not '${2:-}'" >&2; exit 2; }
              rounds=$2; shift 2 ;;
    --quick) steps=10 models=mlp precisions=no rounds=1; shift ;;
    *) echo "train.sh: unknown argument '$1' (usage: train.sh [--steps S] [--ranks \"N...\"] [--rounds R] [--quick])" >&2; exit 2 ;;
  esac
done
declare -A default_steps=([mlp]=900 [cnn]=200)
source scripts/bench/support/example_build.sh
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# run NAME N PRECISION MODEL: prints "samples/s first_step wall_s rss_mib training_mib" (the last:
# the C++ example's rank 0, its training's peak RSS over the RSS training started with; "-" for
# Python)
run() {
  local impl=$1 n=$2 precision=$3 model=$4 out=$scratch/out.$BASHPID
  local cmd backend=auto compression=none views=1 n_steps=${steps:-${default_steps[$model]}}
  [[ $impl == cppgloo ]] && backend=gloo
  [[ $impl == cppwire ]] && compression=bf16
  [[ $impl == cppcopy ]] && views=0
  if [[ $impl == cpp* ]]; then
    cmd=("$example" --model "$model" --steps "$n_steps" --no-shuffle --no-progress --no-eval)
    [[ $impl == cppbarrier ]] && cmd+=(--barrier_only)
  else
    cmd=(/usr/bin/python3 scripts/bench/support/ddp_fashion_mnist.py --model "$model" --steps "$n_steps")
  fi
  local start end
  start=$(date +%s.%N)
  # GNU time per rank: wrap the worker so each rank reports its own peak RSS.
  ACCEL_CPU_BACKEND=$backend ACCEL_GRADIENT_COMPRESSION=$compression ACCEL_GRADIENT_AS_BUCKET_VIEW=$views \
    "$accel" launch -q --cpu -n "$n" --mixed_precision "$precision" --no_python \
    /usr/bin/time -f "rss_kb=%M" -- "${cmd[@]}" >"$out" 2>&1
  end=$(date +%s.%N)
  local sps first rss training
  sps=$(sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' "$out" | head -1)
  first=$(sed -n 's/.*first step after \([0-9.]*\) s.*/\1/p' "$out" | head -1)
  rss=$(sed -n 's/.*rss_kb=\([0-9]*\).*/\1/p' "$out" | sort -n | tail -1)
  training=$(sed -n "s/.*training's peak RSS +\([0-9.]*\) MiB.*/\1/p" "$out" | head -1)
  echo "$sps $first $(awk -v s="$start" -v e="$end" 'BEGIN{printf "%.1f", e-s}') $(awk -v r="$rss" 'BEGIN{printf "%.0f", r/1024}') ${training:--}"
}

# ceiling PRECISION MODEL P2 G2: what 2 ranks could reach without communication — two
# independent 1-rank C++ runs at once, their samples/s summed — and the 2-rank runs' share of it,
# in --rounds rounds (default 3). Each round measures the ceiling and, right after it, the 2-rank
# C++ job on shared memory, so that both see the machine in the same state (a VM's speed drifts
# by tens of percent within minutes); the share is each round's ratio, the median printed with
# the rounds'. Over Gloo and Python DDP: their runs in the table against the median ceiling.
ceiling() {
  local precision=$1 model=$2 p2=$3 g2=$4 a b c l w k r ceil=() share=() lock=() wire=() copy=()
  local c_rss k_rss c_train k_train rss_views=() rss_copies=() train_views=() train_copies=()
  for ((r = 0; r < rounds; r++)); do
    exec 3< <(run cpp 1 "$precision" "$model")
    exec 4< <(run cpp 1 "$precision" "$model")
    read -r a _ <&3; read -r b _ <&4
    exec 3<&- 4<&-
    read -r c _ _ c_rss c_train < <(run cpp 2 "$precision" "$model")
    read -r k _ _ k_rss k_train < <(run cppcopy 2 "$precision" "$model")
    read -r l _ < <(run cppbarrier 2 "$precision" "$model")
    read -r w _ < <(run cppwire 2 "$precision" "$model")
    ceil+=($((a + b)))
    share+=("$(awk -v c="$c" -v t=$((a + b)) 'BEGIN{printf "%.1f", 100*c/t}')")
    lock+=("$(awk -v c="$l" -v t=$((a + b)) 'BEGIN{printf "%.1f", 100*c/t}')")
    wire+=("$(awk -v c="$w" -v t=$((a + b)) 'BEGIN{printf "%.1f", 100*c/t}')")
    copy+=("$(awk -v c="$k" -v t=$((a + b)) 'BEGIN{printf "%.1f", 100*c/t}')")
    rss_views+=("$c_rss") rss_copies+=("$k_rss") train_views+=("$c_train") train_copies+=("$k_train")
  done
  awk -v m="$model" -v p="$precision" -v ceils="${ceil[*]}" -v shares="${share[*]}" -v locks="${lock[*]}" -v wires="${wire[*]}" -v copies="${copy[*]}" -v rv="${rss_views[*]}" -v rk="${rss_copies[*]}" -v tv="${train_views[*]}" -v tk="${train_copies[*]}" -v py="$p2" -v g="$g2" '
    function median(list, v, n, i, j, t) {
      n = split(list, v, " ")
      for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] + 0 > v[j] + 0; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
      return n % 2 ? v[(n+1)/2] : (v[n/2] + v[n/2+1]) / 2
    }
    BEGIN {
      ceil = median(ceils); c = median(shares); l = median(locks); w = median(wires); k = median(copies)
      mv = median(rv); mk = median(rk); mtv = median(tv); mtk = median(tk)
      gsub(/ /, "% ", shares); gsub(/ /, "% ", locks); gsub(/ /, "% ", wires); gsub(/ /, "% ", copies)
      printf "%-5s %-5s ceiling (2 x 1 rank at once, no communication): %d samples/s; 2 ranks reach C++ %.0f%% (the rounds: %s%%), over Gloo %.0f%%, Python DDP %.0f%%\n", m, p, ceil, c, shares, 100*g/ceil, 100*py/ceil
      printf "%-5s %-5s lock-step bound (2 ranks, one barrier per step, gradients not averaged): %.0f%% of the ceiling (the rounds: %s%%); C++ reaches %.0f%% of it\n", m, p, l, locks, 100*c/l
      printf "%-5s %-5s bf16 on the wire (ACCEL_GRADIENT_COMPRESSION=bf16, 2 ranks): %.0f%% of the ceiling (the rounds: %s%%), %.2fx the uncompressed run\n", m, p, w, wires, w/c
      printf "%-5s %-5s gradients copied into the buckets (ACCEL_GRADIENT_AS_BUCKET_VIEW=0, 2 ranks): %.0f%% of the ceiling (the rounds: %s%%), against %.0f%% as bucket views; peak RSS per rank %s MiB copied, %s MiB as views; training-phase peak RSS over its start (rank 0) %.1f MiB copied, %.1f MiB as views\n", m, p, k, copies, c, mk, mv, mtk, mtv }'
}

printf '%-5s %-5s %-2s | %9s %9s %6s | %6s %6s | %6s %6s | %6s %6s | %5s %5s | %9s %5s\n' \
  model prec N "C++ sps" "Py sps" "ratio" "C++ 1st" "Py 1st" "C++ s" "Py s" "C++MB" "PyMB" "effC" "effPy" \
  "gloo sps" "effG"
for model in ${models:-mlp cnn}; do
  for precision in ${precisions:-no bf16}; do
    declare -A one=()
    for n in $ranks; do
      read -r c_sps c_first c_wall c_rss _ < <(run cpp "$n" "$precision" "$model")
      read -r p_sps p_first p_wall p_rss _ < <(run py "$n" "$precision" "$model")
      g_sps=-; eff_g=-
      [[ $n != 1 ]] && read -r g_sps _ < <(run cppgloo "$n" "$precision" "$model")
      # Scaling efficiency: samples/s at N over N × samples/s at N=1 (when N=1 was run).
      if [[ $n == 1 ]]; then one[c]=$c_sps; one[p]=$p_sps; eff_c=-; eff_p=-;
      elif [[ -n ${one[c]:-} ]]; then
        eff_c=$(awk -v a="$c_sps" -v b="${one[c]}" -v n="$n" 'BEGIN{printf "%.0f%%", 100*a/(n*b)}')
        eff_p=$(awk -v a="$p_sps" -v b="${one[p]}" -v n="$n" 'BEGIN{printf "%.0f%%", 100*a/(n*b)}')
        eff_g=$(awk -v a="$g_sps" -v b="${one[c]}" -v n="$n" 'BEGIN{printf "%.0f%%", 100*a/(n*b)}')
      else eff_c=-; eff_p=-; fi
      ratio=$(awk -v a="$c_sps" -v b="$p_sps" 'BEGIN{printf "%.2fx", a/b}')
      printf '%-5s %-5s %-2s | %9s %9s %6s | %6s %6s | %6s %6s | %6s %6s | %5s %5s | %9s %5s\n' \
        "$model" "$precision" "$n" "$c_sps" "$p_sps" "$ratio" "$c_first" "$p_first" "$c_wall" "$p_wall" \
        "$c_rss" "$p_rss" "$eff_c" "$eff_p" "$g_sps" "$eff_g"
      [[ $n == 2 ]] && two=("$p_sps" "$g_sps")
    done
    [[ -n ${two[0]:-} ]] && ceiling "$precision" "$model" "${two[@]}"
    two=()
  done
done
