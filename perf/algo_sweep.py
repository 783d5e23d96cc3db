#!/usr/bin/env python3
"""Does the tuner's default choice keep up with every algorithm forced by CCL_ALGO?

For each rank count, all_reduce_perf sweeps the sizes once per setting (the default, then each
CCL_ALGO value), `--launches` times with the settings interleaved so that the machine's drift
hits them alike; each size's time is the median over the launches. The table shows every
setting's time, the best forced one, default / best forced (1.00 = as fast; the issue's bar is
1.10) and what the tuner chose for the default (from its TUNE log; several when launches
differed). Every launch checks its results (-c 1): any wrong element fails the run. The calls are
blocking, and where ranks outnumber cores they are pinned (cclrun --bind core): launches of the
very same schedule otherwise differ by 20-30% there.

  perf/algo_sweep.py                                # 2, 3 and 4 ranks, default vs ring vs tree
  perf/algo_sweep.py --np 4 --algos ring,tree,rabenseifner --launches 5 --markdown
  perf/algo_sweep.py --netns 2,2 --algos ring,hierarchical -b 64K -e 32M   # 2 "nodes" x 2 ranks

Exit status: 0 when no result was wrong and the default is within --tolerance of the best forced
setting at every size; 1 otherwise (the offending rows are marked); 2 on bad usage.
"""

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "compare"))
from compare import format_size, parse_table  # noqa: E402  (perf/compare/compare.py)

REPO = os.path.dirname(HERE)


def tuner_choices(log_dir: str) -> Dict[int, str]:
    """bytes -> "algorithm/protocol" from one rank's CCL_DEBUG_SUBSYS=TUNE log (all ranks choose
    alike): each cost table starts with "allreduce N B:" and marks its choice "<- chosen"."""
    choices: Dict[int, str] = {}
    logs = sorted(glob.glob(os.path.join(log_dir, "tune.*")))
    if not logs:
        return choices
    size = None
    with open(logs[0]) as f:
        for line in f:
            m = re.search(r"CCL INFO allreduce (\d+) B:", line)
            if m:
                size = int(m.group(1))
                continue
            m = re.match(r"\s+(\S+)\s+[\d.]+ us\s+<- chosen", line)
            if m and size is not None:
                choices[size] = m.group(1)
    return choices


def bind_for(np: int, bind: str) -> str:
    """auto: pinned only when ranks outnumber cores. There, pinning makes launches of the same
    schedule differ by 10% instead of 30%; with a core per rank it doubles small-message times
    (a pinned rank cannot move away from whatever else wakes up on its core)."""
    if bind != "auto":
        return bind
    return "core" if np > (os.cpu_count() or 1) else "none"


