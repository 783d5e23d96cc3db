#!/usr/bin/env bash
# What CCL_CHECK_MODE=1 costs: all_reduce_perf at 8 B and 1 MiB with the check off and on, in
# alternating rounds (machines are noisy: compare within a round, report medians and the ratio).
# Usage: perf/check_mode_cost.sh [BUILD_DIR] [NP] [ROUNDS] [extra cclrun args, e.g. -x CCL_SHM_DISABLE=1]
set -euo pipefail
build=${1:-build}
np=${2:-2}
rounds=${3:-5}
shift $(( $# < 3 ? $# : 3 ))
cclrun=$build/tools/cclrun
perf=$build/perf/all_reduce_perf

# The out-of-place time (us) of one size, from all_reduce_perf's table.
time_us() {  # check bytes [cclrun args...]
  local check=$1 bytes=$2
  shift 2
  CCL_CHECK_MODE=$check "$cclrun" -np "$np" "$@" "$perf" -b "$bytes" -e "$bytes" -n 2000 -w 200 \
    -c 0 2>/dev/null | awk -v b="$bytes" '$1 == b { print $6; exit }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

printf "%-8s %12s %12s %8s   (np %s, %s rounds, median us)\n" size check=0 check=1 ratio "$np" "$rounds"
for bytes in 8 1048576; do
  off=() on=()
  for ((r = 0; r < rounds; ++r)); do
    off+=("$(time_us 0 "$bytes" "$@")")
    on+=("$(time_us 1 "$bytes" "$@")")
  done
  m_off=$(printf "%s\n" "${off[@]}" | median)
  m_on=$(printf "%s\n" "${on[@]}" | median)
  printf "%-8s %12s %12s %8.2f\n" "$bytes" "$m_off" "$m_on" "$(echo "$m_on / $m_off" | bc -l)"
done
