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
