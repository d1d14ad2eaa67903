#!/usr/bin/env bash
# End-to-end tests of `accel config` and `accel env`: config_cli.sh CASE /path/to/accel
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
DEFAULT=$HF_HOME/accelerate/default_config.yaml

FIXTURES=$(cd "$(dirname "$0")/../fixtures/accelerate" && pwd)

# Reads FILE with PyYAML (or json) as accelerate does and checks it against what each recorded
# accelerate tag's own code accepts (tests/fixtures/accelerate/<tag>/config_keys.json, recorded
# by scripts/accelerate_fixtures/record.py keys): every top-level key is one its ClusterConfig
# has, every required field its loader does not fill is there, and every value with an enum or
# constant list (distributed_type, mixed_precision, compute_environment, dynamo backend and mode,
# FSDP policies, DeepSpeed launcher) is one the tag knows. Prints the dict as JSON.
load_like_accelerate() {
  $PY - "$1" "$FIXTURES" <<'PYEOF'
import glob, json, os, sys, yaml
path, fixtures = sys.argv[1], sys.argv[2]
with open(path) as f:
    d = json.load(f) if path.endswith(".json") else yaml.safe_load(f)
tags = sorted(glob.glob(os.path.join(fixtures, "*", "config_keys.json")))
assert len(tags) >= 2, f"expected two recorded accelerate tags under {fixtures}, found {tags}"

def others(fixture):
    return [json.load(open(t)) for t in tags if t != fixture]

def check(tag, cond, what):
    assert cond, f"{path}: accelerate {tag} would reject it: {what}\n{json.dumps(d, indent=1, sort_keys=True)}"

for fixture in tags:
    k = json.load(open(fixture))
    tag, enums, consts = k["tag"], k["enums"], k["constants"]
    # The issue's rule: a key an older accelerate rejects may appear only when its value differs
    # from its default in the version that knows it (enable_cpu_affinity: true, a non-empty
    # mpirun_config): such a file is for that version on purpose.
    unknown = sorted(set(d) - set(k["cluster_config_keys"]))
    for key in unknown:
        defaults = [o["cluster_config_fields"][key].get("default") for o in others(fixture) if key in o["cluster_config_keys"]]
        check(tag, defaults, f"unknown key {key!r}, which no recorded accelerate accepts")
        check(tag, all(d[key] != dflt and d[key] not in ({}, None, []) for dflt in defaults),
              f"unknown key {key!r} written with its default value {d[key]!r}")
    required = {n for n, f in k["cluster_config_fields"].items() if f.get("required")} - set(k["loader_reads"])
    missing = sorted(required - set(d)) + ([] if "distributed_type" in d else ["distributed_type"])
    check(tag, not missing, f"missing required {missing}")
    for key in ("compute_environment", "distributed_type", "mixed_precision"):
        if key in d:
            check(tag, d[key] in enums[key], f"{key} {d[key]!r} not in {enums[key]}")
    dyn = d.get("dynamo_config") or {}
    if "dynamo_backend" in dyn:
        check(tag, dyn["dynamo_backend"] in enums["dynamo_backend"], f"dynamo_backend {dyn['dynamo_backend']!r}")
    if "dynamo_mode" in dyn:
        check(tag, dyn["dynamo_mode"] in consts["TORCH_DYNAMO_MODES"], f"dynamo_mode {dyn['dynamo_mode']!r}")
    fsdp = d.get("fsdp_config") or {}
    for key, const in (("fsdp_auto_wrap_policy", "FSDP_AUTO_WRAP_POLICY"), ("fsdp_state_dict_type", "FSDP_STATE_DICT_TYPE"),
                       ("fsdp_backward_prefetch", "FSDP_BACKWARD_PREFETCH"), ("fsdp_reshard_after_forward", "FSDP_SHARDING_STRATEGY")):
        if isinstance(fsdp.get(key), str):
            check(tag, fsdp[key] in consts[const], f"{key} {fsdp[key]!r} not in {const}")
    fp8 = d.get("fp8_config") or {}
    if "backend" in fp8 and "fp8_backend" in enums:
        check(tag, fp8["backend"] in enums["fp8_backend"], f"fp8 backend {fp8['backend']!r}")
    ds = d.get("deepspeed_config") or {}
    if "deepspeed_multinode_launcher" in ds:
        check(tag, ds["deepspeed_multinode_launcher"] in consts["DEEPSPEED_MULTINODE_LAUNCHERS"],
              f"deepspeed_multinode_launcher {ds['deepspeed_multinode_launcher']!r}")
for key in ("mixed_precision", "distributed_type", "compute_environment", "rdzv_backend"):
    assert key not in d or isinstance(d[key], str), f"{key} is {d[key]!r}, accelerate expects a string"
for key in ("num_processes", "num_machines", "machine_rank"):
    assert key not in d or (isinstance(d[key], int) and not isinstance(d[key], bool)), f"{key} is {d[key]!r}"
for key in ("use_cpu", "debug", "same_network", "enable_cpu_affinity"):
    assert key not in d or isinstance(d[key], bool), f"{key} is {d[key]!r}"
print(json.dumps(d, sort_keys=True))
PYEOF
}

