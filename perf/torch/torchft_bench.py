#!/usr/bin/env python3
"""torchft's lost training per failure, on ccl against torchft's own Gloo groups.

Each launch runs examples/torch/torchft_train.py once: 3 replicas (one process each) train
through torchft's Manager and lighthouse; one is SIGKILLed in the backward pass of step
--kill-at; the survivors go on as a quorum of two; a replacement starts --replace-after s later,
takes the model from a survivor and rejoins. Per launch and survivor the example measures:

  lost at failure: from the survivor's last committed step before the kill to its first
                   committed step after it, less one median step (what a step costs without
                   a failure);
  lost at rejoin:  the gap before the first step in a quorum of three again, less one median
                   step (the survivors send the model to the replacement and make a new group).

The launches alternate between the process groups (ccl_torch.ft.ProcessGroupCcl and
torchft.ProcessGroupGloo; torchft 0.2.0's ProcessGroupBabyGloo fails every step of this loop on
CPU, examples/torch/torchft_train.py says how), `--launches` of each; the table gives, per
group, the median over the launches and the worst launch of each figure (the larger
survivor's). The lighthouse's heartbeat timeout (1 s in the example) bounds how soon a dead
replica leaves the quorum.

Usage:
  PYTHONPATH=build/bindings/torch .venv/bin/python perf/torch/torchft_bench.py [--launches 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "torch", "torchft_train.py")


def launch(pg, args):
    cmd = [sys.executable, EXAMPLE, "--pg", pg, "--steps", str(args.steps),
           "--kill-at", str(args.kill_at), "--replace-after", str(args.replace_after)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    out = proc.stdout
    if proc.returncode != 0 or "{" not in out:
        raise SystemExit(f"torchft_bench: {pg} launch failed ({proc.returncode}):\n"
                         f"{out[-2000:]}{proc.stderr[-2000:]}")
    report = json.loads(out[out.index("{"):out.rindex("}") + 1])
    survivors = report["survivors"].values()
    return {"failure": max(s["lost_at_failure_s"] for s in survivors),
            "rejoin": max(s["lost_at_rejoin_s"] for s in survivors),
            "step": statistics.median(s["median_step_s"] for s in survivors)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--pgs", default="ccl,gloo")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kill-at", type=int, default=20)
    ap.add_argument("--replace-after", type=float, default=1.0)
    ap.add_argument("--timeout", type=float, default=300, help="bound on one launch, s")
    args = ap.parse_args()
    if args.launches < 1:
        ap.error("--launches must be at least 1")
    pgs = [p for p in args.pgs.split(",") if p]
    results = {pg: [] for pg in pgs}
    for i in range(args.launches):
        for pg in (pgs if i % 2 == 0 else list(reversed(pgs))):
            r = launch(pg, args)
            results[pg].append(r)
            print(f"launch {i + 1} {pg}: lost {r['failure']:.2f} s at the failure, "
                  f"{r['rejoin']:.2f} s at the rejoin (step {r['step'] * 1e3:.0f} ms)",
                  flush=True)
    print()
    print("| process group | lost at failure, median | worst | lost at rejoin, median | worst "
          "| step |")
    print("|---|---|---|---|---|---|")
    for pg, rs in results.items():
        fail = [r["failure"] for r in rs]
        rejoin = [r["rejoin"] for r in rs]
        step = statistics.median(r["step"] for r in rs)
        print(f"| {pg} | {statistics.median(fail):.2f} s | {max(fail):.2f} s | "
              f"{statistics.median(rejoin):.2f} s | {max(rejoin):.2f} s | {step * 1e3:.0f} ms |")


if __name__ == "__main__":
    main()
