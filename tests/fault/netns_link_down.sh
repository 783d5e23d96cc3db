#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup runs from a trap
# A network link goes down under a running communicator: two network namespaces (the "nodes" of
# tests/netns/netns_cluster.sh, each joined by a veth pair to a bridge), L ranks of fault_check in
# each running the mixed loop over tcp (or another network transport variant of
# tests/netns/transport_variants.sh: tcp4, ucx); once every rank is up, node 1's veth goes down
# (`ip link set veth1 down`). Every rank, on both sides, must then fail with cclRemoteError or
# cclTimeout within CCL_TIMEOUT (+1 s), and no ccl-* file may be left in /dev/shm.
#
#   netns_link_down.sh [--ranks-per-node L] [--ccl-timeout S] [--variant V --ccl-topo T] FAULT_CHECK
#
# With --variant, the variant's transport is checked first (tests/netns/netns_variant.sh's check:
# ccl-topo --pairs on the same shape must show it between the nodes); without, ccl's default.
# Exit status: 0 passed, 1 failed, 2 bad usage, 77 cannot run here (not root, no `ip netns`, a
# build without the variant's transport).
# The namespaces are netns_cluster.sh's: it removes them on any exit, and so does the trap here
# if it could not (they are named after its pid).
set -u

usage() {
  sed -n '10p' "$0" | sed 's/^# *//' >&2
  exit 2
}
per_node=1
ccl_timeout=5
variant=
topo=
prog=
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks-per-node) [ $# -ge 2 ] || usage; per_node=$2; shift 2 ;;
    --ccl-timeout) [ $# -ge 2 ] || usage; ccl_timeout=$2; shift 2 ;;
    --variant) [ $# -ge 2 ] || usage; variant=$2; shift 2 ;;
    --ccl-topo) [ $# -ge 2 ] || usage; topo=$2; shift 2 ;;
    -*) echo "$0: unknown option '$1'" >&2; usage ;;
    *) [ -z "$prog" ] || usage; prog=$1; shift ;;
  esac
done
[ -x "$prog" ] || { echo "$0: FAULT_CHECK '$prog' is not an executable" >&2; usage; }
case "$per_node" in [1-4]) ;; *) echo "$0: --ranks-per-node must be 1..4" >&2; usage ;; esac
case "$ccl_timeout" in ''|*[!0-9]*|0) echo "$0: --ccl-timeout must be >= 1" >&2; usage ;; esac

skip() {
  echo "SKIP: $*" >&2
  exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"

netns_dir=$(cd "$(dirname "$0")/../netns" && pwd)
cluster=$netns_dir/netns_cluster.sh
if [ -n "$variant" ]; then
  [ -x "$topo" ] || { echo "$0: --variant needs --ccl-topo CCL_TOPO" >&2; usage; }
  # shellcheck source-path=SCRIPTDIR source=../netns/transport_variants.sh
  . "$netns_dir/transport_variants.sh"
  variant_env "$variant" || { echo "$0: --variant must be one of $VARIANTS" >&2; usage; }
  if why=$(variant_missing "$variant" "$topo"); then skip "variant $variant: $why"; fi
  # netns_variant.sh checks the pairs' transport, then runs the cluster as netns_cluster.sh.
  cluster="$netns_dir/netns_variant.sh $variant $topo $cluster"
fi
world=$((2 * per_node))
dir=$(mktemp -d "${TMPDIR:-/tmp}/ccl-link-down.XXXXXX") || exit 2
cluster_pid=
list_shm() { find /dev/shm -maxdepth 1 -name 'ccl-*' -printf '%f\n' 2>/dev/null | sort; }
now_ms() { date +%s%3N; }

cleanup() {
  trap - EXIT INT TERM
  local i ns
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -TERM "$cluster_pid" 2>/dev/null
    # netns_cluster.sh gives its ranks up to 5 s, then deletes its namespaces.
    for ((i = 0; i < 100; ++i)); do
      kill -0 "$cluster_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$cluster_pid" 2>/dev/null
  fi
  if [ -n "$cluster_pid" ]; then
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^cclns${cluster_pid}-"); do
      for i in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$i" 2>/dev/null; done
      ip netns delete "$ns" 2>/dev/null
    done
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

before=$(list_shm)
# shellcheck disable=SC2086  # $cluster is the command and its leading arguments
CCL_TIMEOUT=$ccl_timeout $cluster --nodes 2 --ranks-per-node "$per_node" --timeout 90 -- \
  "$prog" --mode link-down --dir "$dir" --timeout-ms $((ccl_timeout * 1000)) \
  --max-latency-ms 1000 --cap-ms 60000 >"$dir/log" 2>&1 &
cluster_pid=$!

# Every rank up (its ready file), bounded; the cluster script may also stop early (77: skip).
deadline=$(( $(now_ms) + 60000 ))
while [ "$(find "$dir" -name 'ready.*' | wc -l)" -lt "$world" ]; do
  if ! kill -0 "$cluster_pid" 2>/dev/null; then
    wait "$cluster_pid"
    status=$?
    cat "$dir/log"
    [ $status = 77 ] && exit 77
    echo "FAIL: the ranks ended before they were all up (status $status)"
    exit 1
  fi
  [ "$(now_ms)" -lt "$deadline" ] || { cat "$dir/log"; echo "FAIL: the ranks never came up"; exit 1; }
  sleep 0.05
done

# A random moment into the loop; the stamp is written just before the link goes down, so the
# latency the ranks report is, if anything, a little longer than the real one.
sleep "0.$((200 + RANDOM % 700))"
printf '%s\n' "$(now_ms)" >"$dir/stamp.tmp" && mv "$dir/stamp.tmp" "$dir/stamp"
ns="cclns${cluster_pid}-n1"
if ! ip -n "$ns" link set veth1 down; then
  cat "$dir/log"
  echo "FAIL: could not take veth1 down in $ns"
  exit 1
fi
echo "netns_link_down: veth1 of node 1 ($ns) down at $(cat "$dir/stamp")"
wait "$cluster_pid"
status=$?
cluster_pid=
cat "$dir/log"

failed=0
for ((r = 0; r < world; ++r)); do
  if ! grep -q "^\[$r\] SURVIVOR OK rank $r " "$dir/log"; then
    echo "FAIL: rank $r did not report an acceptable error in time"
    failed=1
  fi
done
[ "$status" = 0 ] || { echo "FAIL: netns_cluster.sh exited $status"; failed=1; }
new=$(comm -13 <(echo "$before") <(list_shm))
if [ -n "$new" ]; then
  sleep 0.5
  for f in $new; do
    [ -e "/dev/shm/$f" ] && { echo "FAIL: left in /dev/shm: $f"; failed=1; }
  done
fi
latencies=$(sed -nE 's/^\[[0-9]+\] FAULT .* latency_ms ([0-9-]+) .*/\1/p' "$dir/log" | tr '\n' ' ')
echo "netns_link_down: $world ranks, latencies ms: ${latencies:-none}"
[ "$failed" = 0 ] && echo "PASS"
exit "$failed"
