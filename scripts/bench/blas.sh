#!/usr/bin/env bash
# Which BLAS under Debian's torch, in one run: the C++ Fashion-MNIST example (LibTorch, which
# calls whatever libblas.so.3 it is given), one rank, fp32, OMP_NUM_THREADS=1, on each BLAS
# installed here that provides libblas.so.3 — the reference (netlib, libblas3), OpenBLAS
# (libopenblas0-pthread/-openmp), BLIS (libblis4-pthread/-openmp), ATLAS — each picked with
# LD_LIBRARY_PATH so the alternatives are left alone. Prints samples/s and the ratio to the
# reference BLAS measured in the same run.
#   scripts/bench/blas.sh [--steps S]      (default 300)
#   scripts/bench/blas.sh --quick          (ctest's bench.blas_quick: MLP, 20 steps)
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=300
models="mlp cnn"
while (($#)); do
  case $1 in
    --steps) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "blas.sh: --steps needs a positive integer" >&2; exit 2; }
             steps=$2; shift 2 ;;
    --quick) steps=20 models=mlp; shift ;;
    *) echo "usage: scripts/bench/blas.sh [--steps S] [--quick]" >&2; exit 2 ;;
  esac
done
source scripts/bench/support/example_build.sh
lib=/usr/lib/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
[[ -e $lib/blas/libblas.so.3 ]] || { echo "blas.sh: no reference BLAS at $lib/blas (libblas3)"; exit 77; }

# sps DIR MODEL: samples/s of the example on $lib/DIR/libblas.so.3
sps() {
  LD_LIBRARY_PATH=$lib/$1 "$accel" launch -q --cpu -n 1 --no_python "$example" --model "$2" \
    --steps "$steps" --no-shuffle --no-progress --no-eval 2>&1 | sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' | head -1
}

printf '%-5s %-18s %12s %10s\n' model BLAS samples/s "vs ref"
for model in $models; do
  ref=$(sps blas "$model")
  printf '%-5s %-18s %12s %10s\n' "$model" "reference (blas)" "$ref" "1.00x (reference)"
  for dir in openblas-pthread openblas-openmp blis-pthread blis-openmp atlas; do
    [[ -e $lib/$dir/libblas.so.3 ]] || continue
    s=$(sps "$dir" "$model")
    printf '%-5s %-18s %12s %10s\n' "$model" "$dir" "$s" "$(awk -v a="$s" -v b="$ref" 'BEGIN{printf "%.2fx", a/b}')"
  done
done
