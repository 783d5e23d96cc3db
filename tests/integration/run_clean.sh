#!/usr/bin/env bash
# Runs a command and then checks that it left no communicator segment (ccl-<12 hex digits>-<rank>,
# named by the random tag rank 0 picks) in /dev/shm. Unit tests name theirs differently.
#
# ctest -j runs other multi-rank tests at the same time, whose live segments appear here too: a
# new name counts as left behind only if no live process maps it (a leaked segment is one nobody
# holds), still so 2 s later.
set -u
pattern='^ccl-[0-9a-f]{12}-'
before=$(ls /dev/shm | grep -E "$pattern" | sort || true)
"$@"
status=$?
after=$(ls /dev/shm | grep -E "$pattern" | sort || true)
fresh=$(comm -13 <(printf '%s\n' "$before") <(printf '%s\n' "$after") | grep -E "$pattern" || true)
# Mapped by a live process: not leaked. Unmapped: leaked unless it goes within 2 s (a concurrent
# test between creating and mapping it, or between unmapping and unlinking it).
unheld() {
  local name
  for name in "$@"; do
    [ -e "/dev/shm/$name" ] && ! grep -qsF "/dev/shm/$name" /proc/[0-9]*/maps 2>/dev/null &&
      printf '%s\n' "$name"
  done
}
left=""
[ -n "$fresh" ] && left=$(unheld $fresh)
for _ in $(seq 20); do
  [ -n "$left" ] || break
  sleep 0.1
  left=$(unheld $left)
done
if [ -n "$left" ]; then
  echo "FAIL: files left in /dev/shm (no live process maps them):"; printf '%s\n' "$left"
  exit 1
fi
exit $status