case $CASE in
questionnaire_roundtrip)
  # Every question answered through a pipe: multi-GPU, 2 machines, rank 1, dynamo customised.
  answers='0\n4\n2\n1\n10.0.0.1\n29501\nno\nc10d\ny\ny\n2\ny\n1\nn\ny\nn\nn\nn\nn\n16\n0,1\nyes\nbf16\n'
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
  expect_contains "$OUT" "  [7] multi-SDAA (not supported by accel)"
  expect_contains "$OUT" "Invalid answer: multi-SDAA is not supported by accel"
  expect_contains "$OUT" "Invalid answer: please enter yes or no (or y/n)"
  expect_contains "$OUT" "Invalid answer: must be at least 1"
  expect_contains "$OUT" "Invalid answer: fp16 needs a GPU and this configuration is CPU-only"
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
              '- GPU count:' '- NCCL on this machine (libnccl.so.2, loaded at run time): ' '- NCCL in libaccel (C++ workers): ' '- Python (' '- `accel` default config:'; do
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
  # A HOME where the default file's directory cannot be made: the error names the file it was
  # writing (root may create /nonexistent, so HOME is a plain file here).
  touch "$SCRATCH/home_file"
  expect_exit 1 env -u HF_HOME HOME="$SCRATCH/home_file" "$ACCEL" config default
  expect_contains "$ERR" "accel: error: cannot write the config file '$SCRATCH/home_file/.cache/huggingface/accelerate/default_config.yaml': '$SCRATCH/home_file' exists and is not a directory (set HF_HOME, or pass --config_file, to write it elsewhere)"
  ;;
