#!/usr/bin/env bash
# A rank is SIGKILLed mid-loop: every survivor must report cclRemoteError within 10 s and cclrun
# must exit with the victim's status. (ctest runs it under run_clean.sh for the /dev/shm check.)
# Usage: kill_test.sh CCLRUN KILL_CHECK NP VICTIM
set -u
cclrun=$1 prog=$2 np=$3 victim=$4
stamp=$(mktemp)
out=$(mktemp)
trap 'rm -f "$stamp" "$out"' EXIT
CCL_TIMEOUT=60 timeout 60 "$cclrun" -np "$np" --grace 15 "$prog" "$victim" 20 "$stamp" >"$out" 2>&1
status=$?
cat "$out"
ok=$(grep -c "SURVIVOR OK" "$out" || true)
if [ "$ok" -ne $((np - 1)) ]; then
  echo "FAIL: $ok of $((np - 1)) survivors reported cclRemoteError in time (cclrun status $status)"
  exit 1
fi
if [ "$status" -ne 137 ]; then
  echo "FAIL: cclrun exited $status, expected 137 (the victim's SIGKILL)"
  exit 1
fi
echo "PASS"
