#!/usr/bin/env bash
# The five-minute GPU check, for a machine with one NVIDIA GPU and pip's torch (its LibTorch):
# builds libaccel's GPU path against it into build-gpu/ (or $ACCEL_GPU_BUILD_DIR), then prints
# one PASS/FAIL line per check:
#   (a) ctest -L gpu: the NCCL collectives against the CPU reference, the watchdog's abort of a
#       stuck all-reduce (synchronize() throws within 5 s while the stream is released at 8 s),
#       fp16 skipping an overflowing step — the whole label under 60 s
#   (b) stream order, (c) GradientSync on a world-1 NCCL communicator (bf16 compression off and
#       on), (e) an fp16 resume: tests/gpu/gpu_check.cc
#   (f) the Fashion-MNIST example on the GPU under accel launch beside torch's own loop on the same
#       model and data (scripts/bench/step.sh: samples/s, and ms per step in data, forward,
#       backward, sync and optimizer from CUDA events, side by side)
#   (g) libaccel_tests, libaccel's unit tests, against this LibTorch
#   (h) the health checks through the machine's own NVML: an elastic job's agent checks its GPUs
#       before its round (probes/gpu_health.h) and summary.json shows "gpus" and "gpu 0" passed
# A second run rebuilds nothing that did not change. Exit status: 1 when any check failed.
#   scripts/gpu_check.sh [--steps N]   (the example's steps per run of (f); default 1000)
# It needs yaml-cpp, nlohmann-json, CLI11, GoogleTest and zlib's headers; on a bare CUDA image
# without them, unpack Debian's packages (dpkg -x) into a prefix and export
# CMAKE_PREFIX_PATH=PREFIX/usr (the first run did: libyaml-cpp-dev libyaml-cpp0.7
# nlohmann-json3-dev libcli11-dev libgtest-dev zlib1g-dev zlib1g).
# The example reads Fashion-MNIST from $ACCEL_FASHION_MNIST_DIR (default: Debian's
# dataset-fashion-mnist, /usr/share/datasets/fashion-mnist).
set -uo pipefail
cd "$(dirname "$0")/.."
steps=1000
[[ ${1:-} == --steps && ${2:-} =~ ^[1-9][0-9]*$ ]] && steps=$2
build=${ACCEL_GPU_BUILD_DIR:-build-gpu}
py=${PYTHON:-python3}
failed=0
result() {  # result NAME STATUS [DETAIL]
  if (($2 == 0)); then echo "PASS $1${3:+: $3}"; else echo "FAIL $1${3:+: $3}"; failed=1; fi
}

prefix=$("$py" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null) || {
  echo "FAIL build: $py has no torch (set PYTHON to the one that has)"
  exit 1
}
echo "gpu_check: $("$py" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "on", torch.cuda.get_device_name(0))' 2>&1)"
# pip's torch loads NCCL from the nvidia-nccl wheel: build libaccel against that one.
if [[ -z ${NCCL_HOME:-} ]]; then
  NCCL_HOME=$("$py" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) && export NCCL_HOME
fi
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
start=$SECONDS
if cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DACCEL_WITH_NCCL=ON \
  -DCMAKE_PREFIX_PATH="$prefix" >"$build.log" 2>&1 &&
  cmake --build "$build" -j"$(nproc)" --target accel fashion_mnist nccl_tests gpu_check \
    >>"$build.log" 2>&1; then
  result build 0 "$((SECONDS - start)) s, $(grep -o 'NCCL found.*' "$build.log" | head -1)"
else
  tail -30 "$build.log"
  result build 1 "see $build.log"
  exit 1
fi

start=$SECONDS
ctest --test-dir "$build" -L gpu --output-on-failure --timeout 60 >"$build/gpu_ctest.log" 2>&1
rc=$?
result "ctest -L gpu" $rc "$((SECONDS - start)) s, $(grep -E 'tests passed|tests failed' "$build/gpu_ctest.log")"
((rc == 0)) || tail -40 "$build/gpu_ctest.log"

