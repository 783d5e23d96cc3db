#!/usr/bin/env python3
"""Recovery from a killed rank: how long from the kill to the survivors' next successful collective.

Runs tests/fault/recovery_trials.sh (randomized chaos trials of tests/fault/recovery_check: one or
two ranks SIGKILLed during init, a collective, a group, a stream operation or the shrink itself;
every survivor revokes, shrinks with CCL_SHRINK_ABORT and goes on) for each configuration
(transport x rank count), then prints a markdown table: per configuration the trials, how many
recovered, failed with an error (a death during init: there is nothing to shrink), failed (the
trial broke a rule: the list follows the tables), hung, and the latencies in ms, median / worst
over the recovered trials:
  kill -> recovered       the kill to the survivors' first successful collective on the shrunk
                          communicator (the worst survivor; from the first kill of the recovery)
  kill -> failed call     the kill to the survivors' failed call (detection)
  failed call -> recovered   revoke + shrink + destroying the old communicator + the first
                          collective; of which
  in cclCommShrink        the shrink's calls (its agreement and the new communicator's join,
                          again if a rank died during it), and
  destroying the old comm cclCommDestroy of the revoked communicator
(each column is its own worst survivor, so the parts need not add up to the total), and a second
table of the same per phase, all configurations together.

  /usr/bin/python3 perf/recovery/recovery_bench.py                      # 2 x 3 x 25 trials
  /usr/bin/python3 perf/recovery/recovery_bench.py --trials 40 --out recovery.md
  /usr/bin/python3 perf/recovery/recovery_bench.py --np 4 --transports shm,tcp --trials 5

Needs a build with cclrun and recovery_check (--build, default build/). Standard library only.
Exit status: 0 every trial passed, 1 a trial failed or hung, 2 bad usage. The targets (kill ->
recovered <= 1000 ms median and worst at 8 ranks, no hang) are reported, not enforced.
"""

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
TRIALS_SH = os.path.join(REPO, "tests", "fault", "recovery_trials.sh")
PHASES = ("init", "collective", "group", "stream", "shrink")
TARGET_MS = 1000
# recovery_trials.sh --results columns.
FIELDS = ("transport", "np", "seed", "trial", "phase", "victims", "verdict", "latency", "detect",
          "rest", "shrink", "destroy", "problems")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="build directory")
    p.add_argument("--np", default="4,8", help="rank counts, comma separated (default 4,8)")
    p.add_argument("--transports", default="shm,tcp,ucx", help="default shm,tcp,ucx")
    p.add_argument("--trials", type=int, default=25, help="trials per configuration (25)")
    p.add_argument("--phases", default=",".join(PHASES), help="default: all five")
    p.add_argument("--ccl-timeout", type=int, default=10, help="CCL_TIMEOUT in s (10)")
    p.add_argument("--seed", type=int, default=None, help="seed of the first configuration "
                   "(the next ones use seed+1, ...); default random")
    p.add_argument("--out", help="also write the markdown here")
    p.add_argument("--logs", help="folder for the trials' output and results (default: a new "
                   "folder under /tmp)")
    p.add_argument("--from-results", metavar="FILE", help="run nothing: make the tables from the "
                   "results.tsv of an earlier run")
    a = p.parse_args()
    try:
        a.np_list = [int(x) for x in a.np.split(",") if x]
    except ValueError:
        p.error("--np must be numbers, comma separated")
    a.transport_list = [x for x in a.transports.split(",") if x]
    for t in a.transport_list:
        if t not in ("shm", "tcp", "ucx"):
            p.error(f"unknown transport {t}")
    for ph in a.phases.split(","):
        if ph not in PHASES:
            p.error(f"unknown phase {ph}")
    if a.trials < 1 or a.ccl_timeout < 1 or not a.np_list:
        p.error("--trials, --ccl-timeout and --np must be positive")
    return a


