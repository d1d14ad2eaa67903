# Two "hosts" on one machine: network namespaces joined by a veth pair, no other route.
# Sourced by tests/e2e/netns.sh and scripts/bench/multinode.sh. Needs root.
#   netns_up TAG     removes namespaces left by killed runs (TAG ends in the run's pid), creates accA-TAG (10.200.0.1 on vaTAG) and accB-TAG (10.200.0.2 on vbTAG);
#                    sets NA NB VA VB A B
#   netns_down       kills what runs inside them and deletes them (safe to call twice)
#   netns3_up TAG    three hosts on a bridge brTAG: acc1-TAG, acc2-TAG, acc3-TAG at 10.201.0.1-3
#                    (interface vNTAG in each); sets NS3 (the namespaces) and ADDR3
#   netns3_down      kills what runs inside them, deletes them and the bridge (safe to call twice)
netns_up() {
  local tag=$1 ns pid
  # Namespaces of runs that were killed before their cleanup (the tag ends in the run's pid).
  for ns in $(ip netns list 2>/dev/null | grep -oE '^acc[AB]-[a-z]*[0-9]+'); do
    pid=$(grep -oE '[0-9]+$' <<<"$ns")
    kill -0 "$pid" 2>/dev/null && continue
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  NA=accA-$tag NB=accB-$tag VA=va$tag VB=vb$tag A=10.200.0.1 B=10.200.0.2
  ip netns add "$NA" || return 1
  ip netns add "$NB"
  ip link add "$VA" type veth peer name "$VB"
  ip link set "$VA" netns "$NA"
  ip link set "$VB" netns "$NB"
  ip -n "$NA" addr add $A/24 dev "$VA"
  ip -n "$NB" addr add $B/24 dev "$VB"
  for ns in "$NA" "$NB"; do ip -n "$ns" link set lo up; done
  ip -n "$NA" link set "$VA" up
  ip -n "$NB" link set "$VB" up
}
# netns_hosts NS LINE...: NS's own /etc/hosts (ip netns exec mounts /etc/netns/NS/hosts over it).
netns_hosts() {
  local ns=$1; shift
  mkdir -p "/etc/netns/$ns"
  printf '%s\n' "127.0.0.1 localhost" "$@" >"/etc/netns/$ns/hosts"
}
netns_down() {
  local ns
  for ns in "${NA:-}" "${NB:-}"; do
    [[ -n $ns ]] || continue
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  [[ -n ${VA:-} ]] && ip link del "$VA" 2>/dev/null || true   # only if it never moved into a namespace
}

netns3_up() {
  local tag=$1 i ns
  for ns in $(ip netns list 2>/dev/null | grep -oE '^acc[123]-[0-9]+'); do  # killed runs' leftovers
    kill -0 "${ns#*-}" 2>/dev/null && continue
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    ip link del "br${ns#*-}" 2>/dev/null || true
  done
  BR3=br$tag NS3=() ADDR3=()
  ip link add "$BR3" type bridge || return 1
  ip link set "$BR3" up
  for i in 1 2 3; do
    ns=acc$i-$tag
    ip netns add "$ns"
    ip link add "v$i$tag" type veth peer name "p$i$tag"
    ip link set "v$i$tag" netns "$ns"
    ip link set "p$i$tag" master "$BR3"
    ip link set "p$i$tag" up
    ip -n "$ns" addr add "10.201.0.$i/24" dev "v$i$tag"
    ip -n "$ns" link set lo up
    ip -n "$ns" link set "v$i$tag" up
    NS3+=("$ns") ADDR3+=("10.201.0.$i")
  done
}
netns3_down() {
  local ns
  for ns in "${NS3[@]}"; do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
    rm -rf "/etc/netns/$ns"
  done
  [[ -n ${BR3:-} ]] && ip link del "$BR3" 2>/dev/null || true
}
