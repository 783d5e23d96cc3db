#!/usr/bin/env bash
# What CCL_TRACE_FILE costs: all_reduce_perf at one size (default 8 B, 20000 iterations) with the
# trace off and on, in alternating rounds (machines are noisy: compare within a round, report
# medians). BASE=other_build adds a third column: a build without the trace code, for the
# "off costs nothing" comparison.
# Usage: [BASE=build-old] perf/trace_cost.sh [BUILD_DIR] [NP] [ROUNDS] [BYTES] [cclrun args...]
set -euo pipefail
build=${1:-build}
np=${2:-2}
rounds=${3:-5}
bytes=${4:-8}
shift $(( $# < 4 ? $# : 4 ))
iters=${ITERS:-20000}
out=$(mktemp -d /tmp/ccl_trace_cost_XXXXXX)
trap 'rm -rf "$out"' EXIT

# The out-of-place time (us) of one run: time_us BUILD TRACE_FILE_OR_EMPTY [cclrun args...]
time_us() {
  local dir=$1 file=$2
  shift 2
  env ${file:+CCL_TRACE_FILE=$file} "$dir/tools/cclrun" -np "$np" "$@" "$dir/perf/all_reduce_perf" \
    -b "$bytes" -e "$bytes" -n "$iters" 2>/dev/null |
    awk -v b="$bytes" '$1 == b { print $6; exit }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

off=() on=() base=()
for ((r = 0; r < rounds; ++r)); do
  [[ -n ${BASE:-} ]] && base+=("$(time_us "$BASE" "" "$@")")
  off+=("$(time_us "$build" "" "$@")")
  on+=("$(time_us "$build" "$out/trace.json" "$@")")
  rm -f "$out"/trace.*
done
printf "%s B, np %s, %s iterations, median of %s rounds (us, out of place)\n" "$bytes" "$np" \
  "$iters" "$rounds"
[[ -n ${BASE:-} ]] && printf "  base (%s): %s   [%s]\n" "$BASE" "$(printf "%s\n" "${base[@]}" | median)" "${base[*]}"
printf "  trace off:  %s   [%s]\n" "$(printf "%s\n" "${off[@]}" | median)" "${off[*]}"
printf "  trace on:   %s   [%s]\n" "$(printf "%s\n" "${on[@]}" | median)" "${on[*]}"
