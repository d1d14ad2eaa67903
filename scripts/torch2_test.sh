#!/usr/bin/env bash
# What links LibTorch — libaccel, the example, accel-check, the benches' and tests' libaccel
# workers, and the unit tests of libaccel and of LibTorch's store client — built and run against
# LibTorch 2.6 (Debian trixie's libtorch-dev, in the chroot of scripts/torch2_chroot.sh), into
# build-torch2/ (or $ACCEL_TORCH2_BUILD_DIR), with trixie's g++ 14 and warnings as errors. Fails on
# any deprecation warning from LibTorch's headers, so none is left unexplained. Only those targets:
# the rest of the tree (the accel binary, the launcher, config, probes) never includes LibTorch, and
# building it again here was most of this phase's time on CI's 2 cores. scripts/test runs it after
# the main tests; without root it says why and does nothing. Extra arguments go to ctest (default:
# -L 'unit|cpp_torchrun': the unit tests built here, and a C++ worker on LibTorch 2.6 launched by
# torchrun 2.6).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
if ! reason=$(scripts/torch2_chroot.sh check 2>&1); then
  echo "torch2_test: skipped: $reason"
  exit 0
fi
build_dir=${ACCEL_TORCH2_BUILD_DIR:-build-torch2}
(($#)) || set -- -L 'unit|cpp_torchrun'
log=$(mktemp)
trap 'rm -f "$log"' EXIT
export ACCEL_CHROOT_BINDS=$repo
# Every target that links libaccel (grep libaccel in the CMakeLists.txt files), and libaccel's tests.
targets=(libaccel libaccel_tests libtorch_store_tests fashion_mnist accel_check allreduce_bench
  shm_worker hang_worker)
echo "torch2_test: building against LibTorch 2.6 in the chroot ($build_dir)"
scripts/torch2_chroot.sh run sh -c "cmake -S . -B '$build_dir' -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null &&
  cmake --build '$build_dir' -j$(nproc) --target ${targets[*]}" >"$log" 2>&1 || { tail -40 "$log"; echo "torch2_test: build failed" >&2; exit 1; }
if grep -q "Wdeprecated" "$log"; then
  grep -B2 "Wdeprecated" "$log" | head -40
  echo "torch2_test: deprecated LibTorch APIs used (see above)" >&2
  exit 1
fi
# A test program left by an earlier build of the whole tree is not this build's: its tests would
# run stale, so it goes, with the list of tests discovered in it.
for exe in "$build_dir"/tests/*_tests; do
  if [[ -e $exe && " ${targets[*]} " != *" ${exe##*/} "* ]]; then rm -f "$exe" "$exe[1]_tests.cmake"; fi
done
scripts/torch2_chroot.sh run ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" "$@"
