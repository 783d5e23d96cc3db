#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup runs from a trap
# Runs T recovery trials of recovery_check through cclrun (README.md says what each checks):
#
#   recovery_trials.sh --transport shm|tcp|ucx --np N --trials T [--phases LIST] [--max-victims 1|2]
#                      [--seed S] [--ccl-timeout S] [--debug LEVEL] [--keep-logs] [--results FILE]
#                      [--cclrun PATH] [--recovery-check PATH] BUILD_DIR
#
# BUILD_DIR/tools/cclrun and BUILD_DIR/tests/fault/recovery_check are used unless given.
#
# Each trial picks a phase (init, collective, group, stream or shrink; --phases LIST, comma
# separated, narrows the choice), one or two victims and random moments, and checks: every survivor
# printed RECOVERED and DONE with the members exactly the world less the ranks that died (the same
# on every survivor), or, only when a rank died during init, FAILED at init with cclRemoteError or
# cclTimeout (counted apart); no CORRUPT or BAD line; no process hung (neither cclrun's --timeout
# nor its grace period had to end a rank, no rank is left running); no new ccl-* file is left in
# /dev/shm. Per recovered trial it measures the latency from a kill to the survivors' first
# successful collective on the shrunk communicator (the worst survivor). --results FILE appends
# one tab-separated line per trial (perf/recovery reads them: transport, np, seed, trial, phase,
# victims, verdict, latency, detection, rest, shrink, destroy, problems; times in ms). Exit status 0 when every trial
# passed, 1 when one failed, 2 on bad usage.
set -u

usage() {
  sed -n '5,7p' "$0" | sed 's/^# *//' >&2
  exit 2
}

transport=shm
np=4
trials=10
phases="init,collective,group,stream,shrink"
max_victims=2
seed=$(( $$ ^ $(date +%s) ))
ccl_timeout=10
debug=WARN
keep_logs=0
results=
build=
cclrun=
prog=
while [ $# -gt 0 ]; do
  case "$1" in
    --transport) [ $# -ge 2 ] || usage; transport=$2; shift 2 ;;
    --np) [ $# -ge 2 ] || usage; np=$2; shift 2 ;;
    --trials) [ $# -ge 2 ] || usage; trials=$2; shift 2 ;;
    --phases) [ $# -ge 2 ] || usage; phases=$2; shift 2 ;;
    --max-victims) [ $# -ge 2 ] || usage; max_victims=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
    --ccl-timeout) [ $# -ge 2 ] || usage; ccl_timeout=$2; shift 2 ;;
    --keep-logs) keep_logs=1; shift ;;
    --debug) [ $# -ge 2 ] || usage; debug=$2; shift 2 ;;
    --results) [ $# -ge 2 ] || usage; results=$2; shift 2 ;;
    --cclrun) [ $# -ge 2 ] || usage; cclrun=$2; shift 2 ;;
    --recovery-check) [ $# -ge 2 ] || usage; prog=$2; shift 2 ;;
    -h|--help) usage ;;
    -*) echo "$0: unknown option '$1'" >&2; usage ;;
    *) [ -z "$build" ] || usage; build=$1; shift ;;
  esac
done
[ -n "$build" ] || { echo "$0: BUILD_DIR is missing" >&2; usage; }
# ucx: UCX between the local ranks (as fault_trials.sh).
transport_env=()
case "$transport" in
  shm) shm_disable=0 ;;
  tcp) shm_disable=1 ;;
  ucx) shm_disable=1; transport_env=(-x CCL_NET=ucx) ;;
  *) echo "$0: --transport must be shm, tcp or ucx" >&2; usage ;; esac
for v in np trials seed ccl_timeout max_victims; do
  case "${!v}" in ''|*[!0-9]*) echo "$0: --${v//_/-} must be a whole number" >&2; usage ;; esac
