#!/usr/bin/env python3
"""How much of FSDP2's communication on ccl runs while the rank computes.

One launch of --np ranks; the model of fsdp2_bench.py (tiny_lm's transformer, each block a
fully_shard unit, then the root) on ccl's group; after warm-up steps, rank 0 records --steps
steps with torch.profiler. ccl's spans (`ccl:_all_gather_base`, `ccl:_reduce_scatter_base`, ...:
docs/torch-profiler.md) open when the backend takes the call and close when the operation
completes, so their union is the time some collective of FSDP2's was in flight. The compute is
the union of the spans of aten's matrix products and attention kernels. Printed: the time with a
collective in flight, the part of it with compute running too (overlapped), and that part's
share; and the same for the all-gathers alone (FSDP2's prefetch of the next unit's parameters)
and the reduce-scatters alone. --tokens raises the compute per step; --prefetch shards as
examples/torch/fsdp2.py --prefetch does (asynchronous all-gathers, explicit prefetch).

Usage:
  PYTHONPATH=build/bindings/torch .venv/bin/python perf/torch/fsdp2_overlap.py [--np 2]
"""
import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist

import ccl_torch
from bench_launch import launch_ranks
from fsdp2_bench import model_config, sharded_model, step_time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "torch"))
import tiny_lm  # noqa: E402

COMPUTE = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::linear",
           "aten::scaled_dot_product_attention",
           "aten::_scaled_dot_product_flash_attention_for_cpu")


def union(intervals):
    out = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def length(intervals):
    return sum(end - start for start, end in intervals)


def intersection(a, b):
    """The total length of the intersection of two unions of disjoint sorted intervals."""
    i = j = 0
    total = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            total += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def worker(rank, size, init, args, queue):
    from torch.distributed.device_mesh import DeviceMesh
    from torch.profiler import ProfilerActivity, profile
    torch.set_num_threads(args.threads)
    dist.init_process_group(ccl_torch.BACKEND, init_method=init, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))
    cfg = model_config(args)
    model = sharded_model(cfg, DeviceMesh.from_group(dist.group.WORLD, "cpu"), args.prefetch)
    opt = tiny_lm.optimizer(model.parameters())
    for s in range(3):
        step_time(model, opt, cfg, s)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        steps = [step_time(model, opt, cfg, 100 + s) for s in range(args.steps)]
    spans = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()]
    compute = union([(a, b) for n, a, b in spans if n in COMPUTE])
    result = {}
    for label, prefix in (("all collectives", "ccl:"), ("all-gathers", "ccl:_all_gather"),
                          ("reduce-scatters", "ccl:_reduce_scatter")):
        comm = union([(a, b) for n, a, b in spans if n.startswith(prefix)])
        result[label] = (length(comm), intersection(comm, compute))
    result["compute"] = length(compute)
    result["step"] = sorted(steps)[len(steps) // 2]
    if rank == 0:
        queue.put(result)
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--width", type=int, default=512)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--vocab", type=int, default=4096)
    p.add_argument("--tokens", type=int, default=64, help="tokens per rank and step")
    p.add_argument("--steps", type=int, default=3, help="profiled steps")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--prefetch", action="store_true",
                   help="asynchronous all-gathers with explicit prefetch (examples/torch/fsdp2.py)")
    args = p.parse_args()
    if args.np < 2 or args.steps < 1 or args.tokens < 1:
        p.error("--np must be at least 2, --steps and --tokens at least 1")
    r = launch_ranks(worker, args.np, (args,), 1800, "fsdp2_overlap")
    print(f"# FSDP2 on ccl, {args.np} ranks, {args.tokens} tokens per rank and step, "
          f"{'--prefetch' if args.prefetch else 'FSDP2 default'}, "
          f"{args.steps} profiled steps (rank 0); compute {r['compute'] / 1e3:.1f} ms, "
          f"step {r['step'] * 1e3:.0f} ms\n")
    print("| collectives | in flight (ms) | of it, with compute running (ms) | share |")
    print("|---|---:|---:|---:|")
    for label in ("all collectives", "all-gathers", "reduce-scatters"):
        busy, overlapped = r[label]
        share = overlapped / busy if busy else 0.0
        print(f"| {label} | {busy / 1e3:.1f} | {overlapped / 1e3:.1f} | {share:.0%} |")


if __name__ == "__main__":
    main()
