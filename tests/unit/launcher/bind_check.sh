#!/usr/bin/env bash
# cclrun --bind core -np 2 with real ranks: each rank's Cpus_allowed_list must be the core that
# --report-bindings names, the two ranks must be on different cores when cclrun may use two,
# and on a machine without SMT that core is a single CPU.
# usage: bind_check.sh CCLRUN
set -u
cclrun=$1
fail() { echo "FAIL: $*" >&2; echo "$out" >&2; exit 1; }

# shellcheck disable=SC2016  # the rank's shell expands them
out=$(timeout 60 "$cclrun" --bind core --report-bindings -np 2 -- \
  sh -c 'echo "rank $CCL_RANK $(grep Cpus_allowed_list /proc/self/status)"' 2>&1) ||
  fail "cclrun exited with $?"
own=$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
ncpus=$(nproc)
declare -a got=()
for r in 0 1; do
  allowed=$(echo "$out" | sed -n "s/^rank $r Cpus_allowed_list:[[:space:]]*//p")
  reported=$(echo "$out" | sed -n "s/^cclrun: rank $r bound to core [0-9]*: cpus //p")
  [ -n "$allowed" ] || fail "rank $r printed no Cpus_allowed_list"
  [ "$allowed" = "$reported" ] || fail "rank $r: allowed '$allowed', reported '$reported'"
  if [ "$ncpus" -ge 2 ]; then
    [ "$allowed" != "$own" ] || fail "rank $r is not bound (allowed '$allowed' = cclrun's own)"
  fi
  siblings=/sys/devices/system/cpu/cpu${allowed%%[,-]*}/topology/thread_siblings_list
  if [ -r "$siblings" ] && ! grep -q '[,-]' "$siblings"; then
    case "$allowed" in *[,-]*) fail "rank $r: '$allowed' is more than one CPU without SMT" ;; esac
  fi
  got[r]=$allowed
done
if [ "$ncpus" -ge 2 ] && [ "${got[0]}" = "${got[1]}" ]; then
  fail "both ranks are on CPUs ${got[0]}"
fi
echo "PASS: rank 0 on ${got[0]}, rank 1 on ${got[1]} (cclrun's own: $own)"
