#!/usr/bin/env python3
"""ZeRO stages 1-3 against plain DDP (build/perf/zero_bench under cclrun), at 1, 2, 4 and 8 ranks:

  memory   per-rank bytes of parameters (working copies, and float32 masters where separate),
           gradients and optimizer state (Adam), each at the moment the total peaked, and the
           total as a fraction of DDP's;
  scaling  step time (worst of --launches launches, each the slowest rank's mean over --steps
           steps) and the scaling efficiency throughput(N) / (N * throughput(1)) with the batch per
           rank fixed (weak scaling), throughput = samples a second over all ranks; the core
           ceiling min(1, CPUs / N) is the most a machine with fewer cores than ranks allows.

  python3 perf/training/zero_bench.py --build build --np 1,2,4,8
"""
import argparse
import json
import os
import subprocess
import sys

MODES = ["ddp", "zero1", "zero2", "zero3"]


def run(args, ranks, mode):
    cmd = [os.path.join(args.build, "tools", "cclrun"), "--timeout", "600", "-np", str(ranks),
           os.path.join(args.build, "perf", "zero_bench"), "--mode", mode, "--width",
           str(args.width), "--layers", str(args.layers), "--batch", str(args.batch), "--steps",
           str(args.steps), "--precision", args.precision]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"zero_bench: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return json.loads([line for line in out.stdout.splitlines() if line.startswith("{")][-1])


def mib(n):
    return f"{n / 2**20:.2f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--np", default="1,2,4,8")
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"])
    p.add_argument("--launches", type=int, default=3)
    args = p.parse_args()
    ranks_list = [int(n) for n in args.np.split(",")]
    worst = {}
    for ranks in ranks_list:
        for mode in MODES:
            runs = [run(args, ranks, mode) for _ in range(args.launches)]
            worst[(ranks, mode)] = max(runs, key=lambda r: r["step_ms"])
            best = min(r["step_ms"] for r in runs)
            worst[(ranks, mode)]["best_step_ms"] = best
            print(f"# {ranks} ranks {mode}: worst {worst[(ranks, mode)]['step_ms']:.1f} ms, "
                  f"best {best:.1f} ms", file=sys.stderr)
    first = next(iter(worst.values()))
    print(f"# zero_bench: {args.layers} layers of {args.width}x{args.width} + bias, "
          f"{first['parameters']} float32 parameters ({mib(first['parameters'] * 4)} MiB), Adam, "
          f"batch {args.batch} per rank, {args.steps} steps, precision {args.precision}, "
          f"{args.launches} launches each; {os.cpu_count()} CPUs\n")
    print("## Per-rank memory at the peak (MiB)\n")
    print("| ranks | mode | parameters | fp32 masters | gradients | optimizer | total | vs DDP |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for ranks in ranks_list:
        ddp_total = worst[(ranks, "ddp")]["peak_total"]
        for mode in MODES:
            r = worst[(ranks, mode)]
            print(f"| {ranks} | {mode} | {mib(r['peak_parameters'])} | {mib(r['peak_master'])} | "
                  f"{mib(r['peak_gradients'])} | {mib(r['peak_optimizer'])} | "
                  f"{mib(r['peak_total'])} | {r['peak_total'] / ddp_total:.2f} |")
    print("\n## Step time and scaling efficiency (weak scaling, worst launch)\n")
    cpus = os.cpu_count() or 1
    print("| ranks | mode | step ms (worst) | step ms (best) | samples/s | efficiency | "
          "core ceiling |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for ranks in ranks_list:
        for mode in MODES:
            r = worst[(ranks, mode)]
            one = worst.get((1, mode))
            eff = (r["samples_per_s"] / (ranks * one["samples_per_s"])) if one else float("nan")
            print(f"| {ranks} | {mode} | {r['step_ms']:.1f} | {r['best_step_ms']:.1f} | "
                  f"{r['samples_per_s']:.0f} | {eff:.2f} | {min(1.0, cpus / ranks):.2f} |")


if __name__ == "__main__":
    main()
