#!/usr/bin/env bash
# Launcher start-up and footprint, in one run, against the references on this machine:
#   accel launch -n 4 /bin/true            vs  sh -c starting four /bin/true (the floor: fork,
#                                              exec and wait, nothing else), and mpirun -np 4
#   accel launch -n 2 python3 noop.py      vs  torchrun --standalone --nproc_per_node 2 noop.py
# (torchrun is Debian's torch 1.13 through support/torchrun_fixed.py, see there), plus the
# launchers' peak RSS. Prints hyperfine's table and the ratios (target: accel within 2.5x the
# floor).
#   scripts/bench/launch.sh [--runs N] [--quick]     (ACCEL_BIN=PATH: time that accel instead)
# --quick (ctest's bench.launch_quick): 5 runs of the /bin/true rows only, no torchrun.
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=20
quick=0
while (($#)); do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --quick) quick=1; runs=5; shift ;;
    *) echo "usage: scripts/bench/launch.sh [--runs N] [--quick]" >&2; exit 2 ;;
  esac
done
build=${ACCEL_BUILD_DIR:-build}
[[ "$build" == /* ]] || build=$(pwd)/$build
accel=${ACCEL_BIN:-$build/apps/accel/accel}  # ACCEL_BIN=/usr/bin/accel: an installed one
[[ -x "$accel" ]] || { echo "build first: scripts/build" >&2; exit 1; }
support=$(pwd)/scripts/bench/support
py=/usr/bin/python3
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export HF_HOME=$scratch/hf OMP_NUM_THREADS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

floor="sh -c '/bin/true & /bin/true & /bin/true & /bin/true & wait'"
hyperfine --warmup 3 --runs "$runs" -N --export-json "$scratch/fast.json" \
  --command-name "accel launch -n 4 /bin/true" "$accel launch -n 4 /bin/true" \
  --command-name "accel launch -q -n 4 /bin/true" "$accel launch -q -n 4 /bin/true" \
  --command-name "sh -c: 4 x /bin/true (floor)" "$floor" \
  --command-name "mpirun -np 4 /bin/true" "mpirun --oversubscribe -np 4 /bin/true" >/dev/null
ratio() {
  "$py" - "$scratch/fast.json" <<'PY'
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
floor = r["sh -c: 4 x /bin/true (floor)"]["median"]
for name in ("accel launch -n 4 /bin/true", "accel launch -q -n 4 /bin/true", "sh -c: 4 x /bin/true (floor)", "mpirun -np 4 /bin/true"):
    print(f"{name:40} {r[name]['median']*1e3:8.2f} ms median  {r[name]['median']/floor:6.2f}x the floor")
print(f"accel launch -n 4 /bin/true: {r['accel launch -n 4 /bin/true']['median']/floor:.2f}x the sh -c floor (target <= 2.5x)")
PY
}
if ((quick)); then
  ratio
  exit 0
fi

torchrun=("$py" "$support/torchrun_fixed.py" --standalone --nproc_per_node 2 --redirects 0 "$support/noop.py")
"${torchrun[@]}" >/dev/null 2>&1 || { echo "torchrun reference does not run here" >&2; exit 1; }
hyperfine --warmup 1 --runs "$((runs < 10 ? runs : 10))" -N --export-json "$scratch/py.json" \
  --command-name "accel launch -n 2 python3 noop.py" "$accel launch -n 2 --python $py $support/noop.py" \
  --command-name "torchrun --standalone --nproc_per_node 2 noop.py" "${torchrun[*]}" \
  --command-name "accel launch -n 4 /bin/true (vs torchrun)" "$accel launch -n 4 /bin/true" >/dev/null

# GNU time's %M: the peak RSS of the largest process waited for (time itself is ~2 MiB, so a
# smaller launcher would read as time's own footprint).
peak_mib() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1 | awk '{printf "%.1f", $1 / 1024}'; }
rss_accel=$(peak_mib "$accel" launch -q -n 4 /bin/true)
rss_torchrun=$(peak_mib "${torchrun[@]}")

"$py" - "$scratch/fast.json" "$scratch/py.json" "$rss_accel" "$rss_torchrun" <<'PY'
import json, sys
fast = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
py = {r["command"]: r for r in json.load(open(sys.argv[2]))["results"]}
print(f"{'command':52} {'median':>10} {'min':>9}")
for r in list(fast.values()) + list(py.values()):
    print(f"{r['command']:52} {r['median']*1e3:8.2f}ms {r['min']*1e3:7.2f}ms")
a4 = fast["accel launch -n 4 /bin/true"]["median"]
a4_same_run = py["accel launch -n 4 /bin/true (vs torchrun)"]["median"]
tr = py["torchrun --standalone --nproc_per_node 2 noop.py"]["median"]
apy = py["accel launch -n 2 python3 noop.py"]["median"]
print()
print(f"accel -n 4 /bin/true vs mpirun -np 4 /bin/true:     {fast['mpirun -np 4 /bin/true']['median'] / a4:7.1f}x faster")
print(f"accel -n 4 /bin/true vs torchrun 2 x noop.py:       {tr / a4_same_run:7.1f}x faster  (target >= 100x)")
print(f"accel -n 2 noop.py vs torchrun -n 2 noop.py:        {tr / apy:7.1f}x faster")
print(f"peak RSS: accel agent {sys.argv[3]} MiB (target <= 10), torchrun agent {sys.argv[4]} MiB")
PY
ratio
