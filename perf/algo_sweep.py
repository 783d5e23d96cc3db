#!/usr/bin/env python3
"""Does the tuner's default choice keep up with every algorithm forced by CCL_ALGO?

For each rank count, all_reduce_perf sweeps the sizes once per setting (the default, then each
CCL_ALGO value), `--launches` times with the settings interleaved so that the machine's drift
hits them alike; each size's time is the median over the launches. The table shows every
setting's time, the best forced one, and default / best forced (1.00 = as fast; the issue's bar is
1.10). Every launch checks its results (-c 1): any wrong element fails the run.

  perf/algo_sweep.py                                # 2, 3 and 4 ranks, default vs ring vs tree
  perf/algo_sweep.py --np 4 --algos ring,tree,rabenseifner --launches 5 --markdown

Exit status: 0 when no result was wrong and the default is within --tolerance of the best forced
setting at every size; 1 otherwise (the offending rows are marked); 2 on bad usage.
"""

import argparse
import os
import statistics
import subprocess
import sys
from typing import Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "compare"))
from compare import format_size, parse_table  # noqa: E402  (perf/compare/compare.py)

REPO = os.path.dirname(HERE)


def run_launch(build: str, np: int, algo: str, args: argparse.Namespace) -> Dict[int, float]:
    env = dict(os.environ)
    env.pop("CCL_ALGO", None)
    if algo != "default":
        env["CCL_ALGO"] = algo
    cmd = [os.path.join(build, "tools", "cclrun"), "-np", str(np), "--timeout", str(args.timeout),
           os.path.join(build, "perf", "all_reduce_perf"), "-b", args.begin, "-e", args.end,
           "-f", str(args.factor), "-d", "float", "-o", "sum", "-c", "1", "-w", "5",
           "-n", str(args.iters)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.timeout + 30)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} (CCL_ALGO={algo}) failed with {out.returncode}:\n"
                 f"{out.stdout}\n{out.stderr}")
    rows = parse_table(out.stdout)
    wrong = [line for line in out.stdout.splitlines()
             if line.strip() and not line.startswith("#") and len(line.split()) >= 13
             and any(line.split()[i] not in ("0", "N/A") for i in (8, 12))]
    if wrong:
        sys.exit(f"np {np}, CCL_ALGO={algo}: wrong results:\n" + "\n".join(wrong))
    return {r.size: r.time_us for r in rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", default="2,3,4", help="rank counts (default 2,3,4)")
    ap.add_argument("--algos", default="ring,tree", help="CCL_ALGO values to force")
    ap.add_argument("--begin", "-b", default="8")
    ap.add_argument("--end", "-e", default="32M")
    ap.add_argument("--factor", "-f", type=int, default=4)
    ap.add_argument("--iters", "-n", type=int, default=20, help="timed calls per size")
    ap.add_argument("--launches", type=int, default=3, help="launches per setting (median)")
    ap.add_argument("--tolerance", type=float, default=1.10, help="allowed default / best")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--timeout", type=int, default=600, help="seconds per launch")
    ap.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = ap.parse_args()

    algos = [a.strip() for a in args.algos.split(",") if a.strip()]
    settings = ["default"] + algos
    failed = False
    for np in [int(n) for n in args.np.split(",")]:
        times: Dict[str, Dict[int, List[float]]] = {s: {} for s in settings}
        for _ in range(args.launches):
            for s in settings:
                for size, t in run_launch(args.build_dir, np, s, args).items():
                    times[s].setdefault(size, []).append(t)
        header = ["size"] + [f"{s} us" for s in settings] + ["best forced", "default/best"]
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
                     [f"{ratio:.2f}" + (" SLOWER" if slow else "")])
            print(("| " if args.markdown else "") + sep.join(cells) +
                  (" |" if args.markdown else ""))
    print("\nresult:", "default slower than a forced choice somewhere" if failed else
          f"default within {args.tolerance:.2f}x of the best forced choice at every size")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
