#!/usr/bin/env bash
# Soak: many launches in a row of random shapes, then nothing of ours may be left; and one long
# job with many restarts, whose agent must not leak descriptors or grow.
#   scripts/bench/soak.sh [--launches N] [--restarts R] [--seed S] [ACCEL]
#   scripts/bench/soak.sh --quick       (ctest's bench.soak_quick: 40 launches, 25 restarts, seed 12)
# Each launch: 1-8 ranks and one scenario — success, a rank's exit code, SIGSEGV, grandchildren
# (left running, in their own session, or with a failing worker), SIGINT (once, or three times),
# SIGTERM, SIGUSR1, SIGKILL of the agent, a restart. Its exit code must be the scenario's, and
# afterwards no process carrying the launch's marker and no run directory of its agent may be
# left. Exit status: 0 when every check held. Prints the figures.
set -euo pipefail
cd "$(dirname "$0")/../.."
launches=300 restarts=100 seed=$RANDOM
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --launches) launches=$2 ;; --restarts) restarts=$2 ;; --seed) seed=$2 ;;
    --quick) launches=40 restarts=25 seed=12; shift; continue ;;  # ctest's bench.soak_quick
    *) echo "soak: unknown flag $1" >&2; exit 2 ;;
  esac
  shift 2
done
accel=${1:-$(realpath "${ACCEL_BUILD_DIR:-build}")/apps/accel/accel}
[[ -x "$accel" ]] || { echo "soak: build first (scripts/build): no $accel" >&2; exit 2; }
behave=$(pwd)/tests/e2e/workers/behave.sh
scratch=$(mktemp -d /tmp/accel-soak-XXXXXX)
export HF_HOME=$scratch/hf OUT_DIR=$scratch/out TMPDIR=$scratch/tmp  # agents' run directories
mkdir -p "$OUT_DIR" "$TMPDIR"
tag="accel-soak-$$"
trap 'pkill -KILL -f "$tag" 2>/dev/null || true; rm -rf "$scratch"' EXIT
RANDOM=$seed
failures=0
complain() { echo "soak: launch $1: $2" >&2; failures=$((failures + 1)); }

# wait_marks NAME COUNT: until COUNT files NAME.* exist (at most 20 s).
wait_marks() {
  local i
  for i in $(seq 1 400); do
    [[ $(compgen -G "$OUT_DIR/$1.*" | wc -l) -ge $2 ]] && return 0
    sleep 0.05
  done
  return 1
}

# leftovers MARKER: processes of that launch still alive (zombies excluded), after at most 2 s.
leftovers() {
  local i left
  for i in $(seq 1 40); do
    left=$(pgrep -f "$1" | while read -r p; do [[ $(cut -d' ' -f3 "/proc/$p/stat" 2>/dev/null) =~ ^[^Z]$ ]] && echo "$p"; done)
    [[ -z $left ]] && return 0
    sleep 0.05
  done
  echo "$left"
}

