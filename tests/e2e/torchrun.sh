#!/usr/bin/env bash
# The same job under torchrun and under accel: torchrun.sh CASE /path/to/accel [TORCH [COMMAND]]
# TORCH: 1.13 (default; Debian 12's python3-torch) or 2.6 (Debian trixie's, in the chroot of
# scripts/torch2_chroot.sh; skipped with the reason where that cannot run). COMMAND: the accel
# subcommand that stands in for torchrun, `run` (default: torchrun's drop-in) or `launch`.
#
# Each case runs the same python3-torch worker (workers/twin.py) with the same torchrun flags under
# both launchers and compares the exit codes, every rank's whole environment in every attempt,
# what reached the console, and the tree and bytes of the files under --log_dir
# (workers/twin_compare.py). Differences kept on purpose, with their reasons:
#  - MASTER_PORT: torchrun is given --master_port P (found free by trying: start_torchrun); accel
#    picks its own (the store binds port 0 and keeps it), the same for every rank.
#  - A failed job: torchrun exits 1 (its ChildFailedError), accel with the culprit's exit code.
#  - Only under accel launch (accelerate's launcher too): accelerate's ACCELERATE_* and KMP_*
#    variables. Under accel (run and launch): the name of
#    NCCL_ASYNC_ERROR_HANDLING (1.13) / TORCH_NCCL_ASYNC_ERROR_HANDLING (2.2+) that the other torch
#    release reads (accel sets both, each torchrun its own); accel writes summary.json beside the attempts,
#    and with --log_dir keeps every stream in a file (those torchrun only prints: the lines must
#    be the ones it printed).
#  - The console: torchrun prefixes teed lines "[default0]:", accel "[rank 0] ".
#  - The log directory's random suffix (both: <log_dir>/<run_id>_<random>/attempt_K/<local rank>/).
source "$(dirname "$0")/lib.sh"
CASE=$1
ACCEL=$2
TWIN_TORCH=${3:-1.13}
export TWIN_ACCEL_COMMAND=${4:-run}
[[ $TWIN_ACCEL_COMMAND == run || $TWIN_ACCEL_COMMAND == launch ]] || { echo "COMMAND is run or launch" >&2; exit 1; }
W=$(cd "$(dirname "$0")/workers" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
ACCEL_RUN=("$ACCEL" "$TWIN_ACCEL_COMMAND")
# torchrun (python3 -m torch.distributed.run with Debian's build fixed: see each wrapper), and
# the interpreter of the workers, given to both launchers as PYTHON_EXEC (torchrun's variable
# too): the same python3, seen from inside the chroot (torchrun) or through its wrapper (accel).
if [[ $TWIN_TORCH == 1.13 ]]; then
  /usr/bin/python3 -c 'import torch.distributed.run' 2>/dev/null || { echo "SKIPPED: Debian's python3-torch is not installed"; exit 77; }
  TORCHRUN=(/usr/bin/python3 "$W/torchrun113.py")
  TORCH_PYTHON=/usr/bin/python3 ACCEL_PYTHON=/usr/bin/python3
elif [[ $TWIN_TORCH == 2.6 ]]; then
  reason=$("$ROOT/scripts/torch2_chroot.sh" check 2>&1) || { echo "SKIPPED: $reason"; exit 77; }
  export ACCEL_CHROOT_BINDS=$ROOT
  TORCHRUN=("$ROOT/scripts/torch2_chroot.sh" run /usr/bin/python3 "$W/torchrun26.py")
  TORCH_PYTHON=/usr/bin/python3 ACCEL_PYTHON=$W/torch2_python
elif [[ $TWIN_TORCH == main && $CASE == flags ]]; then
  TORCHRUN=()  # not installed here: its parser's options are recorded (tests/fixtures/torchrun)
else
  fail "TORCH is 1.13 or 2.6 (or main for the flags case), not $TWIN_TORCH"
fi
export MARKER="accel-torchrun-e2e-$$-$RANDOM"    # in every command line: a failed case leaves nothing running
trap 'pkill -KILL -f "$MARKER" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT
RUN_ID=twin-$$-$RANDOM
JOB_TIMEOUT=100  # seconds one launch may take (a few on an idle machine)

# torchrun_options: OPTION DEST NARGS DEFAULT ('-': none or empty) for every option string of
# this torch's own torchrun parser.
torchrun_options() {
  "${TORCHRUN[@]:0:${#TORCHRUN[@]}-1}" -c '
from torch.distributed.run import get_args_parser
for a in get_args_parser()._actions:
    if not a.option_strings or a.dest == "help":
        continue
    value = "-" if a.nargs == 0 else ("-" if a.default is None or a.default == "" else str(a.default))
    for o in a.option_strings:
        print(o, a.dest, a.nargs if a.nargs is not None else 1, value)'
}

# launch WHO ARGS...: runs the job under WHO (torchrun or accel) with its own output and log
# directories ($SCRATCH/WHO/{out,logs}), the console in $SCRATCH/WHO/{stdout,stderr}, the exit
# code in CODE_<WHO>.
launch() {
  local who=$1 code; shift
  rm -rf "${SCRATCH:?}/$who"
  mkdir -p "$SCRATCH/$who/out"
  set +e
  # A launcher that hangs is stopped (SIGTERM, then SIGKILL) and named, not left to ctest's timeout.
  if [[ $who == torchrun ]]; then
    PYTHON_EXEC=$TORCH_PYTHON TWIN_OUT=$SCRATCH/$who/out timeout -k 10 "$JOB_TIMEOUT" "${TORCHRUN[@]}" --master_port "$PORT" --log_dir "$SCRATCH/$who/logs" "$@" \
      >"$SCRATCH/$who/stdout" 2>"$SCRATCH/$who/stderr"
  else
    PYTHON_EXEC=$ACCEL_PYTHON TWIN_OUT=$SCRATCH/$who/out timeout -k 10 "$JOB_TIMEOUT" "${ACCEL_RUN[@]}" --log_dir "$SCRATCH/$who/logs" "$@" \
      >"$SCRATCH/$who/stdout" 2>"$SCRATCH/$who/stderr"
  fi
  code=$?
  set -e
  [[ $code != 124 && $code != 137 ]] ||
    fail "$who did not finish within $JOB_TIMEOUT s: $(tail -20 "$SCRATCH/$who/stderr")
$(worker_logs "$who")"
  printf -v "CODE_$who" %s "$code"
}

# start_torchrun ARGS...: runs torchrun on the first port P of random tries that its agent could
# bind (a port someone holds stops it before any worker starts; then the next is tried). No port
# is picked by binding and closing.
start_torchrun() {
  local try
  for try in $(seq 1 30); do
    PORT=$((20000 + RANDOM % 30000))
    launch torchrun "$@"
    if grep -qi "address already in use" "$SCRATCH/torchrun/stderr" && [[ -z $(ls "$SCRATCH/torchrun/out") ]]; then
      continue
    fi
    return 0
  done
  fail "no port free for torchrun in 30 tries"
}

# worker_logs WHO: the last lines of every log file of WHO's run (what a failure needs to be read).
worker_logs() {
  local f
  for f in "$SCRATCH/$1"/logs/*/attempt_*/*/*.log; do [[ -f $f ]] && printf '%s\n%s\n' "== $f" "$(tail -15 "$f")"; done
  return 0
}

# twin WANT_TORCHRUN WANT_ACCEL FLAGS...: the job under both, then the comparison.
twin() {
  local want_t=$1 want_a=$2; shift 2
  local args=(--nproc_per_node 2 --nnodes 1 --rdzv_id "$RUN_ID" "$@")
  start_torchrun "${args[@]}"
  launch accel "${args[@]}"
  [[ $CODE_torchrun == "$want_t" ]] || fail "torchrun exited $CODE_torchrun (want $want_t): $(tail -30 "$SCRATCH/torchrun/stderr")
$(worker_logs torchrun)"
  [[ $CODE_accel == "$want_a" ]] || fail "accel exited $CODE_accel (want $want_a): $(cat "$SCRATCH/accel/stderr")
$(worker_logs accel)"
  $PY "$W/twin_compare.py" "$SCRATCH/torchrun" "$SCRATCH/accel" "$RUN_ID" "$PORT" ||
    fail "torchrun and accel ran different jobs (above)"
}

# console WHO STREAM LINE PRESENT: whether a worker's LINE reached WHO's console STREAM, after its
# launcher's prefix ([default0]: or [rank 0]).
console_has() {
  local who=$1 stream=$2 line=$3 rank=$4
  local prefix="[rank $rank] "
  [[ $who == torchrun ]] && prefix="[default$rank]:"
  grep -qxF -- "$prefix$line" "$SCRATCH/$who/$stream"
}
expect_console() {  # WHO STREAM RANK LINE yes|no
  local who=$1 stream=$2 rank=$3 line=$4 want=$5
  if console_has "$who" "$stream" "$line" "$rank"; then
    [[ $want == yes ]] || fail "$who printed '$line' on its $stream: $(cat "$SCRATCH/$who/$stream")"
  else
    [[ $want == no ]] || fail "$who did not print '$line' on its $stream: $(cat "$SCRATCH/$who/$stream")"
  fi
}

case $CASE in
ddp_gloo)
  # gloo all_reduce and a DDP step; --tee 3: every stream in its file and on the console.
  twin 0 0 --tee 3 "$W/twin.py" ddp "$MARKER"
  for who in torchrun accel; do
    for r in 0 1; do
      expect_console $who stdout $r "stdout of rank $r in attempt 0" yes
      expect_console $who stderr $r "stderr of rank $r in attempt 0" yes
      expect_console $who stdout $r "ok rank=$r world=2 allreduce=3" yes
    done
  done
  ;;
failing_rank)
  # Rank 1 exits 3; --redirects 3: the workers' streams in files only, none on the console.
  twin 1 3 --redirects 3 "$W/twin.py" fail "$MARKER"
  for who in torchrun accel; do
    for r in 0 1; do
      expect_console $who stdout $r "stdout of rank $r in attempt 0" no
      expect_console $who stderr $r "stderr of rank $r in attempt 0" no
    done
    grep -qxF "rank 1 fails with exit code 3" "$SCRATCH/$who/logs/$RUN_ID"_*/attempt_0/1/stderr.log ||
      fail "$who: rank 1's stderr.log lacks its last words"
  done
  ;;
error_file)
  # Rank 1 raises under torch's @record: its error.json, in the same place under both launchers
  # (TORCHELASTIC_ERROR_FILE), says the same; both exit 1. --tee 2: stderr teed, stdout plain.
  twin 1 1 --tee 2 "$W/twin.py" raise "$MARKER"
  for who in torchrun accel; do
    f=$(echo "$SCRATCH/$who/logs/$RUN_ID"_*/attempt_0/1/error.json)
    [[ -f $f ]] || fail "$who: no error.json for rank 1"
    $PY -c 'import json,sys; m=json.load(open(sys.argv[1]))["message"]["message"]; assert m == "RuntimeError: rank 1 raises in attempt 0", m' "$f"
  done
  expect_contains "$(cat "$SCRATCH/accel/stderr")" "RuntimeError: rank 1 raises in attempt 0"
  ;;
restart)
  # Rank 1 fails in attempt 0 only; --max_restarts 1 runs attempt 1, which succeeds. Per-rank
  # maps: local rank 0 redirects both streams, local rank 1 redirects stdout and tees stderr.
  twin 0 0 --max_restarts 1 --redirects 0:3,1:1 --tee 1:2 "$W/twin.py" fail_first "$MARKER"
  for who in torchrun accel; do
    expect_console $who stdout 0 "stdout of rank 0 in attempt 1" no
    expect_console $who stderr 0 "stderr of rank 0 in attempt 1" no
    expect_console $who stdout 1 "stdout of rank 1 in attempt 1" no
    expect_console $who stderr 1 "stderr of rank 1 in attempt 1" yes
    expect_console $who stderr 1 "rank 1 fails with exit code 3" yes
    [[ -f $(echo "$SCRATCH/$who/logs/$RUN_ID"_*/attempt_1/0/stdout.log) ]] || fail "$who: no attempt_1 logs"
  done
  ;;
