#!/usr/bin/env bash
# libaccel, the example, accel and their unit tests built and run against LibTorch 2.6 (Debian
# trixie's libtorch-dev, in the chroot of scripts/torch2_chroot.sh), into build-torch2/ (or
# $ACCEL_TORCH2_BUILD_DIR), with warnings as errors: the whole tree's one build with trixie's newer
# g++ (14), whose warnings Debian 12's g++ 12 does not give. Fails on any deprecation warning from
# LibTorch's headers, so none is left unexplained. scripts/test runs it after the main tests; without root it says why and
# does nothing. Extra arguments go to ctest (default: -L 'unit|cpp_torchrun': the unit tests, and
# a C++ worker on LibTorch 2.6 launched by torchrun 2.6).
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
echo "torch2_test: building against LibTorch 2.6 in the chroot ($build_dir)"
scripts/torch2_chroot.sh run sh -c "cmake -S . -B '$build_dir' -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_COMPILE_WARNING_AS_ERROR=ON >/dev/null &&
  cmake --build '$build_dir' -j$(nproc)" >"$log" 2>&1 || { tail -40 "$log"; echo "torch2_test: build failed" >&2; exit 1; }
if grep -q "Wdeprecated" "$log"; then
  grep -B2 "Wdeprecated" "$log" | head -40
  echo "torch2_test: deprecated LibTorch APIs used (see above)" >&2
  exit 1
fi
scripts/torch2_chroot.sh run ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" "$@"
