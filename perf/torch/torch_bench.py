#!/usr/bin/env python3
"""ccl's torch.distributed backend against Gloo, in one run: DDP step times and collective busbw.

Every rank holds both process groups (the default one on ccl, a Gloo group of the same ranks)
and the measurements alternate between them, so both see the same machine.

DDP: the same model and data on both; per backend the median step time (forward, backward with
DDP's bucketed allreduces, SGD step), the compute-only step time (the same step inside
no_sync(), so no allreduce), and their difference: the communication DDP could not hide.

Collectives: torch.distributed.all_reduce / broadcast / all_gather of float32 tensors per size,
median of the repetitions, busbw as nccl-tests defines it (allreduce 2(n-1)/n, broadcast 1,
allgather (n-1)/n of algbw, algbw = bytes / time; allgather's bytes are the output's).

Usage (PYTHONPATH must reach ccl_torch: a build tree's bindings/torch or an install's python/):
  PYTHONPATH=build/bindings/torch /usr/bin/python3 perf/torch/torch_bench.py --np 2,4
"""
import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

try:
    import ccl_torch  # noqa: F401  (registers the backend "ccl", in the spawned ranks too)
except ImportError as e:
    sys.exit(f"torch_bench: cannot import ccl_torch ({e}): set PYTHONPATH to a build tree's "
             "bindings/torch or an install's python/")


def make_model(width, depth):
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def ddp_times(ddp, steps, batch, width, no_sync):
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = torch.randn(batch, width)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        if no_sync:
            with ddp.no_sync():
                ddp(x).square().mean().backward()
        else:
            ddp(x).square().mean().backward()
        opt.step()
        times.append(time.perf_counter() - start)
    return times


def bench_ddp(rank, size, args, groups):
    from torch.nn.parallel import DistributedDataParallel as DDP
    models = {name: DDP(make_model(args.width, args.depth), process_group=pg)
              for name, pg in groups.items()}
    results = {name: {"step": [], "compute": []} for name in groups}
    for name, m in models.items():  # warm-up: buckets rebuilt after the first step
        ddp_times(m, 3, args.batch, args.width, False)
    for _ in range(args.rounds):
        for name, m in models.items():
            dist.barrier(group=groups[name])
            results[name]["step"] += ddp_times(m, args.steps, args.batch, args.width, False)
            results[name]["compute"] += ddp_times(m, args.steps, args.batch, args.width, True)
    return {name: {k: statistics.median(v) for k, v in r.items()} for name, r in results.items()}


def bench_collectives(rank, size, args, groups):
    factor = {"all_reduce": 2 * (size - 1) / size, "broadcast": 1.0,
              "all_gather": (size - 1) / size}
    out = {}
    for coll in ("all_reduce", "broadcast", "all_gather"):
        for nbytes in args.sizes:
            n = max(1, nbytes // 4)
            t = torch.ones(n)
            outs = [torch.empty(n) for _ in range(size)]
            for name, pg in groups.items():
                def once():
                    if coll == "all_reduce":
                        dist.all_reduce(t, group=pg)
                    elif coll == "broadcast":
                        dist.broadcast(t, src=0, group=pg)
                    else:
                        dist.all_gather(outs, t, group=pg)
                for _ in range(3):
                    once()
                iters = max(3, min(200, int(2e8 // max(nbytes, 1) // 8)))
                samples = []
                for _ in range(args.rounds):
                    dist.barrier(group=pg)
                    start = time.perf_counter()
                    for _ in range(iters):
                        once()
                    samples.append((time.perf_counter() - start) / iters)
                sec = statistics.median(samples)
                moved = n * 4 * (size if coll == "all_gather" else 1)
                out[(coll, n * 4, name)] = (sec * 1e6, moved / sec / 1e9 * factor[coll])
    return out


def worker(rank, size, init, args, queue):
    torch.set_num_threads(args.threads)  # as torchrun does (OMP_NUM_THREADS=1) with several ranks
    dist.init_process_group("ccl", init_method=init, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))
    groups = {"ccl": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    ddp = bench_ddp(rank, size, args, groups)
    colls = bench_collectives(rank, size, args, groups) if args.collectives else {}
    if rank == 0:
        queue.put((ddp, colls))
    dist.barrier()
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--np", default="2,4", help="rank counts, comma-separated")
    p.add_argument("--width", type=int, default=1024, help="DDP model: width of each Linear")
    p.add_argument("--depth", type=int, default=8, help="DDP model: number of Linear layers")
    p.add_argument("--batch", type=int, default=8, help="DDP: samples per rank and step")
    p.add_argument("--steps", type=int, default=10, help="DDP: steps per round")
    p.add_argument("--rounds", type=int, default=3, help="alternations between the backends")
    p.add_argument("--sizes", default="4096,65536,1048576,16777216",
                   help="collective sizes in bytes")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--no-collectives", dest="collectives", action="store_false")
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    params = args.depth * (args.width * args.width + args.width)
    print(f"# DDP model: {args.depth} x Linear({args.width}, {args.width}) + ReLU, "
          f"{params / 1e6:.1f} M float32 parameters ({params * 4 / 2**20:.0f} MiB of gradients), "
          f"batch {args.batch} per rank; medians of {args.rounds} x {args.steps} steps")
    print(f"# {os.cpu_count()} CPUs; torch {torch.__version__}")
    ctx = mp.get_context("spawn")
    for size in [int(s) for s in args.np.split(",")]:
        queue = ctx.SimpleQueue()
        with tempfile.TemporaryDirectory() as tmp:
            init = "file://" + os.path.join(tmp, "init")
            procs = [ctx.Process(target=worker, args=(r, size, init, args, queue))
                     for r in range(size)]
            for pr in procs:
                pr.start()
            deadline = time.monotonic() + 1800
            while queue.empty():
                if not all(pr.is_alive() for pr in procs) or time.monotonic() > deadline:
                    for pr in procs:
                        pr.kill()
                    sys.exit(f"torch_bench: a rank of the {size}-rank run failed or hung")
                time.sleep(0.2)
            ddp, colls = queue.get()
            for pr in procs:
                pr.join(300)
        c, g = ddp["ccl"], ddp["gloo"]
        comm = {k: max(v["step"] - v["compute"], 1e-9) for k, v in ddp.items()}
        print(f"\n## {size} ranks: DDP\n")
        print("| backend | step (ms) | compute-only step (ms) | communication (ms) |")
        print("|---|---:|---:|---:|")
        for name, v in ddp.items():
            print(f"| {name} | {v['step'] * 1e3:.2f} | {v['compute'] * 1e3:.2f} | "
                  f"{comm[name] * 1e3:.2f} |")
        print(f"\nGloo / ccl: step {g['step'] / c['step']:.2f}x, communication "
              f"{comm['gloo'] / comm['ccl']:.1f}x")
        if colls:
            print(f"\n## {size} ranks: torch.distributed collectives, float32\n")
            print("| collective | bytes | ccl (us) | ccl busbw (GB/s) | gloo (us) | "
                  "gloo busbw (GB/s) | ccl / gloo busbw |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for coll in ("all_reduce", "broadcast", "all_gather"):
                for nbytes in args.sizes:
                    nb = max(1, nbytes // 4) * 4
                    cu, cb = colls[(coll, nb, "ccl")]
                    gu, gb = colls[(coll, nb, "gloo")]
                    print(f"| {coll} | {nb} | {cu:.1f} | {cb:.2f} | {gu:.1f} | {gb:.2f} | "
                          f"{cb / gb:.1f}x |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
