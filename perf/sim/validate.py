#!/usr/bin/env python3
"""Validate ccl-sim against real runs on this machine (issue 32, point 3).

For every rank count, transport (shm, or tcp: CCL_SHM_DISABLE=1 / ccl-sim --no-shm) and
collective, it

  (a) runs the real build/perf/*_perf under cclrun with the tuner's own choice, --launches times,
      and keeps, per size, the MEDIAN over the launches of the out-of-place time (each launch's
      time is the perf binary's mean over its timed iterations, averaged across ranks);
  (b) runs ccl-sim on the same shape with --pick-only --figures cache (after the first real launch,
      so that the tuner cache the real run's tuner used exists), and compares the pick's simulated
      time with (a): error = (sim - real) / real (negative: ccl-sim is optimistic);
  (c) unless --no-winner: runs ccl-sim without --pick-only to learn which algorithms are
      candidates at each size, then the real *_perf once (--winner-launches) per such algorithm,
      forced with CCL_ALGO=<collective>:<algorithm> (the tuner still picks the protocol),
      interleaved with the launches of (a), and
      ccl-sim --algo <collective>:<algorithm> --pick-only (the same restriction, so the same
      protocol). At every (collective, size, ranks) point with two candidate algorithms or more it
      asks whether ccl-sim's fastest algorithm is the measured fastest (a tie in ccl-sim counts as
      agreement when the measured fastest is among the tied ones), whether the tuner's pick is,
      and how much slower than the measured best the algorithm ccl-sim ranks first really ran.

Output: Markdown tables on stdout (per collective and transport, per rank count, error per size,
the worst 10 points) and, with --json OUT, every point. The header prints the CPU count: where
ranks outnumber CPUs they time-share cores, which ccl-sim does not model (it gives every rank its
own core); those rows are marked "oversubscribed". Before every launch the script samples how
many CPUs other processes keep busy (/proc/stat over --idle-sample seconds), and during it the
machine's busy CPU time less the launch's own (its processes' rusage); the tables show the largest
"during" figure of each shape. --wait-idle waits (bounded) for a quiet machine before a launch,
and a launch that others disturbed anyway (--max-other-load) runs again (--retries). Ranks are
pinned (cclrun --bind core) and every size gets -w 5 -n 50 unless told otherwise (see --bind).

  perf/sim/validate.py --quick                           # smoke run: 2, 4 ranks, shm, 2 collectives
  perf/sim/validate.py --ranks 2,4,8 --transports shm --collectives allreduce,allgather \\
      --launches 3 --json /tmp/validate.json
  perf/sim/validate.py       # 2,4,8 ranks x shm,tcp x all six, -b 8 -e 64M -f 8 (8 B..16 MiB)
  perf/sim/validate.py --resimulate /tmp/validate.json   # the same measurements, ccl-sim again

Every subprocess runs under a timeout (--timeout per perf launch, --sim-timeout per ccl-sim call).
Exit status: 0 when every run worked, 1 when a run failed or timed out (its shape is skipped and
named), 2 on bad usage. The targets (median error <= 10%, p95 <= 20%, winner agreement >= 90%)
are reported, not enforced. Standard library only.
"""

import argparse
import datetime
import glob
import json
import math
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "compare"))
from compare import run_bounded  # noqa: E402  (perf/compare/compare.py)

# collective -> (perf binary, its nccl-tests flags)
COLLECTIVES = {
    "allreduce": ("all_reduce_perf", ["-o", "sum"]),
    "broadcast": ("broadcast_perf", ["-r", "0"]),
    "reduce": ("reduce_perf", ["-o", "sum", "-r", "0"]),
    "allgather": ("all_gather_perf", []),
    "reducescatter": ("reduce_scatter_perf", ["-o", "sum"]),
    "alltoall": ("alltoall_perf", []),
}
# Collectives whose tuner size (what the TUNE log prints) is one rank's piece: the row size is
# nranks times it.
PIECE_COLLECTIVES = ("allgather", "reducescatter", "alltoall")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
TARGET_MEDIAN = 0.10
TARGET_P95 = 0.20
TARGET_WINNER = 0.90
REGRET_TOLERANCE = 0.05  # "ccl-sim's first choice within 5% of the measured best"


class RunError(Exception):
    pass


