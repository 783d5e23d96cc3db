#!/usr/bin/env python3
"""The training layer's DDP reducer, measured through examples/ddp_train under cclrun:

  overlap      step time with the gradients handed to the reducer as the backward pass makes
               them (overlap) and only after it (--no-overlap), in the same run, per rank count;
  compressors  bytes on the wire per step and rank, step time and held-out loss for none, fp16,
               TopK 1% and 1-bit.

Each configuration is launched --launches times (fresh processes); the tables give the worst
launch (longest step) and the best. Model: an MLP 32-W-...-W-1 (--width, --depth), --batch
samples per rank, SGD, --steps steps.

  python3 perf/training/training_bench.py --build build --np 2,4
"""
import argparse
import json
import os
import subprocess
import sys


def run(args, ranks, *flags):
    cmd = [os.path.join(args.build, "tools", "cclrun"), "--timeout", "600", "-np", str(ranks),
           os.path.join(args.build, "examples", "ddp_train"), "--quiet", "--steps", str(args.steps),
           "--width", str(args.width), "--depth", str(args.depth), "--batch", str(args.batch),
           "--bucket-mb", str(args.bucket_mb), "--lr", str(args.lr), *flags]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        sys.exit(f"training_bench: {' '.join(cmd)} failed:\n{out.stdout}{out.stderr}")
    return json.loads([l for l in out.stdout.splitlines() if l.startswith("{")][-1])


def launches(args, ranks, *flags):
    results = [run(args, ranks, *flags) for _ in range(args.launches)]
    return max(results, key=lambda r: r["step_ms"]), min(results, key=lambda r: r["step_ms"])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--np", default="2,4")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--bucket-mb", type=float, default=1.0)
    p.add_argument("--lr", type=float, default=0.005)
    p.add_argument("--launches", type=int, default=3)
    args = p.parse_args()
    first = run(args, 1, "--steps", "1")
    print(f"# ddp_train: MLP 32-"
          f"{'-'.join([str(args.width)] * args.depth)}-1, {first['parameters']} float32 "
          f"parameters ({first['parameters'] * 4 / 2**20:.1f} MiB), batch {args.batch} per rank, "
          f"{args.steps} steps, SGD lr {args.lr}, buckets of {args.bucket_mb} MiB ({first['buckets']} buckets), "
          f"{args.launches} launches each; {os.cpu_count()} CPUs")
    for ranks in [int(n) for n in args.np.split(",")]:
        print(f"\n## {ranks} ranks: overlap\n")
        print("| gradients handed over | step ms (worst) | step ms (best) | compute ms | "
              "wait ms (exposed comm) | comm alone ms | overlap fraction |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for label, flags in (("during backward (overlap)", ()), ("after backward", ("--no-overlap",))):
            worst, best = launches(args, ranks, *flags)
            print(f"| {label} | {worst['step_ms']:.2f} | {best['step_ms']:.2f} | "
                  f"{worst['compute_ms']:.2f} | {worst['exposed_comm_ms']:.2f} | "
                  f"{worst['comm_alone_ms']:.2f} | {worst['overlap_fraction']:.2f} |")
        print(f"\n## {ranks} ranks: compressors\n")
        print("| compress | bytes a step and rank | vs none | step ms (worst) | step ms (best) | "
              "held-out loss |")
        print("|---|---:|---:|---:|---:|---:|")
        base = None
        for spec in ("none", "fp16", "topk:0.01", "onebit"):
            worst, best = launches(args, ranks, "--compress", spec)
            per_step = worst["bytes_sent"] / args.steps
            base = base or per_step
            print(f"| {spec} | {per_step:,.0f} | {base / per_step:.1f}x fewer | "
                  f"{worst['step_ms']:.2f} | {best['step_ms']:.2f} | {worst['eval_loss'] if worst['eval_loss'] is not None else 'diverged'} |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
