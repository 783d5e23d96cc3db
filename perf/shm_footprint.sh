#!/usr/bin/env bash
# Peak shared memory of an allreduce run on one host: samples Shmem in /proc/meminfo every 20 ms
# while `cclrun -np N all_reduce_perf -b SIZE -e SIZE` runs, and prints the peak above what was
# there before, in all and per rank. Extra arguments go to cclrun (e.g. -x CCL_SHM_POOL=0 for the
# old every-ring-full-size layout).
#   perf/shm_footprint.sh [BUILD_DIR] [SIZE] [NP...] [-- CCLRUN_ARGS...]
#   perf/shm_footprint.sh build 16M 8 16 32
#   perf/shm_footprint.sh build 16M 8 16 -- -x CCL_SHM_POOL=0
set -euo pipefail
build=${1:-build}
size=${2:-16M}
shift $(( $# >= 2 ? 2 : $# ))
nps=()
while [[ $# -gt 0 && $1 != -- ]]; do nps+=("$1"); shift; done
[[ ${1:-} == -- ]] && shift
extra=("$@")
[[ ${#nps[@]} -gt 0 ]] || nps=(8 16 32)

shmem_kib() { awk '/^Shmem:/ {print $2}' /proc/meminfo; }

printf '%5s %14s %14s %8s\n' ranks "peak MiB" "MiB per rank" result
for np in "${nps[@]}"; do
  base=$(shmem_kib)
  peak=$base
  log=$(mktemp)
  "$build/tools/cclrun" -np "$np" --timeout 600 "${extra[@]}" "$build/perf/all_reduce_perf" \
    -b "$size" -e "$size" -n 5 -w 2 -c 1 >"$log" 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    now=$(shmem_kib)
    (( now > peak )) && peak=$now
    sleep 0.02
  done
  if wait "$pid" && grep -q "Out of bounds values : 0 OK" "$log"; then result=ok; else result=FAILED; fi
  [[ $result == ok ]] || tail -n 20 "$log" >&2
  rm -f "$log"
  awk -v p="$peak" -v b="$base" -v n="$np" -v r="$result" \
    'BEGIN { d = (p - b) / 1024; printf "%5d %14.1f %14.2f %8s\n", n, d, d / n, r }'
done
