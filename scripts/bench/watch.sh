#!/usr/bin/env bash
# What watching a job costs and how fast it answers, in one run (README: When a job hangs):
#   1. `accel status` with a 4-rank job running, against `ps` asked for the same ranks' columns;
#   2. the C++ example (MLP bf16: the shortest steps, so the heartbeat weighs most) at N=2, with
#      libaccel's heartbeat and --hang_timeout on, against the same without the heartbeat key
#      (env -u ACCEL_HEARTBEAT_KEY) and without hang detection;
#   3. how long after a rank stops (python3-torch gloo, heartbeats) the agent calls the hang,
#      for --hang_timeout 3, over R runs.
#   scripts/bench/watch.sh [--runs R]   (default 5)
#   scripts/bench/watch.sh --quick      (ctest's bench.watch_quick: 5 status samples, 1 round of
#                                        100 steps, 1 hang run)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=5 steps=3000 rounds=5 samples=20
while (($#)); do
  case $1 in
    --quick) runs=1 steps=100 rounds=1 samples=5; shift ;;
    --runs) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "watch.sh: --runs needs a positive integer, not '${2:-}'" >&2; exit 2; }
            runs=$2; shift 2 ;;
    *) echo "watch.sh: unknown argument '$1' (usage: watch.sh [--runs R] [--quick])" >&2; exit 2 ;;
  esac
done
source scripts/bench/support/example_build.sh
scratch=$(mktemp -d)
export XDG_RUNTIME_DIR=$scratch/run
mkdir -m 700 "$XDG_RUNTIME_DIR"
trap 'touch "$scratch/release"; rm -rf "$scratch"' EXIT

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
ms_of() { local s e; s=$(date +%s%N); "$@" >/dev/null; e=$(date +%s%N); echo $(((e - s) / 1000)); }  # µs

# ---- 1. accel status vs ps ----
cat >"$scratch/idle.py" <<'PY'
import os, sys, time
open(f"{sys.argv[1]}/ready.{os.environ['RANK']}", "w").close()
while not os.path.exists(f"{sys.argv[1]}/release"):
    time.sleep(0.05)
PY
"$accel" launch -q --cpu -n 4 --python /usr/bin/python3 "$scratch/idle.py" "$scratch" &
agent=$!
until [[ $(ls "$scratch"/ready.* 2>/dev/null | wc -l) == 4 ]]; do sleep 0.05; done
pids=$(pgrep -P "$agent" -d, python3 || true)
for _ in $(seq "$samples"); do ms_of "$accel" status --json; done | median >"$scratch/status_us"
for _ in $(seq "$samples"); do ms_of ps -o pid,stat,pcpu,rss,etimes -p "$pids"; done | median >"$scratch/ps_us"
touch "$scratch/release"
wait $agent
printf 'accel status (4 ranks): %s µs median of %s; ps for the same ranks: %s µs (%.2fx)\n' \
  "$(cat "$scratch/status_us")" "$samples" "$(cat "$scratch/ps_us")" \
  "$(awk -v a="$(cat "$scratch/status_us")" -v b="$(cat "$scratch/ps_us")" 'BEGIN{print a/b}')"

# ---- 2. heartbeat and hang detection overhead on training ----
train() {  # train [--hang_timeout S] [env -u ACCEL_HEARTBEAT_KEY]: prints samples/s
  local flags=() wrap=()
  [[ $1 == on ]] && flags=(--hang_timeout 300)
  [[ $1 == off ]] && wrap=(env -u ACCEL_HEARTBEAT_KEY)
  "$accel" launch -q --cpu -n 2 --mixed_precision bf16 "${flags[@]}" --no_python "${wrap[@]}" \
    "$example" --model mlp --steps "$steps" --no-shuffle --no-progress --no-eval 2>&1 |
    sed -n 's/.* \([0-9]*\) samples\/s.*/\1/p' | head -1
}
for _ in $(seq "$rounds"); do
  echo "$(train off) $(train on)"
done >"$scratch/train"
printf 'MLP bf16, 2 ranks, %s steps, samples/s (%s rounds, alternating):\n' "$steps" "$rounds"
while read -r off on; do
  printf '  without heartbeat %6s   with heartbeat + --hang_timeout %6s   (%.3fx)\n' "$off" "$on" \
    "$(awk -v a="$on" -v b="$off" 'BEGIN{print a/b}')"
done <"$scratch/train"
off_median=$(cut -d' ' -f1 "$scratch/train" | median)
on_median=$(cut -d' ' -f2 "$scratch/train" | median)
printf '  medians: without %s, with %s (%.3fx)\n' "$off_median" "$on_median" \
  "$(awk -v a="$on_median" -v b="$off_median" 'BEGIN{print a/b}')"

# ---- 3. detection delay ----
cat >"$scratch/hang.py" <<'PY'
import os, sys, time, torch, torch.distributed as dist
dist.init_process_group("gloo")
hb = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False)
t = torch.ones(4)
for step in range(1, 100000):
    hb.add(os.environ["ACCEL_HEARTBEAT_KEY"], 1)
    if dist.get_rank() == 1 and step == 20:
        open(sys.argv[1], "w").write(str(time.time()))
        time.sleep(600)
    dist.all_reduce(t)
PY
for r in $(seq "$runs"); do
  rm -rf "$scratch/logs"
  "$accel" launch -q --cpu -n 2 --python /usr/bin/python3 --hang_timeout 3 --log_dir "$scratch/logs" \
    "$scratch/hang.py" "$scratch/stuck" >/dev/null 2>&1 || true
  /usr/bin/python3 -c "import json,glob,sys; s=json.load(open(glob.glob(sys.argv[1])[0])); print(s['attempts'][0]['hang']['detected_at'] - float(open(sys.argv[2]).read()))" \
    "$scratch/logs/*/summary.json" "$scratch/stuck"
done >"$scratch/delays"
printf 'hang called after the rank stopped, --hang_timeout 3 (%s runs): median %.2f s, max %.2f s (timeout + %.2f s)\n' \
  "$runs" "$(median <"$scratch/delays")" "$(sort -n "$scratch/delays" | tail -1)" \
  "$(awk -v m="$(sort -n "$scratch/delays" | tail -1)" 'BEGIN{print m-3}')"
