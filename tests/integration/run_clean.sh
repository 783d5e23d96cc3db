#!/usr/bin/env bash
# Runs a command and then checks that it left nothing of ccl's in /dev/shm.
set -u
before=$(ls /dev/shm | grep -c '^ccl-' || true)
"$@"
status=$?
after=$(ls /dev/shm | grep -c '^ccl-' || true)
if [ "$after" -gt "$before" ]; then
  echo "FAIL: files left in /dev/shm:"; ls /dev/shm | grep '^ccl-'
  exit 1
fi
exit $status