"$build/tests/gpu_check" || failed=1

# (f) The example on the GPU beside torch's loop on the same model and data: where a step's time
# goes, from CUDA events (scripts/bench/step.sh; GPU_CHECK_BEFORE=BUILD_DIR adds another build's
# example, e.g. the last commit's, as "before").
data=${ACCEL_FASHION_MNIST_DIR:-/usr/share/datasets/fashion-mnist}
before=()
[[ -n ${GPU_CHECK_BEFORE:-} ]] && before=(--before "$GPU_CHECK_BEFORE")
if ACCEL_BUILD_DIR=$build ACCEL_FASHION_MNIST_DIR=$data PYTHON=$py scripts/bench/step.sh --device cuda \
  --steps "$steps" --rounds 3 "${before[@]}" >"$build/step.log" 2>&1; then
  cat "$build/step.log"
  result "example beside torch's loop (step.sh)" 0 "$(awk '$1 == "cnn" && $2 == "no" && $3 == "cpp" {print "CNN fp32 steady-state", $NF, "of torch'"'"'s"}' "$build/step.log")"
else
  tail -30 "$build/step.log"
  result "example beside torch's loop (step.sh)" 1 "see $build/step.log"
fi

# (g) libaccel's own tests on this LibTorch (the first GPU run found pip's torch 2.11 exporting a
# broken std::filesystem::remove_all here). Gloo's tests run where this LibTorch has Gloo.
start=$SECONDS
if cmake --build "$build" -j"$(nproc)" --target libaccel_tests >>"$build.log" 2>&1; then
  "$build/tests/libaccel_tests" >"$build/libaccel_tests.log" 2>&1
  rc=$?
  result "libaccel_tests on this LibTorch" $rc "$((SECONDS - start)) s, $(grep -E '^\[  PASSED|tests? ran' "$build/libaccel_tests.log" | tr '\n' ' ')"
  # A failed test names itself; a crash leaves the test it was running as the last RUN line.
  ((rc == 0)) || grep -E '^\[  FAILED  \]' "$build/libaccel_tests.log" | head -20
  ((rc == 0)) || grep -E '^\[ RUN      \]' "$build/libaccel_tests.log" | tail -1 | sed 's/^/last started: /'
else
  result "libaccel_tests on this LibTorch" 1 "build failed, see $build.log"
fi

# (h) The GPU health checks through the real NVML (elsewhere they ran only against a fake): a
# one-machine elastic job (its agent checks before the round) with one rank on the GPU.
scratch=$(mktemp -d)
cat >"$scratch/w.py" <<'PY'
import os, torch
print("rank", os.environ["RANK"], "on", torch.cuda.get_device_name(0), torch.ones(4, device="cuda").sum().item())
PY
"$build/apps/accel/accel" run --nproc_per_node 1 --nnodes 1:2 --rdzv_backend c10d \
  --rdzv_endpoint "127.0.0.1:$((20000 + RANDOM % 10000))" --rdzv_conf last_call_timeout=1 \
  --log_dir "$scratch/logs" "$py" "$scratch/w.py" >"$build/health.log" 2>&1
rc=$?
summary=$(find "$scratch/logs" -name summary.json 2>/dev/null | head -1)
detail=$("$py" - "${summary:-/nonexistent}" <<'PY' 2>&1
import json, sys
checks = json.load(open(sys.argv[1]))["health_checks"]
gpu = [c for c in checks if c["name"] == "gpus" or c["name"].startswith("gpu ")]
print("; ".join(f'{c["name"]} {"passed" if c["passed"] else "FAILED"}: {c["detail"]} ({c["took_ms"]} ms)' for c in gpu))
assert [c["name"] for c in gpu] == ["gpus", "gpu 0"], gpu
assert all(c["passed"] for c in checks), checks
PY
)
prc=$?
((rc == 0 && prc == 0))
result "GPU health checks through NVML" $? "$detail"
((rc == 0)) || cat "$build/health.log"
rm -rf "$scratch"
exit $failed
