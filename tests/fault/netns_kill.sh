#!/usr/bin/env bash
# shellcheck disable=SC2317  # cleanup runs from a trap
# kill -9 across network namespaces: H "nodes" of tests/netns/netns_cluster.sh, L ranks of
# fault_check in each, over one network transport variant (tests/netns/transport_variants.sh:
# tcp, tcp4, ucx). In each trial a random rank is the victim and SIGKILLs itself from a helper
# thread (fault_check --mode kill: at a random moment of the mixed loop; --mode kill-idle: while
# every rank sleeps between two passes). Every survivor must then fail within --max-latency-ms
# (2000) of the victim's stamp with cclRemoteError or cclTimeout (what fault_check accepts) and a
# message naming the victim, pass fault_check's own verdict (async error, abort within 1 s), and
# exit; the victim must have died of its SIGKILL; nothing may hang, no ccl-* file may be left in
# /dev/shm and the trial's namespaces must be gone afterwards.
#
#   netns_kill.sh --variant tcp|tcp4|ucx --ccl-topo CCL_TOPO [--nodes H] [--ranks-per-node L]
#                 [--trials T] [--idle-trials I] [--ccl-timeout S] [--max-latency-ms M]
#                 [--seed N] [--min-sockets-per-pair K] FAULT_CHECK
#
# T trials of --mode kill (default 3), then I of --mode kill-idle (default 1). Before them, the
# variant's transport is checked (tests/netns/netns_variant.sh: ccl-topo --pairs on the same
# shape must show it between every pair of nodes). Each trial is bounded (netns_cluster.sh's
# --timeout, and a watchdog here 10 s later); the run stops at the first hung trial.
# While trial 1 runs (its victim dies 300..699 ms in, so the ranks are up long enough), the tcp
# connections node 0 holds to the other nodes are counted; with --min-sockets-per-pair K there
# must be at least K for each pair of ranks on different nodes (tcp: 1, tcp4: 4), else it is
# only printed (ucx: UCX opens its own).
#
# Exit status: 0 every trial passed, 1 one failed, 2 bad usage, 77 cannot run here (not root, no
# `ip netns`, or a build without the variant's transport: ucx without UCX).
set -u

usage() {
  sed -n '13,15p' "$0" | sed 's/^# *//' >&2
  exit 2
}
variant=
topo=
nodes=2
per_node=1
trials=3
idle_trials=1
ccl_timeout=5
max_latency_ms=2000
seed=$(( $$ ^ $(date +%s) ))
min_sockets=0
prog=
while [ $# -gt 0 ]; do
  case "$1" in
    --variant) [ $# -ge 2 ] || usage; variant=$2; shift 2 ;;
    --ccl-topo) [ $# -ge 2 ] || usage; topo=$2; shift 2 ;;
    --nodes) [ $# -ge 2 ] || usage; nodes=$2; shift 2 ;;
    --ranks-per-node) [ $# -ge 2 ] || usage; per_node=$2; shift 2 ;;
    --trials) [ $# -ge 2 ] || usage; trials=$2; shift 2 ;;
    --idle-trials) [ $# -ge 2 ] || usage; idle_trials=$2; shift 2 ;;
    --ccl-timeout) [ $# -ge 2 ] || usage; ccl_timeout=$2; shift 2 ;;
    --max-latency-ms) [ $# -ge 2 ] || usage; max_latency_ms=$2; shift 2 ;;
    --seed) [ $# -ge 2 ] || usage; seed=$2; shift 2 ;;
    --min-sockets-per-pair) [ $# -ge 2 ] || usage; min_sockets=$2; shift 2 ;;
    -*) echo "$0: unknown option '$1'" >&2; usage ;;
    *) [ -z "$prog" ] || usage; prog=$1; shift ;;
  esac
done
[ -x "$prog" ] || { echo "$0: FAULT_CHECK '$prog' is not an executable" >&2; usage; }
[ -x "$topo" ] || { echo "$0: --ccl-topo '$topo' is not an executable" >&2; usage; }
case "$nodes" in 2|3|4) ;; *) echo "$0: --nodes must be 2..4" >&2; usage ;; esac
case "$per_node" in [1-4]) ;; *) echo "$0: --ranks-per-node must be 1..4" >&2; usage ;; esac
for v in trials idle_trials seed max_latency_ms min_sockets; do
  case "${!v}" in ''|*[!0-9]*) echo "$0: a number option is not a whole number" >&2; usage ;; esac
