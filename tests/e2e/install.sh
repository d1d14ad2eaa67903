#!/usr/bin/env bash
# `cmake --install` as a user does it: the installed tree holds bin/accel, libaccel, its public
# headers and a CMake package; a program outside this tree finds it (find_package(accel),
# target_link_libraries(app accel::accel)), builds, and runs as a 2-rank job under the installed
# accel. Usage: install.sh BUILD_DIR TORCH_DIR
source "$(dirname "$0")/lib.sh"
BUILD=$1 TORCH_DIR=$2
prefix=$SCRATCH/prefix
cmake --install "$BUILD" --prefix "$prefix" >"$SCRATCH/install.log" 2>&1 || fail "cmake --install failed: $(tail "$SCRATCH/install.log")"
for f in bin/accel include/accel/accelerator.h lib/libaccel.a lib/cmake/accel/accelConfig.cmake; do
  [[ -e $prefix/$f ]] || fail "not installed: $f"
done
expect_exit 0 "$prefix/bin/accel" --version

app=$SCRATCH/app
mkdir -p "$app"
cat >"$app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(app LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(accel 0.1 REQUIRED)
add_executable(app main.cc)
target_link_libraries(app accel::accel)
CMAKE
cat >"$app/main.cc" <<'CC'
#include <accel/accelerator.h>

#include <iostream>

int main() {
  accel::Accelerator acc;
  auto sum = acc.reduce(torch::full({1}, acc.processIndex() + 1.0));
  std::cout << "rank " << acc.processIndex() << " of " << acc.numProcesses()
            << ": sum=" << sum.item<double>() << std::endl;
}
CC
cmake -S "$app" -B "$app/build" -DCMAKE_PREFIX_PATH="$prefix" -DTorch_DIR="$TORCH_DIR" \
  >"$SCRATCH/app.log" 2>&1 || fail "configuring a program against the installed accel failed: $(tail -20 "$SCRATCH/app.log")"
cmake --build "$app/build" -j2 >>"$SCRATCH/app.log" 2>&1 || fail "building it failed: $(tail -20 "$SCRATCH/app.log")"
expect_exit 0 "$prefix/bin/accel" launch --cpu -n 2 "$app/build/app"
expect_contains "$OUT" "[rank 0] rank 0 of 2: sum=3"
expect_contains "$OUT" "[rank 1] rank 1 of 2: sum=3"
echo "ok: install"