flags)
  # Every option of this torch's own torchrun parser (get_args_parser) is one `accel run` lists
  # in its help and takes with the same arity; each value option given torchrun's own default
  # (or a value where the default is None) plans a job (--dry_run). TORCH=main: the options
  # recorded from pytorch main's parser, in the lines torchrun_options prints.
  if [[ $TWIN_TORCH == main ]]; then
    options=$(grep -v '^#' "$ROOT/tests/fixtures/torchrun/main_options.txt")
  else
    options=$(torchrun_options)
  fi
  [[ $(wc -l <<<"$options") -ge 20 ]] || fail "torchrun's parser gave too few options: $options"
  expect_exit 0 "${ACCEL_RUN[@]}" --help-all
  help=$OUT
  declare -A example=([log_dir]="$SCRATCH/logs" [local_addr]=127.0.0.1 [rdzv_endpoint]=127.0.0.1:29400
    [logs_specs]=default [numa_binding]=node [rdzv_conf]=join_timeout=900)
  n=0
  while read -r option dest nargs value; do
    listed=$option  # the help lists long flags with underscores (dashes are the same flag)
    if [[ $option == --* ]]; then rest=${option:2}; listed=--${rest//-/_}; fi
    grep -qE -- "^  (.*, )?$listed(,| [A-Z{][A-Z0-9_{},a-z-]*| |$)" <<<"$help" || fail "accel $TWIN_ACCEL_COMMAND --help-all does not list $listed"
    args=("$option")
    if [[ $nargs != 0 ]]; then
      [[ $value == - ]] && value=${example[$dest]:-1}
      args+=("$value")
    fi
    # Then --nproc_per_node 2, which wins over an earlier one as in argparse.
    expect_exit 0 "${ACCEL_RUN[@]}" --dry_run "${args[@]}" --nproc_per_node 2 /bin/true
    expect_contains "$OUT" "WORLD_SIZE=2"
    n=$((n + 1))
  done <<<"$options"
  echo "torch $TWIN_TORCH: $n torchrun options checked"
  ;;
*) fail "unknown case $CASE" ;;
esac
echo "PASS $CASE"