done
if [ "$trials" -gt 50 ] || [ "$idle_trials" -gt 50 ] || [ $((trials + idle_trials)) -lt 1 ]; then
  echo "$0: 1..100 trials in all (at most 50 of each mode)" >&2; usage
fi
case "$ccl_timeout" in ''|*[!0-9]*|0) echo "$0: --ccl-timeout must be >= 1" >&2; usage ;; esac

netns_dir=$(cd "$(dirname "$0")/../netns" && pwd)
cluster=$netns_dir/netns_cluster.sh
# shellcheck source-path=SCRIPTDIR source=../netns/transport_variants.sh
. "$netns_dir/transport_variants.sh"
variant_env "$variant" || { echo "$0: --variant must be one of $VARIANTS" >&2; usage; }
export CCL_TIMEOUT=$ccl_timeout

skip() {
  echo "SKIP: $*" >&2
  exit 77
}
[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"
if why=$(variant_missing "$variant" "$topo"); then skip "variant $variant: $why"; fi

world=$((nodes * per_node))
# As fault_trials.sh: every rank stops by itself after cap_s, the cluster after trial_s.
cap_s=$((2 * ccl_timeout + 6))
trial_s=$((cap_s + ccl_timeout + 10))
workdir=$(mktemp -d "${TMPDIR:-/tmp}/ccl-netns-kill.XXXXXX") || exit 2
cluster_pid=
failures=0

list_shm() { find /dev/shm -maxdepth 1 -name 'ccl-*' -printf '%f\n' 2>/dev/null | sort; }
now_ms() { date +%s%3N; }
our_ns() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^cclns$1-"; }

# Ends whatever a trial left: its cluster script, its ranks (pid files), its namespaces.
end_trial() {
  local dir=$1 f p i ns
  if [ -n "$cluster_pid" ] && kill -0 "$cluster_pid" 2>/dev/null; then
    kill -TERM "$cluster_pid" 2>/dev/null
    for ((i = 0; i < 100; ++i)); do  # netns_cluster.sh gives its ranks up to 5 s
      kill -0 "$cluster_pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$cluster_pid" 2>/dev/null
  fi
  for f in "$dir"/pid.*; do
    [ -f "$f" ] || continue
    p=$(cat "$f" 2>/dev/null)
    [ -n "$p" ] && grep -qs fault_check "/proc/$p/cmdline" && kill -KILL "$p" 2>/dev/null
  done
  if [ -n "$cluster_pid" ]; then
    for ns in $(our_ns "$cluster_pid"); do
      for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
      ip netns delete "$ns" 2>/dev/null
    done
  fi
  cluster_pid=
}
cleanup() {
  trap - EXIT INT TERM
  end_trial "${dir:-$workdir/none}"
  if [ "$failures" = 0 ]; then rm -rf "$workdir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# True when MESSAGE names rank V as fault_check's names_rank does: "rank 2", "rank(s) 0,2",
# "ranks [1, 2]" (the victim, not only some rank).
names_rank() {
  grep -qE "rank(s|\(s\))?[][ ,:]*([0-9]+[][ ,]+)*$2([^0-9]|\$)" <<<"$1"
}

# The tcp connections node 0's namespace holds to other nodes, sampled while trial 1's ranks are
# up (the most seen); echoes a problem when fewer than --min-sockets-per-pair per pair.
count_sockets() {
  local dir=$1 i n most=0 ns=
  for ((i = 0; i < 200; ++i)); do  # up to 4 s for every rank to be up
    [ "$(find "$dir" -name 'ready.[0-9]*' | wc -l)" -ge "$world" ] && break
    kill -0 "$cluster_pid" 2>/dev/null || return 0
    sleep 0.02
  done
  ns=$(our_ns "$cluster_pid" | grep -- '-n0$')
  [ -n "$ns" ] || return 0
  for ((i = 0; i < 10; ++i)); do
    n=$(ip netns exec "$ns" ss -Htn state established 2>/dev/null |
        awk '{split($(NF-1), l, ":"); split($NF, p, ":"); if (l[1] != p[1]) ++n} END {print n + 0}')
    [ "$n" -gt "$most" ] && most=$n
    sleep 0.02
  done
  local pairs=$((per_node * (world - per_node)))
  echo "netns_kill: $variant: node 0 held up to $most tcp connection(s) to other nodes for" \
    "$pairs pair(s) of ranks across nodes${CCL_NSOCKS_PERTHREAD:+ (CCL_NSOCKS_PERTHREAD=$CCL_NSOCKS_PERTHREAD CCL_SOCKET_NTHREADS=$CCL_SOCKET_NTHREADS)}" >&2
  if [ "$most" -lt $((min_sockets * pairs)) ]; then
    echo "SOCKETS: node 0 held $most tcp connection(s) to other nodes, expected at least" \
      "$min_sockets per pair of ranks across nodes ($((min_sockets * pairs)))"
  fi
}

echo "netns_kill: variant $variant, $nodes nodes x $per_node ranks, $trials kill +" \
  "$idle_trials kill-idle trials, CCL_TIMEOUT=$ccl_timeout, seed $seed, logs in $workdir"

# The transport: ccl-topo --pairs on the same shape (and nothing else: the program is `true`).
timeout -k 5 60 "$netns_dir/netns_variant.sh" "$variant" "$topo" "$cluster" --nodes "$nodes" \
  --ranks-per-node "$per_node" --timeout 30 -- true >"$workdir/transport.log" 2>&1
status=$?
if [ "$status" != 0 ]; then
  cat "$workdir/transport.log"
  [ "$status" = 77 ] && exit 77
  failures=1
  echo "FAIL: the transport check failed (status $status)"
  exit 1
fi
grep "^netns_variant:" "$workdir/transport.log"

RANDOM=$seed
latencies=()
total=$((trials + idle_trials))
for ((t = 1; t <= total; ++t)); do
  dir=$workdir/trial$t
  mkdir -p "$dir"
  victim=$((RANDOM % world))
  if [ "$t" = 1 ] && [ "$trials" -ge 1 ]; then  # long enough to count the sockets
    mode=kill moment=$((300 + RANDOM % 400)) extra=()
  elif [ "$t" -le "$trials" ]; then
    mode=kill moment=$((10 + RANDOM % 700)) extra=()
  else
    # The ranks sleep 1 s after pass K; the victim dies 50..549 ms into that sleep.
    mode=kill-idle moment=$((50 + RANDOM % 500)) extra=(--idle-iter $((1 + RANDOM % 30)) --idle-ms 1000)
  fi
  before=$(list_shm)
  start=$(now_ms)
  "$cluster" --nodes "$nodes" --ranks-per-node "$per_node" \
    --timeout "$trial_s" --expect-killed "$victim" -- \
    "$prog" --mode "$mode" --victim "$victim" --moment-ms "$moment" --dir "$dir" \
    --cap-ms $((cap_s * 1000)) --max-latency-ms "$max_latency_ms" \
    --timeout-ms $((ccl_timeout * 1000)) "${extra[@]}" >"$dir/log" 2>&1 &
  cluster_pid=$!
  sockets=
  [ "$t" = 1 ] && sockets=$(count_sockets "$dir")
  # netns_cluster.sh ends itself at trial_s (124); past trial_s + 10 s it is ended here.
  while kill -0 "$cluster_pid" 2>/dev/null && [ $(( $(now_ms) - start )) -lt $(( (trial_s + 10) * 1000 )) ]; do
    sleep 0.05
  done
  kill -0 "$cluster_pid" 2>/dev/null && kill -TERM "$cluster_pid" 2>/dev/null
  wait "$cluster_pid"
  status=$?
  elapsed=$(( ($(now_ms) - start) / 1000 ))
  pid_of_cluster=$cluster_pid
  problems=()
  [ -n "$sockets" ] && problems+=("$sockets")
  [ "$status" = 77 ] && { cat "$dir/log"; exit 77; }

  # Left running or left behind: a hang, a leak.
  for f in "$dir"/pid.*; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    grep -qs fault_check "/proc/$p/cmdline" &&
      problems+=("HANG: ${f##*/} (pid $p) still running after the cluster exited")
  done
  left_ns=$(our_ns "$pid_of_cluster" | tr '\n' ' ')
  [ -n "$left_ns" ] && problems+=("LEAK: namespaces left: $left_ns")
  end_trial "$dir"
  new=$(comm -13 <(echo "$before") <(list_shm))
  if [ -n "$new" ]; then
    sleep 0.5  # another process's file passing through is gone by then
    for f in $new; do [ -e "/dev/shm/$f" ] && problems+=("LEAK: left in /dev/shm: $f"); done
  fi

  # The survivors' verdicts.
  trial_lat=()
  for ((r = 0; r < world; ++r)); do
    [ "$r" = "$victim" ] && continue
    line=$(grep -m1 "^\[$r\] FAULT rank $r " "$dir/log")
    if [ -z "$line" ]; then
      problems+=("rank $r: no FAULT line$(grep -m1 -E "^\[$r\] (NOFAULT|CORRUPT|SETUP)" "$dir/log" |
        sed 's/^/: /')")
      continue
    fi
    result=$(sed -E 's/.* result ([A-Za-z]+) .*/\1/' <<<"$line")
    latency=$(sed -E 's/.* latency_ms ([^ ]+) .*/\1/' <<<"$line")
    message=${line#*: }
    case "$latency" in
      ''|*[!0-9-]*) problems+=("rank $r: no latency (failed before the kill?)") ;;
      *) trial_lat+=("$latency")
         [ "$latency" -le "$max_latency_ms" ] ||
           problems+=("rank $r: latency $latency ms > $max_latency_ms ms") ;;
    esac
    case "$result" in cclRemoteError|cclTimeout) ;;
      *) problems+=("rank $r: result $result, expected cclRemoteError or cclTimeout") ;; esac
    names_rank "$message" "$victim" ||
      problems+=("rank $r: the message does not name the victim, rank $victim: $message")
    if ! grep -q "^\[$r\] SURVIVOR OK rank $r " "$dir/log"; then
      verdict=$(grep -m1 "^\[$r\] SURVIVOR BAD" "$dir/log" | sed "s/^\[$r\] SURVIVOR BAD rank $r: //")
      problems+=("rank $r: fault_check's verdict: ${verdict:-none (hung after the error?)}")
    fi
  done
  grep -q "^\[$victim\] FAULT" "$dir/log" && problems+=("victim $victim reported a failure")
  grep -q "^netns_cluster: rank $victim was killed by SIGKILL" "$dir/log" ||
    problems+=("victim $victim did not die of its SIGKILL")
  while IFS= read -r l; do problems+=("$l"); done < <(grep "CORRUPT" "$dir/log")
  case "$status" in
    0) ;;
    124) problems+=("HANG: the cluster ran into its $trial_s s limit") ;;
    *) problems+=("netns_cluster.sh exited $status") ;;
  esac
  [ "$elapsed" -lt "$trial_s" ] || problems+=("HANG: the trial took $elapsed s")

  latencies+=("${trial_lat[@]}")
  what="$mode, victim $victim, moment $moment ms${extra[*]:+ (${extra[*]})}, $elapsed s"
  if [ ${#problems[@]} = 0 ]; then
    echo "trial $t/$total: $what: ok (latencies ms: ${trial_lat[*]:-none})"
    grep "^\[[0-9]*\] NOTE" "$dir/log" | sed 's/^/    /'
  else
    failures=$((failures + 1))
    echo "trial $t/$total: $what: FAILED (latencies ms: ${trial_lat[*]:-none})"
    printf '    %s\n' "${problems[@]}"
    echo "---- log of trial $t ----"
    cat "$dir/log"
    if printf '%s\n' "${problems[@]}" | grep -q "^HANG"; then
      echo "netns_kill: stopping after a hung trial"
      break
    fi
  fi
done

max=none
[ ${#latencies[@]} -gt 0 ] && max=$(printf '%s\n' "${latencies[@]}" | sort -n | tail -n1)
echo "netns_kill $variant ${nodes}x$per_node: trials $total, survivors ${#latencies[@]} with a" \
  "latency, max $max ms, failures $failures"
[ "$failures" = 0 ] && echo "PASS"
[ "$failures" = 0 ]
