#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup runs from a trap
# Runs T fault-injection trials of fault_check through cclrun (README.md says what each checks):
#
#   fault_trials.sh --transport shm|tcp|tcp4|ucx --np N --trials T [--mode kill|kill-idle|kill-stream|stop]
#                   [--seed S] [--ccl-timeout S] [--max-latency-ms L] [--keep-logs]
#                   [--cclrun PATH] [--fault-check PATH] BUILD_DIR
#
# BUILD_DIR/tools/cclrun and BUILD_DIR/tests/fault/fault_check are used unless given.
#
# Each trial picks a random victim rank and a random moment, and checks: every survivor printed a
# FAULT line with an acceptable result and latency (and fault_check's own verdict, SURVIVOR OK),
# no process hung (neither cclrun's --timeout nor its grace period had to end a rank, no rank is
# left running), and no new ccl-* file is left in /dev/shm. Exit status 0 when every trial passed,
# 1 when one failed, 2 on bad usage.
set -u

usage() {
  sed -n '5,7p' "$0" | sed 's/^# *//' >&2
  exit 2
}

transport=shm
np=2
trials=20
mode="kill"
seed=$(( $$ ^ $(date +%s) ))
ccl_timeout=
max_latency_ms=2000
keep_logs=0
build=
cclrun=
prog=
while [ $# -gt 0 ]; do
  case "$1" in
    --transport) [ $# -ge 2 ] || usage; transport=$2; shift 2 ;;
    --np) [ $# -ge 2 ] || usage; np=$2; shift 2 ;;
    --trials) [ $# -ge 2 ] || usage; trials=$2; shift 2 ;;
    --mode) [ $# -ge 2 ] || usage; mode=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
    --ccl-timeout) [ $# -ge 2 ] || usage; ccl_timeout=$2; shift 2 ;;
    --max-latency-ms) [ $# -ge 2 ] || usage; max_latency_ms=$2; shift 2 ;;
    --keep-logs) keep_logs=1; shift ;;
    --cclrun) [ $# -ge 2 ] || usage; cclrun=$2; shift 2 ;;
    --fault-check) [ $# -ge 2 ] || usage; prog=$2; shift 2 ;;
    -*) echo "$0: unknown option '$1'" >&2; usage ;;
    *) [ -z "$build" ] || usage; build=$1; shift ;;
  esac
done
[ -n "$build" ] || { echo "$0: BUILD_DIR is missing" >&2; usage; }
# tcp4: 4 sockets per peer, two helper threads; ucx: UCX between the local ranks (its tcp: UCX
# 1.13 carries no peer-error-handling endpoint over its shared memory).
transport_env=()
case "$transport" in
  shm) shm_disable=0 ;;
  tcp) shm_disable=1 ;;
  tcp4) shm_disable=1; transport_env=(-x CCL_NSOCKS_PERTHREAD=2 -x CCL_SOCKET_NTHREADS=2) ;;
  ucx) shm_disable=1; transport_env=(-x CCL_NET=ucx) ;;
  *) echo "$0: --transport must be shm, tcp, tcp4 or ucx" >&2; usage ;; esac
case "$mode" in kill|kill-idle|kill-stream|stop) ;;
  *) echo "$0: unknown --mode '$mode'" >&2; usage ;; esac
for v in np trials seed max_latency_ms; do
  case "${!v}" in ''|*[!0-9]*) echo "$0: --${v//_/-} must be a whole number" >&2; usage ;; esac
done
if [ "$np" -lt 2 ] || [ "$np" -gt 16 ]; then echo "$0: --np must be 2..16" >&2; usage; fi
[ "$trials" -ge 1 ] || { echo "$0: --trials must be >= 1" >&2; usage; }
# The library's timeout: short for stop (survivors must reach it), and in the kill modes only
# what ends a trial whose survivors missed the death (their error is due within 2 s anyway).
if [ -z "$ccl_timeout" ]; then
  if [ "$mode" = stop ]; then ccl_timeout=3; else ccl_timeout=5; fi
fi
case "$ccl_timeout" in ''|*[!0-9]*|0) echo "$0: --ccl-timeout must be >= 1" >&2; usage ;; esac

cclrun=${cclrun:-$build/tools/cclrun}
prog=${prog:-$build/tests/fault/fault_check}
for f in "$cclrun" "$prog"; do
  [ -x "$f" ] || { echo "$0: $f is not built" >&2; exit 2; }
done

# Every rank stops by itself after cap_s; cclrun ends the trial after trial_s (and gives the
# survivors that long after the victim's death); `timeout` is the last resort.
cap_s=$((2 * ccl_timeout + 6))
trial_s=$((cap_s + ccl_timeout + 10))

