#!/usr/bin/env bash
# shellcheck disable=SC2317  # the cleanup functions run from traps
# A small "cluster" on one machine: H network namespaces (the nodes), each joined by a veth pair
# to a Linux bridge that lives in its own extra namespace, and H*L ranks of PROGRAM started in
# them with the variables cclCommInitFromEnv reads. Ranks on one node share memory (same
# CCL_HOSTID); ranks on different nodes only see each other through tcp over the bridge.
#
#   netns_cluster.sh --nodes H --ranks-per-node L [--timeout S] [--placement block|cyclic]
#                    [--slow-link A-B:RATE]... [--slow-node K:RATE]... [--expect-killed R]
#                    -- PROGRAM ARGS...
#
# --slow-link A-B:RATE shapes the traffic between nodes A and B (both ways) to RATE (tc's units:
# 200mbit), leaving their other links alone: on the bridge's port toward each of the two, an htb
# qdisc sends the packets from the other one (a u32 match on the source address) through a class
# of that rate, everything else through one of 40gbit (this kernel has htb and tbf, not prio).
# --slow-node K:RATE shapes everything node K sends and receives (a tbf on both ends of its
# veth). This kernel has no netem, so links are slowed by rate, not by delay.
# --expect-killed R: rank R is meant to die of SIGKILL (a fault-injection victim,
# tests/fault/netns_kill.sh): its status 137 does not end the run, the other ranks go on to
# exit by themselves, and the run fails (1) if R exits any other way.
#
# Exit status: 0 every rank passed (--expect-killed R: every other one, and R died of SIGKILL),
# 1 a rank failed (or bad usage: 2), 124 timeout,
# 77 cannot run here (not root, no `ip netns`, namespaces cannot be made).
#
# Nothing in the root namespace is touched: the veth pairs are created inside the bridge's
# namespace and their node ends moved straight into the node namespaces. Every namespace made
# here (and with it every link) is removed on any exit, including SIGINT and SIGTERM.
set -u

usage() {
  echo "usage: $0 --nodes H --ranks-per-node L [--timeout S] [--placement block|cyclic]" \
    "[--slow-link A-B:RATE]... [--slow-node K:RATE]... [--expect-killed R] -- PROGRAM ARGS..." >&2
  exit 2
}

nodes=0
per_node=0
timeout_s=300
placement=block
slow_links=()
slow_nodes=()
expect_killed=-1
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes) [ $# -ge 2 ] || usage; nodes=$2; shift 2 ;;
    --ranks-per-node) [ $# -ge 2 ] || usage; per_node=$2; shift 2 ;;
    --timeout) [ $# -ge 2 ] || usage; timeout_s=$2; shift 2 ;;
    --placement) [ $# -ge 2 ] || usage; placement=$2; shift 2 ;;
    --slow-link) [ $# -ge 2 ] || usage; slow_links+=("$2"); shift 2 ;;
    --slow-node) [ $# -ge 2 ] || usage; slow_nodes+=("$2"); shift 2 ;;
    --expect-killed) [ $# -ge 2 ] || usage; expect_killed=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "$0: unknown option '$1'" >&2; usage ;;
  esac
done
[ $# -ge 1 ] || { echo "$0: PROGRAM is missing" >&2; usage; }
case "$nodes" in 2|3|4) ;; *) echo "$0: --nodes must be 2..4" >&2; usage ;; esac
case "$per_node" in [1-9]|1[0-6]) ;; *) echo "$0: --ranks-per-node must be 1..16" >&2; usage ;; esac
case "$timeout_s" in ''|*[!0-9]*|0) echo "$0: --timeout must be a whole number > 0" >&2; usage ;; esac
case "$placement" in block|cyclic) ;; *) echo "$0: --placement must be block or cyclic" >&2; usage ;; esac
case "$expect_killed" in -1|[0-9]|[1-5][0-9]|6[0-3]) ;;
  *) echo "$0: --expect-killed wants a rank" >&2; usage ;; esac
[ "$expect_killed" -lt $((nodes * per_node)) ] ||
  { echo "$0: --expect-killed $expect_killed is not a rank" >&2; usage; }
