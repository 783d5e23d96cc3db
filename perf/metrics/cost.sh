#!/usr/bin/env bash
# What CCL_METRICS_FILE costs: all_reduce_perf at one size (default 8 B: latency, where a per-
# operation cost shows most; 20000 iterations) with the metrics off and on (rewritten every
# second, the shortest interval), in alternating rounds (machines are noisy: compare within a
# round). Prints each round's on/off ratio, then the median, best and worst ratio and the median
# times. BASE=other_build adds a third column: a build without the metrics code, for the "off is a
# null test" comparison. docs/metrics.md quotes its results.
# Usage: [BASE=build-old] [ITERS=20000] perf/metrics_cost.sh [BUILD_DIR] [NP] [ROUNDS] [BYTES]
#        [cclrun args...]
set -euo pipefail
build=${1:-build}
np=${2:-2}
rounds=${3:-7}
bytes=${4:-8}
shift $(($# < 4 ? $# : 4))
iters=${ITERS:-20000}
out=$(mktemp -d /tmp/ccl_metrics_cost_XXXXXX)
trap 'rm -rf "$out"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
lib=$(cd "$build/src" && pwd)

echo "== 1 rank, in one process (op_overhead.cc)"
${CXX:-g++} -std=c++20 -O2 -I"$src/include" "$here/op_overhead.cc" -L"$lib" -lccl \
  -Wl,-rpath,"$lib" -o "$out/op_overhead"
CCL_METRICS_INTERVAL=1 "$out/op_overhead" "$out/overhead.prom" "$rounds"
rm -f "$out"/overhead*

echo "== all_reduce_perf -b $bytes -e $bytes -n $iters under cclrun -np $np"

# The out-of-place time (us) of one run: time_us BUILD METRICS_FILE_OR_EMPTY [cclrun args...]
time_us() {
  local dir=$1 file=$2
  shift 2
  env ${file:+CCL_METRICS_FILE=$file CCL_METRICS_INTERVAL=1} "$dir/tools/cclrun" -np "$np" "$@" \
    "$dir/perf/all_reduce_perf" -b "$bytes" -e "$bytes" -n "$iters" 2>/dev/null |
    awk -v b="$bytes" '$1 == b { print $6; exit }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

off=() on=() base=() ratios=()
for ((r = 0; r < rounds; ++r)); do
  [[ -n ${BASE:-} ]] && base+=("$(time_us "$BASE" "" "$@")")
  # Alternate which goes first, so that drift within a round hits both alike.
  if ((r % 2 == 0)); then
    off+=("$(time_us "$build" "" "$@")")
    on+=("$(time_us "$build" "$out/ccl.prom" "$@")")
  else
    on+=("$(time_us "$build" "$out/ccl.prom" "$@")")
    off+=("$(time_us "$build" "" "$@")")
  fi
  ratios+=("$(awk -v a="${on[r]}" -v b="${off[r]}" 'BEGIN { printf "%.3f", a / b }')")
  printf "round %d: off %s us, on %s us, on/off %s\n" "$r" "${off[r]}" "${on[r]}" "${ratios[r]}"
done
[[ -s $out/ccl.0.prom ]] || { echo "no metrics file was written" >&2; exit 1; }
printf "%s B, np %s, %s iterations, %s rounds (us, out of place)\n" "$bytes" "$np" "$iters" \
  "$rounds"
[[ -n ${BASE:-} ]] && printf "  base (%s): median %s   [%s]\n" "$BASE" \
  "$(printf "%s\n" "${base[@]}" | median)" "${base[*]}"
printf "  metrics off: median %s   [%s]\n" "$(printf "%s\n" "${off[@]}" | median)" "${off[*]}"
printf "  metrics on:  median %s   [%s]\n" "$(printf "%s\n" "${on[@]}" | median)" "${on[*]}"
printf "  on/off: median %s, best %s, worst %s\n" "$(printf "%s\n" "${ratios[@]}" | median)" \
  "$(printf "%s\n" "${ratios[@]}" | sort -g | head -1)" \
  "$(printf "%s\n" "${ratios[@]}" | sort -g | tail -1)"
