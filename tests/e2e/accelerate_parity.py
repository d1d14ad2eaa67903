#!/usr/bin/env python3
"""accel's worker environment against what accelerate itself computes (fixtures from its real code).

    accelerate_parity.py --accel PATH --fixtures tests/fixtures/accelerate/<tag> [--case NAME]...

Every tests/fixtures/accelerate/<tag>/<case>.json (recorded by scripts/accelerate_fixtures/record.py
from accelerate's own launch_command) is replayed through accel: same argv, same parent environment
(env -i + the fixture's parent_env), the same config file text and corpus files in a fresh {tmp}
that is the working directory, and HF_HOME empty:

    accel launch --dry_run_json --dry_run_gpus N ARGV...

whose stdout is one JSON object {"ranks": [{"rank", "local_rank", "command", "env"}], "notices"}.
Per case and rank it compares
  (a) accelerate's env_changed (ACCELERATE_*, FSDP_*, MEGATRON_LM_*, CUDA_VISIBLE_DEVICES,
      OMP_NUM_THREADS, KMP_*, MASTER_*, ...) plus what torchrun's config_from_args added, with
      accel's env;
  (b) the per-rank variables torchrun's agent gives each worker, derived from the recorded
      LaunchConfig by torchrun_worker_env() below;
  (c) the number of ranks and the command;
and every variable accel sets that accelerate/torchrun would not. A case where accelerate raised
must make accel fail too. The differences kept on purpose are KEPT below, each with its reason;
anything else fails, printing case, rank, key, accelerate's value and accel's value.

--legacy-dry-run parses the text of `accel launch --dry_run` instead (no GPU emulation): a
diagnostic for builds without --dry_run_json, never what the ctest case runs.
"""

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

ANY = object()  # a value torchrun decides at run time: accel's must be present and non-empty

TORCHRUN_KEYS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                 "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
                 "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_USE_AGENT_STORE",
                 "TORCHELASTIC_RUN_ID", "TORCHELASTIC_ERROR_FILE", "NCCL_ASYNC_ERROR_HANDLING",
                 "TORCH_NCCL_ASYNC_ERROR_HANDLING")


def torch_at_least(fixture, major, minor):
    found = re.match(r"(\d+)\.(\d+)", fixture["torch"])
    return found is not None and (int(found.group(1)), int(found.group(2))) >= (major, minor)


def torchrun_worker_env(fixture, local_rank, nproc=None, nnodes=None, group_rank=None, endpoint=None):
    """torchrun's rule (LocalElasticAgent._start_workers after the rendezvous, torch 1.13 and 2.6)
    for worker `local_rank` of a homogeneous job: nproc_per_node workers on each of max_nodes
    nodes, global rank = group_rank * nproc + local_rank (role ranks the same: one role).
    group_rank is the static rendezvous's rank (the node rank accelerate passed); under c10d it is
    the order of arrival, taken here as the node rank. MASTER_ADDR/PORT: static → the rendezvous
    endpoint; c10d → chosen by the rank-0 agent at rendezvous (ANY). The agent store is shared
    with workers under static, and under c10d from torch 2.5 on (pytorch#128096) unless
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1. The NCCL variable's name follows the torch version.
    The keyword arguments override the LaunchConfig (used for accel's N-process MULTI_CPU run)."""
    cfg = fixture.get("torchrun_config") or {}
    nproc = nproc if nproc is not None else int(cfg["nproc_per_node"])
    nnodes = nnodes if nnodes is not None else int(cfg["max_nodes"])
    backend = cfg.get("rdzv_backend", "static")
    if group_rank is None:
        group_rank = int(cfg.get("rdzv_configs", {}).get("rank", fixture.get("torchrun_node_rank", 0)))
    rank, world = group_rank * nproc + local_rank, nproc * nnodes
    if backend == "static":
        host, port = (endpoint or cfg["rdzv_endpoint"]).rsplit(":", 1)
        use_agent_store = True
    else:
        host, port = ANY, ANY
        use_agent_store = (torch_at_least(fixture, 2, 5)
                           and fixture["parent_env"].get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "0") != "1")
    nccl = "TORCH_NCCL_ASYNC_ERROR_HANDLING" if torch_at_least(fixture, 2, 2) else "NCCL_ASYNC_ERROR_HANDLING"
    return {"RANK": str(rank), "LOCAL_RANK": str(local_rank), "WORLD_SIZE": str(world),
            "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": str(group_rank), "GROUP_WORLD_SIZE": str(nnodes),
            "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world), "ROLE_NAME": cfg.get("role", "default"),
            "MASTER_ADDR": host, "MASTER_PORT": port,
            "TORCHELASTIC_MAX_RESTARTS": str(cfg.get("max_restarts", 0)), "TORCHELASTIC_RESTART_COUNT": "0",
            "TORCHELASTIC_USE_AGENT_STORE": str(use_agent_store), "TORCHELASTIC_RUN_ID": cfg.get("run_id", "none"),
            "TORCHELASTIC_ERROR_FILE": ANY, nccl: fixture["parent_env"].get(nccl, "1")}


