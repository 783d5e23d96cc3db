# shellcheck shell=bash disable=SC2317  # trial_cleanup runs from a trap
# What fault_trials.sh and recovery_trials.sh share (sourced by both): the trials' folder and its
# cleanup, /dev/shm listings, and the clock.

# The ccl-* files in /dev/shm, sorted.
list_shm() { find /dev/shm -maxdepth 1 -name 'ccl-*' -printf '%f\n' 2>/dev/null | sort; }

# The pid that made a shm segment, from its header (src/transport/shm/shm_layout.h: the magic
# "ccl-shm1" at 0, owner_pid at byte 52); nothing if the file is not such a segment.
shm_owner() {
  [ "$(head -c 8 "$1" 2>/dev/null | rev 2>/dev/null)" = "ccl-shm1" ] || return 0
  od -An -t d4 -j 52 -N 4 "$1" 2>/dev/null | tr -d ' '
}

now_ms() { date +%s%3N; }

# trial_workdir PREFIX PROGRAM: makes $workdir, where each trial keeps its logs and pid.R files.
# On exit whatever a trial of PROGRAM left running (already counted as a hang) is ended, resumed
# first if it was stopped, and $workdir goes unless $keep_logs is 1 or $failures is not 0.
trial_workdir() {
  trial_program=$2
  workdir=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 2
  trap trial_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

trial_cleanup() {
  local f p
  for f in "$workdir"/trial*/pid.*; do
    [ -f "$f" ] || continue
    p=$(cat "$f" 2>/dev/null)
    if [ -n "$p" ] && grep -qs "$trial_program" "/proc/$p/cmdline"; then
      kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
    fi
  done
  if [ "${keep_logs:-0}" = 0 ] && [ "${failures:-1}" = 0 ]; then rm -rf "$workdir"; fi
}