files_load_in_accelerate)
  # Every kind of file accel writes — each questionnaire branch (DeepSpeed, FSDP1/2 with
  # parallelism_config, Megatron-LM, fp8, dynamo, numa), `config default`, `config update`
  # of old and new accelerate files — checked against both recorded accelerate tags.
  # ACCEL_KEEP_FILES=DIR keeps them, to load them with each tag's own code:
  #   /usr/bin/python3 scripts/accelerate_fixtures/record.py load --accelerate-src SRC/v0.27.2 DIR/*
  #   scripts/torch2_chroot.sh run python3 scripts/accelerate_fixtures/record.py load --accelerate-src SRC/v1.14.0 DIR/*
  dir=${ACCEL_KEEP_FILES:-$SCRATCH/files}
  mkdir -p "$dir"
  ask() {  # NAME ANSWERS: runs the questionnaire into $dir/NAME
    expect_exit 0 bash -c "printf '$2' | '$ACCEL' config --config_file '$dir/$1'"
    expect_contains "$OUT" "accel configuration saved at $dir/$1"
  }
  ask q_no_defaults.yaml '\n\n\n\n\n\n\n\n'
  ask q_no_cpu.yaml '0\n0\ny\nn\n0\n'
  ask q_multi_cpu.yaml '0\n1\n1\nn\nn\nn\n4\n2\n'
  # The process count's default is one the check accepts: one per machine (here 2).
  ask q_default_count.yaml '0\n1\n2\n1\nhost-a\n\nn\nc10d\ny\nn\nn\n\n0\n'
  expect_contains "$OUT" "in total over all machines? [2]: "
  [[ $OUT != *"Invalid answer"* ]] || fail "the default process count was refused: $OUT"
  echo "host-a slots=2" >"$SCRATCH/hostfile"   # the questionnaire checks it exists
  ask q_multi_cpu_nodes.yaml "0\\n1\\n2\\n1\\nhost-a\\n\\nn\\nzookeeper\\nc10d\\ny\\ny\\n$SCRATCH/hostfile\\nn\\n4\\n0\\n"
  ask q_multi_gpu_nodes.yaml '0\n4\n2\n1\n10.0.0.1\n29501\nno\nc10d\ny\ny\n2\ny\n1\nn\ny\nn\nn\nn\nn\n16\n0,1\nno\nbf16\n'
  ask q_gpu_dynamo_numa.yaml '0\n0\nn\ny\n0\ny\n2\ny\ny\ny\nn\n1\nyes\nbf16\n'
  ask q_deepspeed_zero3.yaml '0\n4\n2\n0\n10.0.0.1\n\n\nn\nn\ny\nn\n3\n2\n1\n/mnt/nvme\n4\ny\n0.5\ny\ny\ny\nMoeBlock\n\n16\nbf16\n'
  ask q_deepspeed_zero2.yaml '0\n0\nn\nn\ny\nn\n\n\n\n\n\nn\nn\n1\nfp16\n'
  ask q_deepspeed_file.yaml '0\n0\nn\nn\ny\ny\n/tmp/ds.json\nn\nn\n1\n'
  ask q_fsdp1.yaml '0\n4\n1\nn\nn\nn\ny\n0\n1\ny\n0\nn\nBertLayer,BertEmbeddings\n1\n2\ny\nn\nn\nn\ny\n8\nfp16\n'
  ask q_fsdp2.yaml '0\n4\n1\nn\nn\nn\ny\n\n\n\n1\n\n\n\n\n\n2\n\n'
  ask q_fsdp2_nowrap.json '0\n4\n1\nn\nn\nn\ny\n\nn\ny\n2\n1\nn\ny\nn\n4\n2\n'
  ask q_fsdp2_parallelism.yaml '0\n4\n1\nn\nn\nn\ny\n\n\n\n2\n\n\n\ny\n2\n4\n\n2\n1\n16\nbf16\n'
  ask q_fp8_te.yaml '0\n0\nn\nn\nn\n\nn\nfp8\nte\ny\n2\n\n1\n16\n1\ny\ny\nn\ny\n'
  ask q_fp8_ao.json '0\n4\n1\nn\nn\nn\nn\nn\n2\n\nn\n3\n0\n\n\n'
  ask q_megatron.yaml '0\n4\n2\n0\n10.0.0.1\n\n\nn\nn\nn\nn\ny\n2\n\n4\n8\n\n\n0.5\n16\nbf16\n'
  expect_exit 0 "$ACCEL" config default --config_file "$dir/default.yaml"
  expect_exit 0 "$ACCEL" config default --mixed_precision bf16 --config_file "$dir/default_bf16.json"
  # config update of files from older and newer accelerates (legacy keys, ipex_config, the
  # defaults 0.27 rejects, sections accel does not interpret).
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nfp16: true\nnum_processes: 2\ndynamo_backend: INDUCTOR\ndeepspeed_config: {}\n' >"$dir/u_legacy.yaml"
  printf "distributed_type: 'NO'\ndynamo_backend: 'NO'\nmain_process_ip: null\nfsdp_config: {}\n" >"$dir/u_0_11.yaml"
  printf 'compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nipex_config:\n  ipex: true\nmpirun_config:\n  mpirun_hostfile: /h\nnum_processes: 16\nnum_machines: 4\nmain_process_ip: 127.0.0.1\nmain_process_port: 29500\nuse_cpu: true\n' >"$dir/u_ipex.yaml"
  printf '{"compute_environment": "LOCAL_MACHINE", "debug": false, "distributed_type": "NO", "downcast_bf16": false, "enable_cpu_affinity": false, "machine_rank": 0, "main_training_function": "main", "mixed_precision": "no", "num_machines": 1, "num_processes": 1, "rdzv_backend": "static", "same_network": false, "tpu_use_cluster": false, "tpu_use_sudo": false, "use_cpu": true}\n' >"$dir/u_default_1x.yaml"
  printf 'distributed_type: FSDP\nnum_processes: 2\nenable_cpu_affinity: false\nfp8_config: {}\nparallelism_config: {}\nfsdp_config:\n  fsdp_version: 2\n  fsdp_future_option: [1, 2]\n  fsdp_reshard_after_forward: true\nmegatron_lm_config:\n  megatron_lm_tp_degree: 2\n' >"$dir/u_fsdp_1x.yaml"
  for f in u_legacy u_0_11 u_default_1x u_fsdp_1x; do
    expect_exit 0 "$ACCEL" config update --config_file "$dir/$f.yaml"
  done
  expect_exit 0 "$ACCEL" config update --config_file "$dir/u_ipex.yaml"
  expect_contains "$OUT$ERR" "$dir/u_ipex.yaml: removed 'ipex_config': accelerate 1.x rejects it"
  n=0
  for f in "$dir"/*; do
    d=$(load_like_accelerate "$f") || fail "$(basename "$f") does not load in every recorded accelerate"
    n=$((n + 1))
  done
  [[ $n == 24 ]] || fail "expected 24 files, checked $n"
  # Spot checks that the files say what was asked (a checker that passed everything would miss these).
  d=$(load_like_accelerate "$dir/q_multi_cpu_nodes.yaml")
  expect_contains "$d" "\"mpirun_config\": {\"mpirun_hostfile\": \"$SCRATCH/hostfile\"}"
  expect_contains "$d" '"rdzv_backend": "c10d"'
  d=$(load_like_accelerate "$dir/q_gpu_dynamo_numa.yaml")
  expect_contains "$d" '"enable_cpu_affinity": true'
  expect_contains "$d" '"dynamo_config": {"dynamo_backend": "EAGER", "dynamo_mode": "max-autotune"'
  d=$(load_like_accelerate "$dir/q_deepspeed_file.yaml")
  [[ $d != *mixed_precision* && $d == *'"distributed_type": "DEEPSPEED"'* ]] || fail "deepspeed file: $d"
  d=$(load_like_accelerate "$dir/q_fsdp2_nowrap.json")
  expect_contains "$d" '"fsdp_auto_wrap_policy": "NO_WRAP"'
  expect_contains "$d" '"fsdp_state_dict_type": "FULL_STATE_DICT"'
  d=$(load_like_accelerate "$dir/q_fp8_te.yaml")
  expect_contains "$d" '"override_linear_precision": [true, false, true]'
  expect_contains "$d" '"mixed_precision": "fp8"'
  d=$(load_like_accelerate "$dir/q_megatron.yaml")
  expect_contains "$d" '"distributed_type": "MEGATRON_LM"'
  expect_contains "$d" '"megatron_lm_pp_degree": 4'
  d=$(load_like_accelerate "$dir/q_fsdp2_parallelism.yaml")
  expect_contains "$d" '"parallelism_config_cp_comm_strategy": "alltoall"'
  d=$(load_like_accelerate "$dir/u_legacy.yaml")
  expect_contains "$d" '"dynamo_config": {"dynamo_backend": "INDUCTOR"}'
  expect_contains "$d" '"mixed_precision": "fp16"'
  d=$(load_like_accelerate "$dir/u_ipex.yaml")
  [[ $d != *ipex* ]] || fail "ipex_config kept: $d"
  expect_contains "$d" '"mpirun_config": {"mpirun_hostfile": "/h"}'
  d=$(load_like_accelerate "$dir/u_fsdp_1x.yaml")
  expect_contains "$d" '"fsdp_future_option": [1, 2]'
  expect_contains "$d" '"megatron_lm_config": {"megatron_lm_tp_degree": 2}'
  [[ $d != *enable_cpu_affinity* && $d != *fp8_config* && $d != *parallelism_config* ]] || fail "defaults kept: $d"
  # The checker itself rejects what accelerate 0.27 or 1.x would.
  for bad in 'distributed_type: NO\nnum_processes: 1\nenable_cpu_affinity: false\n' \
             'distributed_type: NO\nnum_processes: 1\nipex_config:\n  ipex: false\n' \
             'distributed_type: MULTI_HPU\nnum_processes: 2\n' \
             'distributed_type: NO\n' \
             'distributed_type: NO\nnum_processes: 1\ndynamo_config:\n  dynamo_backend: IPEX\n'; do
    printf "$bad" >"$SCRATCH/bad.yaml"
    if load_like_accelerate "$SCRATCH/bad.yaml" >/dev/null 2>&1; then fail "checker accepted: $bad"; fi
  done
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
  # accel's own errors are prefixed once ("accel: error: accel: ..." was doubled).
  [[ "$ERR" == "accel: error: unknown command 'frobnicate' (commands: config, env, launch, run, status, test)"$'\n'"Run 'accel --help' for more information." ]] ||
    fail "unknown command error: $ERR"
  expect_exit 2 "$ACCEL" lauch
  expect_contains "$ERR" "accel: error: unknown command 'lauch' (did you mean 'launch'? commands: config, env, launch, run, status, test)"
  expect_exit 2 "$ACCEL" config show --num_processes abc
  expect_contains "$ERR" "accel: error: accel config: "
  expect_contains "$ERR" "num_processes"
  # Unexpected arguments as typed, and what env --check reads instead of launch flags.
  expect_exit 2 "$ACCEL" env --check --main_process_port 29555
  expect_contains "$ERR" "accel: error: accel env: unexpected argument(s): --main_process_port 29555 (accel env --check checks the config file, --config_file, not launch flags"
  expect_contains "$ERR" "Run 'accel env --help' for more information."
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