# ---------------------------------------------------------------------------------------------
# Differences kept on purpose. Each: the keys it covers, when it applies, what accel's value must
# satisfy instead of equality, and why.

def _nonempty(_accelerate, accel):
    return accel not in (None, "")


def _port(_accelerate, accel):
    return accel is not None and accel.isdigit() and 0 <= int(accel) <= 65535


def _one(_accelerate, accel):
    return accel == "1"


def _flag_value(fixture, *names):
    argv = fixture["argv"]
    for i, arg in enumerate(argv[:-1]):
        if arg in names:
            return argv[i + 1]
    return None


def _no_port_given(fixture):
    """Neither a flag nor the config names the store's port (accelerate then uses 29500)."""
    if _flag_value(fixture, "--main_process_port", "--main-process-port", "--master_port", "--rdzv_endpoint") is not None:
        return False
    text = (fixture.get("config") or {}).get("text", "")
    return re.search(r'main_process_port', text) is None


def _affinity_from_config_only(fixture):
    text = (fixture.get("config") or {}).get("text", "")
    return (re.search(r'^\s*"?enable_cpu_affinity"?\s*:\s*true', text, re.M) is not None
            and "--enable_cpu_affinity" not in fixture["argv"])


def _accumulation_flag_outside_deepspeed(fixture):
    return (_flag_value(fixture, "--gradient_accumulation_steps") is not None
            and "ACCELERATE_USE_DEEPSPEED" not in fixture.get("env_changed", {}))


def _port_zero_requested(fixture):
    argv = fixture["argv"]
    for i, arg in enumerate(argv[:-1]):
        if arg in ("--main_process_port", "--main-process-port") and argv[i + 1] == "0":
            return True
    text = (fixture.get("config") or {}).get("text", "")
    return re.search(r'^\s*"?main_process_port"?\s*:\s*0\s*,?\s*$', text, re.M) is not None


