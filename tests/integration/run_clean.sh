#!/usr/bin/env bash
# Runs a command and then checks that it left no communicator segment (ccl-<12 hex digits>-<rank>,
# named by the random tag rank 0 picks) in /dev/shm. Unit tests name theirs differently.
#
# ctest -j runs other multi-rank tests at the same time, whose live segments appear here too: a
# new name counts as left behind only if it is still there after a grace and no live process
# maps it (a leaked segment is one nobody holds).
set -u
pattern='^ccl-[0-9a-f]{12}-'
before=$(ls /dev/shm | grep -E "$pattern" | sort || true)
"$@"
status=$?
after=$(ls /dev/shm | grep -E "$pattern" | sort || true)
fresh=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep -E "$pattern" || true)
left=""
if [ -n "$fresh" ]; then
  sleep 2
  for name in $fresh; do
    [ -e "/dev/shm/$name" ] || continue
    if ! grep -qsF "/dev/shm/$name" /proc/[0-9]*/maps 2>/dev/null; then left+="$name"$'\n'; fi
  done
fi
if [ -n "$left" ]; then
  echo "FAIL: files left in /dev/shm (no live process maps them):"; printf '%s' "$left"
  exit 1
fi
exit $status