done
if [ "$np" -lt 2 ] || [ "$np" -gt 16 ]; then echo "$0: --np must be 2..16" >&2; usage; fi
[ "$trials" -ge 1 ] || { echo "$0: --trials must be >= 1" >&2; usage; }
[ "$ccl_timeout" -ge 1 ] || { echo "$0: --ccl-timeout must be >= 1" >&2; usage; }
case "$max_victims" in 1|2) ;; *) echo "$0: --max-victims must be 1 or 2" >&2; usage ;; esac
# Two victims need a third rank to survive them.
[ "$np" -ge 3 ] || max_victims=1
phase_list=()
IFS=, read -r -a wanted <<<"$phases"
for p in "${wanted[@]}"; do
  case "$p" in
    init|collective|group|stream) phase_list+=("$p") ;;
    shrink) [ "$np" -ge 3 ] && phase_list+=("$p") ;;  # a second victim dies in the shrink
    *) echo "$0: unknown phase '$p' in --phases" >&2; usage ;;
  esac
done
[ ${#phase_list[@]} -gt 0 ] || { echo "$0: no phase left to run (shrink needs --np >= 3)" >&2; usage; }

cclrun=${cclrun:-$build/tools/cclrun}
prog=${prog:-$build/tests/fault/recovery_check}
for f in "$cclrun" "$prog"; do
  [ -x "$f" ] || { echo "$0: $f is not built" >&2; exit 2; }
done

# A passing trial needs at most one CCL_TIMEOUT (a death during init: the rank that holds the
# rendezvous may wait for it); cclrun ends the trial after trial_s and gives the survivors that
# long after a death; `timeout` is the last resort.
trial_s=$((3 * ccl_timeout + 15))

# shellcheck source=tests/fault/trial_lib.sh
. "$(dirname "$0")/trial_lib.sh"
trial_workdir ccl-recovery-trials recovery_check

RANDOM=$seed
echo "recovery_trials: $transport, np $np, $trials trials, phases ${phase_list[*]}," \
  "CCL_TIMEOUT=$ccl_timeout, seed $seed, logs in $workdir"

failures=0
recovered=0
failed_error=0
hangs=0
leaks=0
bad=0
latencies=()
detects=()
rests=()
failed_logs=()

# Judges one trial's log (awk, below). Arguments: the trial's folder, its phase, and the victims
# that died as RANK:STAMP,... Prints "REASON text" per problem, "BADLINE text" per CORRUPT or BAD
# line, then "OUTCOME recovered|failed-error|none LATENCY DETECT REST SHRINK DESTROY NOTE" (- for
# no figure): LATENCY is max over the survivors' recoveries of at_ms - the earliest kill it
# recovered from, DETECT the same for failed_call_ms (kill -> the call that failed), REST
# at_ms - failed_call_ms, SHRINK and DESTROY the most time a survivor's recovery spent in
# cclCommShrink and in destroying the old communicator.
judge_log() {
  awk -v np="$np" -v dead="$3" -v init_ok="$([ "$2" = init ] && echo 1 || echo 0)" '
    BEGIN {
      ndead = split(dead, items, ",")
      for (i = 1; i <= ndead; ++i) { split(items[i], kv, ":"); stamp[kv[1]] = kv[2]; isdead[kv[1]] = 1 }
      for (r = 0; r < np; ++r) if (!(r in isdead)) survivor[r] = 1
      shrink_worst = -1; destroy_worst = -1
    }
    /^RECOVERED rank / {
      r = $3; n = ++nrec[r]
      rec_members[r, n] = $9; rec_at[r, n] = $11; rec_fc[r, n] = $13
      if ($19 != "" && $19 + 0 > shrink_worst) shrink_worst = $19 + 0
      if ($21 != "" && $21 + 0 > destroy_worst) destroy_worst = $21 + 0
    }
    /^DONE rank / { done_members[$3] = $5 }
    /^FAILED rank / {
      r = $3; failed_result[r] = $5; step = $0
      sub(/^FAILED rank [0-9]+ result [A-Za-z]+ at /, "", step); sub(/:.*/, "", step)
      failed_step[r] = step; failed_line[r] = $0
    }
    /^(CORRUPT|BAD)/ { print "BADLINE " $0 }
    /^cclrun: rank [0-9]+ \(pid [0-9]+\) killed by signal/ { killed[$3] = $NF }
    /^cclrun: rank [0-9]+ \(pid [0-9]+\) exited with status/ { exited[$3] = $NF }
    END {
      for (r in isdead) {
        if (killed[r] != 9) print "REASON victim " r " wrote its stamp but cclrun did not see it die of signal 9"
      }
      # The ranks whose init failed (acceptable only after a death during init); the others
      # must end with exactly the survivors that did not fail.
      ninit = 0; nfailed = 0
      for (r = 0; r < np; ++r) {
        if (!(r in survivor) || !(r in failed_result)) continue
        res = failed_result[r]
        if (init_ok && failed_step[r] == "init" && (res == "cclRemoteError" || res == "cclTimeout")) {
          init_failed[r] = 1; ++ninit
        } else {
          print "REASON rank " r ": " failed_line[r]; ++nfailed
        }
      }
      # A rank that failed (a problem itself unless at init) is gone for the others too.
      want = ""
      for (r = 0; r < np; ++r) if ((r in survivor) && !(r in failed_result)) want = want (want == "" ? "" : ",") r
      lat = -1; det = -1; rest = -1; nrecovered = 0
      for (r = 0; r < np; ++r) {
        if (!(r in survivor) || (r in failed_result)) continue
        if (killed[r] != "") { print "REASON rank " r ": killed by signal " killed[r] " (not a victim)"; continue }
        if (!(r in done_members)) {
          print "REASON rank " r ": neither DONE nor FAILED" (exited[r] != "" ? " (exited with status " exited[r] ")" : ""); continue
        }
        if (done_members[r] != want) print "REASON rank " r ": DONE with members " done_members[r] ", expected " want
        if (ndead > 0 && nrec[r] == 0) { print "REASON rank " r ": DONE without a recovery"; continue }
        if (nrec[r] > 0 && rec_members[r, nrec[r]] != done_members[r])
          print "REASON rank " r ": last RECOVERED members " rec_members[r, nrec[r]] " but DONE members " done_members[r]
        ++nrecovered
        prev = ""
        for (i = 0; i < np; ++i) prev = prev (prev == "" ? "" : ",") i
        for (j = 1; j <= nrec[r]; ++j) {
          # The kills this recovery took out of the membership: it is measured from the first.
          delete inprev; delete innow
          split(prev, a, ","); for (k in a) inprev[a[k]] = 1
          split(rec_members[r, j], a, ","); for (k in a) innow[a[k]] = 1
          t0 = -1
          for (v in isdead) if ((v in inprev) && !(v in innow) && (t0 < 0 || stamp[v] < t0)) t0 = stamp[v]
          for (k in inprev) if (!(k in innow) && !(k in isdead) && !(k in failed_result))
            print "REASON rank " r ": recovery " j " left out rank " k ", which was alive"
          if (t0 < 0) { print "REASON rank " r ": recovery " j " (members " rec_members[r, j] ") without a death"; prev = rec_members[r, j]; continue }
          l = rec_at[r, j] - t0; d = rec_fc[r, j] - t0; s = rec_at[r, j] - rec_fc[r, j]
          if (d < 0) print "REASON rank " r ": its call failed " (-d) " ms before the kill it recovered from"
          if (l > lat) lat = l
          if (d > det) det = d
          if (s > rest) rest = s
          prev = rec_members[r, j]
        }
      }
      note = "-"
      if (ninit > 0 && nrecovered > 0) note = "partial:" nrecovered "-recovered-without-the-ranks-whose-init-failed"
      outcome = "none"
      if (ninit > 0) outcome = "failed-error"
      else if (nrecovered > 0 && ndead > 0) outcome = "recovered"
      if (ndead == 0) print "REASON no victim died"
      printf "OUTCOME %s %s %s %s %s %s %s\n", outcome, (lat < 0 ? "-" : lat), (det < 0 ? "-" : det), (rest < 0 ? "-" : rest), \
        (shrink_worst < 0 ? "-" : shrink_worst), (destroy_worst < 0 ? "-" : destroy_worst), note
    }' "$1/log"
}

max_hangs=3
ran=0
for ((t = 1; t <= trials; ++t)); do
  if [ "$hangs" -ge "$max_hangs" ]; then
    echo "recovery_trials: stopping after $hangs hung trials ($((t - 1)) of $trials run)"
    break
  fi
  ran=$t
  dir=$workdir/trial$t
  mkdir -p "$dir"
  phase=${phase_list[RANDOM % ${#phase_list[@]}]}
  nvictims=$((1 + RANDOM % max_victims))
  # Two distinct random ranks (here, not in a subshell: a subshell reseeds RANDOM, and --seed
  # must repeat the choices).
  a=$((RANDOM % np))
  b=$(( (a + 1 + RANDOM % (np - 1)) % np ))
  # Moments: during init, within 20 ms a rank of the start (the ranks make the communicator in
  # about 10-15 ms a rank here; a victim still alive then dies in the loop); in the loop,
  # anywhere in its first 0.7 s, a second victim up to 0.4 s after the first (during the first
  # recovery or just after it); in the shrink, within 15 ms a rank of entering it (a revoke,
  # shrink and check take about 5-12 ms a rank here): most land in it, some just after it.
  case "$phase" in
    init)
      victims="$a:init:$((RANDOM % (20 * np)))"
      [ "$nvictims" = 2 ] && victims+=",$b:init:$((RANDOM % (20 * np)))" ;;
    collective|group|stream)
      m=$((10 + RANDOM % 700))
      victims="$a:$phase:$m"
      [ "$nvictims" = 2 ] && victims+=",$b:$phase:$((m + RANDOM % 400))" ;;
    shrink)
      loop_phases=(collective group stream)
      victims="$a:${loop_phases[RANDOM % 3]}:$((10 + RANDOM % 700)),$b:shrink:$((RANDOM % (15 * np)))" ;;
  esac
  before=$(list_shm)
  start=$(now_ms)
  timeout -k 5 $((trial_s + 10)) "$cclrun" -np "$np" --grace "$trial_s" --timeout "$trial_s" \
    -x CCL_TIMEOUT="$ccl_timeout" -x CCL_SHM_DISABLE="$shm_disable" "${transport_env[@]}" \
    -x CCL_DEBUG="$debug" -x CHAOS_VICTIMS="$victims" -x CHAOS_DIR="$dir" "$prog" >"$dir/log" 2>&1
  status=$?
  elapsed=$(( ($(now_ms) - start) / 1000 ))

  problems=""
  # Ranks still alive after cclrun has gone: leaked (and a hang); end them now.
  for f in "$dir"/pid.*; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    if grep -qs recovery_check "/proc/$p/cmdline"; then
      problems+=$'\n'"HANG: ${f##*/} (pid $p) still running after cclrun exited"
      kill -KILL "$p" 2>/dev/null
    fi
  done
  if [ "$elapsed" -ge "$trial_s" ] || grep -q "^cclrun: timeout after" "$dir/log"; then
    problems+=$'\n'"HANG: the trial ran into its $trial_s s limit (cclrun exited $status)"
  fi
  grep -q "^cclrun: sending SIGTERM" "$dir/log" &&
    problems+=$'\n'"HANG: cclrun had to terminate ranks that did not exit by themselves"
  # New ccl-* files in /dev/shm; a second look skips those of another process that were only
  # passing through, and a segment whose header names another process as its owner belongs to
  # someone else's run on this machine. Ours (every rank is gone by now) are reported and removed,
  # so that a leak does not pile up over runs.
  new=$(comm -13 <(echo "$before") <(list_shm))
  if [ -n "$new" ]; then
    sleep 0.5
    still=""
    for f in $new; do
      [ -e "/dev/shm/$f" ] || continue
      owner=$(shm_owner "/dev/shm/$f")
      if [ -n "$owner" ] && ! grep -qsx "$owner" "$dir"/pid.*; then continue; fi
      still+=" $f"
    done
    if [ -n "$still" ]; then
      leaks=$((leaks + $(wc -w <<<"$still")))
      problems+=$'\n'"LEAK: left in /dev/shm:$still (removed)"
      for f in $still; do rm -f "/dev/shm/$f"; done
    fi
  fi
  # The victims that died, with their kill times.
  dead=""
  for f in "$dir"/stamp.*; do
    [ -f "$f" ] || continue
    case "$f" in *.tmp) continue ;; esac  # a stamp never finished: its rank did not die then
    dead+="${dead:+,}${f##*stamp.}:$(cat "$f")"
  done
  judge_log "$dir" "$phase" "$dead" >"$dir/judged"
  read -r _ outcome lat det rest shrink_ms destroy_ms note < <(grep "^OUTCOME" "$dir/judged")
  problems+=$'\n'$(sed -n 's/^REASON //p; s/^BADLINE //p' "$dir/judged")
  problems=$(sed '/^$/d' <<<"$problems")
  grep -q "^BADLINE" "$dir/judged" && bad=$((bad + 1))
  what="$phase, victims $victims"
  if [ -z "$problems" ]; then
    case "$outcome" in
      recovered)
        recovered=$((recovered + 1))
        latencies+=("$lat"); detects+=("$det"); rests+=("$rest")
        echo "trial $t/$trials: $what: recovered in $lat ms (kill -> failed call $det ms," \
          "failed call -> recovered $rest ms; shrink $shrink_ms ms, destroy $destroy_ms ms)" ;;
      failed-error)
        failed_error=$((failed_error + 1))
        [ "$note" = "-" ] && note=""
        echo "trial $t/$trials: $what: init failed with an error on the survivors" \
          "(${elapsed} s)${note:+ ($note)}" ;;
    esac
    verdict=$outcome
  else
    failures=$((failures + 1))
    grep -q "^HANG" <<<"$problems" && hangs=$((hangs + 1))
    echo "trial $t/$trials: $what: FAILED (${elapsed} s)"
    while IFS= read -r line; do echo "    $line"; done <<<"$problems"
    failed_logs+=("$t")
    verdict=fail
  fi
  if [ -n "$results" ]; then
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$transport" "$np" "$seed" \
      "$t" "$phase" "$victims" "$verdict" "$lat" "$det" "$rest" "$shrink_ms" "$destroy_ms" \
      "$(tr '\n\t' '; ' <<<"$problems")" >>"$results"
  fi