# One launch of scenario $3 with $2 ranks; checks its exit code and what is left.
one_launch() {
  local i=$1 n=$2 scenario=$3 marker="$tag-$i" want agent rc
  local -a env=(BEHAVE_DEFAULT=ready-sleep) flags=(-n "$n" --term_timeout 1)
  local victim=$((RANDOM % n)) code=$((1 + RANDOM % 100)) signal=""
  rm -f "$OUT_DIR"/*
  case $scenario in
    ok) env=(BEHAVE_DEFAULT=ok); want=0 ;;
    exit) env+=("BEHAVE_$victim=exit-when-ready:$code"); want=$code ;;
    segv) env=(BEHAVE_DEFAULT=sleep "BEHAVE_$victim=segv"); want=139 ;;
    grandchild) env=(BEHAVE_DEFAULT=grandchild GRANDCHILD_THEN=sleep "BEHAVE_$victim=exit:$code"); want=$code ;;
    setsid) env=(BEHAVE_DEFAULT=setsid-grandchild); want=0 ;;
    fail_grandchild) env=(BEHAVE_DEFAULT=grandchild GRANDCHILD_THEN=fail); want=4 ;;
    sigint) env=(BEHAVE_DEFAULT=ready-sleep); signal=INT; want=130 ;;
    sigint3) env=(BEHAVE_DEFAULT=traps); signal=INT; want=130 ;;
    sigterm) env=(BEHAVE_DEFAULT=sleep-ignore-term); signal=TERM; want=143 ;;
    sigusr1) env=(BEHAVE_DEFAULT=usr1-then-exit); signal=USR1; want=0 ;;
    sigkill) env=(BEHAVE_DEFAULT=grandchild GRANDCHILD_THEN=sleep); signal=KILL; want=137 ;;
    restart) env=(BEHAVE_DEFAULT=fail-first-attempt); flags+=(--max_restarts 1); want=0 ;;
  esac
  env "${env[@]}" MARKER="$marker" "$accel" launch "${flags[@]}" "$behave" "$marker" >"$scratch/o" 2>"$scratch/e" &
  agent=$!
  if [[ -n $signal ]]; then
    wait_marks "$([[ $scenario == sigkill ]] && echo grandchild || echo ready)" "$n" ||
      complain "$i" "$scenario: the workers never got ready"
    if [[ $scenario == sigint3 ]]; then  # forwarded as SIGINT, then SIGTERM, then SIGKILL
      kill -INT "$agent"; wait_marks int "$n" || true
      kill -INT "$agent"; wait_marks term "$n" || true
    fi
    kill -"$signal" "$agent"
  fi
  set +e; wait "$agent"; rc=$?; set -e
  [[ $rc == "$want" ]] || complain "$i" "$scenario with $n ranks exited $rc (want $want): $(tail -3 "$scratch/e")"
  local left
  left=$(leftovers "$marker")
  [[ -z $left ]] || complain "$i" "$scenario with $n ranks left processes: $(ps -o pid,ppid,stat,args -p "$(paste -sd, <<<"$left")")"
  pkill -KILL -f "$marker" 2>/dev/null || true
  return 0
}

scenarios=(ok exit segv grandchild setsid fail_grandchild sigint sigint3 sigterm sigusr1 sigkill restart)
declare -A count
start=$(date +%s.%N)
for i in $(seq 1 "$launches"); do
  n=$((1 + RANDOM % 8))
  scenario=${scenarios[RANDOM % ${#scenarios[@]}]}
  count[$scenario]=$(( ${count[$scenario]:-0} + 1 ))
  one_launch "$i" "$n" "$scenario"
done
elapsed=$(echo "$(date +%s.%N) - $start" | bc)
left_total=$(pgrep -fc "$tag" || true)
runs_left=$(ls "$TMPDIR" | wc -l)
printf 'soak: %d launches (seed %d) in %.1f s, %.2f s per launch\n' "$launches" "$seed" "$elapsed" \
  "$(echo "$elapsed / $launches" | bc -l)"
for s in "${scenarios[@]}"; do printf '  %-16s %d\n' "$s" "${count[$s]:-0}"; done
echo "soak: processes of ours left: $left_total; run directories left: $runs_left; failed checks: $failures"
[[ $left_total == 0 && $runs_left == 0 ]] || failures=$((failures + 1))

# One job, many restarts: rank 0 of every attempt records the agent's descriptors and RSS.
rm -f "$OUT_DIR"/*
set +e
# (Every attempt fails the same way on purpose: --retry_identical_failures keeps restarting it.)
BEHAVE_DEFAULT="fail-until:$restarts" MARKER="$tag-long" "$accel" launch -n 4 --term_timeout 1 --max_restarts "$restarts" --retry_identical_failures \
  "$behave" "$tag-long" >/dev/null 2>"$scratch/e"
rc=$?
set -e
[[ $rc == 0 ]] || complain long "the job with $restarts restarts exited $rc: $(tail -3 "$scratch/e")"
attempts=$(wc -l <"$OUT_DIR/agent_stats")
read -r _ fd_first rss_first < <(sed -n 2p "$OUT_DIR/agent_stats")
read -r _ fd_last rss_last < <(tail -1 "$OUT_DIR/agent_stats")
fd_max=$(awk 'NR>1 {if ($2>m) m=$2} END {print m}' "$OUT_DIR/agent_stats")
rss_max=$(awk 'NR>1 {if ($3>m) m=$3} END {print m}' "$OUT_DIR/agent_stats")
echo "soak: one job, $attempts attempts: agent descriptors at attempt 1 $fd_first, last $fd_last, max $fd_max;" \
  "RSS at attempt 1 ${rss_first} KiB, last ${rss_last} KiB, max ${rss_max} KiB"
[[ $attempts == $((restarts + 1)) ]] || complain long "$attempts attempts recorded (want $((restarts + 1)))"
[[ $fd_last == "$fd_first" && $fd_max == "$fd_first" ]] || complain long "the agent's descriptors grew: $fd_first -> $fd_last (max $fd_max)"
left=$(leftovers "$tag-long")
[[ -z $left ]] || complain long "processes left after the long job"
echo "soak: $failures failed checks"
((failures == 0))
