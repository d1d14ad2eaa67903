#!/usr/bin/env python3
"""Records what Hugging Face accelerate itself computes, as fixture data for accel's parity test.

    record.py --accelerate-src DIR --out DIR CASES.json [--case NAME]...   launch cases
    record.py keys --accelerate-src DIR --out FILE                         accepted config keys
    record.py load --accelerate-src DIR FILE...     load files with the tag's load_config_from_file

DIR is a tree whose src/accelerate is the package (e.g. /work/accelerate-src/v1.14.0). accelerate's
code is read from there and never copied into this repository. Run it with the Python whose torch
the tag is recorded against: Debian 12's /usr/bin/python3 (torch 1.13) for v0.27.2, and
`scripts/torch2_chroot.sh run python3 ...` (torch 2.6) for v1.14.0. scripts/accelerate_fixtures/
record_all.sh runs both.

Launch cases. Each case runs in a fresh child interpreter (accelerate reads HF_HOME when
accelerate.commands.config.config_args is imported, so the environment must be in force before any
accelerate import). The child clears os.environ and sets exactly the case's parent_env ({tmp} is a
fresh empty directory; HF_HOME={tmp}/hf_home is empty, so no default config is found), changes into
{tmp}, writes the case's config file text into {tmp}, imports accelerate from DIR/src and calls
accelerate's own `launch_command_parser().parse_args(argv)` and `launch_command(args)`. The process
launch is intercepted at the last moment, recording instead of spawning:
  * torch.distributed.run.run(args)  (multi-GPU, FSDP, Megatron-LM, DeepSpeed single node): the
    environment in force (accelerate wraps the call in patch_environment) and torch's own
    config_from_args(args) (LaunchConfig, cmd, cmd_args). config_from_args itself may set
    OMP_NUM_THREADS; what it adds is recorded apart as torchrun_env_changed.
  * subprocess.Popen(cmd, env=...) as called from accelerate.commands.launch (simple launcher,
    mpirun, DeepSpeed multinode): cmd and env. Only the name `subprocess` inside
    accelerate.commands.launch is replaced (by a proxy that forwards everything but Popen); every
    other subprocess use (e.g. `mpirun --version` in _get_mpirun_args) is real.
An exception raised by accelerate before that point is data: {"launcher": "error", "error": ...}.

What is NOT real (everything else is accelerate's and torch's unmodified code; accelerate_env.py
does the first three):
  * is_deepspeed_available() -> True, and a `deepspeed.launcher.runner` module providing only
    DEEPSPEED_ENVIRONMENT_NAME = ".deepspeed_env" (DeepSpeed is not packaged in Debian).
  * is_fp8_available() -> True (Transformer Engine, torchao and MS-AMP are not packaged).
  * huggingface_hub and safetensors (and packaging, if absent) are placeholder modules: accelerate
    imports them at module level, but no launch code path calls them; every attribute of a
    placeholder is a class whose construction/call raises, so a path that did use one would
    fail loudly instead of recording something false.
  * The recording machine has no GPU: torch.cuda.device_count() is 0 and is_bf16_available is what
    torch reports here; cases.json states the GPU count accel is to emulate (--dry_run_gpus) so
    that both see the same world.
  * mpirun: Open MPI is installed here, so accelerate's _get_mpirun_args runs for real.

Output per case: OUT/<case>.json with sorted keys, written via a temp file and rename.
"""

import argparse
import ast
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile

from accelerate_env import _jsonable, import_accelerate, versions, write_json


# ---------------------------------------------------------------------------------------------
# `keys`: what each tag's config loader accepts

def dataclass_fields(cls):
    out = {}
    for field in dataclasses.fields(cls):
        if field.default is not dataclasses.MISSING:
            out[field.name] = {"default": _jsonable(field.default)}
        elif field.default_factory is not dataclasses.MISSING:
            out[field.name] = {"default": _jsonable(field.default_factory())}
        else:
            out[field.name] = {"required": True}
    return out


