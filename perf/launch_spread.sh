#!/usr/bin/env bash
# Launch after launch: does the same command give the same figure? Runs `make run`'s command
# (cclrun -np NP all_reduce_perf -b 8 -e 64M -f 2 -c 1) LAUNCHES times and prints, per launch,
# the out-of-place and in-place time at SIZE bytes, their ratio, the tuner's choice at that size
# (rank 0's COLL log) and where its figures came from (a probe, or the tuner cache). The tuner
# cache is whatever CCL_TUNER_CACHE says (default ~/.cache/ccl); --fresh first removes that
# launch's entry by giving the launches a new, empty cache folder.
#
#   perf/launch_spread.sh [--fresh] [BUILD [NP [LAUNCHES [SIZE]]]]
#   perf/launch_spread.sh --fresh build 2 10 1048576
set -euo pipefail
fresh=0
if [ "${1:-}" = --fresh ]; then
  fresh=1
  shift
fi
build=${1:-build}
np=${2:-2}
launches=${3:-10}
size=${4:-1048576}
if [ "$fresh" = 1 ]; then
  CCL_TUNER_CACHE=$(mktemp -d /tmp/ccl-tuner-cache-XXXXXX)
  export CCL_TUNER_CACHE
fi
out=$(mktemp)
trap 'rm -f "$out"; [ "$fresh" = 1 ] && rm -rf "$CCL_TUNER_CACHE"' EXIT
echo "| launch | out of place us | in place us | ratio | choice at $size B | figures |"
echo "|---:|---:|---:|---:|---|---|"
for i in $(seq 1 "$launches"); do
  "$build/tools/cclrun" -np "$np" -x CCL_DEBUG=INFO -x CCL_DEBUG_SUBSYS=TUNE,COLL \
    "$build/perf/all_reduce_perf" -b 8 -e 64M -f 2 -c 1 >"$out" 2>&1 ||
    { cat "$out"; exit 1; }
  row=$(awk -v s="$size" '$1 == s && $3 == "float" {printf "%s | %s | %.2f", $6, $10, $6 / $10}' "$out")
  choice=$(grep -m1 "CCL INFO allreduce $size B: " "$out" | sed 's/.*B: //; s/ (next best)//')
  source=$(grep -m1 "\[0\] CCL INFO rank 0: link figures" "$out" | sed 's/.*figures (//; s/):$//')
  case "$source" in
    probed*kept*) source="probed, kept" ;;
    probed*) source="probed" ;;
    *from*) source="tuner cache" ;;
  esac
  echo "| $i | $row | $choice | $source |"
done
