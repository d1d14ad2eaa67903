# etcd_start DIR PORT [ETCD ARGS...]: one etcd member (Debian's etcd-server) on loopback, its data
# in DIR/data and its log in DIR/etcd.log, client port PORT and peer port PORT+1; a pair taken
# makes etcd exit saying so, and the next pair is tried (no port is bound and closed to find a
# free one). ETCD_SCHEME=https: clients speak https (give the certificate flags). Sets ETCD_PID and ETCD_ENDPOINT (127.0.0.1:PORT); returns 1 with the log's last lines
# on stderr when no member started. For tests/e2e/etcd.sh and scripts/bench/*.sh.
etcd_start() {
  local dir=$1 port=$2 _i
  shift 2
  for _i in $(seq 1 20); do
    rm -rf "$dir/data"
    etcd --data-dir "$dir/data" --listen-client-urls "${ETCD_SCHEME:-http}://127.0.0.1:$port" \
      --advertise-client-urls "${ETCD_SCHEME:-http}://127.0.0.1:$port" \
      --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
      --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
      --initial-cluster "default=http://127.0.0.1:$((port + 1))" "$@" >"$dir/etcd.log" 2>&1 &
    ETCD_PID=$!
    for _ in $(seq 1 300); do
      grep -q "ready to serve client requests" "$dir/etcd.log" && break
      kill -0 "$ETCD_PID" 2>/dev/null || break
      sleep 0.05
    done
    if grep -q "ready to serve client requests" "$dir/etcd.log"; then
      ETCD_ENDPOINT=127.0.0.1:$port
      return 0
    fi
    kill -KILL "$ETCD_PID" 2>/dev/null || true
    grep -q "address already in use" "$dir/etcd.log" || { tail -5 "$dir/etcd.log" >&2; return 1; }
    port=$((port + 2))
  done
  echo "no free pair of ports for etcd from $2" >&2
  return 1
}

# etcd_cluster_member DIR M LOG: member M of a three-member cluster on loopback (client port
# ETCD_BASE + 2M, peer port + 1) in the background, its data in DIR/etcdM (kept when it is killed,
# so that it rejoins when started again), its log in DIR/LOG, its pid in ETCD_MEMBER_PIDS[M].
etcd_cluster_member() {
  local dir=$1 m=$2 cluster="" k
  for k in 0 1 2; do cluster+="${cluster:+,}m$k=http://127.0.0.1:$((ETCD_BASE + 2 * k + 1))"; done
  etcd --name "m$m" --data-dir "$dir/etcd$m" \
    --listen-client-urls "http://127.0.0.1:$((ETCD_BASE + 2 * m))" \
    --advertise-client-urls "http://127.0.0.1:$((ETCD_BASE + 2 * m))" \
    --listen-peer-urls "http://127.0.0.1:$((ETCD_BASE + 2 * m + 1))" \
    --initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_BASE + 2 * m + 1))" \
    --initial-cluster "$cluster" --initial-cluster-token "accel-$$" >"$dir/$3" 2>&1 &
  ETCD_MEMBER_PIDS[$m]=$!
}

# etcd_cluster_start DIR BASE: three members on loopback from port BASE (the next six ports; the
# next six after those when one is taken, ten times). Sets ETCD_CLUSTER (their endpoints),
# ETCD_MEMBER_PIDS and ETCD_BASE; returns 1 with the first log's last lines on stderr when none
# formed.
etcd_cluster_start() {
  local dir=$1 i m ok _
  ETCD_BASE=$2
  for _ in $(seq 1 10); do
    ETCD_MEMBER_PIDS=()
    for m in 0 1 2; do
      rm -rf "$dir/etcd$m"
      etcd_cluster_member "$dir" $m "etcd$m.log"
    done
    for i in $(seq 1 400); do
      ok=1
      for m in 0 1 2; do grep -q "ready to serve client requests" "$dir/etcd$m.log" || ok=0; done
      ((ok)) && break
      grep -q "address already in use" "$dir"/etcd?.log && break
      sleep 0.05
    done
    if ((ok)); then
      ETCD_CLUSTER="127.0.0.1:$ETCD_BASE,127.0.0.1:$((ETCD_BASE + 2)),127.0.0.1:$((ETCD_BASE + 4))"
      return 0
    fi
    kill -KILL "${ETCD_MEMBER_PIDS[@]}" 2>/dev/null || true
    wait "${ETCD_MEMBER_PIDS[@]}" 2>/dev/null || true
    grep -q "address already in use" "$dir"/etcd?.log || { tail -3 "$dir/etcd0.log" >&2; return 1; }
    ETCD_BASE=$((ETCD_BASE + 6))
  done
  echo "no free ports for three etcd members from $2" >&2
  return 1
}
