#!/usr/bin/env bash
# ccl-check's verdicts on the namespace cluster (tests/netns/netns_cluster.sh: 4 nodes, one rank
# each, tcp over a bridge), with its default thresholds: RUNS clean runs (each should PASS) and
# RUNS runs with the link between nodes 2 and 3 shaped to RATE (each should name that link,
# CCL-CHECK-201), `ccl-check -b 8 -e 1M -f 4` as the issue ran it. Prints the links each slowed
# run named and the counts. Needs root (network namespaces); about 3 s a run.
#
#   perf/ccl_check_verdicts.sh [BUILD [RUNS [RATE]]]      # defaults: build 20 6400mbit
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${2:-20}
rate=${3:-6400mbit}
cluster() {
  tests/netns/netns_cluster.sh --nodes 4 --ranks-per-node 1 --timeout 150 "$@" -- \
    "$build/tools/ccl-check" -b 8 -e 1M -f 4 2>&1 || true
}
# "2-3 0-3" from rank 0's verdict lines.
links_named() {
  grep -E '^\[0\] netns-node' | grep -o 'slow link netns-node[0-9]-[0-9]*-netns-node[0-9]' |
    sed 's/slow link netns-node\([0-9]\)-[0-9]*-netns-node\([0-9]\)/\1-\2/' | sort -u | tr '\n' ' '
}
clean_failed=0 named=0 alone=0
for i in $(seq 1 "$runs"); do
  out=$(cluster)
  if grep -q "ccl-check: FAIL" <<<"$out"; then
    clean_failed=$((clean_failed + 1))
    echo "clean run $i: $(grep 'FAIL CCL' <<<"$out" | head -2 | tr '\n' ' ')"
  fi
done
for i in $(seq 1 "$runs"); do
  links=$(cluster --slow-link "2-3:$rate" | links_named)
  case " $links" in *" 2-3 "*) named=$((named + 1)) ;; esac
  [ "$links" = "2-3 " ] && alone=$((alone + 1))
  echo "slowed run $i: links named: $links"
done
echo "clean runs failed: $clean_failed of $runs; the slowed link 2-3 named: $named of $runs" \
  "(the only link named: $alone)"