KEPT = [
    {"keys": ("TORCHELASTIC_RUN_ID",), "check": _nonempty,
     "when": lambda f: agent_launched(f),
     "reason": "torchrun's run_id is 'none' without --rdzv_id; accel gives every launch a fresh id "
               "so the stores and logs of concurrent launches never collide"},
    {"keys": ("TORCHELASTIC_ERROR_FILE",), "check": _nonempty,
     "when": lambda f: agent_launched(f),
     "reason": "torchrun's path is under its own temporary log dir, accel's under its run directory; "
               "both are decided at launch"},
    {"keys": ("NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_ASYNC_ERROR_HANDLING"), "check": _one,
     "when": lambda f: agent_launched(f),
     "reason": "torchrun sets the one name its torch version reads; accel sets both to 1 so the "
               "workers' torch reads it whichever version it is"},
    {"keys": ("MASTER_PORT",), "check": _port, "when": _port_zero_requested,
     "reason": "port 0 asks for a free port: accelerate picked one when it was recorded, accel picks "
               "its own when it launches (a dry run reports 0 or the port it would use)"},
    {"keys": ("MASTER_PORT",), "check": _port, "when": lambda f: agent_launched(f) and _no_port_given(f),
     "reason": "with no port given, accelerate and torchrun use a fixed 29500, which collides between jobs on "
               "one machine; accel's agent binds a free port (a dry run reports 0)"},
    {"keys": ("TORCHELASTIC_ERROR_FILE",), "check": _nonempty, "when": lambda f: f["launcher"] == "simple",
     "reason": "accel supervises accelerate's single process too: torch's @record writes its error there, and "
               "the failure summary names it"},
    {"keys": ("ACCELERATE_CPU_AFFINITY",), "check": _one, "when": _affinity_from_config_only,
     "reason": "enable_cpu_affinity: true in the config: accelerate 1.x never copies it onto its flag (the "
               "flag defaults to False, not None), so the key does nothing there; accel honours the key"},
    {"keys": ("ACCELERATE_GRADIENT_ACCUMULATION_STEPS",), "check": _nonempty,
     "when": _accumulation_flag_outside_deepspeed,
     "reason": "accelerate passes --gradient_accumulation_steps to DeepSpeed jobs only; accel to every job, "
               "whose C++ workers (libaccel) read it"},
    {"keys": ("ACCEL_HEARTBEAT_KEY",), "check": _nonempty, "when": lambda f: agent_launched(f),
     "reason": "accel's agent watches each rank's progress (`accel status`, --hang_timeout): the store key "
               "a rank adds 1 to at each step (README: When a job hangs)"},
    {"keys": ("ACCEL_WORK_KEY",), "check": _nonempty, "when": lambda f: agent_launched(f),
     "reason": "accel's agent scores stragglers: the store key a rank adds its own work per step to "
               "(README: Healthy machines only)"},
    {"keys": ("PYTHONFAULTHANDLER",), "check": _one, "when": lambda f: True,
     "reason": "accel asks a hung rank for its stack with SIGABRT; Python's faulthandler prints every "
               "thread's then (set unless the user set it)"},
    {"keys": ("MASTER_ADDR", "MASTER_PORT"), "check": _nonempty,
     "when": lambda f: (f.get("torchrun_config") or {}).get("rdzv_backend", "static") != "static",
     "reason": "under c10d torchrun's rank-0 agent chooses the store address at rendezvous time"},
]


# Differences kept on purpose at the level of a whole case (used by the code below).
CASE_KEPT = {
    "multi_cpu_processes": "MULTI_CPU without mpirun: accelerate's simple launcher runs ONE process (the "
                           "user starts one per rank); accel starts num_processes ranks itself, each with "
                           "torchrun's per-rank variables (checked by torchrun_worker_env)",
    "deepspeed_multinode": "DeepSpeed multi-node with a launcher other than `standard`: accelerate hands the "
                           "job to DeepSpeed's launcher (its cmd and .deepspeed_env are in the fixture); accel "
                           "launches itself, so only the ACCELERATE_* settings compare",
    "older_flag": "a flag added after 0.27.2: accel follows the newest accelerate, whose fixture checks it",
    "older_key": "a config key added after 0.27.2: accel follows the newest accelerate, whose fixture checks it",
    "older_xla": "XLA is 1.x's name for TPU",
    "no_mpirun": "not comparable: accelerate found no mpirun where it was recorded (scripts/torch2_chroot.sh "
                 "installs Open MPI for this), so the fixture holds that error, not accelerate's mpirun command",
    "unbuffered": "accelerate's simple launcher runs `python SCRIPT`; accel runs `python -u SCRIPT` as torchrun "
                  "does, because the agent reads the workers' output through pipes and prefixes each line",
    "mpi_tags": "accel adds --tag-output (Open MPI) or -prepend-rank (MPICH) to accelerate's mpirun command, "
                "so the console labels each line with its MPI rank; dropped before comparing commands",
    "fp16_fp8_on_cpu": "mixed_precision fp16 or fp8 on a CPU-only job: accelerate runs it in fp32 without a "
                       "word; accel refuses it before anything starts (README: differences on purpose)",
    "device_not_supported": "distributed_type MULTI_XPU/NPU/...: accel launches CPU and CUDA GPU jobs and "
                            "refuses the others with one line naming the type",
    "newer_value": "for an older tag, a worker may see a variable's value the way the newest accelerate "
                   "gives it for the same case (older workers ignore a variable they never read); a "
                   "variable the older tag sets that neither the newest accelerate nor accel gives is "
                   "always a difference",
}


