#!/usr/bin/env bash
# End-to-end tests of `accel config` and `accel env`: config_cli.sh CASE /path/to/accel
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
DEFAULT=$HF_HOME/accelerate/default_config.yaml

# Keys accelerate's ClusterConfig accepts at the top level (its unknown-key check).
ACCELERATE_KEYS="compute_environment distributed_type mixed_precision use_cpu debug num_processes machine_rank
num_machines gpu_ids main_process_ip main_process_port rdzv_backend same_network main_training_function
enable_cpu_affinity downcast_bf16 tpu_name tpu_zone tpu_use_cluster tpu_use_sudo command_file commands tpu_vm
tpu_env fp8_config deepspeed_config fsdp_config parallelism_config megatron_lm_config mpirun_config dynamo_config"

# Reads FILE with PyYAML as accelerate does and checks every key is one accelerate knows and the
# values have the types accelerate expects; prints the dict as JSON.
load_like_accelerate() {
  $PY - "$1" "$ACCELERATE_KEYS" <<'PYEOF'
import json, sys, yaml
path, keys = sys.argv[1], set(sys.argv[2].split())
with open(path) as f:
    d = json.load(f) if path.endswith(".json") else yaml.safe_load(f)
unknown = sorted(set(d) - keys)
assert not unknown, f"accelerate would reject unknown keys {unknown}"
for k in ("mixed_precision", "distributed_type", "compute_environment", "rdzv_backend"):
    assert isinstance(d[k], str), f"{k} is {d[k]!r}, accelerate expects a string"
for k in ("num_processes", "num_machines", "machine_rank"):
    assert isinstance(d[k], int) and not isinstance(d[k], bool), f"{k} is {d[k]!r}"
for k in ("use_cpu", "debug", "same_network", "enable_cpu_affinity"):
    assert isinstance(d[k], bool), f"{k} is {d[k]!r}"
print(json.dumps(d, sort_keys=True))
PYEOF
}

case $CASE in
questionnaire_roundtrip)
  # Every question answered through a pipe: multi-GPU, 2 machines, rank 1, dynamo customised.
  answers='0\n4\n2\n1\n10.0.0.1\n29501\nno\nc10d\ny\ny\n2\ny\n1\nn\ny\nn\n16\n0,1\nyes\nbf16\n'
  expect_exit 0 bash -c "printf '$answers' | '$ACCEL' config"
  expect_contains "$OUT" "accel configuration saved at $DEFAULT"
  d=$(load_like_accelerate "$DEFAULT")
  expect_contains "$d" '"distributed_type": "MULTI_GPU"'
  expect_contains "$d" '"machine_rank": 1'
  expect_contains "$d" '"main_process_ip": "10.0.0.1"'
  expect_contains "$d" '"main_process_port": 29501'
  expect_contains "$d" '"num_processes": 16'
  expect_contains "$d" '"gpu_ids": "0,1"'
  expect_contains "$d" '"mixed_precision": "bf16"'
  expect_contains "$d" '"rdzv_backend": "c10d"'
  expect_contains "$d" '"dynamo_config": {"dynamo_backend": "INDUCTOR"'
  # And accel loads it back to the same values.
  expect_exit 0 "$ACCEL" config show --json
  expect_contains "$OUT" '"num_processes": 16'
  expect_contains "$OUT" '"machine_rank": 1'
  # A JSON target gets JSON.
  expect_exit 0 bash -c "printf '0\n1\n1\nn\nn\nn\n4\n2\n' | '$ACCEL' config --config_file '$SCRATCH/c.json'"
  d=$(load_like_accelerate "$SCRATCH/c.json")
  expect_contains "$d" '"num_processes": 4'
  ;;
questionnaire_bad_answers)
  expect_exit 0 bash -c "printf '0\nfoo\n7\n1\n1\nmaybe\nn\nn\nn\n0\n4\nfp16\n2\n' | '$ACCEL' config"
  expect_contains "$OUT" "Invalid answer: 'foo' is not a choice; enter a number from 0 to 10"
  expect_contains "$OUT" "Invalid answer: multi-SDAA is not supported by accel"
  expect_contains "$OUT" "Invalid answer: please enter yes or no (or y/n)"
  expect_contains "$OUT" "Invalid answer: must be at least 1"
  expect_contains "$OUT" "Invalid answer: fp16 needs a GPU"
  d=$(load_like_accelerate "$DEFAULT")
  expect_contains "$d" '"num_processes": 4'
  expect_contains "$d" '"mixed_precision": "bf16"'
  ;;