def run_launch(build: str, np: int, algo: str,
               args: argparse.Namespace) -> Tuple[Dict[int, float], Dict[int, str]]:
    env = dict(os.environ)
    env.pop("CCL_ALGO", None)
    log_dir = tempfile.mkdtemp(prefix="algo_sweep.")
    if algo != "default":
        env["CCL_ALGO"] = algo
    else:  # the tuner's choices, for the table
        env.update(CCL_DEBUG="INFO", CCL_DEBUG_SUBSYS="TUNE",
                   CCL_DEBUG_FILE=os.path.join(log_dir, "tune.%p"))
    perf = [os.path.join(build, "perf", "all_reduce_perf"), "-b", args.begin, "-e", args.end,
            "-f", str(args.factor), "-d", "float", "-o", "sum", "-c", "1", "-w", "5",
            "-n", str(args.iters), "-y", "0" if args.stream else "1"]
    if args.netns:
        hosts, per_host = args.netns
        launcher = [os.path.join(REPO, "tests", "netns", "netns_cluster.sh"), "--nodes",
                    str(hosts), "--ranks-per-node", str(per_host), "--timeout", str(args.timeout),
                    "--"]
    else:
        launcher = [os.path.join(build, "tools", "cclrun"), "-np", str(np), "--timeout",
                    str(args.timeout), "--bind", bind_for(np, args.bind)]
    cmd = launcher + perf
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout + 30)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} (CCL_ALGO={algo}) failed with {out.returncode}:\n"
                 f"{out.stdout}\n{out.stderr}")
    text = out.stdout
    if args.netns:  # every line is "[rank] ...": rank 0's table is the one
        text = "\n".join(line[4:] for line in text.splitlines() if line.startswith("[0] "))
    rows = parse_table(text)
    wrong = [line for line in text.splitlines()
             if line.strip() and not line.startswith("#") and len(line.split()) >= 13
             and any(line.split()[i] not in ("0", "N/A") for i in (8, 12))]
    if wrong:
        sys.exit(f"np {np}, CCL_ALGO={algo}: wrong results:\n" + "\n".join(wrong))
    choices = tuner_choices(log_dir)
    for path in glob.glob(os.path.join(log_dir, "*")):
        os.unlink(path)
    os.rmdir(log_dir)
    return {r.size: r.time_us for r in rows}, choices


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", default="2,3,4", help="rank counts (default 2,3,4)")
    ap.add_argument("--algos", default="ring,tree", help="CCL_ALGO values to force")
    ap.add_argument("--begin", "-b", default="8")
    ap.add_argument("--end", "-e", default="32M")
    ap.add_argument("--factor", "-f", type=int, default=4)
    ap.add_argument("--iters", "-n", type=int, default=100, help="timed calls per size")
    ap.add_argument("--launches", type=int, default=5, help="launches per setting (median)")
    ap.add_argument("--stream", action="store_true",
                    help="queue the calls on a stream as nccl-tests does (default: blocking calls, "
                         "so the times are the algorithms', not the stream thread's hand-offs)")
    ap.add_argument("--tolerance", type=float, default=1.10, help="allowed default / best")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--bind", default="auto", choices=("auto", "core", "numa", "none"),
                    help="cclrun --bind; auto (default): core when ranks outnumber cores")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per launch")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    ap.add_argument("--netns", default=None, metavar="H,L",
                    help="run in H network namespaces of L ranks each (tests/netns, needs root) "
                         "instead of cclrun on this host; --np is then H*L")
    args = ap.parse_args()
    if args.netns:
        hosts, per_host = (int(x) for x in args.netns.split(","))
        args.netns = (hosts, per_host)
        args.np = str(hosts * per_host)

    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    settings = ["default"] + algos
    failed = False
    for np in [int(n) for n in args.np.split(",")]:
        times: Dict[str, Dict[int, List[float]]] = {s: {} for s in settings}
        chosen: Dict[int, set] = {}
        for _ in range(args.launches):
            for s in settings:
                launch, choices = run_launch(args.build_dir, np, s, args)
                for size, t in launch.items():
                    times[s].setdefault(size, []).append(t)
                for size, c in choices.items():
                    chosen.setdefault(size, set()).add(c)
        header = (["size"] + [f"{s} us" for s in settings] + ["best forced", "default/best",
                                                               "default's choice"])
        sep = " | " if args.markdown else "  "
        print(f"\n{np} ranks, allreduce float sum, median of {args.launches} launches")
        print(("| " if args.markdown else "") + sep.join(header) + (" |" if args.markdown else ""))
        if args.markdown:
            print("|" + "|".join("---:" for _ in header) + "|")
        for size in sorted(times["default"]):
            med = {s: statistics.median(times[s][size]) for s in settings}
            best = min(algos, key=lambda a: med[a])
            ratio = med["default"] / med[best] if med[best] > 0 else 1.0
            slow = ratio > args.tolerance
            failed |= slow
            cells = ([format_size(size)] + [f"{med[s]:.2f}" for s in settings] + [best] +
                     [f"{ratio:.2f}" + (" SLOWER" if slow else "")] +
                     [",".join(sorted(chosen.get(size, {"?"})))])
            print(("| " if args.markdown else "") + sep.join(cells) +
                  (" |" if args.markdown else ""))
    print("\nresult:", "default slower than a forced choice somewhere" if failed else
          f"default within {args.tolerance:.2f}x of the best forced choice at every size")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
