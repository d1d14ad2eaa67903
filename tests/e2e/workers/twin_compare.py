"""Compares one job run under torchrun and under accel (tests/e2e/torchrun.sh):
twin_compare.py TORCH_DIR ACCEL_DIR RUN_ID TORCH_PORT. Each DIR holds out/ (twin.py's env.<attempt>.<rank>
files) and logs/ (the --log_dir). Prints every difference not kept on purpose; exits 1 if any."""
import json
import os
import re
import sys

torch_dir, accel_dir, run_id, torch_port = sys.argv[1:5]

# What each rank must see, in both runs (compared below with everything else).
REQUIRED = """RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT GROUP_RANK GROUP_WORLD_SIZE
ROLE_RANK ROLE_WORLD_SIZE ROLE_NAME TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS
TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_RUN_ID TORCHELASTIC_ERROR_FILE OMP_NUM_THREADS""".split()

# Differences kept on purpose, with the reason:
# - accel launch is also accelerate's launcher: it gives accelerate's variables; accel run, the
#   torchrun drop-in ($TWIN_ACCEL_COMMAND), must not.
ONLY_ACCEL_PREFIXES = ("ACCELERATE_", "KMP_") if os.environ.get("TWIN_ACCEL_COMMAND") == "launch" else ()
# - one setting, two names: torch 1.13 reads NCCL_ASYNC_ERROR_HANDLING, 2.2+ its
#   TORCH_NCCL_ASYNC_ERROR_HANDLING. Each torchrun sets its own release's name (so a name missing
#   under accel is still a difference); accel, serving every release, sets both.
# - accel's agent watches progress, scores stragglers and asks hung ranks for their stacks (README:
#   When a job hangs; Healthy machines only): the heartbeat and work keys, and Python's faulthandler
#   on (SIGABRT prints every thread).
ONLY_ACCEL = {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", "ACCEL_HEARTBEAT_KEY",
              "ACCEL_WORK_KEY", "PYTHONFAULTHANDLER"}
ONLY_TORCH = set()
# - the test points each launch's workers at their own output directory, and gives each launcher
#   the workers' python3 by its path as that launcher sees it (torch 2.6: inside the chroot, or
#   the wrapper that enters it, which adds the repository to ACCEL_CHROOT_BINDS); bash exports `_`
#   as the path of the program it starts.
IGNORED = {"TWIN_OUT", "TWIN_ACCEL_COMMAND", "PYTHON_EXEC", "ACCEL_CHROOT_BINDS", "_"}
# - accel keeps its job summary (README: failure summary) beside the attempts.
ACCEL_EXTRA_FILES = {"summary.json"}
# - with --log_dir accel keeps every stream in a file, also those torchrun only prints: each line
#   of such a file must be a line torchrun printed on that console stream.
ACCEL_ALWAYS_LOGS = re.compile(r"attempt_\d+/\d+/(stdout|stderr)\.log")

problems = []


def read_envs(d):
    out = os.path.join(d, "out")
    return {n: dict(line.rstrip("\n").split("=", 1) for line in open(os.path.join(out, n)) if "=" in line)
            for n in sorted(os.listdir(out)) if n.startswith("env.")}


def run_dir(d):
    logs = os.path.join(d, "logs")
    runs = os.listdir(logs)
    if len(runs) != 1 or not re.fullmatch(re.escape(run_id) + r"_[a-z0-9_]+", runs[0], re.I):
        problems.append(f"{logs}: want one directory {run_id}_<random>, have {runs}")
        return None
    return os.path.join(logs, runs[0])


def normalise(who, envs, run, port):
    ports = set()
    for name, env in envs.items():
        attempt, rank = name.split(".")[1:]
        for k in IGNORED:
            env.pop(k, None)
        ports.add(env.get("MASTER_PORT"))
        env["MASTER_PORT"] = "<port>"
        want = f"{run}/attempt_{attempt}/{env.get('LOCAL_RANK')}/error.json"
        if env.get("TORCHELASTIC_ERROR_FILE") != want:
            problems.append(f"{who} {name}: TORCHELASTIC_ERROR_FILE={env.get('TORCHELASTIC_ERROR_FILE')}, want {want}")
        env["TORCHELASTIC_ERROR_FILE"] = "<run dir>/" + os.path.relpath(want, run)
        missing = [k for k in REQUIRED if k not in env]
        if missing:
            problems.append(f"{who} {name}: missing {missing}")
    if len(ports) != 1 or not next(iter(ports)).isdigit() or (port and ports != {port}):
        problems.append(f"{who}: MASTER_PORT {sorted(ports)}, want one port{' ' + port if port else ''}")