def kept_for(fixture, key):
    for entry in KEPT:
        if key in entry["keys"] and entry["when"](fixture):
            return entry
    return None


def multi_cpu_n_processes(fixture):
    """CASE_KEPT["multi_cpu_processes"] applies."""
    resolved = fixture.get("resolved_args") or {}
    return (fixture["launcher"] == "simple" and not resolved.get("mpirun_hostfile")
            and (resolved.get("num_processes") or 1) > 1 and (resolved.get("use_cpu") or resolved.get("cpu")))


def tolerated_error(fixture, keys_of_newest):
    """The CASE_KEPT reason when accelerate's error is not one accel must share: v0.27.2 rejecting
    a flag or config key a later accelerate added, or no mpirun where it was recorded."""
    message = fixture["error"]["message"] + " " + " ".join(fixture["error"].get("stderr_tail", []))
    if message.startswith("mpirun or mpiexec were not found"):
        return CASE_KEPT["no_mpirun"]
    if fixture["tag"] != "v0.27.2":
        return None
    if "unrecognized arguments" in message:
        return CASE_KEPT["older_flag"]
    found = re.search(r"had unknown keys \((\[.*?\])\)", message)
    if found and keys_of_newest and set(json.loads(found.group(1).replace("'", '"'))) <= keys_of_newest:
        return CASE_KEPT["older_key"]
    if "'XLA' is not a valid DistributedType" in message:
        return CASE_KEPT["older_xla"]
    return None


# ---------------------------------------------------------------------------------------------
# Running accel

def expand(value, tmp):
    if isinstance(value, str):
        return value.replace("{tmp}", tmp)
    if isinstance(value, list):
        return [expand(v, tmp) for v in value]
    if isinstance(value, dict):
        return {k: expand(v, tmp) for k, v in value.items()}
    return value


def prepare_tmp(fixture):
    tmp = tempfile.mkdtemp(prefix="accel-parity-")
    os.makedirs(os.path.join(tmp, "home"))
    os.makedirs(os.path.join(tmp, "hf_home"))
    texts = dict(fixture.get("files", {}))
    if fixture.get("config"):
        texts[fixture["config"]["name"]] = fixture["config"]["text"]
    for name, text in texts.items():
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
            f.write(expand(text, tmp))
    if os.path.exists(os.path.join(tmp, "run.sh")):
        os.chmod(os.path.join(tmp, "run.sh"), 0o755)
    return tmp


