# shellcheck shell=bash
# The network transport variants of the netns tests, sourced by netns_variant.sh and
# tests/fault/netns_kill.sh (perf/net/net_bench.py has the same table in Python):
#
#   tcp   CCL_NET=tcp, one socket per peer (ccl's default)
#   tcp4  CCL_NET=tcp CCL_NSOCKS_PERTHREAD=2 CCL_SOCKET_NTHREADS=2: 4 sockets per peer
#   ucx   CCL_NET=ucx UCX_TLS=tcp, UCX_NET_DEVICES unset: UCX over its tcp transport, the only
#         one that works across network namespaces (each rank's `ip netns exec` gives it the
#         namespace's own /sys, where UCX finds the namespace's veth)
#
# CCL_NET is set for tcp as well, so that a build whose default would pick another transport
# still tests the one named.

# shellcheck disable=SC2034  # used by the scripts that source this one
VARIANTS="tcp tcp4 ucx"

# variant_env NAME: exports NAME's environment (and unsets what would change it); 1 if unknown.
variant_env() {
  unset CCL_NSOCKS_PERTHREAD CCL_SOCKET_NTHREADS
  case "$1" in
    tcp) export CCL_NET=tcp ;;
    tcp4) export CCL_NET=tcp CCL_NSOCKS_PERTHREAD=2 CCL_SOCKET_NTHREADS=2 ;;
    ucx) export CCL_NET=ucx UCX_TLS=tcp; unset UCX_NET_DEVICES ;;
    *) return 1 ;;
  esac
}

# variant_transport NAME: the transport name (cclCommPeerTransport, ccl-topo --pairs) the pairs
# on different nodes must show.
variant_transport() {
  case "$1" in
    tcp|tcp4) echo tcp ;;
    ucx) echo ucx ;;
    *) return 1 ;;
  esac
}

# variant_missing NAME CCL_TOPO: after variant_env NAME, prints why this build cannot run NAME
# and returns 0; returns 1 when it can (or may: any other init failure is left to the test, which
# then fails with it). The only reason taken is the build's own: `ccl-topo --net` saying "Init
# would fail: CCL_NET asks for ucx, which this build of ccl does not have ...".
variant_missing() {
  local out
  [ "$1" = ucx ] || return 1
  out=$("$2" --net 2>&1)
  if grep -q "does not have" <<<"$out"; then
    grep -m1 "does not have" <<<"$out" | sed 's/^Init would fail: //'
    return 0
  fi
  return 1
}