for spec in "${slow_links[@]}"; do
  [[ "$spec" =~ ^[0-3]-[0-3]:[0-9]+[kmg]?bit$ ]] ||
    { echo "$0: --slow-link wants A-B:RATE (0-2:200mbit), not '$spec'" >&2; usage; }
done
for spec in "${slow_nodes[@]}"; do
  [[ "$spec" =~ ^[0-3]:[0-9]+[kmg]?bit$ ]] ||
    { echo "$0: --slow-node wants K:RATE (1:200mbit), not '$spec'" >&2; usage; }
done

skip() {
  echo "SKIP: $*" >&2
  exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"

# Unique per run, so parallel runs (and a leftover of a killed one) never collide.
tag="cclns$$"
bridge_ns="${tag}-br"
node_ns=()
made_ns=()
rank_pids=()
# A private 10.x.y.0/24 per run. Each run has its own bridge namespace, so even equal ranges
# would not meet; distinct ones just make logs of parallel runs easier to tell apart.
net="10.$(( ($$ >> 8) % 250 + 1 )).$(( $$ % 256 ))"
port=$(( 20000 + RANDOM % 20000 ))
secret=$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')

# Kills whatever still runs inside our namespaces (ranks and anything they started).
kill_namespaces() {
  local sig=$1 ns pid
  for ns in "${made_ns[@]}"; do
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill "-$sig" "$pid" 2>/dev/null; done
  done
}

cleanup() {
  trap - EXIT INT TERM HUP
  local pid i ns
  for pid in "${rank_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  kill_namespaces TERM
  # Up to 5 s for the ranks to go, then SIGKILL.
  for ((i = 0; i < 50; ++i)); do
    local alive=0
    for ns in "${made_ns[@]}"; do
      [ -n "$(ip netns pids "$ns" 2>/dev/null)" ] && alive=1
    done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  kill_namespaces KILL
  for ns in "${made_ns[@]}"; do ip netns delete "$ns" 2>/dev/null; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

add_ns() {
  local err
  err=$(ip netns add "$1" 2>&1) || { echo "$err" >&2; return 1; }
  made_ns+=("$1")
  ip -n "$1" link set lo up
}

add_ns "$bridge_ns" || skip "cannot create a network namespace"
ip -n "$bridge_ns" link add br0 type bridge || skip "cannot create a bridge"
ip -n "$bridge_ns" link set br0 up || exit 1
for ((k = 0; k < nodes; ++k)); do
  ns="${tag}-n$k"
  add_ns "$ns" || exit 1
  node_ns+=("$ns")
  # Created in the bridge's namespace, the node end moved straight into the node's.
  ip -n "$bridge_ns" link add "vb$k" type veth peer name "veth$k" netns "$ns" ||
    skip "cannot create a veth pair"
  ip -n "$bridge_ns" link set "vb$k" master br0 up || exit 1
  ip -n "$ns" addr add "$net.$((k + 1))/24" dev "veth$k" || exit 1
  ip -n "$ns" link set "veth$k" up || exit 1
done

# Wait (bounded) for the links to come up: a rank connecting before that would fail for the
# wrong reason.
for ((k = 0; k < nodes; ++k)); do
  for ((i = 0; i < 50; ++i)); do
    ip -n "${node_ns[$k]}" -br link show "veth$k" | grep -q "LOWER_UP" && break
    sleep 0.1
  done
done

# The injected faults. A tbf's burst must hold a few full-size packets; its latency bounds the
# queue (packets beyond it are dropped, and tcp slows down to the rate).
shape() {  # shape NS DEV RATE [PARENT]
  ip netns exec "$1" tc qdisc add dev "$2" ${4:+parent "$4"} ${4:-root} tbf rate "$3" \
    burst 64kb latency 100ms
}
for spec in "${slow_links[@]}"; do
  pair=${spec%%:*}; rate=${spec#*:}; a=${pair%-*}; b=${pair#*-}
  { [ "$a" -lt "$nodes" ] && [ "$b" -lt "$nodes" ] && [ "$a" != "$b" ]; } ||
    { echo "$0: --slow-link $spec: no such pair of nodes" >&2; exit 2; }
  for end in "$a:$b" "$b:$a"; do
    to=${end%:*}; from=${end#*:}
    tcb() { ip netns exec "$bridge_ns" tc "$@" 2>/dev/null; }  # quiet: htb warns of quanta
    tcb qdisc add dev "vb$to" root handle 1: htb default 10 r2q 1000 &&
      tcb class add dev "vb$to" parent 1: classid 1:10 htb rate 40gbit &&
      tcb class add dev "vb$to" parent 1: classid 1:20 htb rate "$rate" &&
      tcb filter add dev "vb$to" parent 1: protocol ip prio 1 u32 \
        match ip src "$net.$((from + 1))/32" flowid 1:20 ||
      { echo "$0: cannot shape vb$to with tc (htb, u32)" >&2; exit 1; }
  done
  echo "netns_cluster: slowed the link between nodes $a and $b to $rate" >&2
done
for spec in "${slow_nodes[@]}"; do
  k=${spec%%:*}; rate=${spec#*:}
  [ "$k" -lt "$nodes" ] || { echo "$0: --slow-node $spec: no such node" >&2; exit 2; }
  shape "$bridge_ns" "vb$k" "$rate" || exit 1
  shape "${node_ns[$k]}" "veth$k" "$rate" || exit 1
  echo "netns_cluster: slowed every link of node $k to $rate" >&2
done

world=$((nodes * per_node))
root_addr="$net.1"
echo "netns_cluster: $nodes nodes x $per_node ranks ($placement), rendezvous $root_addr:$port" >&2
for ((r = 0; r < world; ++r)); do
  if [ "$placement" = block ]; then
    k=$((r / per_node)); local_rank=$((r % per_node))
  else
    k=$((r % nodes)); local_rank=$((r / nodes))
  fi
  # A subshell per rank: its status is the program's (pipefail; sed exits 0), its output goes
  # through sed for the "[r] " prefix.
  (
    set -o pipefail
    ip netns exec "${node_ns[$k]}" env -u CCL_BOOTSTRAP_LISTEN_FD \
      CCL_COMM_ID="$root_addr:$port" CCL_COMM_SECRET="$secret" \
      CCL_RANK=$r CCL_WORLD_SIZE=$world CCL_LOCAL_RANK=$local_rank CCL_LOCAL_SIZE="$per_node" \
      CCL_HOSTID="netns-node$k-$$" CCL_SOCKET_IFNAME="veth$k" \
      "$@" 2>&1 </dev/null | sed -u "s/^/[$r] /"
  ) &
  rank_pids+=($!)
done

# Poll every 0.1 s until every rank has exited, one fails, or the time is up.
remaining=$world
declare -A done_rank=()
deadline=$((SECONDS + timeout_s))
while [ $remaining -gt 0 ]; do
  if [ $SECONDS -ge $deadline ]; then
    echo "netns_cluster: timeout after $timeout_s s; killing all ranks" >&2
    exit 124
  fi
  for ((r = 0; r < world; ++r)); do
    [ -n "${done_rank[$r]:-}" ] && continue
    kill -0 "${rank_pids[$r]}" 2>/dev/null && continue
    wait "${rank_pids[$r]}"
    rc=$?
    done_rank[$r]=1
    remaining=$((remaining - 1))
    if [ "$r" = "$expect_killed" ]; then
      if [ $rc -eq 137 ]; then
        echo "netns_cluster: rank $r was killed by SIGKILL, as expected" >&2
        continue
      fi
      echo "netns_cluster: rank $r, expected to be killed, exited with status $rc;" \
        "killing the others" >&2
      exit 1
    fi
    if [ $rc -ne 0 ]; then
      echo "netns_cluster: rank $r exited with status $rc; killing the others" >&2
      exit 1
    fi
  done
  sleep 0.1
done
if [ "$expect_killed" -ge 0 ]; then
  echo "netns_cluster: all $((world - 1)) other ranks passed" >&2
else
  echo "netns_cluster: all $world ranks passed" >&2
fi
exit 0
