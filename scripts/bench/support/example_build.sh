# Sourced by the benchmarks that run the C++ example under accel launch: sets `build` (the build
# to measure: $ACCEL_BUILD_DIR, else build/), `accel` and `example`, and stops the benchmark when
# either is missing. OMP_NUM_THREADS=1 for every rank, as accel launch gives several processes.
build=${ACCEL_BUILD_DIR:-build}
accel=$build/apps/accel/accel
example=$build/apps/examples/fashion_mnist/fashion_mnist
[[ -x "$accel" && -x "$example" ]] || { echo "build first: scripts/build" >&2; exit 1; }
export OMP_NUM_THREADS=1