# shellcheck source=tests/fault/trial_lib.sh
. "$(dirname "$0")/trial_lib.sh"
trial_workdir ccl-fault-trials fault_check

RANDOM=$seed
echo "fault_trials: mode $mode, $transport, np $np, $trials trials, CCL_TIMEOUT=$ccl_timeout," \
  "seed $seed, logs in $workdir"

failures=0
hangs=0
leaked_files=0
survivors=0
latencies=()
failed_logs=()

# stop mode: once the victim has stopped itself (its stamp), waits for the survivors to time out
# and exit, then resumes the victim. Echoes a problem, if any.
drive_stop() {
  local dir=$1 launcher=$2 victim=$3 r p deadline
  deadline=$(( $(now_ms) + (cap_s + 2) * 1000 ))
  while [ ! -f "$dir/stamp" ]; do
    kill -0 "$launcher" 2>/dev/null || return 0  # ended before the stop: the log says why
    [ "$(now_ms)" -lt "$deadline" ] || { echo "the victim never stopped"; return 0; }
    sleep 0.05
  done
  deadline=$(( $(now_ms) + (ccl_timeout + 5) * 1000 ))
  for ((r = 0; r < np; ++r)); do
    [ "$r" = "$victim" ] && continue
    p=$(cat "$dir/pid.$r" 2>/dev/null)
    while [ -n "$p" ] && kill -0 "$p" 2>/dev/null && [ "$(now_ms)" -lt "$deadline" ]; do
      sleep 0.05
    done
    if [ -n "$p" ] && kill -0 "$p" 2>/dev/null; then
      echo "HANG: survivor rank $r still running $((ccl_timeout + 5)) s after the stop"
    fi
  done
  p=$(cat "$dir/pid.$victim" 2>/dev/null)
  echo "SIGCONT to rank $victim at $(now_ms)" >>"$dir/driver"
  [ -n "$p" ] && kill -CONT "$p" 2>/dev/null
}

# Judges one trial from its log; prints one reason a line (nothing: passed).
judge_trial() {
  local dir=$1 status=$2 victim=$3 elapsed=$4 log=$1/log r line result latency
  for ((r = 0; r < np; ++r)); do
    [ "$r" = "$victim" ] && continue
    line=$(grep -m1 "^FAULT rank $r " "$log")
    if [ -z "$line" ]; then
      echo "rank $r: no FAULT line$(grep -m1 -E "^(NOFAULT|CORRUPT|SETUP)[a-z ]* rank $r" "$log" |
        sed 's/^/: /')"
      continue
    fi
    result=$(sed -E 's/.* result ([A-Za-z]+) .*/\1/' <<<"$line")
    latency=$(sed -E 's/.* latency_ms ([^ ]+) .*/\1/' <<<"$line")
    case "$latency" in
      ''|*[!0-9-]*) echo "rank $r: no latency (failed before the fault?)" ;;
      *) latencies+=("$latency")
         if [ "$mode" != stop ] && [ "$latency" -gt "$max_latency_ms" ]; then
           echo "rank $r: latency $latency ms > $max_latency_ms ms"
         fi ;;
    esac
    if [ "$mode" = stop ]; then
      [ "$result" = cclTimeout ] || echo "rank $r: result $result, expected cclTimeout"
    else
      case "$result" in cclRemoteError|cclTimeout) ;;
        *) echo "rank $r: result $result, expected cclRemoteError or cclTimeout" ;; esac
    fi
    grep -q "^SURVIVOR OK rank $r " "$log" ||
      grep -m1 "^SURVIVOR BAD rank $r" "$log" || echo "rank $r: no verdict (hung after the error?)"
  done
  grep "^CORRUPT" "$log"
  if [ "$mode" = stop ]; then
    grep -q "^VICTIM OK rank $victim" "$log" ||
      grep -m1 "^VICTIM BAD" "$log" || echo "victim $victim: no verdict after SIGCONT"
    [ "$status" = 0 ] || echo "cclrun exited $status, expected 0"
  else
    grep -q "^cclrun: rank $victim (pid [0-9]*) killed by signal 9" "$log" ||
      echo "victim $victim did not die of its SIGKILL"
    [ "$status" = 137 ] || echo "cclrun exited $status, expected 137 (the victim's SIGKILL)"
  fi
  if [ "$elapsed" -ge "$trial_s" ] || grep -q "^cclrun: timeout after" "$log"; then
    echo "HANG: the trial ran into its $trial_s s limit"
  fi
  grep -q "^cclrun: sending SIGTERM" "$log" &&
    echo "HANG: cclrun had to terminate ranks that did not exit by themselves"
}