done

# median and worst of the arguments ("none" without any).
stats() {
  [ $# -gt 0 ] || { echo "none none"; return; }
  local sorted
  sorted=$(printf '%s\n' "$@" | sort -n)
  echo "$(sed -n "$(( ($# + 1) / 2 ))p" <<<"$sorted") $(tail -n1 <<<"$sorted")"
}
read -r lat_med lat_max < <(stats "${latencies[@]}")
read -r det_med det_max < <(stats "${detects[@]}")
read -r rest_med rest_max < <(stats "${rests[@]}")
# The logs of the first few failed trials in full; the rest stay in $workdir.
shown=0
for t in "${failed_logs[@]}"; do
  [ $shown -lt 3 ] || { echo "(logs of the other failed trials: $workdir)"; break; }
  echo "---- log of failed trial $t ----"
  # Without the flight recorder's dump (every op of the failed communicator) and the DONE lines.
  grep -v -E "^DONE|CCL WARN +seq [0-9]+ " "$workdir/trial$t/log" | head -n 80
  shown=$((shown + 1))
done
[ "$failures" = 0 ] || echo "(every trial's log: $workdir/trialN/log)"
echo "recovery_trials $transport np $np: trials $ran, recovered $recovered," \
  "failed-with-error $failed_error, hangs $hangs, leaks $leaks, bad $bad, failures $failures," \
  "latency median $lat_med ms worst $lat_max ms (kill -> failed call median $det_med worst" \
  "$det_max, failed call -> recovered median $rest_med worst $rest_max)"
[ "$failures" = 0 ]