def loader_keys(cls):
    """Every key the loader tests with `"key" in config_dict`, read from the source of
    process_config (v1.x) or of from_yaml_file/from_json_file (v0.27.2 migrates inline)."""
    import inspect
    import textwrap

    keys = set()
    for name in ("process_config", "from_yaml_file", "from_json_file"):
        if not hasattr(cls, name):
            continue
        tree = ast.parse(textwrap.dedent(inspect.getsource(getattr(cls, name))))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Constant)
                    and isinstance(node.left.value, str)
                    and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)):
                keys.add(node.left.value)
    return sorted(keys)


MIGRATION_PROBES = [
    {"distributed_type": "NO"},
    {"distributed_type": "NO", "num_processes": 1},
    {"distributed_type": "NO", "num_processes": 1, "fp16": True},
    {"distributed_type": "NO", "num_processes": 1, "fp16": False},
    {"distributed_type": "NO", "num_processes": 1, "mixed_precision": "bf16", "fp16": True},
    {"distributed_type": "NO", "num_processes": 1, "dynamo_backend": "INDUCTOR"},
    {"distributed_type": "NO", "num_processes": 1, "dynamo_backend": "NO"},
    {"distributed_type": "MULTI_GPU"},
    {"compute_environment": "LOCAL_MACHINE", "num_processes": 1},
    {"distributed_type": "NO", "num_processes": 1, "enable_cpu_affinity": True},
    {"distributed_type": "NO", "num_processes": 1, "ipex_config": {"ipex": True}},
    {"distributed_type": "NO", "num_processes": 1, "parallelism_config": {"parallelism_config_tp_size": 2}},
    {"distributed_type": "NO", "num_processes": 1, "fp8_config": {"backend": "TE"}},
    {"distributed_type": "NO", "num_processes": 1, "mpirun_config": {"mpirun_hostfile": "/h"}},
    {"distributed_type": "TPU", "num_processes": 8},
    {"distributed_type": "XLA", "num_processes": 8},
    {"distributed_type": "NO", "num_processes": 1, "not_a_key": 1},
]


