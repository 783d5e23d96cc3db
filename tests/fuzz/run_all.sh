#!/usr/bin/env bash
# Runs every fuzz target of a CCL_FUZZ=ON build, starting from its seeds in
# tests/fuzz/corpus/<name>/ (copied to a fresh temporary corpus, so the repository's stays as it
# is), and prints per target the inputs executed and whether it crashed. Either for SECONDS each
# (open-ended fuzzing: what it finds depends on the machine's speed), or, with --runs, for N
# inputs each from a fixed random seed and without address-space randomization (`make fuzz-ci`):
# the same binary then tries the same inputs on every machine, so a failure is reproducible and
# not found by chance.
# Exit status: 0 if no target crashed (or leaked, hung, ran out of memory); 1 otherwise; 2 on
# usage errors. A crashing input is kept in BUILD_DIR/fuzz-artifacts/<name>/ (README.md says how
# to reproduce it).
#   tests/fuzz/run_all.sh SECONDS BUILD_DIR [TARGET...]
#   tests/fuzz/run_all.sh --runs N [--seed S] BUILD_DIR [TARGET...]     (S: 1 unless given)
set -u

usage() {
  echo "usage: $0 SECONDS BUILD_DIR [TARGET...]   (TARGET: e.g. store_protocol)" >&2
  echo "       $0 --runs N [--seed S] BUILD_DIR [TARGET...]" >&2
  exit 2
}
number() { [[ $1 =~ ^[0-9]+$ && $1 -ge 1 ]]; }
seconds= runs= seed=1
if [[ ${1:-} == --runs ]]; then
  [[ $# -ge 2 ]] && number "$2" || usage
  runs=$2
  shift 2
  if [[ ${1:-} == --seed ]]; then
    [[ $# -ge 2 ]] && number "$2" || usage
    seed=$2
    shift 2
  fi
else
  [[ $# -ge 1 ]] && number "$1" || usage
  seconds=$1
  shift
fi
[[ $# -ge 1 ]] || usage
build=$(cd "$1" 2>/dev/null && pwd) || { echo "$0: no build directory '$1'" >&2; exit 2; }
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  for bin in "$build"/tests/fuzz/*_fuzz; do
    [[ -x $bin ]] && targets+=("$(basename "$bin" _fuzz)")
  done
fi
if [[ ${#targets[@]} -eq 0 ]]; then
  echo "$0: no fuzz targets in $build/tests/fuzz (configure with -DCCL_FUZZ=ON and build the" \
       "fuzz_targets target)" >&2
  exit 2
fi

# With --runs, the address space is not randomized either (where setarch can turn that off):
# coverage of code that hashes pointers, and with it the inputs libFuzzer keeps, would differ.
fixed=()
if [[ -n $runs ]] && setarch "$(uname -m)" -R true 2>/dev/null; then
  fixed=(setarch "$(uname -m)" -R)
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/ccl-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

failed=0
crashed=()
printf '%-16s %12s  %s\n' target executions result
for name in "${targets[@]}"; do
  bin=$build/tests/fuzz/${name}_fuzz
  if [[ ! -x $bin ]]; then
    printf '%-16s %12s  %s\n' "$name" - "MISSING ($bin)"
    failed=1
    continue
  fi
  corpus=$work/$name/corpus
  artifacts=$build/fuzz-artifacts/$name
  mkdir -p "$corpus" "$artifacts"
  if [[ -d $here/corpus/$name ]]; then cp "$here/corpus/$name"/* "$corpus"/ 2>/dev/null; fi
  if [[ -n $runs ]]; then
    args=(-runs="$runs" -seed="$seed")
    limit=600
  else
    args=(-max_total_time="$seconds")
    limit=$((seconds + 120))
  fi
  args+=(-print_final_stats=1 -timeout=10 -rss_limit_mb=2048 -artifact_prefix="$artifacts/")
  [[ -f $here/dict/$name.dict ]] && args+=(-dict="$here/dict/$name.dict")
  log=$work/$name/log
  # A hang is caught by -timeout; the outer timeout is for a fuzzer that stops answering at all.
  timeout --signal=KILL "$limit" "${fixed[@]}" "$bin" "${args[@]}" "$corpus" \
    >"$log" 2>&1
  rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
  crash=$(grep -o -m 1 -E 'ERROR: (libFuzzer|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer): [a-zA-Z-]+( [a-z]+)?|runtime error: .*|FUZZ_CHECK\(.*\) failed' "$log")
  if [[ $rc -eq 0 ]]; then
    result=ok
  else
    failed=1
    input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
    result="CRASH (exit $rc): ${crash:-see log}; input: ${input:-none saved}"
    cp "$log" "$artifacts/last-run.log"
    crashed+=("$name")
  fi
  printf '%-16s %12s  %s\n' "$name" "${runs:-?}" "$result"
done
for name in "${crashed[@]}"; do
  echo "---- last lines of $name's log (all of it: $build/fuzz-artifacts/$name/last-run.log)"
  tail -n 40 "$build/fuzz-artifacts/$name/last-run.log"
done
exit $failed
