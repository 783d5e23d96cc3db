#!/usr/bin/env python3
"""FSDP2 (torch's fully_shard) step time on ccl against Gloo, in one run.

Every rank holds both process groups (the default one on ccl, a Gloo group of the same ranks),
a 1-D DeviceMesh over each (DeviceMesh.from_group), and one copy of the model sharded over each
mesh (each block its own fully_shard unit, then the root, reshard_after_forward=True: FSDP2's
default, two all-gathers of each block per step and one reduce-scatter of its gradients). The
steps alternate between the two in rounds, so both see the same machine. Per backend: the median
step time (forward, backward, SGD step). The model is tiny_lm.py's transformer at --width and
--blocks (the defaults: 8 blocks of width 512 and a 4096-word vocabulary, 29.4 M parameters),
fed --tokens tokens per rank and step: few, so that the step is mostly FSDP2's communication,
which is what differs between the backends (--tokens raises the compute).

Each rank count is launched --launches times (fresh processes; which backend steps first
alternates between launches); the table gives each launch, and the Gloo / ccl ratio of the worst
launch of each and of the median launch.

Usage (PYTHONPATH must reach ccl_torch):
  PYTHONPATH=build/bindings/torch .venv/bin/python perf/torch/fsdp2_bench.py --np 2,4
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import ccl_torch
from bench_launch import launch_ranks

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))
import tiny_lm  # noqa: E402


def model_config(args):
    return tiny_lm.Config(vocab=args.vocab, width=args.width, heads=8, blocks=args.blocks,
                          seq=args.tokens, batch=1)


def sharded_model(cfg, mesh, prefetch=False):
    """tiny_lm's model sharded as examples/torch/fsdp2.py shards it."""
    import fsdp2
    return fsdp2.shard_model(tiny_lm.build(cfg), mesh, prefetch=prefetch)


def step_time(model, opt, cfg, step):
    inputs, targets = tiny_lm.batch(step, cfg)
    start = time.perf_counter()
    tiny_lm.loss_fn(model(inputs), targets).backward()
    opt.step()
    opt.zero_grad()
    return time.perf_counter() - start


def worker(rank, size, init, args, queue):
    from torch.distributed.device_mesh import DeviceMesh
    torch.set_num_threads(args.threads)
    dist.init_process_group(ccl_torch.BACKEND, init_method=init, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))
    groups = {"ccl": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    if args.gloo_first:
        groups = {"gloo": groups["gloo"], "ccl": groups["ccl"]}
    cfg = model_config(args)
    runs = {}
    for name, group in groups.items():
        model = sharded_model(cfg, DeviceMesh.from_group(group, "cpu"))
        runs[name] = (model, tiny_lm.optimizer(model.parameters()), [])
    for name, (model, opt, _) in runs.items():  # warm-up: buffers, the first gathers
        for s in range(2):
            step_time(model, opt, cfg, s)
    for r in range(args.rounds):
        for name, (model, opt, times) in runs.items():
            for s in range(args.steps):
                times.append(step_time(model, opt, cfg, r * args.steps + s))
    result = {name: statistics.median(times) for name, (_, _, times) in runs.items()}
    params = sum(p.numel() for p in tiny_lm.build(cfg).parameters())
    if rank == 0:
        queue.put((result, params))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--np", default="2,4", help="rank counts, comma-separated")
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=8, help="tokens per rank and step")
    p.add_argument("--steps", type=int, default=3, help="steps per round and backend")
    p.add_argument("--rounds", type=int, default=3, help="alternations between the backends")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--launches", type=int, default=5)
    args = p.parse_args()
    for name in ("width", "blocks", "vocab", "tokens", "steps", "rounds", "threads", "launches"):
        if getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    if args.width % 8:
        p.error("--width must be a multiple of the 8 heads")
    print(f"# {os.cpu_count()} CPUs; torch {torch.__version__}; medians of {args.rounds} x "
          f"{args.steps} steps per backend and launch")
    for size in [int(s) for s in args.np.split(",")]:
        launches = []
        for i in range(args.launches):
            run_args = argparse.Namespace(**vars(args), gloo_first=i % 2 == 1)
            launches.append(launch_ranks(worker, size, (run_args,), 1800, "fsdp2_bench"))
        params = launches[0][1]
        print(f"\n## {size} ranks: FSDP2, {params / 1e6:.1f} M parameters, {args.tokens} tokens "
              f"per rank and step\n")
        print("| launch | ccl step (ms) | gloo step (ms) | gloo / ccl |")
        print("|---|---:|---:|---:|")
        for i, (r, _) in enumerate(launches):
            print(f"| {i + 1} | {r['ccl'] * 1e3:.1f} | {r['gloo'] * 1e3:.1f} | "
                  f"{r['gloo'] / r['ccl']:.2f}x |")
        ccl = sorted(r["ccl"] for r, _ in launches)
        gloo = sorted(r["gloo"] for r, _ in launches)
        print(f"\nGloo / ccl: worst launch of each {gloo[-1] / ccl[-1]:.2f}x "
              f"({ccl[-1] * 1e3:.1f} ms against {gloo[-1] * 1e3:.1f} ms), median launch "
              f"{gloo[len(gloo) // 2] / ccl[len(ccl) // 2]:.2f}x")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
