#!/usr/bin/env bash
# End-to-end tests of `accel env --check`: env_check.sh CASE /path/to/accel
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
export PYTHON_EXEC=$PY   # Debian's python3, which has torch 1.13 (the PATH one may not)

# hold_port [listen|bind]: a socket on a port the kernel chose, held by a background python3
# until the test ends; sets $port and $holder. "bind" binds without listening: connections are
# refused, and nobody else can take the port meanwhile.
hold_port() {
  $PY -c '
import socket, sys, time
s = socket.socket(); s.bind(("0.0.0.0", 0))
if sys.argv[1] == "listen": s.listen()
print(s.getsockname()[1], flush=True); time.sleep(60)' "${1:-listen}" >"$SCRATCH/port" &
  holder=$!
  trap 'kill $holder 2>/dev/null; rm -rf "$SCRATCH"' EXIT
  for _ in $(seq 1 100); do [[ -s "$SCRATCH/port" ]] && break; sleep 0.05; done
  port=$(cat "$SCRATCH/port")
  [[ -n $port ]] || fail "the port holder printed no port"
}

# item_of JSON NAME: prints "STATUS<TAB>FINDING" of item NAME (fails when absent).
item_of() {
  echo "$1" | $PY -c '
import json, sys
d = json.load(sys.stdin)
item = [i for i in d["items"] if i["name"] == sys.argv[1]]
assert len(item) == 1, "no item %s in %s" % (sys.argv[1], d)
print(item[0]["status"] + "\t" + item[0]["finding"] + "\t" + item[0]["fix"])' "$2"
}

case $CASE in
taken_port)
  hold_port listen
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: %s\n' \
    "$port" >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "FAIL  port: port $port is already in use by pid $holder (python3) ($SCRATCH/c.yaml)"
  expect_contains "$OUT" "      fix: stop the program holding it, or set main_process_port to another port (0 or unset: launch picks a free one)"
  expect_contains "$OUT" "preflight failed: 1 failure"
  expect_exit 1 "$ACCEL" env --check --json --config_file "$SCRATCH/c.yaml"
  item=$(item_of "$OUT" port)
  expect_contains "$item" "FAIL	port $port is already in use by pid $holder"
  echo "$OUT" | $PY -c 'import json, sys; assert json.load(sys.stdin)["ok"] is False'
  ;;
too_many_processes)
  printf 'distributed_type: MULTI_GPU\nnum_processes: 4\ngpu_ids: 0,7\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "FAIL  gpus: distributed_type MULTI_GPU with 4 processes on this machine, but 0 GPUs are usable"
  expect_contains "$OUT" "(0 GPUs); gpu_ids names GPU 7, which does not exist here (0 GPUs) ($SCRATCH/c.yaml)"
  expect_contains "$OUT" "fix: run on a machine with GPUs, or make it a CPU job"
  # A GPU job without a driver: the driver item fails too, saying why.
  expect_contains "$OUT" "FAIL  driver: no usable CUDA driver for a GPU job"
  expect_exit 1 "$ACCEL" env --check --json --config_file "$SCRATCH/c.yaml"
  expect_contains "$(item_of "$OUT" gpus)" "FAIL	distributed_type MULTI_GPU with 4 processes"
  # fp8 on a CPU config: the rule launch and config follow (config::precisionNeedsGpu).
  printf 'distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\nmixed_precision: fp8\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "FAIL  gpus: mixed_precision fp8 needs a GPU but the config is CPU-only (use_cpu)"
  expect_exit 2 "$ACCEL" launch --config_file "$SCRATCH/c.yaml" /bin/true
  expect_contains "$ERR" "mixed_precision fp8 needs a GPU but the job is CPU-only (--cpu / use_cpu); use bf16 or no"
  ;;
bad_config)
  printf 'distributed_type: MULTI_CPU\nnum_procesess: 4\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "FAIL  config: $SCRATCH/c.yaml:2:1: unknown key 'num_procesess'; did you mean 'num_processes'?"
  expect_contains "$OUT" "WARN  gpus: not checked: the config file did not load"
  printf 'distributed_type: MULTI_CPU\nnum_processes: [4\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" env --check --json --config_file "$SCRATCH/c.yaml"
  item=$(item_of "$OUT" config)
  expect_contains "$item" "FAIL	$SCRATCH/c.yaml:"
  expect_contains "$item" "invalid YAML"
  expect_exit 1 "$ACCEL" env --check --config_file "$SCRATCH/missing.yaml"
  expect_contains "$OUT" "FAIL  config: --config_file: '$SCRATCH/missing.yaml' does not exist"
  ;;
healthy)
  # Port 0: launch binds a free port, so the port check passes without guessing one.
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\nmain_process_port: 0\n' \
    >"$SCRATCH/c.yaml"
  expect_exit 0 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "OK    config: $SCRATCH/c.yaml loads: MULTI_CPU, 2 processes on 1 machine"
  expect_contains "$OUT" "OK    python: $PY ($PY, Python "
  expect_contains "$OUT" "preflight passed: 0 failures"
  ! grep -q '^FAIL' <<<"$OUT" || fail "a FAIL line on a healthy machine: $OUT"
  # --python names the interpreter to check, as launch's --python does.
  printf '#!/bin/sh\nexit 3\n' >"$SCRATCH/nopython" && chmod +x "$SCRATCH/nopython"
  expect_exit 0 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml" --python "$SCRATCH/nopython"
  expect_contains "$OUT" "WARN  python: $SCRATCH/nopython unavailable ("
  # An interpreter without torch (one that answers the probe so), first in PATH: the fix names
  # Debian's, which has torch, as `accel env` lists it.
  mkdir -p "$SCRATCH/bin"
  printf '#!/bin/sh