def parse_size(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([KMG]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r}")
    return int(m.group(1)) * UNITS[m.group(2).upper()]


def format_size(n: int) -> str:
    for suffix, unit in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {suffix}"
    return f"{n} B"


def percentile(values: List[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    v = sorted(values)
    if not v:
        return float("nan")
    pos = (len(v) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def pct(x: Optional[float], signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x * 100:+.1f}%" if signed else f"{x * 100:.1f}%"


def share(num: int, den: int) -> str:
    return f"{num}/{den} ({100.0 * num / den:.0f}%)" if den else "-"


def cpu_count() -> Tuple[int, int]:
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 0
    return os.cpu_count() or 1, usable or (os.cpu_count() or 1)


def cpu_times() -> Tuple[float, float]:
    with open("/proc/stat") as f:
        fields = [float(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)  # idle + iowait
    return sum(fields[:8]), idle


def busy_seconds() -> Optional[float]:
    """CPU seconds spent busy by the whole machine since boot (all CPUs summed)."""
    try:
        total, idle = cpu_times()
    except OSError:
        return None
    return (total - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def busy_cpus(sample_s: float) -> Optional[float]:
    """CPUs kept busy by other processes over the next sample_s seconds (nothing of ours runs)."""
    try:
        t0, i0 = cpu_times()
        time.sleep(sample_s)
        t1, i1 = cpu_times()
    except OSError:
        return None
    if t1 <= t0:
        return None
    return (1.0 - (i1 - i0) / (t1 - t0)) * (os.cpu_count() or 1)


def run_or_fail(cmd: List[str], env: Dict[str, str], timeout: float,
                what: str) -> subprocess.CompletedProcess:
    """compare.run_bounded (its own session: a timeout, or this script being stopped, takes the
    whole group down, cclrun and its ranks), with a timeout as a RunError naming `what`."""
    result = run_bounded(cmd, env, timeout)
    if result is None:
        raise RunError(f"{what}: timed out after {timeout} s: {shlex.join(cmd)}")
    return subprocess.CompletedProcess(cmd, *result)


def sim_command(sim: str, coll: str, n: int, transport: str, sweep: Tuple[int, int, int],
                figures: str, pick_only: bool, algo: Optional[str], model: Optional[str],
                calls: int) -> List[str]:
    """ccl-sim on the shape of a real run: n ranks on this host, shm off for tcp; sweep is
    (-b, -e, -f); figures: "cache" or a figures file; --json is added by run_sim."""
    cmd = [sim, "--ranks", str(n), "--collective", coll, "-b", str(sweep[0]), "-e",
           str(sweep[1]), "-f", str(sweep[2]), "--figures", figures, "--calls", str(calls)]
    if model:
        cmd += ["--model", model]
    if pick_only:
        cmd.append("--pick-only")
    if algo:
        cmd += ["--algo", f"{coll}:{algo}"]
    if transport == "tcp":
        cmd.append("--no-shm")
    return cmd


def run_sim(cmd: List[str], out_json: str, env: Dict[str, str],
            timeout: float) -> Tuple[List[dict], subprocess.CompletedProcess]:
    """Runs a sim_command with --json out_json: its results (then out_json is removed) and the
    finished process; a RunError on a timeout or a failure."""
    out = run_or_fail(cmd + ["--json", out_json], env, timeout, "ccl-sim")
    if out.returncode != 0:
        raise RunError(f"ccl-sim exit {out.returncode}: {shlex.join(out.args)}\n{out.stderr}")
    with open(out_json) as f:
        results = json.load(f)["results"]
    os.unlink(out_json)
    return results, out


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


class Validator:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.build = os.path.abspath(args.build_dir)
        self.cclrun = os.path.join(self.build, "tools", "cclrun")
        self.sim = os.path.abspath(args.sim) if args.sim else os.path.join(self.build, "tools",
                                                                          "ccl-sim")
        self.ncpu, self.usable_cpu = cpu_count()
        self.tmp = tempfile.mkdtemp(prefix="ccl-validate.")
        # --fresh-figures: an empty tuner cache of our own, read by the real runs and ccl-sim
        # alike, so the first launch of every shape probes the figures anew (today's machine).
        self.cache_dir = os.path.join(self.tmp, "tuner-cache") if args.fresh_figures else None
        self.failures: List[str] = []
        self.models: Dict[Tuple[str, int, str], str] = {}
        self.retried = 0    # launches run again because others disturbed them
        self.disturbed = 0  # launches kept although every attempt was disturbed
        self.log = sys.stderr

    # ---- helpers -------------------------------------------------------------------------

    def note(self, text: str) -> None:
        print(text, file=self.log, flush=True)

    def base_env(self, transport: str) -> Dict[str, str]:
        env = dict(os.environ)
        for var in ("CCL_ALGO", "CCL_PROTO", "CCL_SHM_DISABLE", "CCL_DEBUG", "CCL_DEBUG_SUBSYS",
                    "CCL_DEBUG_FILE"):
            env.pop(var, None)
        if transport == "tcp":
            env["CCL_SHM_DISABLE"] = "1"
        if self.cache_dir:
            env["CCL_TUNER_CACHE"] = self.cache_dir
        return env

    def bind_for(self, n: int) -> str:
        if self.args.bind != "auto":
            return self.args.bind
        return "core" if n > self.usable_cpu else "none"

    def wait_quiet(self) -> Optional[float]:
        """Samples the other processes' load; with --wait-idle, waits (bounded) for it to drop."""
        deadline = time.monotonic() + self.args.wait_idle
        while True:
            busy = busy_cpus(self.args.idle_sample)
            if (self.args.wait_idle <= 0 or busy is None or busy <= self.args.idle_threshold
                    or time.monotonic() >= deadline):
                return busy
            time.sleep(1.0)

    # ---- the real runs ---------------------------------------------------------------------

    def real_launch(self, coll: str, n: int, transport: str,
                    algo: Optional[str]) -> Tuple[Dict[int, Tuple[float, float]],
                                                  Dict[int, str], Optional[float], float]:
        """One launch of the collective's *_perf: {row bytes: (out-of-place us, in-place us)},
        the tuner's choices from rank 0's TUNE log {row bytes: "algo/proto"}, the other
        processes' load before it, and its wall time."""
        binary, flags = COLLECTIVES[coll]
        a = self.args
        run_dir = tempfile.mkdtemp(prefix="run.", dir=self.tmp)
        out_json = os.path.join(run_dir, "perf.json")
        env = self.base_env(transport)
        env.update(CCL_DEBUG="INFO", CCL_DEBUG_SUBSYS="TUNE",
                   CCL_DEBUG_FILE=os.path.join(run_dir, "tune.%p"))
        if algo:
            env["CCL_ALGO"] = f"{coll}:{algo}"
        perf = [os.path.join(self.build, "perf", binary), "-b", str(a.begin), "-e", str(a.end),
                "-f", str(a.factor), "-c", "0", "-d", "float", "--json", out_json] + flags
        if a.iters is not None:
            perf += ["-n", str(a.iters)]
        if a.warmup is not None:
            perf += ["-w", str(a.warmup)]
        if a.blocking:
            perf += ["-y", "1"]
        cmd = [self.cclrun, "-np", str(n), "--timeout", str(a.timeout), "--bind",
               self.bind_for(n)] + perf
        busy = self.wait_quiet()
        machine0, ours0 = busy_seconds(), children_cpu_seconds()
        t0 = time.monotonic()
        what = f"{coll} np{n} {transport} " + (f"CCL_ALGO={env['CCL_ALGO']}" if algo else
                                                "tuner's choice")
        out = run_or_fail(cmd, env, a.timeout + 30, what)
        wall = time.monotonic() - t0
        machine1, ours1 = busy_seconds(), children_cpu_seconds()
        during = None
        if machine0 is not None and machine1 is not None and wall > 0:
            # what the machine was busy with, less the CPU time of the launch's own processes
            during = max(0.0, (machine1 - machine0) - (ours1 - ours0)) / wall
        if out.returncode != 0:
            raise RunError(f"{what}: exit {out.returncode}: {shlex.join(cmd)}\n"
                           f"{out.stdout[-2000:]}\n{out.stderr[-2000:]}")
        try:
            with open(out_json) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            raise RunError(f"{what}: no JSON from {binary}: {e}")
        times = {}
        for r in doc.get("results", []):
            times[int(r["size"])] = (float(r["out_of_place"]["time_us"]),
                                     float(r["in_place"]["time_us"]))
        choices = self.tune_choices(run_dir, coll, n)
        shutil.rmtree(run_dir, ignore_errors=True)
        return times, choices, (busy, during), wall

    @staticmethod
    def tune_choices(run_dir: str, coll: str, n: int) -> Dict[int, str]:
        """{row bytes: "algo/proto"} from the lowest pid's log (every rank chooses alike)."""
        logs = sorted(glob.glob(os.path.join(run_dir, "tune.*")),
                      key=lambda p: int(p.rsplit(".", 1)[1]) if p.rsplit(".", 1)[1].isdigit()
                      else 0)
        choices: Dict[int, str] = {}
        if not logs:
            return choices
        size = None
        head = re.compile(r"CCL INFO " + re.escape(coll) + r" (\d+) B:")
        other = re.compile(r"CCL INFO \S+ \d+ B:")
        with open(logs[0], errors="replace") as f:
            for line in f:
                m = head.search(line)
                if m:
                    size = int(m.group(1))
                    continue
                if other.search(line):
                    size = None
                    continue
                m = re.match(r"\s+(\S+)\s+[\d.]+ us\s+<- chosen", line)
                if m and size is not None:
                    row = size * n if coll in PIECE_COLLECTIVES else size
                    choices.setdefault(row, m.group(1))
        return choices

    # ---- ccl-sim ---------------------------------------------------------------------------

    def sim_run(self, coll: str, n: int, transport: str, pick_only: bool,
                algo: Optional[str]) -> Tuple[List[dict], str]:
        a = self.args
        cmd = sim_command(self.sim, coll, n, transport, (a.begin, a.end, a.factor), "cache",
                          pick_only, algo, a.sim_model, a.sim_calls)
        results, out = run_sim(cmd, os.path.join(self.tmp, "sim.json"), self.base_env("shm"),
                               a.sim_timeout)
        source, model = "", []
        for line in out.stdout.splitlines():
            if line.startswith("# the tuner's figures:"):
                source = line.split(":", 1)[1].strip()
            elif line.startswith("  ") and not line.lstrip().startswith(("#", "0", "1", "2", "3",
                                                                         "4", "5", "6", "7", "8",
                                                                         "9")):
                model.append(line.strip())
        self.models[(coll, n, transport)] = "; ".join(model)
        return [r for r in results if int(r["bytes"]) > 0], source

    # ---- one shape ---------------------------------------------------------------------------

    def launch(self, coll: str, n: int, transport: str, algo: Optional[str], what: str,
               loads: List[Tuple[Optional[float], Optional[float]]]):
        """real_launch, repeated (at most --retries more times) while other processes kept more
        than --max-other-load CPUs busy during it; keeps the least disturbed attempt."""
        best = None
        for attempt in range(self.args.retries + 1):
            times, ch, load, wall = self.real_launch(coll, n, transport, algo)
            loads.append(load)
            during = load[1] if load[1] is not None else 0.0
            self.note(f"    {what}: {wall:.1f} s, other load before/during "
                      + "/".join("?" if x is None else f"{x:.2f}" for x in load) + " CPUs"
                      + (" -> again" if during > self.args.max_other_load
                         and attempt < self.args.retries else ""))
            if best is None or during < best[3]:
                best = (times, ch, attempt, during)
            if during <= self.args.max_other_load:
                break
        else:
            self.disturbed += 1
        self.retried += best[2] if best else 0
        return best

    def shape(self, coll: str, n: int, transport: str) -> List[dict]:
        a = self.args
        label = f"{coll} {transport} np{n}"
        self.note(f"{label}:")
        t_shape = time.monotonic()
        launches: List[Dict[int, Tuple[float, float]]] = []
        choices: Dict[int, set] = {}
        loads: List[Tuple[Optional[float], Optional[float]]] = []
        kept_loads: List[float] = []

        def default_launch(k: int) -> None:
            times, ch, _, during = self.launch(coll, n, transport, None,
                                               f"tuner's choice {k + 1}/{a.launches}", loads)
            launches.append(times)
            kept_loads.append(during)
            for size, c in ch.items():
                choices.setdefault(size, set()).add(c)

        # (a), first launch: it also leaves the tuner cache for this shape
        default_launch(0)
        # (b)
        picks, source = self.sim_run(coll, n, transport, True, None)
        if "tuner cache" not in source:
            self.failures.append(f"{label}: ccl-sim did not read the tuner cache ({source})")
        pick_by_size = {int(r["bytes"]): r for r in picks if r["pick"]}

        # (c): the candidates at each size; every algorithm that is one somewhere is forced
        candidates: Dict[int, List[str]] = {}
        algos: List[str] = []
        forced_sim: Dict[str, Dict[int, dict]] = {}
        if not a.no_winner:
            listing, _ = self.sim_run(coll, n, transport, False, None)
            for r in listing:
                algs = candidates.setdefault(int(r["bytes"]), [])
                if r["algorithm"] not in algs:
                    algs.append(r["algorithm"])
                if r["algorithm"] not in algos:
                    algos.append(r["algorithm"])
            if not any(len(v) > 1 for v in candidates.values()):
                algos = []
            for alg in algos:
                sims, _ = self.sim_run(coll, n, transport, True, alg)
                forced_sim[alg] = {int(r["bytes"]): r for r in sims if r["pick"]}
        forced_runs: Dict[str, List[Dict[int, float]]] = {alg: [] for alg in algos}
        forced_choice: Dict[str, Dict[int, str]] = {}
        # The rest interleaved, so that the machine's drift hits the settings alike: round r
        # runs the tuner's choice (r >= 1) and, for r < --winner-launches, every forced
        # algorithm, starting one further each round.
        for r in range(max(a.launches, a.winner_launches if algos else 0)):
            if 1 <= r < a.launches:
                default_launch(r)
            if r < a.winner_launches and algos:
                for i in range(len(algos)):
                    alg = algos[(i + r) % len(algos)]
                    times, ch, _, during = self.launch(
                        coll, n, transport, alg,
                        f"forced {alg} {r + 1}/{a.winner_launches}", loads)
                    forced_runs[alg].append({s: t[0] for s, t in times.items()})
                    kept_loads.append(during)
                    for size, c in ch.items():
                        forced_choice.setdefault(alg, {}).setdefault(size, c)
        forced_real: Dict[str, Dict[int, float]] = {}
        for alg, runs in forced_runs.items():
            sizes = set().union(*runs) if runs else set()
            forced_real[alg] = {s: statistics.median(run[s] for run in runs if s in run)
                                for s in sizes}
        before = [l[0] for l in loads if l[0] is not None]
        points = []
        for size in sorted(pick_by_size):
            per = [l[size] for l in launches if size in l]
            if not per:
                continue
            pick = pick_by_size[size]
            real = statistics.median(t[0] for t in per)
            real_ip = statistics.median(t[1] for t in per)
            sim = float(pick["time_us"])
            p = {
                "collective": coll, "transport": transport, "ranks": n, "bytes": size,
                "oversubscribed": n > self.usable_cpu,
                "pick": f"{pick['algorithm']}/{pick['protocol']}",
                "pick_simulated": bool(pick["simulated"]),
                "pick_predicted_us": pick.get("predicted_us"),
                "real_choices": sorted(choices.get(size, [])),
                "real_us_launches": [t[0] for t in per],
                "real_us": real,
                "real_in_place_us": real_ip,
                "sim_us": sim,
            }
            p["pick_matches_real"] = (not p["real_choices"]
                                      or p["real_choices"] == [p["pick"]])
            cands = candidates.get(size, [])
            if len(cands) > 1:
                forced = {}
                for alg in cands:
                    r_us = forced_real.get(alg, {}).get(size)
                    s_row = forced_sim.get(alg, {}).get(size)
                    if r_us is None or s_row is None:
                        continue
                    forced[alg] = {"real_us": r_us, "sim_us": float(s_row["time_us"]),
                                   "protocol": s_row["protocol"],
                                   "real_choice": forced_choice.get(alg, {}).get(size)}
                if len(forced) > 1:
                    p["forced"] = forced
            score(p)
            points.append(p)
        load_before = statistics.median(before) if before else None
        load_during = max(kept_loads) if kept_loads else None
        self.note(f"  {label}: {len(points)} points, {time.monotonic() - t_shape:.0f} s, other "
                  f"load: median before {load_before}, max during {load_during} CPUs")
        # The figures themselves too: a --fresh-figures cache is gone after the run, and
        # --resimulate needs them.
        prefix = "the tuner cache, "
        figures_text = None
        if source.startswith(prefix) and os.path.exists(source[len(prefix):]):
            with open(source[len(prefix):]) as f:
                figures_text = f.read()
        for p in points:
            p["other_load_before_cpus"] = load_before
            p["other_load_during_max_cpus"] = load_during
            p["figures"] = source
            p["figures_text"] = figures_text
            p["model"] = self.models.get((coll, n, transport), "")
        return points


# ---- scores ---------------------------------------------------------------------------------

def score(p: dict) -> None:
    """A point's errors from its real and simulated times and, where it has forced runs of two or
    more candidates ("forced", in the tuner's order of preference), the winner checks."""
    real, sim = p["real_us"], p["sim_us"]
    p["error"] = (sim - real) / real
    p["abs_error"] = abs(sim - real) / real
    p["in_place_error"] = (sim - p["real_in_place_us"]) / p["real_in_place_us"]
    forced = p.get("forced")
    if not forced:
        return
    pick_algorithm = p["pick"].split("/")[0]
    real_best = min(forced, key=lambda x: forced[x]["real_us"])
    sim_min = min(v["sim_us"] for v in forced.values())
    sim_best = [x for x in forced if forced[x]["sim_us"] <= sim_min * (1 + 1e-6)]
    first = sim_best[0]  # the tuner's preference order breaks ties
    p["real_winner"] = real_best
    p["sim_winners"] = sim_best
    p["sim_winner_ok"] = real_best in sim_best
    p["tuner_winner_ok"] = pick_algorithm == real_best
    p["sim_first_regret"] = forced[first]["real_us"] / forced[real_best]["real_us"] - 1
    p["tuner_regret"] = (forced[pick_algorithm]["real_us"] / forced[real_best]["real_us"] - 1
                         if pick_algorithm in forced else None)


def resimulate(doc: dict, sim: str, timeout: int, model: Optional[str],
               calls: int) -> List[dict]:
    """The points of an earlier run with ccl-sim's times computed again by `sim` (a model change
    checked against the same measurements in seconds): the same shapes, sizes and figures (the
    tuner cache entry each point names, which must still exist), the pick and every forced
    candidate."""
    prefix = "the tuner cache, "
    groups: Dict[Tuple[str, int, str], List[dict]] = {}
    for p in doc["points"]:
        groups.setdefault((p["collective"], p["ranks"], p["transport"]), []).append(p)
    out = []
    tmp = tempfile.mkdtemp(prefix="ccl-resimulate.")
    for (coll, n, transport), pts in groups.items():
        figures = pts[0]["figures"]
        path = figures[len(prefix):] if figures.startswith(prefix) else ""
        if not os.path.exists(path) and pts[0].get("figures_text"):
            path = os.path.join(tmp, f"{coll}_{transport}_{n}.txt")
            with open(path, "w") as f:
                f.write(pts[0]["figures_text"])
        if not os.path.exists(path):
            raise RunError(f"{coll} {transport} np{n}: its figures are gone ({figures})")
        sizes = sorted(p["bytes"] for p in pts)

        def times(algo: Optional[str]) -> Dict[int, float]:
            cmd = sim_command(sim, coll, n, transport, (sizes[0], sizes[-1], 2), path, True, algo,
                              model, calls)
            results, _ = run_sim(cmd, os.path.join(tmp, "sim.json"), dict(os.environ), timeout)
            return {int(r["bytes"]): float(r["time_us"]) for r in results}

        picks = times(None)
        forced = {alg: times(alg) for alg in {a for p in pts for a in p.get("forced", {})}}
        for p in pts:
            q = dict(p)
            q["sim_us"] = picks[p["bytes"]]
            if "forced" in p:
                q["forced"] = {alg: dict(v, sim_us=forced[alg][p["bytes"]])
                               for alg, v in p["forced"].items()}
            score(q)
            out.append(q)
    shutil.rmtree(tmp, ignore_errors=True)
    return out


# ---- report ---------------------------------------------------------------------------------

def stats_row(pts: List[dict]) -> List[str]:
    errs = [p["abs_error"] for p in pts]
    signed = [p["error"] for p in pts]
    ip = [abs(p["in_place_error"]) for p in pts]
    win = [p for p in pts if "sim_winner_ok" in p]
    regret_ok = sum(1 for p in win if p["sim_first_regret"] <= REGRET_TOLERANCE)
    load = [p["other_load_during_max_cpus"] for p in pts
            if p.get("other_load_during_max_cpus") is not None]
    return [str(len(pts)), pct(statistics.median(errs)) if errs else "-",
            pct(percentile(errs, 0.95)) if errs else "-",
            pct(statistics.median(signed), True) if signed else "-",
            pct(statistics.median(ip)) if ip else "-",
            share(sum(p["sim_winner_ok"] for p in win), len(win)),
            share(sum(p["tuner_winner_ok"] for p in win), len(win)),
            share(regret_ok, len(win)),
            f"{max(load):.2f}" if load else "-"]


STATS_HEAD = ["points", "median \\|err\\|", "p95 \\|err\\|", "median signed err",
              "median \\|err\\| in place", "ccl-sim winner = measured", "tuner pick = measured",
              "ccl-sim's first within 5%", "max other load (CPUs)"]


def table(head: List[str], rows: List[List[str]], right_from: int = 1) -> str:
    lines = ["| " + " | ".join(head) + " |",
             "|" + "|".join("---" if i < right_from else "---:" for i in range(len(head))) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def report(points: List[dict], usable_cpu: int, header: List[str]) -> str:
    out = ["\n".join(header), ""]
    colls = [c for c in COLLECTIVES if any(p["collective"] == c for p in points)]
    transports = [t for t in ("shm", "tcp") if any(p["transport"] == t for p in points)]
    ranks = sorted({p["ranks"] for p in points})

    out.append("### Per collective and transport (the tuner's pick; all rank counts)\n")
    rows = []
    for c in colls:
        for t in transports:
            pts = [p for p in points if p["collective"] == c and p["transport"] == t]
            if pts:
                rows.append([c, t] + stats_row(pts))
    allp = stats_row(points)
    rows.append(["**all**", ""] + allp)
    out.append(table(["collective", "transport"] + STATS_HEAD, rows, 2))
    def summary(what: str, pts: List[dict]) -> None:
        out.append(f"{what}: " + ", ".join(f"{h.replace(chr(92), '')} {x}"
                                           for h, x in zip(STATS_HEAD[:4], stats_row(pts)[:4]))
                   + ".")

    nover = [p for p in points if not p["oversubscribed"]]
    if nover and len(nover) != len(points):
        out.append("")
        summary(f"Without the oversubscribed shapes (ranks <= {usable_cpu} CPUs)", nover)
    # The direct path has no schedule: ccl-sim gives its cost model's time, so those points
    # measure the tuner's model, the others the simulation.
    simulated = [p for p in points if p["pick_simulated"]]
    if simulated and len(simulated) != len(points):
        out.append("")
        summary("Points whose pick ccl-sim simulated", simulated)
        out.append("")
        summary("Points whose pick has no schedule (the direct path: the tuner's cost model)",
                [p for p in points if not p["pick_simulated"]])

    out.append("\n### Per collective, transport and rank count\n")
    rows = []
    for c in colls:
        for t in transports:
            for n in ranks:
                pts = [p for p in points if (p["collective"], p["transport"], p["ranks"])
                       == (c, t, n)]
                if pts:
                    over = " (oversubscribed)" if pts[0]["oversubscribed"] else ""
                    rows.append([c, t, f"{n}{over}"] + stats_row(pts))
    out.append(table(["collective", "transport", "ranks"] + STATS_HEAD, rows, 3))

    out.append("\n### Signed error per size: (ccl-sim - real) / real of the tuner's pick "
               "(negative: ccl-sim too optimistic); the pick in brackets\n")
    shapes = []
    for c in colls:
        for t in transports:
            for n in ranks:
                if any((p["collective"], p["transport"], p["ranks"]) == (c, t, n)
                       for p in points):
                    shapes.append((c, t, n))
    sizes = sorted({p["bytes"] for p in points})
    idx = {(p["collective"], p["transport"], p["ranks"], p["bytes"]): p for p in points}
    rows = []
    for s in sizes:
        row = [format_size(s)]
        for sh in shapes:
            p = idx.get(sh + (s,))
            row.append(f"{pct(p['error'], True)} ({p['pick']})" if p else "")
        rows.append(row)
    out.append(table(["size"] + [f"{c} {t} np{n}" for c, t, n in shapes], rows, 1))

    win = [p for p in points if "forced" in p]
    if win:
        out.append("\n### Winner check: every candidate algorithm forced (one launch each)\n")
        rows = []
        for p in win:
            algs = sorted(p["forced"], key=lambda a: p["forced"][a]["real_us"])
            rows.append([p["collective"], p["transport"], str(p["ranks"]),
                         format_size(p["bytes"]),
                         ", ".join(f"{a} {p['forced'][a]['real_us']:.1f}" for a in algs),
                         ", ".join(f"{a} {p['forced'][a]['sim_us']:.1f}"
                                   for a in sorted(p["forced"],
                                                   key=lambda a: p["forced"][a]["sim_us"])),
                         p["pick"].split("/")[0],
                         "yes" if p["sim_winner_ok"] else "**no**",
                         "yes" if p["tuner_winner_ok"] else "**no**",
                         pct(p["sim_first_regret"])])
        out.append(table(["collective", "transport", "ranks", "size", "measured us (fastest first)",
                          "ccl-sim us (fastest first)", "tuner's pick", "ccl-sim winner ok",
                          "pick ok", "ccl-sim's first: slower than best by"], rows, 4))

    out.append("\n### The 10 worst points (\\|err\\| of the tuner's pick)\n")
    rows = []
    for p in sorted(points, key=lambda p: -p["abs_error"])[:10]:
        rows.append([p["collective"], p["transport"],
                     f"{p['ranks']}{' (over)' if p['oversubscribed'] else ''}",
                     format_size(p["bytes"]), p["pick"] + ("" if p["pick_simulated"]
                                                           else " (cost model)"),
                     " / ".join(f"{t:.1f}" for t in p["real_us_launches"]),
                     f"{p['real_us']:.1f}", f"{p['sim_us']:.1f}", pct(p["error"], True),
                     f"{p['real_in_place_us']:.1f}"])
    out.append(table(["collective", "transport", "ranks", "size", "pick", "real us per launch",
                      "real median us", "ccl-sim us", "error", "real in place us"], rows, 4))

    out.append("\n### The model ccl-sim ran (from the tuner's figures), per rank count and "
               "transport\n")
    rows, seen = [], set()
    for p in points:
        key = (p["transport"], p["ranks"])
        if key not in seen:
            seen.add(key)
            rows.append([p["transport"], str(p["ranks"]), p["model"],
                         os.path.basename(p["figures"].split(", ")[-1])])
    out.append(table(["transport", "ranks", "model", "figures"], rows, 4))

    mism = [p for p in points if not p["pick_matches_real"]]
    out.append("")
    out.append(f"ccl-sim's pick = the real run's TUNE choice at {len(points) - len(mism)} of "
               f"{len(points)} points" + (": differs at " + ", ".join(
                   f"{p['collective']} {p['transport']} np{p['ranks']} {format_size(p['bytes'])} "
                   f"(sim {p['pick']}, real {'/'.join(p['real_choices'])})" for p in mism[:10])
                   if mism else "") + ".")
    errs = [p["abs_error"] for p in points]
    win_ok = sum(p["sim_winner_ok"] for p in win)
    out.append(f"Targets (issue 32): median |err| <= {TARGET_MEDIAN:.0%}: "
               f"{'met' if errs and statistics.median(errs) <= TARGET_MEDIAN else 'NOT met'}; "
               f"p95 <= {TARGET_P95:.0%}: "
               f"{'met' if errs and percentile(errs, .95) <= TARGET_P95 else 'NOT met'}; "
               f"ccl-sim winner = measured in >= {TARGET_WINNER:.0%}: " +
               (("met" if win_ok >= TARGET_WINNER * len(win) else "NOT met") if win
                else "not checked") + ".")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("--ranks", default=None, help="rank counts (default 2,4,8)")
    ap.add_argument("--transports", default=None, help="shm,tcp (default both)")
    ap.add_argument("--collectives", default=None,
                    help="comma list of " + ",".join(COLLECTIVES) + " (default all six)")
    ap.add_argument("-b", "--begin", type=parse_size, default=None, help="default 8")
    ap.add_argument("-e", "--end", type=parse_size, default=None, help="default 64M")
    ap.add_argument("-f", "--factor", type=int, default=None, help="default 8")
    ap.add_argument("--launches", type=int, default=3,
                    help="launches of the tuner's choice per shape; the median is kept")
    ap.add_argument("--winner-launches", type=int, default=1,
                    help="launches per forced algorithm for the winner check (median; default 1)")
    ap.add_argument("--max-other-load", type=float, default=0.1,
                    help="run a launch again when other processes kept more CPUs than this busy "
                         "during it (default 0.1)")
    ap.add_argument("--retries", type=int, default=3,
                    help="at most this many repeats of a disturbed launch; then the least "
                         "disturbed attempt is kept and counted (default 3)")
    ap.add_argument("--no-winner", action="store_true",
                    help="skip (c), the forced run of every candidate algorithm")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 and 4 ranks, shm, allreduce and allgather, 3 sizes "
                         "(1 KiB, 64 KiB, 4 MiB); explicit options still win")
    ap.add_argument("-n", "--iters", type=int, default=50,
                    help="perf -n, timed calls per size (default 50; the binary's own is 20)")
    ap.add_argument("-w", "--warmup", type=int, default=5,
                    help="perf -w, warm-up calls per size (default 5; the binary's own is 1, "
                         "which leaves the first size of a sweep 2-3x slow)")
    ap.add_argument("--blocking", action="store_true",
                    help="perf -y 1 (blocking calls; default: stream mode, as nccl-tests)")
    ap.add_argument("--bind", default="core", choices=("auto", "core", "numa", "none"),
                    help="cclrun --bind (default core: rank i on CPU i mod C). Unpinned, 1 to 3 "
                         "launches in 10 of 2 ranks here run every small call ~22 us slower "
                         "(both ranks on one CPU, it seems), which a median of 3 does not remove; "
                         "auto: core only where ranks outnumber CPUs (perf/algo_sweep.py)")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--sim", default=None, help="ccl-sim binary (default BUILD/tools/ccl-sim)")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per perf launch")
    ap.add_argument("--sim-model", default=None, metavar="FILE",
                    help="ccl-sim --model FILE: keys that replace the figures' (model.h)")
    ap.add_argument("--sim-calls", type=int, default=8, metavar="K",
                    help="ccl-sim --calls K: the steady state of K back-to-back calls, as the "
                         "perf binaries time -n calls (default 8)")
    ap.add_argument("--sim-timeout", type=int, default=120, help="seconds per ccl-sim call")
    ap.add_argument("--wait-idle", type=float, default=60,
                    help="before each launch wait up to this many seconds for other processes "
                         "to use <= --idle-threshold CPUs (default 60; 0: only measure)")
    ap.add_argument("--idle-threshold", type=float, default=0.3)
    ap.add_argument("--idle-sample", type=float, default=0.5,
                    help="seconds of /proc/stat sampling before each launch")
    ap.add_argument("--fresh-figures", action="store_true",
                    help="use an empty tuner cache of this run's own (CCL_TUNER_CACHE, for the "
                         "real runs and ccl-sim): every shape's first launch probes the figures "
                         "now; default: the user's cache, whatever the tuner measured before")
    ap.add_argument("--json", default=None, metavar="OUT",
                    help="write every point here (rewritten after every shape; \"complete\": "
                         "false until the run ends)")
    ap.add_argument("--resimulate", default=None, metavar="JSON",
                    help="measure nothing: run ccl-sim again on the points of an earlier --json "
                         "file (same shapes, sizes and tuner figures) and print the tables; "
                         "--json writes the new points")
    ap.add_argument("--report", default=None, metavar="JSON",
                    help="run nothing: print the tables of an earlier --json file again, only "
                         "the points of the --ranks, --transports and --collectives given")
    args = ap.parse_args()

    if args.report or args.resimulate:
        with open(args.report or args.resimulate) as f:
            doc = json.load(f)
        if args.resimulate:
            sim = args.sim or os.path.join(args.build_dir, "tools", "ccl-sim")
            doc["points"] = resimulate(doc, sim, args.sim_timeout, args.sim_model,
                                       args.sim_calls)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(dict(doc, resimulated_by=sys.argv), f, indent=1)
        pts = [p for p in doc["points"]
               if (not args.ranks or p["ranks"] in [int(x) for x in args.ranks.split(",")])
               and (not args.transports or p["transport"] in args.transports.split(","))
               and (not args.collectives or p["collective"] in args.collectives.split(","))]
        if not pts:
            print("no such points in " + args.report, file=sys.stderr)
            return 1
        header = doc.get("header", [f"## ccl-sim against real runs: {doc.get('date')}"])
        header = header + [f"- these tables: `perf/sim/validate.py {shlex.join(sys.argv[1:])}` "
                           f"({len(pts)} of the run's {len(doc['points'])} points)"]
        print(report(pts, doc.get("usable_cpus", 1), header))
        return 0

    q = args.quick
    args.ranks = [int(x) for x in (args.ranks or ("2,4" if q else "2,4,8")).split(",")]
    args.transports = [x.strip() for x in (args.transports or ("shm" if q else "shm,tcp"))
                       .split(",") if x.strip()]
    args.collectives = [x.strip() for x in (args.collectives or
                                            ("allreduce,allgather" if q else
                                             ",".join(COLLECTIVES))).split(",") if x.strip()]
    if args.begin is None:
        args.begin = 1 << 10 if q else 8
    if args.end is None:
        args.end = 4 << 20 if q else 64 << 20
    if args.factor is None:
        args.factor = 64 if q else 8
    for t in args.transports:
        if t not in ("shm", "tcp"):
            ap.error(f"unknown transport {t!r}")
    for c in args.collectives:
        if c not in COLLECTIVES:
            ap.error(f"unknown collective {c!r}")
    if args.launches < 1 or args.winner_launches < 1 or any(n < 2 for n in args.ranks):
        ap.error("--launches, --winner-launches >= 1 and rank counts >= 2")

    v = Validator(args)
    for path in (v.cclrun, v.sim):
        if not os.access(path, os.X_OK):
            ap.error(f"{path} is missing: build it first")
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        rev = "?"
    started = datetime.datetime.now().astimezone()
    t0 = time.monotonic()
    header = [
        f"## ccl-sim against real runs: {started:%Y-%m-%d %H:%M %Z}",
        "",
        f"- command: `perf/sim/validate.py {shlex.join(sys.argv[1:])}`",
        f"- commit {rev}; {v.ncpu} CPUs ({v.usable_cpu} usable by this process); load average "
        f"at start {loadavg()}",
        f"- rank counts above {v.usable_cpu} are OVERSUBSCRIBED: ranks time-share the CPUs "
        f"(cclrun --bind {args.bind}: "
        + ", ".join(f"np{n} -> {v.bind_for(n)}" for n in args.ranks) + "); ccl-sim gives "
        "every rank its own core",
        f"- real: build/perf/*_perf under cclrun, -b {args.begin} -e {args.end} -f {args.factor} "
        f"-c 0 -d float{' -n ' + str(args.iters) if args.iters else ''}"
        f"{' -w ' + str(args.warmup) if args.warmup else ''}"
        f"{' -y 1 (blocking)' if args.blocking else ' (stream mode)'}; the out-of-place time; "
        f"the MEDIAN of {args.launches} launch(es) per size of the tuner's choice",
        "- ccl-sim: --pick-only --figures cache (the cache the real run's tuner read: " +
        ("a fresh one, probed by each shape's first launch" if args.fresh_figures else
         "the user's, probed whenever that shape first ran on this host") +
        "), --no-shm for tcp; error = (ccl-sim - real) / real",
        "- winner check: " + ("skipped (--no-winner)" if args.no_winner else
                              f"{args.winner_launches} launch(es) per candidate algorithm "
                              "(median; CCL_ALGO=coll:algo, and ccl-sim --algo coll:algo), "
                              "interleaved with the tuner's-choice launches; points with >= 2 "
                              "candidate algorithms"),
    ]
    points: List[dict] = []

    def save(final: bool) -> None:
        if not args.json:
            return
        with open(args.json + ".tmp", "w") as f:
            json.dump({"program": "perf/sim/validate.py", "date": started.isoformat(),
                       "command": sys.argv, "commit": rev, "cpus": v.ncpu,
                       "usable_cpus": v.usable_cpu, "elapsed_s": time.monotonic() - t0,
                       "launches": args.launches, "complete": final, "failures": v.failures,
                       "header": header, "points": points}, f, indent=1)
        os.replace(args.json + ".tmp", args.json)

    def stop(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        for t in args.transports:
            for n in args.ranks:
                for c in args.collectives:
                    try:
                        points += v.shape(c, n, t)
                    except RunError as e:
                        v.failures.append(str(e))
                        v.note(f"  FAILED: {e}")
                    save(False)  # a run cut short still leaves what it measured
    finally:
        shutil.rmtree(v.tmp, ignore_errors=True)
    elapsed = time.monotonic() - t0
    header.append(f"- took {elapsed / 60:.1f} min; load average at end {loadavg()}; "
                  f"{v.retried} launch(es) run again because other processes used more than "
                  f"{args.max_other_load} CPUs during them, {v.disturbed} kept disturbed after "
                  f"{args.retries} repeats")
    if v.failures:
        header.append("- FAILED: " + "; ".join(f.splitlines()[0] for f in v.failures))
    if not points:
        print("\n".join(header))
        print("no points measured", file=sys.stderr)
        return 1
    print(report(points, v.usable_cpu, header))
    save(True)
    return 1 if v.failures else 0


if __name__ == "__main__":
    sys.exit(main())
