#!/usr/bin/env bash
# libaccel's GPU path compiled and linked on a machine without a GPU: what CUDA changes, built
# against Debian trixie's CUDA build of LibTorch 2.6, NCCL 2.22 and the CUDA 12.4 toolkit (the
# chroot of scripts/torch2_chroot.sh --cuda), with -DACCEL_WITH_NCCL=ON, without Gloo (as against
# pip's torch, the GPU machines' build) and warnings as errors, into build-cuda/ (or
# $ACCEL_CUDA_BUILD_DIR): libaccel with its NCCL communicator, the NCCL unit tests and
# scripts/gpu_check.sh's program, libaccel's unit tests (tests/libaccel/world.h compiles
# differently without Gloo), and the probes' unit tests, which run (below). Nothing else compiles
# differently here: the example, accel-check, the benches' and tests' workers and LibTorch's store
# client include no CUDA, NCCL or Gloo switch, and scripts/torch2_test.sh compiles them against
# the same LibTorch 2.6 headers with trixie's compiler and -Werror; building them again here cost
# about 4 minutes of CPU (and the whole tree, once, 18 minutes of a CI run on 2 cores). Every
# unit-test binary built here that can start runs; those that link LibTorch's CUDA build cannot
# (no libcudnn.so.9 in that chroot, no GPU) and are named, with the library the loader did not find.
# scripts/test runs it after the main tests; without root it says why and does nothing.
#
# Linking: libtorch_cuda.so needs libcudnn.so.9, which that chroot does not have (see
# torch2_chroot.sh), so executables link with --allow-shlib-undefined; nothing else is relaxed.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! reason=$(scripts/torch2_chroot.sh --cuda check 2>&1); then
  echo "cuda_build: skipped: $reason"
  exit 0
fi
build_dir=${ACCEL_CUDA_BUILD_DIR:-build-cuda}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export ACCEL_CHROOT_BINDS=$PWD
chroot_run() { scripts/torch2_chroot.sh --cuda run "$@"; }

echo "cuda_build: building against LibTorch 2.6 with CUDA, NCCL and -Werror in the chroot ($build_dir)"
# Without Gloo, as against pip's torch (which ships no Gloo headers): the GPU machines' build.
configure=(cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACCEL_WITH_NCCL=ON
  -DACCEL_WITH_GLOO=OFF
  -DCMAKE_COMPILE_WARNING_AS_ERROR=ON -DACCEL_TEST_DISCOVERY=PRE_TEST
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined)
# The targets named above. probes_tests: the GPU probe loads libcuda.so.1, which this chroot has
# without a GPU (its threads once took the agent's Ctrl-C); nowhere else do its tests run beside
# it. (Not the whole launcher_tests: the launcher compiles no differently here.)
targets=(libaccel libaccel_tests nccl_tests gpu_check probes_tests)
if ! chroot_run "${configure[@]}" >"$log" 2>&1 ||
  ! chroot_run cmake --build "$build_dir" -j"$(nproc)" --target "${targets[@]}" >>"$log" 2>&1; then
  tail -40 "$log"
  echo "cuda_build: build failed" >&2
  exit 1
fi
grep -E "accel: NCCL found|PyTorch: CUDA detected" "$log" | sed 's/^-- /cuda_build: /' || true
grep -q "accel: NCCL found" "$log" || { echo "cuda_build: CMake did not find NCCL and CUDA" >&2; exit 1; }

# Each unit-test binary: run where it can start, named with the reason where it cannot.
failed=0 ran=() not_run=()
for exe in "$build_dir"/tests/*_tests; do
  name=${exe##*/}
  # A binary left by an earlier build of the whole tree is not this build's.
  [[ " ${targets[*]} " == *" $name "* ]] || continue
  if ! out=$(chroot_run "$exe" --gtest_list_tests 2>&1); then
    missing=$(grep -o "lib[A-Za-z0-9_.+-]*\.so[.0-9]*: cannot open shared object file" <<<"$out" | head -1)
    [[ -n $missing ]] || { echo "$out" | tail -5; echo "cuda_build: $name did not start" >&2; exit 1; }
    not_run+=("$name (${missing%%:*} missing: links LibTorch's CUDA build)")
    continue
  fi
  if chroot_run "$exe" --gtest_brief=1 >"$log" 2>&1; then
    ran+=("$name ($(grep -vc '^ ' <<<"$out") suites)")
  else
    tail -30 "$log"
    echo "cuda_build: $name failed" >&2
    failed=1
  fi
done
echo "cuda_build: ran (compiled with CUDA and NCCL, do not need a GPU): ${ran[*]:-none}"
echo "cuda_build: built, not run here (need libcudnn and a GPU; run them on a GPU machine):"
for n in "${not_run[@]}"; do echo "  $n"; done
exit $failed