def compare_envs(torch_envs, accel_envs):
    if sorted(torch_envs) != sorted(accel_envs):
        problems.append(f"ranks and attempts differ: torchrun {sorted(torch_envs)}, accel {sorted(accel_envs)}")
    for name in sorted(set(torch_envs) & set(accel_envs)):
        t, a = torch_envs[name], accel_envs[name]
        for k in sorted(set(t) | set(a)):
            if k in t and k in a:
                if t[k] != a[k]:
                    problems.append(f"{name}: {k}: torchrun '{t[k]}', accel '{a[k]}'")
            elif k in a and not (k in ONLY_ACCEL or k.startswith(ONLY_ACCEL_PREFIXES)):
                problems.append(f"{name}: {k}={a[k]} only under accel")
            elif k in t and k not in ONLY_TORCH:
                problems.append(f"{name}: {k}={t[k]} only under torchrun")


def tree(run):
    paths = set()
    for root, dirs, files in os.walk(run):
        for n in dirs + files:
            paths.add(os.path.relpath(os.path.join(root, n), run))
    return paths


def same_error_file(tp, ap):
    """torch's @record writes {"message": {"message": ..., "extraInfo": {"py_callstack": ...,
    "timestamp": ...}}}: all but the time must match."""
    t, a = json.load(open(tp)), json.load(open(ap))
    for j in (t, a):
        j["message"]["extraInfo"].pop("timestamp", None)
    return t == a


def compare_logs(trun, arun):
    t, a = tree(trun), tree(arun) - ACCEL_EXTRA_FILES
    for p in sorted(a - t):
        m = ACCEL_ALWAYS_LOGS.fullmatch(p)
        if not m:
            continue
        a.discard(p)
        printed = set(open(os.path.join(torch_dir, m.group(1)), errors="replace").read().splitlines())
        lines = open(os.path.join(arun, p), errors="replace").read().splitlines()
        if not lines or not set(lines) <= printed:
            problems.append(f"accel's {p} has {lines}, not lines torchrun printed on its {m.group(1)}")
    if t != a:
        problems.append(f"log trees differ: only torchrun {sorted(t - a)}, only accel {sorted(a - t)}")
    for p in sorted(t & a):
        tp, ap = os.path.join(trun, p), os.path.join(arun, p)
        if p.endswith("error.json") and os.path.isfile(tp):
            if not same_error_file(tp, ap):
                problems.append(f"{p} differs:\n--- torchrun\n{open(tp).read()}\n--- accel\n{open(ap).read()}")
        elif os.path.isfile(tp) and open(tp, "rb").read() != open(ap, "rb").read():
            problems.append(f"{p} differs:\n--- torchrun\n{open(tp, errors='replace').read()}--- accel\n"
                            f"{open(ap, errors='replace').read()}")
    if not any(p.endswith(".log") for p in t):
        problems.append("no log file at all under torchrun's log dir")


torch_envs, accel_envs = read_envs(torch_dir), read_envs(accel_dir)
trun, arun = run_dir(torch_dir), run_dir(accel_dir)
if not torch_envs:
    problems.append("no rank ran under torchrun")
if trun and arun:
    normalise("torchrun", torch_envs, trun, torch_port)
    normalise("accel", accel_envs, arun, None)
    compare_envs(torch_envs, accel_envs)
    compare_logs(trun, arun)
    if not os.path.isfile(os.path.join(arun, "summary.json")):
        problems.append(f"no summary.json in {arun}")
for p in problems:
    print("DIFFERENCE:", p)
sys.exit(1 if problems else 0)