questionnaire_eof)
  # An existing file must survive an aborted questionnaire untouched.
  mkdir -p "$(dirname "$DEFAULT")"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 3\n' >"$DEFAULT"
  before=$(cat "$DEFAULT")
  expect_exit 1 bash -c "printf '0\n1\n1\n' | '$ACCEL' config"
  expect_contains "$ERR" 'end of input before an answer to "Should distributed operations be checked'
  expect_contains "$ERR" "nothing was written"
  [[ "$(cat "$DEFAULT")" == "$before" ]] || fail "config file changed"
  [[ -z "$(ls "$HF_HOME/accelerate" | grep -v '^default_config.yaml$')" ]] || fail "stray files: $(ls "$HF_HOME/accelerate")"
  expect_exit 1 bash -c "'$ACCEL' config </dev/null"
  expect_contains "$ERR" 'end of input before an answer to "In which compute environment are you running?"'
  ;;
questionnaire_bad_target)
  expect_exit 1 bash -c "printf '\n' | '$ACCEL' config --config_file /nonexistent-dir/c.yaml"
  expect_contains "$ERR" "--config_file: directory '/nonexistent-dir' of '/nonexistent-dir/c.yaml' does not exist"
  ;;
unknown_key_suggestion)
  printf 'distributed_type: MULTI_CPU\nnum_procesess: 4\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" config show --config_file "$SCRATCH/c.yaml"
  expect_contains "$ERR" "$SCRATCH/c.yaml:2:1: unknown key 'num_procesess'; did you mean 'num_processes'?"
  ;;
missing_config_file)
  expect_exit 1 "$ACCEL" config show --config_file "$SCRATCH/nope.yaml"
  expect_contains "$ERR" "--config_file: '$SCRATCH/nope.yaml' does not exist"
  expect_exit 1 "$ACCEL" env --config_file "$SCRATCH/nope.yaml"
  expect_contains "$OUT" "Error: --config_file: '$SCRATCH/nope.yaml' does not exist"
  ;;
invalid_yaml)
  printf 'distributed_type: MULTI_CPU\nnum_processes: [4\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" config show --config_file "$SCRATCH/c.yaml"
  expect_contains "$ERR" "$SCRATCH/c.yaml:"
  expect_contains "$ERR" "invalid YAML"
  printf 'distributed_type: MULTI_CPU\nmain_process_port: 99999\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" config show --config_file "$SCRATCH/c.yaml"
  expect_contains "$ERR" "$SCRATCH/c.yaml:2:20: 'main_process_port' is 99999, out of range 0..65535"
  ;;
env_json)
  "$ACCEL" config default >/dev/null
  expect_exit 0 "$ACCEL" env --json
  echo "$OUT" | $PY -c '
import json, sys
d = json.load(sys.stdin)
for section, fields in {
    "accel": ["version", "git_revision", "build_type", "compiler", "path"],
    "platform": ["os", "kernel", "machine", "hostname"],
    "cpu": ["model", "logical_cpus", "usable_cpus", "physical_cores"],
    "libtorch": ["version"],
    "cuda": ["usable", "status", "gpu_count", "devices"],
    "nccl": ["version", "status"],
    "config": ["path", "explicit", "values", "error"],
}.items():
    for f in fields:
        assert f in d[section], f"missing {section}.{f}"
assert d["ram_gib"] > 0
assert d["cpu"]["logical_cpus"] >= 1
assert d["cuda"]["gpu_count"] == len(d["cuda"]["devices"])
assert isinstance(d["python"], list) and d["python"], "python probes missing"
assert d["config"]["values"]["distributed_type"] in ("NO", "MULTI_GPU")
assert d["config"]["path"].endswith("accelerate/default_config.yaml")
'
  ;;