printf "%%s\n" "$0" 3.11.7 "" ""
' >"$SCRATCH/bin/python3" && chmod +x "$SCRATCH/bin/python3"
  expect_exit 0 env PATH="$SCRATCH/bin:$PATH" "$ACCEL" env --check --config_file "$SCRATCH/c.yaml" --python "$SCRATCH/bin/python3"
  expect_contains "$OUT" "WARN  python: $SCRATCH/bin/python3 ($SCRATCH/bin/python3, Python 3.11.7) has no torch"
  expect_contains "$OUT" "fix: $PY has torch $($PY -c 'import torch; print(torch.__version__)'): launch with --python $PY (or PYTHON_EXEC=$PY), or pip install torch into it"
  expect_exit 2 "$ACCEL" env --python "$PY"
  expect_contains "$OUT$ERR" "--python requires --check"
  # The BLAS Debian's torch loads: the library the alternatives point libblas.so.3 to, in both
  # the report and the check (scripts/setup.sh installs OpenBLAS: OK, not the reference's WARN).
  blas=$(readlink -f "/usr/lib/$(gcc -dumpmachine)/libblas.so.3")
  expect_exit 0 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml" --python "$PY"
  expect_contains "$OUT" "blas: torch under $PY"
  expect_contains "$OUT" "($blas)"
  expect_exit 0 "$ACCEL" env
  expect_contains "$OUT" "- BLAS under torch ($PY): "
  expect_contains "$OUT" "$blas"
  expect_exit 0 "$ACCEL" env --check --json --config_file "$SCRATCH/c.yaml"
  echo "$OUT" | $PY -c '
import json, sys
d = json.load(sys.stdin)
names = [i["name"] for i in d["items"]]
assert names == ["config", "gpus", "driver", "port", "network", "shm", "ulimit", "python", "paradigm", "blas"], names
assert d["ok"] is True, d
for i in d["items"]:
    assert i["status"] in ("OK", "WARN"), i
    assert set(i) == {"name", "status", "finding", "fix"}, i
    assert (i["fix"] == "") == (i["status"] == "OK"), i
'
  ;;
several_machines)
  # Machine 1 of 2 whose master does not listen yet (the port is bound, not listening: refused).
  hold_port bind
  printf 'distributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\nmachine_rank: 1\nmain_process_ip: 127.0.0.1\nmain_process_port: %s\n' \
    "$port" >"$SCRATCH/c.yaml"
  expect_exit 0 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "WARN  network: host name $(hostname)"
  expect_contains "$OUT" "master 127.0.0.1:$port via lo (127.0.0.1) is not reachable yet"
  expect_contains "$OUT" "start machine 0's \`accel launch\`"
  expect_contains "$OUT" "OK    port: port $port is machine 0's (this is machine_rank 1)"
  # Once the master listens, the same check finds it.
  kill $holder; wait $holder 2>/dev/null || true
  $PY -c '
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen()
print("up", flush=True); time.sleep(60)' "$port" >"$SCRATCH/up" &
  holder=$!
  for _ in $(seq 1 100); do [[ -s "$SCRATCH/up" ]] && break; sleep 0.05; done
  expect_exit 0 "$ACCEL" env --check --json --config_file "$SCRATCH/c.yaml"
  expect_contains "$(item_of "$OUT" network)" "master 127.0.0.1:$port answers via lo (127.0.0.1)"
  # No main_process_port with several machines: launch would refuse.
  printf 'distributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\nmain_process_ip: 127.0.0.1\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" env --check --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "FAIL  port: main_process_port is not set, but 2 machines must meet at one port"
  ;;
paradigm)
  # What the config's paradigm needs of the interpreter, and main_process_ip on machine 0 too.
  printf 'distributed_type: DEEPSPEED\nnum_processes: 1\ndeepspeed_config:\n  zero_stage: 2\n' >"$SCRATCH/ds.yaml"
  expect_exit 1 "$ACCEL" env --check --python /usr/bin/python3 --config_file "$SCRATCH/ds.yaml"
  expect_contains "$OUT" "FAIL  paradigm: distributed_type DEEPSPEED, but /usr/bin/python3 has no deepspeed ($SCRATCH/ds.yaml)"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\ndynamo_config:\n  dynamo_backend: INDUCTOR\n' >"$SCRATCH/dyn.yaml"
  expect_exit 1 "$ACCEL" env --check --python /usr/bin/python3 --config_file "$SCRATCH/dyn.yaml"
  expect_contains "$OUT" "FAIL  paradigm: dynamo_backend INDUCTOR needs torch.compile (torch 2.0+), and /usr/bin/python3 has torch 1.13"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 2\nuse_cpu: true\n' >"$SCRATCH/plain.yaml"
  "$ACCEL" env --check --python /usr/bin/python3 --config_file "$SCRATCH/plain.yaml" >"$SCRATCH/o" || true
  expect_contains "$(cat "$SCRATCH/o")" "OK    paradigm: no DeepSpeed or torch dynamo in the config"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 4\nnum_machines: 2\nmachine_rank: 0\nmain_process_ip: no-such-host.invalid\nmain_process_port: 29500\n' >"$SCRATCH/m0.yaml"
  expect_exit 1 "$ACCEL" env --check --config_file "$SCRATCH/m0.yaml"
  expect_contains "$OUT" "master no-such-host.invalid:29500: "
  expect_contains "$OUT" "check main_process_ip (every machine must resolve it)"
  ;;
*)
  fail "unknown case $CASE"
  ;;
esac
echo "PASS $CASE"
