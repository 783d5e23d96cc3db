#!/usr/bin/env bash
# Runs a command and then checks that it left no communicator segment (ccl-<12 hex digits>-<rank>,
# named by the random tag rank 0 picks) in /dev/shm. Unit tests name theirs differently.
set -u
before=$(ls /dev/shm | grep -cE '^ccl-[0-9a-f]{12}-' || true)
"$@"
status=$?
after=$(ls /dev/shm | grep -cE '^ccl-[0-9a-f]{12}-' || true)
if [ "$after" -gt "$before" ]; then
  echo "FAIL: files left in /dev/shm:"; ls /dev/shm | grep -E '^ccl-[0-9a-f]{12}-'
  exit 1
fi
exit $status