def run_accel(accel, fixture, tmp, legacy):
    argv = expand(fixture["argv"], tmp)
    flags = ["--dry_run"] if legacy else ["--dry_run_json", "--dry_run_gpus", str(fixture.get("dry_run_gpus", 0))]
    proc = subprocess.run([accel, "launch"] + flags + argv, cwd=tmp, env=expand(fixture["parent_env"], tmp),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return None, proc
    try:
        return (parse_legacy(proc.stdout) if legacy else json.loads(proc.stdout)), proc
    except ValueError as e:
        return {"unparsable": f"{e}: {proc.stdout[:500]}"}, proc


def parse_legacy(text):
    ranks, current = [], None
    for line in text.splitlines():
        head = re.match(r"rank (\d+) \(local rank (\d+)\):", line)
        if head:
            current = {"rank": int(head.group(1)), "local_rank": int(head.group(2)), "command": [], "env": {}}
            ranks.append(current)
        elif current is not None and line.startswith("  command: "):
            current["command"] = shlex.split(line[len("  command: "):])
        elif current is not None and line.startswith("    ") and "=" in line:
            key, value = line.strip().split("=", 1)
            current["env"][key] = value
    if not ranks:
        raise ValueError("no rank in the --dry_run text")
    return {"ranks": ranks, "notices": []}


# ---------------------------------------------------------------------------------------------
# Comparing

def agent_launched(fixture):
    return fixture["launcher"] == "torchrun" or multi_cpu_n_processes(fixture)


def host_physical_cores():
    cores = set()
    physical = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("physical id"):
                    physical = line.split(":")[1].strip()
                elif line.startswith("core id"):
                    cores.add((physical, line.split(":")[1].strip()))
    except OSError:
        pass
    return len(cores) or os.cpu_count() or 1


def omp_for_this_host(fixture, expected, cores):
    """accelerate sets OMP_NUM_THREADS from psutil's physical core count when the parent has none
    and no --num_cpu_threads_per_process was given (CPU runs): int(cores / local processes) if that
    is above 1, else 1. A fixture recorded on a host with another core count is adjusted by it."""
    resolved = fixture.get("resolved_args") or {}
    flagged = any(a in ("--num_cpu_threads_per_process", "--num-cpu-threads-per-process") for a in fixture["argv"])
    if (fixture["host_physical_cores"] == cores or "OMP_NUM_THREADS" in fixture["parent_env"] or flagged
            or not (resolved.get("use_cpu") or resolved.get("cpu")) or "OMP_NUM_THREADS" not in expected):
        return expected
    local = max(int((resolved.get("num_processes") or 1) / (resolved.get("num_machines") or 1)), 1)
    threads = int(cores / local)
    return dict(expected, OMP_NUM_THREADS=str(threads if threads > 1 else 1))


def normalize_command(cmd, tmp, unbuffered=False):
    """The command as both launchers mean it: the interpreter, first or after mpirun's arguments,
    is {python}; a program the launcher found on PATH (accel execs its full path, accelerate its
    name) is its name. unbuffered: accelerate's `python SCRIPT` as accel runs it, `python -u
    SCRIPT` (CASE_KEPT["unbuffered"])."""
    out = []
    for i, arg in enumerate(expand(list(cmd), tmp)):
        if arg in ("--tag-output", "-prepend-rank"):
            continue  # accel asks mpirun for rank tags to label each rank's lines (CASE_KEPT["mpi_tags"])
        arg = arg.replace(tmp + "/", "")
        if arg.startswith("./"):
            arg = arg[2:]
        if "{python}" not in out and (arg == "{python}" or re.fullmatch(r"(.*/)?python3?(\.\d+)?", arg)):
            arg = "{python}"
        elif i == 0 and os.path.isabs(arg) and shutil.which(os.path.basename(arg)) == arg:
            arg = os.path.basename(arg)
        out.append(arg)
    if unbuffered and "{python}" in out:
        at = out.index("{python}")
        if out[at + 1:at + 2] != ["-u"]:
            out.insert(at + 1, "-u")
    return out


def expected_ranks(fixture):
    """[(local_rank, env, command)] that accelerate + torchrun would start on this machine."""
    env = dict(fixture["env_changed"])
    env.update(fixture.get("torchrun_env_changed", {}))
    if fixture["launcher"] == "torchrun":
        n = int(fixture["torchrun_config"]["nproc_per_node"])
        return [(i, dict(env, **torchrun_worker_env(fixture, i)), fixture["cmd"]) for i in range(n)]
    if multi_cpu_n_processes(fixture):
        r = fixture["resolved_args"]
        machines = r.get("num_machines") or 1
        n = max(int(r["num_processes"] / machines), 1)
        endpoint = f"{env.get('MASTER_ADDR', '127.0.0.1')}:{env.get('MASTER_PORT', '29500')}"
        return [(i, dict(env, **torchrun_worker_env(fixture, i, nproc=n, nnodes=machines,
                                                    group_rank=int(r.get("machine_rank") or 0), endpoint=endpoint)),
                 fixture["cmd"]) for i in range(n)]
    return [(0, env, fixture["cmd"])]


def _effective(env, parent, key):
    """The value a worker sees: what the launcher sets, else what it inherits."""
    return env.get(key, parent.get(key))


def compare_env(fixture, rank, expected, got, cores, newer=None, tmp=""):
    """newer: what the newest recorded accelerate sets for the same case and rank, or None
    (CASE_KEPT["newer_value"])."""
    parent = expand(fixture["parent_env"], tmp)
    expected = omp_for_this_host(fixture, expected, cores)
    expected = {k: v for k, v in expected.items() if v is ANY or parent.get(k) != v}
    got = {k: v for k, v in got.items() if parent.get(k) != v}
    if fixture["launcher"] == "deepspeed_multinode":
        expected = {k: v for k, v in expected.items() if k.startswith("ACCELERATE_")}
        got = {k: v for k, v in got.items() if k.startswith("ACCELERATE_")}
    out = []
    for key in sorted(set(expected) | set(got)):
        want, have = expected.get(key), got.get(key)
        if want is ANY:
            if _nonempty(None, have):
                continue
            want = "<set at run time>"
        elif want == have:
            continue
        kept = kept_for(fixture, key)
        if kept and kept["check"](want, have):
            continue
        if newer is not None and _effective(newer, parent, key) not in (None, ANY) \
                and _effective(newer, parent, key) == _effective(got, parent, key):
            continue
        out.append((rank, key, want, have))
    return out


def newer_envs(fixture, newest):
    """{local rank: env} of the newest tag's fixture of the same case, when it is another tag and
    launched the same way."""
    if newest is None or newest["tag"] == fixture["tag"] or newest["launcher"] != fixture["launcher"]:
        return {}
    return {local: env for local, env, _ in expected_ranks(newest)}


def compare_case(fixture, result, proc, tmp, cores, newest_keys, newest=None):
    """Returns (status, [(rank, key, accelerate's value, accel's value)])."""
    if fixture["launcher"] == "error":
        tolerated = tolerated_error(fixture, newest_keys)
        if tolerated:
            return f"kept ({tolerated.split(':')[0]})", []
        if result is None:
            return "ok (both reject)", []
        err = fixture["error"]
        return "FAIL", [("-", "<outcome>", f"raises {err['type']}: {err['message'][:300]}",
                         f"accepts ({len(result.get('ranks', []))} ranks)")]
    if result is None:
        tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
        if proc.returncode == 2 and re.search(r"mixed_precision fp(16|8) needs a GPU but the job is CPU-only", tail):
            return "kept (fp16_fp8_on_cpu)", []
        if proc.returncode == 2 and "is not supported by accel, which launches CPU and CUDA GPU jobs" in tail:
            return "kept (device_not_supported)", []
        return "FAIL", [("-", "<outcome>", f"launches ({fixture['launcher']})", f"exit {proc.returncode}: {tail}")]
    if "unparsable" in result:
        return "FAIL", [("-", "<output>", "one JSON object", result["unparsable"])]
    out = []
    ranks = sorted(result.get("ranks", []), key=lambda r: r.get("local_rank", -1))
    want = [(local, expand(env, tmp), cmd) for local, env, cmd in expected_ranks(fixture)]
    newer = {local: expand(env, tmp) for local, env in newer_envs(fixture, newest).items()}
    if fixture["launcher"] != "deepspeed_multinode":
        if len(ranks) != len(want):
            out.append(("-", "<ranks>", len(want), len(ranks)))
        for (local, env, cmd), got in zip(want, ranks):
            if got.get("local_rank") != local:
                out.append((local, "<local_rank>", local, got.get("local_rank")))
            if normalize_command(cmd, tmp, unbuffered=fixture["launcher"] == "simple") != \
                    normalize_command(got.get("command", []), tmp):
                out.append((local, "<command>", normalize_command(cmd, tmp),
                            normalize_command(got.get("command", []), tmp)))
            out += compare_env(fixture, local, env, got.get("env", {}), cores, newer.get(local), tmp)
    else:  # CASE_KEPT["deepspeed_multinode"]
        for got in ranks:
            out += compare_env(fixture, got.get("local_rank"), want[0][1], got.get("env", {}), cores, newer.get(0), tmp)
    return ("FAIL" if out else "ok"), out


def newest_tag_dir(fixtures_dir):
    """The directory of the newest recorded tag beside fixtures_dir (v1.14.0 beside v0.27.2)."""
    root = os.path.dirname(os.path.abspath(fixtures_dir))
    tags = sorted((d for d in os.listdir(root) if re.fullmatch(r"v\d+\.\d+\.\d+", d)),
                  key=lambda t: tuple(int(x) for x in t[1:].split(".")))
    return os.path.join(root, tags[-1])


def newest_config_keys(fixtures_dir):
    """The cluster config keys of the newest recorded tag, for tolerated_error."""
    with open(os.path.join(newest_tag_dir(fixtures_dir), "config_keys.json"), encoding="utf-8") as f:
        return set(json.load(f)["cluster_config_keys"])


def newest_fixtures(fixtures_dir):
    directory = newest_tag_dir(fixtures_dir)
    if os.path.samefile(directory, fixtures_dir):
        return {}
    return {f["case"]: f for f in load_fixtures(directory, [])}


def load_fixtures(directory, names):
    fixtures = []
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(".json") or entry == "config_keys.json":
            continue
        with open(os.path.join(directory, entry), encoding="utf-8") as f:
            fixture = json.load(f)
        if not names or fixture["case"] in names:
            fixtures.append(fixture)
    missing = set(names) - {f["case"] for f in fixtures}
    if missing or not fixtures:
        raise SystemExit(f"accelerate_parity: no fixture for {sorted(missing) or 'any case'} in {directory}")
    return fixtures


# ---------------------------------------------------------------------------------------------
# --self-test: the comparison itself, without accel. An ideal accel (what the fixture says
# accelerate + torchrun give each worker) must pass every fixture; each mutation of it must fail.

class _Exit:
    def __init__(self, returncode):
        self.returncode, self.stderr = returncode, "accel: error: (self-test)"


def ideal_result(fixture, tmp):
    if fixture["launcher"] == "error":
        return None, _Exit(2)
    ranks = []
    for local, env, cmd in expected_ranks(fixture):
        env = {k: ("set-at-run-time" if v is ANY else expand(v, tmp)) for k, v in env.items()}
        command = normalize_command(cmd, tmp, unbuffered=fixture["launcher"] == "simple")  # CASE_KEPT["unbuffered"]
        ranks.append({"rank": local, "local_rank": local, "command": command, "env": env})
    return {"ranks": ranks, "notices": []}, _Exit(0)


def mutations(fixture, result):
    """(name, mutated result) pairs the comparison must each reject."""
    if result is None:
        return [("accepts what accelerate rejects", {"ranks": [{"rank": 0, "local_rank": 0, "command": [], "env": {}}]})]
    out = []
    first = result["ranks"][0]
    accelerate_keys = sorted(k for k in first["env"] if k.startswith("ACCELERATE_"))
    if accelerate_keys:
        changed = json.loads(json.dumps(result))
        changed["ranks"][0]["env"][accelerate_keys[0]] += "-changed"
        out.append((f"{accelerate_keys[0]} changed", changed))
        dropped = json.loads(json.dumps(result))
        del dropped["ranks"][-1]["env"][accelerate_keys[-1]]
        out.append((f"{accelerate_keys[-1]} left out", dropped))
    extra = json.loads(json.dumps(result))
    extra["ranks"][0]["env"]["ACCELERATE_NOT_FROM_ACCELERATE"] = "1"
    out.append(("an extra ACCELERATE_ variable", extra))
    if fixture["launcher"] != "deepspeed_multinode":
        more = json.loads(json.dumps(result))
        more["ranks"].append(dict(more["ranks"][-1], local_rank=len(more["ranks"])))
        out.append(("one rank too many", more))
        command = json.loads(json.dumps(result))
        command["ranks"][0]["command"] = command["ranks"][0]["command"] + ["--extra"]
        out.append(("command changed", command))
    if "RANK" in first["env"]:
        rank = json.loads(json.dumps(result))
        rank["ranks"][0]["env"]["RANK"] = "7"
        out.append(("RANK changed", rank))
    return out


def self_test(fixtures, cores, newest_keys, newest):
    problems, checked = [], 0
    for fixture in fixtures:
        tmp = prepare_tmp(fixture)
        try:
            result, proc = ideal_result(fixture, tmp)
            status, found = compare_case(fixture, result, proc, tmp, cores, newest_keys, newest.get(fixture["case"]))
            if found:
                problems.append(f"{fixture['case']}: the ideal accel fails: {found[:3]}")
            if status.startswith("kept"):
                continue
            for name, mutated in mutations(fixture, result):
                checked += 1
                _, found = compare_case(fixture, mutated, _Exit(0), tmp, cores, newest_keys, newest.get(fixture["case"]))
                if not found:
                    problems.append(f"{fixture['case']}: mutation not detected: {name}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for problem in problems:
        print("SELF-TEST " + problem)
    print(f"self-test: {len(fixtures)} fixtures pass as recorded, {checked} mutations checked, {len(problems)} problems")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accel", help="the accel binary (not with --self-test)")
    parser.add_argument("--self-test", action="store_true", help="check the comparison itself, without accel")
    parser.add_argument("--fixtures", required=True, help="tests/fixtures/accelerate/<tag>")
    parser.add_argument("--case", action="append", default=[])
    parser.add_argument("--legacy-dry-run", action="store_true", help="diagnostic: parse `--dry_run` text")
    opts = parser.parse_args()
    fixtures = load_fixtures(opts.fixtures, opts.case)
    cores, newest_keys, newest = host_physical_cores(), newest_config_keys(opts.fixtures), newest_fixtures(opts.fixtures)
    if opts.self_test:
        return self_test(fixtures, cores, newest_keys, newest)
    if not opts.accel or not os.access(opts.accel, os.X_OK):
        parser.error(f"--accel {opts.accel}: not an executable")
    opts.accel = os.path.abspath(opts.accel)
    failed, by_key = 0, {}
    for fixture in fixtures:
        tmp = prepare_tmp(fixture)
        try:
            result, proc = run_accel(opts.accel, fixture, tmp, opts.legacy_dry_run)
            status, mismatches = compare_case(fixture, result, proc, tmp, cores, newest_keys,
                                              newest.get(fixture["case"]))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{fixture['tag']} {fixture['case']}: {status}")
        for rank, key, want, have in mismatches:
            print(f"  MISMATCH case={fixture['case']} rank={rank} key={key} accelerate={want!r} accel={have!r}")
            by_key.setdefault(key, []).append(fixture["case"])
        failed += bool(mismatches)
    print(f"\n{len(fixtures)} fixtures of {fixtures[0]['tag']} ({fixtures[0]['commit'][:12]}), {failed} with mismatches")
    for key, cases in sorted(by_key.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {key}: {len(cases)} x ({', '.join(sorted(set(cases))[:6])}{', ...' if len(set(cases)) > 6 else ''})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