def load_with(load_config_from_file, text, name):
    """Loads text (written as file `name`) with the tag's own load_config_from_file."""
    work = tempfile.mkdtemp(prefix="accel-keys-")
    try:
        path = os.path.join(work, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            return {"loaded": _jsonable(load_config_from_file(path).to_dict())}
        except Exception as e:  # errors are data
            return {"error": f"{type(e).__name__}: {str(e).replace(work, '{tmp}')}"}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def migrations(load_config_from_file):
    return [{"input": probe, **load_with(load_config_from_file, json.dumps(probe), "probe.yaml")}
            for probe in MIGRATION_PROBES]


def enum_values(cls):
    return [m.value for m in cls]


def launch_flags():
    from accelerate.commands.launch import launch_command_parser

    flags = []
    for action in launch_command_parser()._actions:
        if not action.option_strings and action.dest in ("help",):
            continue
        flags.append({"options": list(action.option_strings), "dest": action.dest,
                      "default": _jsonable(action.default), "nargs": _jsonable(action.nargs),
                      "choices": _jsonable(list(action.choices)) if action.choices else None,
                      "kind": type(action).__name__})
    return flags


def record_keys(src, out):
    import_accelerate(src)
    from accelerate.commands.config import config_args
    from accelerate.utils import constants, dataclasses as adc

    data = dict(versions(src))
    base = set(f.name for f in dataclasses.fields(config_args.BaseConfig))
    data["base_config_fields"] = dataclass_fields(config_args.BaseConfig)
    data["cluster_config_fields"] = dataclass_fields(config_args.ClusterConfig)
    data["cluster_config_keys"] = sorted(config_args.ClusterConfig.__dataclass_fields__)
    data["cluster_only_keys"] = sorted(set(config_args.ClusterConfig.__dataclass_fields__) - base)
    data["sagemaker_config_keys"] = sorted(config_args.SageMakerConfig.__dataclass_fields__)
    data["loader_reads"] = loader_keys(config_args.BaseConfig)
    data["loader_migrated_keys"] = sorted(
        set(data["loader_reads"]) - set(config_args.ClusterConfig.__dataclass_fields__))
    data["loader_examples"] = migrations(config_args.load_config_from_file)
    enums = {"distributed_type": adc.DistributedType, "compute_environment": adc.ComputeEnvironment,
             "sagemaker_distributed_type": adc.SageMakerDistributedType,
             "mixed_precision": adc.PrecisionType, "dynamo_backend": adc.DynamoBackend}
    if hasattr(adc, "FP8BackendType"):
        enums["fp8_backend"] = adc.FP8BackendType
    data["enums"] = {name: enum_values(cls) for name, cls in enums.items()}
    data["constants"] = {name: _jsonable(getattr(constants, name)) for name in sorted(dir(constants))
                         if name.startswith(("FSDP_", "DEEPSPEED_", "TORCH_DYNAMO_MODES"))
                         and isinstance(getattr(constants, name), (list, tuple, str))}
    data["launch_flags"] = launch_flags()
    write_json(out, data)


# ---------------------------------------------------------------------------------------------
# Launch cases

class _Stop(BaseException):
    """Raised by the interceptors after recording, so nothing is spawned."""


def _snapshot_env():
    return dict(os.environ)


def _env_delta(parent, env):
    changed = {k: v for k, v in env.items() if parent.get(k) != v}
    removed = sorted(k for k in parent if k not in env)
    return changed, removed


def _launch_config_dict(config):
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if field.name == "logs_specs" and value is not None:
            value = {"class": type(value).__name__,
                     **{k.lstrip("_"): _jsonable(v) for k, v in vars(value).items()}}
        out[field.name] = _jsonable(value)
    return out


def _drop_logs_tmpdir(config):
    """torch 2.x's DefaultLogsSpecs makes an empty /tmp/torchelastic_* directory when built: remove
    it (nothing runs) and record its place as {torchelastic_tmp}, which differs on every run."""
    specs = getattr(config, "logs_specs", None)
    root = getattr(specs, "_root_log_dir", None)
    if root and os.path.basename(root).startswith("torchelastic_"):
        try:
            os.rmdir(root)
        except OSError:
            pass
        specs._root_log_dir = "{torchelastic_tmp}"


def install_interceptors(record):
    import torch.distributed.run as distrib_run

    import accelerate.commands.launch as launch_module

    def fake_run(args):
        env_before = _snapshot_env()
        config, cmd, cmd_args = distrib_run.config_from_args(args)
        _drop_logs_tmpdir(config)
        record.update(launcher="torchrun", env=env_before, env_after_torchrun=_snapshot_env(),
                      cmd=[cmd] + list(cmd_args) if isinstance(cmd, str) else [str(cmd)] + list(cmd_args),
                      torchrun_config=_launch_config_dict(config), node_rank=int(args.node_rank))
        raise _Stop()

    distrib_run.run = fake_run

    class SubprocessProxy:
        def __getattr__(self, name):
            return getattr(subprocess, name)

        @staticmethod
        def Popen(cmd, env=None, **kwargs):  # noqa: N802 (subprocess's name)
            _fake_caller(record)
            record.update(launcher="popen", env=dict(env if env is not None else os.environ),
                          cmd=[str(c) for c in cmd], popen_kwargs=sorted(kwargs))
            raise _Stop()

    launch_module.subprocess = SubprocessProxy()


# What accelerate resolved from config and flags, recorded for the parity test's rules.
RESOLVED_ARGS = ("num_processes", "num_machines", "machine_rank", "main_process_ip", "main_process_port",
                 "same_network", "rdzv_backend", "use_cpu", "cpu", "mpirun_hostfile", "gpu_ids",
                 "mixed_precision", "num_cpu_threads_per_process")


def run_case_in_child(src, case, tmp):
    """Runs in the child interpreter: the environment is already the case's parent_env."""
    record = {}
    import_accelerate(src)
    install_interceptors(record)
    from accelerate.commands.launch import launch_command, launch_command_parser

    parser = launch_command_parser()
    try:
        args = parser.parse_args(case["argv"])
        launch_command(args)
        record.setdefault("launcher", "returned")
    except _Stop:
        # launch_command resolved config + flags into this same namespace before launching
        record["resolved_args"] = {name: _jsonable(getattr(args, name, None)) for name in RESOLVED_ARGS}
    except SystemExit as e:
        record.update(launcher="error", error={"type": "SystemExit", "message": str(e.code)})
    except Exception as e:
        record.update(launcher="error", error={"type": type(e).__name__, "message": str(e)})
    ds_env = os.path.join(tmp, ".deepspeed_env")
    if os.path.exists(ds_env):
        with open(ds_env, encoding="utf-8") as f:
            record["deepspeed_env_file"] = f.read()
    return record


def _fake_caller(record):
    """Which accelerate launcher called Popen (simple_launcher or deepspeed_launcher)."""
    frame = sys._getframe(2)
    record["caller"] = frame.f_code.co_name


BASE_PARENT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "{tmp}/home", "LANG": "C.UTF-8",
                   "HF_HOME": "{tmp}/hf_home"}