env_text)
  expect_exit 0 "$ACCEL" env
  for line in '- `accel` version:' '- Platform:' '- CPU:' '- System RAM:' '- LibTorch version' '- CUDA usable:' \
              '- GPU count:' '- NCCL version:' '- Python (' '- `accel` default config:'; do
    expect_contains "$OUT" "$line"
  done
  expect_contains "$OUT" $'\tNot found'
  ;;
env_bad_config)
  printf 'distributed_type: MULTI_CPU\nnum_machine: 2\n' >"$SCRATCH/c.yaml"
  expect_exit 1 "$ACCEL" env --config_file "$SCRATCH/c.yaml"
  expect_contains "$OUT" "Error: $SCRATCH/c.yaml:2:1: unknown key 'num_machine'; did you mean 'num_machines'?"
  ;;
config_default_update)
  expect_exit 0 "$ACCEL" config default --mixed_precision bf16
  expect_contains "$OUT" "accel configuration saved at $DEFAULT"
  d=$(load_like_accelerate "$DEFAULT")
  expect_contains "$d" '"mixed_precision": "bf16"'
  # Never overwrites.
  expect_exit 0 "$ACCEL" config default --mixed_precision no
  expect_contains "$OUT" "Configuration already exists at $DEFAULT, will not override."
  expect_contains "$(cat "$DEFAULT")" "mixed_precision: bf16"
  # update rewrites an old-style file with current keys.
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nfp16: true\nnum_processes: 2\ndeepspeed_config: {}\n' >"$SCRATCH/old.yaml"
  expect_exit 0 "$ACCEL" config update --config_file "$SCRATCH/old.yaml"
  expect_contains "$OUT" "Successfully updated the configuration file at $SCRATCH/old.yaml."
  new=$(cat "$SCRATCH/old.yaml")
  expect_contains "$new" "mixed_precision: fp16"
  [[ "$new" != *"fp16: true"* && "$new" != *deepspeed_config* ]] || fail "legacy keys kept: $new"
  expect_exit 2 "$ACCEL" config default --mixed_precision fp32
  ;;
config_update_missing)
  expect_exit 1 "$ACCEL" config update
  expect_contains "$ERR" "no config file to update: '$DEFAULT' does not exist"
  ;;
config_show_precedence)
  mkdir -p "$(dirname "$DEFAULT")"
  printf 'distributed_type: MULTI_CPU\nnum_processes: 4\nmixed_precision: bf16\nuse_cpu: true\n' >"$DEFAULT"
  expect_exit 0 "$ACCEL" config show --num-processes 8
  expect_contains "$OUT" "num_processes: 8  # flag"
  expect_contains "$OUT" "mixed_precision: bf16  # file"
  expect_contains "$OUT" "rdzv_backend: static  # default"
  expect_exit 0 "$ACCEL" config show --json --mixed_precision no
  echo "$OUT" | $PY -c '
import json, sys
d = json.load(sys.stdin)
assert d["values"]["mixed_precision"] == "no" and d["sources"]["mixed_precision"] == "flag"
assert d["values"]["num_processes"] == 4 and d["sources"]["num_processes"] == "file"
assert d["sources"]["main_training_function"] == "default"
'
  expect_exit 1 "$ACCEL" config show --mixed_precision fp32
  expect_contains "$ERR" "--mixed_precision: 'fp32' is not one of no, fp16, bf16, fp8"
  expect_exit 1 "$ACCEL" config show --cpu --multi_gpu
  expect_contains "$ERR" "--cpu and --multi_gpu cannot be used together"
  ;;
usage_errors)
  expect_exit 2 "$ACCEL"
  expect_exit 2 "$ACCEL" frobnicate
  expect_exit 2 "$ACCEL" config show --num_processes abc
  expect_contains "$ERR" "num_processes"
  expect_exit 0 "$ACCEL" --help
  expect_contains "$OUT" "config"
  expect_exit 0 "$ACCEL" --version
  ;;
no_heavy_libraries)
  # The CLI must start in milliseconds: no LibTorch, CUDA or NCCL in its link map.
  libs=$(ldd "$ACCEL")
  for lib in libtorch libc10 libcuda libcudart libnccl libgloo; do
    [[ "$libs" != *"$lib"* ]] || fail "accel links $lib:
$libs"
  done
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "ok: $CASE"
