#!/usr/bin/env python3
"""How much does overlapping a backend's allreduces with computation cost, 2 ranks, ccl and Gloo?

The pattern of DDP's backward, without DDP: eight 1 MiB float32 buckets, each issued with
async_op=True after a slice of elementwise work, then every Work waited on. Three timings per
backend (median of 35 iterations): "comm" (no work between the issues), "work" (the work, no
allreduce) and "both". On a machine with spare cores "both" is close to max(comm, work); where
ranks fill the cores, a backend whose progress needs both ranks' threads running at once (ccl's
shared-memory collectives) pays for every time slice its peer spends on the work.

  PYTHONPATH=build/bindings/torch /usr/bin/python3 perf/torch/overlap_probe.py
"""
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from bench_launch import launch_ranks

try:
    import ccl_torch  # registers ccl_torch.BACKEND
except ImportError as e:
    sys.exit(f"overlap_probe: cannot import ccl_torch ({e}): set PYTHONPATH")

BUCKETS, FLOATS, ITERS, SKIP = 8, 262144, 40, 5


def timed(pg, bufs, a, b, work, comm):
    times = []
    for _ in range(ITERS):
        dist.barrier(group=pg)
        start = time.perf_counter()
        works = []
        for buf in bufs:
            if work:
                for _ in range(8):
                    torch.mul(a, 1.0001, out=b)
            if comm:
                works.append(dist.all_reduce(buf, group=pg, async_op=True))
        for w in works:
            w.wait()
        times.append(time.perf_counter() - start)
    return statistics.median(times[SKIP:]) * 1e3


def worker(rank, size, init, queue):
    torch.set_num_threads(1)
    dist.init_process_group(ccl_torch.BACKEND, init_method=init, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=120))
    groups = {"ccl": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    bufs = [torch.ones(FLOATS) for _ in range(BUCKETS)]
    a, b = torch.randn(FLOATS), torch.empty(FLOATS)
    out = {}
    for name, pg in groups.items():
        out[name] = {"comm": timed(pg, bufs, a, b, False, True),
                     "work": timed(pg, bufs, a, b, True, False),
                     "both": timed(pg, bufs, a, b, True, True)}
    if rank == 0:
        queue.put(out)
    dist.barrier()
    dist.destroy_process_group()


def main():
    out = launch_ranks(worker, 2, (), 600, "overlap_probe")
    print(f"# 2 ranks, {BUCKETS} x {FLOATS * 4 // 2**20} MiB async allreduces; {os.cpu_count()} CPUs")
    print("| backend | comm only (ms) | work only (ms) | both (ms) | both - work (ms) |")
    print("|---|---:|---:|---:|---:|")
    for name, t in out.items():
        print(f"| {name} | {t['comm']:.2f} | {t['work']:.2f} | {t['both']:.2f} | "
              f"{t['both'] - t['work']:.2f} |")


if __name__ == "__main__":
    main()
