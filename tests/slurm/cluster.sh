#!/usr/bin/env bash
# The tests' SLURM cluster: two nodes (n1, n2) on this machine, munge authentication with a
# key of its own. Everything lives in DIR; nothing outside it is written.
#   cluster.sh start DIR   munged, slurmctld, slurmd -N n1, slurmd -N n2; returns once both
#                          nodes are idle and DIR/env holds `export SLURM_CONF=...`
#   cluster.sh stop DIR    stops every daemon start started (by their pid files)
# Exits 77 with the reason when the cluster cannot be had here (not root, SLURM not installed).
set -euo pipefail
cmd=${1:?usage: cluster.sh start|stop DIR}
D=${2:?usage: cluster.sh start|stop DIR}
HERE=$(cd "$(dirname "$0")" && pwd)

stop() {
  local f pid i
  for f in "$D"/run/slurmd-*.pid "$D"/run/slurmctld.pid "$D"/munge/munged.pid; do
    [[ -f $f ]] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  rm -f "$D/env"
}

# daemons_listen CTLD P0 P1: until slurmctld listens on CTLD and a slurmd on P0 and on P1 (true),
# or one of the daemons is gone without its port (false; at most 10 s).
daemons_listen() {
  local i
  for i in $(seq 1 100); do
    ss -ltnpH "sport = :$1" | grep -q '"slurmctld"' && ss -ltnpH "sport = :$2" | grep -q '"slurmd"' &&
      ss -ltnpH "sport = :$3" | grep -q '"slurmd"' && return 0
    sleep 0.1
  done
  return 1
}

case $cmd in
stop) stop; echo "slurm test cluster in $D stopped" ;;
start)
  skip() { echo "SKIPPED: $*"; exit 77; }
  [[ $(id -u) == 0 ]] || skip "the test cluster runs slurmd as root"
  for bin in munged slurmctld slurmd srun sbatch sinfo; do
    command -v "$bin" >/dev/null || PATH=$PATH:/usr/sbin command -v "$bin" >/dev/null || skip "$bin not installed (scripts/setup.sh installs slurm-wlm and munge)"
  done
  export PATH=$PATH:/usr/sbin
  stop  # leftovers of an interrupted run
  rm -rf "$D"
  mkdir -p "$D"/{spool,log,run,munge}
  trap 'echo "slurm did not start; logs in $D/log and $D/munge" >&2; stop' ERR

  # munge with a key of the test's own (root runs it, hence --force).
  head -c 1024 /dev/urandom >"$D/munge/munge.key"
  chmod 400 "$D/munge/munge.key"
  munged --force --socket="$D/munge/munge.socket" --pid-file="$D/munge/munged.pid" \
    --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" --key-file="$D/munge/munge.key"

  # Three ports (slurmctld's, one per slurmd) that the daemons themselves bind and keep: random
  # tries, each checked by who listens there; a port someone else holds makes its daemon fail,
  # and the next try takes other ports (none is picked by binding and closing).
  cp "$HERE/cgroup.conf" "$D/cgroup.conf"
  export SLURM_CONF=$D/slurm.conf
  for try in $(seq 1 10); do
    # 30000-49999: clear of the ports accel gives SLURM jobs (20000 + job id mod 10000).
    ctld=$((30000 + RANDOM % 20000)) p0=$((30000 + RANDOM % 20000)) p1=$((30000 + RANDOM % 20000))
    [[ $ctld != "$p0" && $ctld != "$p1" && $p0 != "$p1" ]] || continue
    sed -e "s|@DIR@|$D|g" -e "s|@HOST@|$(hostname -s)|g" -e "s|@CTLD_PORT@|$ctld|g" \
        -e "s|@SLURMD_PORT0@|$p0|g" -e "s|@SLURMD_PORT1@|$p1|g" -e "s|@CPUS@|${CPUS_PER_NODE:-2}|g" \
        "$HERE/slurm.conf.in" >"$D/slurm.conf"
    slurmctld -f "$SLURM_CONF" || true
    slurmd -N n1 -f "$SLURM_CONF" || true
    slurmd -N n2 -f "$SLURM_CONF" || true
    if daemons_listen "$ctld" "$p0" "$p1"; then break; fi
    echo "slurm ports $ctld $p0 $p1: a daemon did not get its port; trying others" >&2
    for f in "$D"/run/slurmd-*.pid "$D"/run/slurmctld.pid; do
      [[ -f $f ]] && { kill -KILL "$(cat "$f")" 2>/dev/null || true; }
      rm -f "$f"
    done
  done
  for _ in $(seq 1 120); do
    if [[ $(sinfo -h -N -o '%T' 2>/dev/null | grep -cx idle) == 2 ]]; then
      echo "export SLURM_CONF=$SLURM_CONF" >"$D/env"
      echo "slurm test cluster up in $D: $(sinfo -h -N -o '%N %T' | paste -sd' ')"
      exit 0
    fi
    sleep 0.25
  done
  echo "nodes never became idle: $(sinfo -h -N -o '%N %T' 2>&1 | paste -sd' ')" >&2
  false ;;
*) echo "usage: cluster.sh start|stop DIR" >&2; exit 2 ;;
esac