# After this many hung trials the run stops: each costs the whole trial limit, and the verdict
# (failed) is known.
max_hangs=3
ran=0
for ((t = 1; t <= trials; ++t)); do
  if [ "$hangs" -ge "$max_hangs" ]; then
    echo "fault_trials: stopping after $hangs hung trials ($((t - 1)) of $trials run)"
    break
  fi
  ran=$t
  dir=$workdir/trial$t
  mkdir -p "$dir"
  victim=$((RANDOM % np))
  extra=()
  case "$mode" in
    kill|kill-stream) moment=$((10 + RANDOM % 700)) ;;
    stop) moment=$((10 + RANDOM % 700)) ;;
    kill-idle)
      # The ranks sleep 1 s after pass K; the victim dies 50..549 ms into that sleep.
      moment=$((50 + RANDOM % 500))
      extra=(--idle-iter $((1 + RANDOM % 30)) --idle-ms 1000) ;;
  esac
  before=$(list_shm)
  start=$(now_ms)
  timeout -k 5 $((trial_s + 10)) "$cclrun" -np "$np" --grace "$trial_s" --timeout "$trial_s" \
    -x CCL_TIMEOUT="$ccl_timeout" -x CCL_SHM_DISABLE="$shm_disable" "${transport_env[@]}" \
    "$prog" --mode "$mode" --victim "$victim" --moment-ms "$moment" --dir "$dir" \
    --cap-ms $((cap_s * 1000)) --max-latency-ms "$max_latency_ms" \
    --timeout-ms $((ccl_timeout * 1000)) "${extra[@]}" >"$dir/log" 2>&1 &
  launcher=$!
  problems=""
  [ "$mode" = stop ] && problems=$(drive_stop "$dir" "$launcher" "$victim")
  wait "$launcher"
  status=$?
  elapsed=$(( ($(now_ms) - start) / 1000 ))

  # Ranks still alive after cclrun has gone: leaked (and a hang); end them now.
  for f in "$dir"/pid.*; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    if grep -qs fault_check "/proc/$p/cmdline"; then
      problems+=$'\n'"HANG: ${f##*/} (pid $p) still running after cclrun exited"
      kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
    fi
  done
  # New ccl-* files in /dev/shm; a second look skips those of another process that were only
  # passing through (ours are all gone by now and cannot be removed later).
  new=$(comm -13 <(echo "$before") <(list_shm))
  if [ -n "$new" ]; then
    sleep 0.5
    still=""
    for f in $new; do [ -e "/dev/shm/$f" ] && still+=" $f"; done
    if [ -n "$still" ]; then
      leaked_files=$((leaked_files + $(wc -w <<<"$still")))
      problems+=$'\n'"LEAK: left in /dev/shm:$still"
    fi
  fi

  n_before=${#latencies[@]}
  # Not in $(...): judge_trial adds to latencies.
  judge_trial "$dir" "$status" "$victim" "$elapsed" >"$dir/judged"
  problems=$(printf '%s\n' "$problems" | cat - "$dir/judged" | sed '/^$/d')
  survivors=$((survivors + np - 1))
  trial_lat="${latencies[*]:$n_before}"
  what="victim $victim, moment $moment ms${extra[*]:+ (${extra[*]})}"
  if [ -z "$problems" ]; then
    echo "trial $t/$trials: $what: ok (latencies ms: ${trial_lat:-none})"
    # kill-idle: a kill that landed after a survivor's call began (a slow sleeper) is still
    # judged, from the kill, but the trial did not test an idle survivor: said, not failed.
    grep "^NOTE" "$dir/log" | sed 's/^/    /'
  else
    failures=$((failures + 1))
    grep -q "^HANG" <<<"$problems" && hangs=$((hangs + 1))
    echo "trial $t/$trials: $what: FAILED (latencies ms: ${trial_lat:-none})"
    while IFS= read -r line; do echo "    $line"; done <<<"$problems"
    failed_logs+=("$t")
  fi
done

median=none
max=none
if [ ${#latencies[@]} -gt 0 ]; then
  sorted=$(printf '%s\n' "${latencies[@]}" | sort -n)
  median=$(sed -n "$(( (${#latencies[@]} + 1) / 2 ))p" <<<"$sorted")
  max=$(tail -n1 <<<"$sorted")
fi
# The logs of the first few failed trials in full; the rest stay in $workdir.
shown=0
for t in "${failed_logs[@]}"; do
  [ $shown -lt 3 ] || { echo "(logs of the other failed trials: $workdir)"; break; }
  echo "---- log of failed trial $t ----"
  cat "$workdir/trial$t/log"
  [ -f "$workdir/trial$t/driver" ] && cat "$workdir/trial$t/driver"
  shown=$((shown + 1))
done
echo "fault_trials $mode $transport np $np: trials $ran, survivors $survivors," \
  "latency median $median ms max $max ms, hangs $hangs, leaked files $leaked_files," \
  "failures $failures"
[ "$failures" = 0 ]
