#!/usr/bin/env bash
# Runs a netns test over one network transport variant (transport_variants.sh: tcp, tcp4, ucx):
#
#   netns_variant.sh VARIANT CCL_TOPO NETNS_CLUSTER [CLUSTER OPTIONS] -- PROGRAM ARGS...
#
# With the variant's environment exported, it first runs `CCL_TOPO --pairs` on a cluster of the
# same shape and checks its matrix: every pair on one node must show shm, every pair across nodes
# the variant's transport (a test that passed over tcp when ucx was asked for would prove
# nothing). Then it runs PROGRAM on a fresh cluster of that shape (NETNS_CLUSTER's exit status).
#
# Exit status: NETNS_CLUSTER's (0 passed, 1 a rank failed, 124 timeout), 1 when the matrix is
# wrong, 2 bad usage, 77 when the build lacks the variant's transport (CCL_NET=ucx in a build
# without UCX) or NETNS_CLUSTER cannot run here.
set -u

usage() {
  sed -n '4p' "$0" | sed 's/^# *//' >&2
  exit 2
}
[ $# -ge 5 ] || usage
variant=$1 topo=$2 cluster=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=transport_variants.sh
. "$here/transport_variants.sh"
variant_env "$variant" || { echo "$0: unknown variant '$variant' (not one of $VARIANTS)" >&2; usage; }
[ -x "$topo" ] || { echo "$0: CCL_TOPO '$topo' is not an executable" >&2; usage; }

opts=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
[ $# -ge 2 ] || { echo "$0: -- PROGRAM is missing" >&2; usage; }
shift
nodes=0 per_node=0 placement=block
for ((i = 0; i < ${#opts[@]}; ++i)); do
  case "${opts[$i]}" in
    --nodes) nodes=${opts[$((i + 1))]:-0} ;;
    --ranks-per-node) per_node=${opts[$((i + 1))]:-0} ;;
    --placement) placement=${opts[$((i + 1))]:-block} ;;
  esac
done
case "$nodes$per_node" in *[!0-9]*|0*) echo "$0: --nodes and --ranks-per-node are needed" >&2; usage ;; esac

if why=$(variant_missing "$variant" "$topo"); then
  echo "SKIP: variant $variant: $why" >&2
  exit 77
fi
want=$(variant_transport "$variant")
env | grep -E '^(CCL_NET|CCL_NSOCKS_PERTHREAD|CCL_SOCKET_NTHREADS|UCX_[A-Z_]+)=' | sort |
  tr '\n' ' ' | sed "s/^/netns_variant: $variant: /; s/ \$/\n/" >&2

# The node of rank r, as netns_cluster.sh places it.
node_of() {
  if [ "$placement" = block ]; then echo $(($1 / per_node)); else echo $(($1 % nodes)); fi
}

# The transport matrix, on a cluster of its own (a fraction of a second).
out=$("$cluster" "${opts[@]}" -- "$topo" --pairs 2>&1)
status=$?
if [ $status != 0 ]; then
  echo "$out"
  [ $status = 77 ] && exit 77
  echo "FAIL: ccl-topo --pairs over variant $variant exited $status"
  exit 1
fi
world=$((nodes * per_node))
bad=0 rows=0
while read -r r cells; do
  rows=$((rows + 1))
  read -ra cell <<<"$cells"
  for ((p = 0; p < world; ++p)); do
    [ "$p" = "$r" ] && continue
    if [ "$(node_of "$r")" = "$(node_of "$p")" ]; then expect=shm; else expect=$want; fi
    if [ "${cell[$p]:-}" != "$expect" ]; then
      echo "FAIL: ranks $r and $p chose '${cell[$p]:-}', expected $expect (variant $variant)"
      bad=1
    fi
  done
done < <(grep -E '^\[0\] +[0-9]+ .* -( |$)' <<<"$out" |
           sed -nE 's/^\[0\] +([0-9]+( +[-a-z0-9?]+)+) *$/\1/p')  # the rows, not the header
if [ "$bad" != 0 ] || [ "$rows" != "$world" ]; then
  echo "$out"
  [ "$rows" = "$world" ] || echo "FAIL: ccl-topo --pairs printed $rows rows, expected $world"
  exit 1
fi
echo "netns_variant: $variant: every pair across nodes over $want, within a node over shm" >&2

exec "$cluster" "${opts[@]}" -- "$@"