def case_argv(case):
    argv = list(case["argv"])
    if case.get("config"):
        argv = ["--config_file", "{tmp}/" + case["config"]["name"]] + argv
    return argv


def case_parent_env(case):
    env = dict(BASE_PARENT_ENV)
    env.update(case.get("parent_env", {}))
    return env


def _subst(value, mapping):
    if isinstance(value, str):
        for real, placeholder in mapping:
            value = value.replace(real, placeholder)
        return value
    if isinstance(value, list):
        return [_subst(v, mapping) for v in value]
    if isinstance(value, dict):
        return {_subst(k, mapping): _subst(v, mapping) for k, v in value.items()}
    return value


def _expand(value, tmp):
    return _subst(value, [("{tmp}", tmp)])


def write_case_files(tmp, case, files):
    """The corpus's shared files (train.py, hostfile, ...) and the case's config, {tmp} expanded."""
    texts = dict(files)
    if case.get("config"):
        texts[case["config"]["name"]] = case["config"]["text"]
    for name, text in texts.items():
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
            f.write(_expand(text, tmp))


def record_case(src, case, meta, files):
    """Runs one case in a child interpreter; returns the fixture dict."""
    work = tempfile.mkdtemp(prefix="accel-fixture-")
    try:
        tmp = os.path.join(work, "t")
        for d in (tmp, os.path.join(tmp, "home"), os.path.join(tmp, "hf_home")):
            os.makedirs(d)
        write_case_files(tmp, case, files)
        parent_env = case_parent_env(case)
        result_path = os.path.join(work, "result.json")
        child_case = dict(case, argv=_expand(case_argv(case), tmp))
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), "child", "--accelerate-src", src, "--tmp", tmp,
             "--result", result_path, json.dumps(child_case)],
            env=_expand(parent_env, tmp), cwd=tmp, stdin=subprocess.DEVNULL, capture_output=True,
            text=True, timeout=300)
        if not os.path.exists(result_path):
            raise RuntimeError(f"case {case['name']}: the child failed (exit {proc.returncode}):\n"
                               f"{proc.stderr[-3000:]}")
        with open(result_path, encoding="utf-8") as f:
            record = json.load(f)
        return build_fixture(case, meta, parent_env, record, proc, tmp, files)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_fixture(case, meta, parent_env, record, proc, tmp, files):
    mapping = [(tmp, "{tmp}"), (sys.executable, "{python}")]
    record = _subst(record, mapping)
    fixture = dict(meta)
    fixture.update(case=case["name"], argv=case_argv(case), parent_env=parent_env,
                   config=case.get("config"), dry_run_gpus=case.get("dry_run_gpus", 0),
                   files=files, note=case.get("note", ""), host_physical_cores=record.pop("physical_cores"))
    launcher = record.get("launcher")
    if launcher == "popen":
        launcher = "deepspeed_multinode" if record.get("caller") == "deepspeed_launcher" else "simple"
    fixture["launcher"] = launcher
    if launcher == "error":
        fixture["error"] = record["error"]
        if record["error"]["type"] == "SystemExit":  # argparse: the reason is only on stderr
            tail = [line for line in proc.stderr.splitlines() if line.strip()][-1:]
            fixture["error"]["stderr_tail"] = _subst(tail, mapping)
        return fixture
    if launcher not in ("torchrun", "simple", "deepspeed_multinode"):
        raise RuntimeError(f"case {case['name']}: accelerate neither launched nor failed ({launcher})")
    fixture["env_changed"], fixture["env_removed"] = _env_delta(parent_env, record["env"])
    fixture["cmd"] = record["cmd"]
    fixture["resolved_args"] = record["resolved_args"]
    if launcher == "torchrun":
        fixture["torchrun_config"] = record["torchrun_config"]
        fixture["torchrun_node_rank"] = record["node_rank"]
        fixture["torchrun_env_changed"], _ = _env_delta(record["env"], record["env_after_torchrun"])
    if "deepspeed_env_file" in record:
        fixture["deepspeed_env_file"] = record["deepspeed_env_file"]
    return fixture