def have_ucx(build: str) -> bool:
    info = os.path.join(build, "tools", "ccl-info")
    try:
        out = subprocess.run([info, "--build"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return True  # let the trials say
    return "ucx yes" in out


def ms(r: Dict[str, str], key: str) -> Optional[int]:
    return int(r[key]) if r[key].lstrip("-").isdigit() else None


def median_worst(values: List[Optional[int]]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    return f"{int(statistics.median_low(values))} / {max(values)}"


def table(rows: List[Dict[str, str]], key_title: str, keys: List[str], key_of) -> List[str]:
    out = [f"| {key_title} | trials | recovered | failed with error (init) | failed | hangs | "
           "kill -> recovered (ms) median / worst | kill -> failed call | failed call -> recovered |"
           " in cclCommShrink | destroying the old comm |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for k in keys:
        mine = [r for r in rows if key_of(r) == k]
        if not mine:
            continue
        rec = [r for r in mine if r["verdict"] == "recovered"]
        hangs = sum(1 for r in mine if "HANG" in r["problems"])
        out.append(
            f"| {k} | {len(mine)} | {len(rec)} | "
            f"{sum(1 for r in mine if r['verdict'] == 'failed-error')} | "
            f"{sum(1 for r in mine if r['verdict'] == 'fail')} | {hangs} | "
            f"{median_worst([ms(r, 'latency') for r in rec])} | "
            f"{median_worst([ms(r, 'detect') for r in rec])} | "
            f"{median_worst([ms(r, 'rest') for r in rec])} | "
            f"{median_worst([ms(r, 'shrink') for r in rec])} | "
            f"{median_worst([ms(r, 'destroy') for r in rec])} |")
    return out


def run_trials(a: argparse.Namespace, logs: str, results: str) -> Tuple[List[str], List[str]]:
    """Runs every configuration; returns the commands and the configurations skipped."""
    if os.path.exists(results):
        os.remove(results)
    ucx = have_ucx(a.build)
    seed = a.seed if a.seed is not None else int.from_bytes(os.urandom(2), "little")
    commands: List[str] = []
    skipped: List[str] = []
    for np_ in a.np_list:
        for t in a.transport_list:
            if t == "ucx" and not ucx:
                skipped.append(f"ucx np {np_}: n/a (this build has no UCX)")
                continue
            cmd = [TRIALS_SH, "--transport", t, "--np", str(np_), "--trials", str(a.trials),
                   "--phases", a.phases, "--ccl-timeout", str(a.ccl_timeout), "--seed",
                   str(seed), "--results", results, a.build]
            seed += 1
            commands.append(" ".join(shlex.quote(c) for c in cmd))
            log = os.path.join(logs, f"{t}.np{np_}.log")
            print(f"recovery_bench: {t} np {np_}: {a.trials} trials (output: {log})",
                  file=sys.stderr, flush=True)
            with open(log, "w") as f:
                subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, check=False)
            with open(log) as f:
                summary = [line for line in f if line.startswith("recovery_trials ")]
            print("  " + (summary[-1].strip() if summary else "(no summary line)"),
                  file=sys.stderr, flush=True)
    return commands, skipped


def main() -> int:
    a = parse_args()
    commands: List[str] = []
    skipped: List[str] = []
    started = time.time()
    if a.from_results:
        results = a.from_results
        logs = os.path.dirname(os.path.abspath(results))
    else:
        for f in (os.path.join(a.build, "tools", "cclrun"),
                  os.path.join(a.build, "tests", "fault", "recovery_check")):
            if not os.access(f, os.X_OK):
                print(f"recovery_bench: {f} is not built", file=sys.stderr)
                return 2
        logs = a.logs or tempfile.mkdtemp(prefix="ccl-recovery-bench.")
        os.makedirs(logs, exist_ok=True)
        results = os.path.join(logs, "results.tsv")
        commands, skipped = run_trials(a, logs, results)
    minutes = (time.time() - started) / 60

    rows: List[Dict[str, str]] = []
    if os.path.exists(results):
        with open(results) as f:
            for line in f:
                parts = line.rstrip("\n").split("\t")
                if len(parts) == len(FIELDS):
                    rows.append(dict(zip(FIELDS, parts)))
    configs = [f"{t} np {n}" for n in a.np_list for t in a.transport_list]
    if a.from_results:
        configs = list(dict.fromkeys(f"{r['transport']} np {r['np']}" for r in rows))
        md: List[str] = [f"Recovery trials: {len(rows)} trials (from {results}).", ""]
    else:
        md = [f"Recovery trials: {len(rows)} trials, {a.trials} per configuration, phases "
              f"{a.phases}, CCL_TIMEOUT={a.ccl_timeout}, {os.cpu_count()} cores, {minutes:.1f} "
              f"min; load average at the end {os.getloadavg()[0]:.2f}.", ""]
    md += table(rows, "configuration", configs, lambda r: f"{r['transport']} np {r['np']}")
    md += ["", "Per phase, all configurations:", ""]
    md += table(rows, "phase", list(PHASES), lambda r: r["phase"])
    md.append("")
    at8 = [ms(r, "latency") for r in rows if r["np"] == "8" and r["verdict"] == "recovered"]
    at8 = [v for v in at8 if v is not None]
    hangs = sum(1 for r in rows if "HANG" in r["problems"])
    if at8:
        ok = statistics.median_low(at8) <= TARGET_MS and max(at8) <= TARGET_MS
        md.append(f"Target kill -> next successful collective <= {TARGET_MS} ms at 8 ranks: median "
                  f"{statistics.median_low(at8)} ms, worst {max(at8)} ms: "
                  f"{'met' if ok else 'NOT met'}.")
    md.append(f"Target no hang: {hangs} hung trial(s) in {len(rows)}: "
              f"{'met' if hangs == 0 else 'NOT met'}.")
    failed = [r for r in rows if r["verdict"] == "fail"]
    if failed:
        md += ["", "Failed trials:", ""]
        for r in failed:
            md.append(f"- {r['transport']} np {r['np']} seed {r['seed']} trial {r['trial']}: "
                      f"{r['phase']}, victims {r['victims']}: {r['problems'].strip('; ')}")
    if skipped:
        md += [""] + [f"    {line}" for line in skipped]
    if commands:
        md += ["", "Commands:", ""] + [f"    {c}" for c in commands]
    md += ["", f"Logs and results: {logs}"]
    text = "\n".join(md) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 1 if failed or hangs else 0


if __name__ == "__main__":
    sys.exit(main())