def child_main(opts):
    case = json.loads(opts.case_json)
    import psutil

    record = run_case_in_child(opts.accelerate_src, case, opts.tmp)
    record["physical_cores"] = psutil.cpu_count(logical=False)
    with open(opts.result, "w", encoding="utf-8") as f:
        json.dump(record, f)


def load_cases(path):
    with open(path, encoding="utf-8") as f:
        corpus = json.load(f)
    cases = corpus["cases"]
    names = [c["name"] for c in cases]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise SystemExit(f"record.py: {path}: duplicate case names {dup}")
    return cases, corpus.get("files", {})


def cases_main(opts):
    cases, files = load_cases(opts.cases)
    if opts.case:
        unknown = sorted(set(opts.case) - {c["name"] for c in cases})
        if unknown:
            raise SystemExit(f"record.py: no such case(s) {unknown} in {opts.cases}")
        cases = [c for c in cases if c["name"] in opts.case]
    src = os.path.abspath(opts.accelerate_src)
    meta = child_versions(src)
    for case in cases:
        fixture = record_case(src, case, meta, files)
        write_json(os.path.join(opts.out, case["name"] + ".json"), fixture)
        print(f"{meta['tag']} {case['name']}: {fixture['launcher']}", flush=True)


def child_versions(src):
    """versions() from a clean child, so this process never imports accelerate."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "versions", "--accelerate-src", src],
                         env={"PATH": BASE_PARENT_ENV["PATH"], "LANG": "C.UTF-8", "HOME": "/nonexistent",
                              "HF_HOME": "/nonexistent"},
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def load_main(opts):
    """Prints, per file, what the tag's load_config_from_file makes of it (exit 1 if any fails)."""
    import_accelerate(opts.accelerate_src)
    from accelerate.commands.config.config_args import load_config_from_file

    failed = 0
    for path in opts.files:
        with open(path, encoding="utf-8") as f:
            result = load_with(load_config_from_file, f.read(), os.path.basename(path))
        failed += "error" in result
        print(json.dumps({"file": path, **result}, sort_keys=True))
    sys.exit(1 if failed else 0)


def main(argv):
    mode = argv[0] if argv and argv[0] in ("keys", "child", "versions", "load") else "cases"
    rest = argv[1:] if mode != "cases" else argv
    parser = argparse.ArgumentParser(prog="record.py " + (mode if mode != "cases" else ""))
    parser.add_argument("--accelerate-src", required=True)
    if mode == "cases":
        parser.add_argument("--out", required=True)
        parser.add_argument("--case", action="append", default=[])
        parser.add_argument("cases")
    elif mode == "keys":
        parser.add_argument("--out", required=True)
    elif mode == "load":
        parser.add_argument("files", nargs="+")
    elif mode == "child":
        parser.add_argument("--tmp", required=True)
        parser.add_argument("--result", required=True)
        parser.add_argument("case_json")
    opts = parser.parse_args(rest)
    if not os.path.isdir(os.path.join(opts.accelerate_src, "src", "accelerate")):
        parser.error(f"--accelerate-src {opts.accelerate_src}: no src/accelerate package there")
    if mode == "keys":
        record_keys(opts.accelerate_src, opts.out)
    elif mode == "child":
        child_main(opts)
    elif mode == "load":
        load_main(opts)
    elif mode == "versions":
        import_accelerate(opts.accelerate_src)
        print(json.dumps(versions(opts.accelerate_src)))
    else:
        cases_main(opts)


if __name__ == "__main__":
    main(sys.argv[1:])
