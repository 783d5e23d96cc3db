#!/usr/bin/env python3
"""ccl's torch.distributed backend against Gloo, in one run: DDP step times and collective busbw.

Every rank holds both process groups (the default one on ccl, a Gloo group of the same ranks)
and the measurements alternate between them, so both see the same machine.

DDP: the same model and data on both; per backend the median step time (forward, backward with
DDP's bucketed allreduces, SGD step), the compute-only step time (the same step inside
no_sync(), so no allreduce), and their difference: the communication DDP could not hide. Two
models: `--model mlp` (Linear layers: on this machine's reference BLAS, compute-heavy) and
`--model embedding` (EmbeddingBag tables with dense gradients and a small MLP head, as
recommendation models: most parameters, little arithmetic, so communication-heavy). Each rank
count is launched `--launches` times (fresh processes); the ratios are given for the worst launch
of each backend and for the median one.

Collectives: torch.distributed.all_reduce / broadcast / all_gather_into_tensor /
reduce_scatter_tensor of float32 tensors per size (8 B to 64 MiB by default), median of the
repetitions within a launch, busbw as nccl-tests defines it (allreduce 2(n-1)/n, broadcast 1,
allgather and reducescatter (n-1)/n of algbw, algbw = bytes / time; allgather's and
reducescatter's bytes are the larger buffer's). Every launch measures them; the tables give, per
backend, the median over the launches and the worst launch (lowest busbw).

Usage (PYTHONPATH must reach ccl_torch: a build tree's bindings/torch or an install's python/):
  PYTHONPATH=build/bindings/torch .venv/bin/python perf/torch/torch_bench.py --np 2,4
  PYTHONPATH=build/bindings/torch .venv/bin/python perf/torch/torch_bench.py --np 2,4 \
      --no-collectives --model embedding --width 64 --depth 8 --rows 4096 --bucket-cap-mb 1 \
      --bucket-view
"""
import argparse
import datetime
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

from bench_launch import launch_ranks

try:
    import ccl_torch  # registers ccl_torch.BACKEND, in the spawned ranks too
except ImportError as e:
    sys.exit(f"torch_bench: cannot import ccl_torch ({e}): set PYTHONPATH to a build tree's "
             "bindings/torch or an install's python/")


class EmbeddingModel(torch.nn.Module):
    """A recommendation-style model: embedding tables (dense gradients, as DDP reduces them) whose
    pooled rows feed a small MLP. Most parameters, little arithmetic: communication-heavy."""

    def __init__(self, tables, rows, dim):
        super().__init__()
        self.tables = torch.nn.ModuleList(
            torch.nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        self.head = torch.nn.Sequential(torch.nn.Linear(tables * dim, 64), torch.nn.ReLU(),
                                        torch.nn.Linear(64, 1))

    def forward(self, idx):  # idx: [tables, batch, bag]
        return self.head(torch.cat([t(idx[i]) for i, t in enumerate(self.tables)], 1))


def make_model(args):
    torch.manual_seed(0)
    if args.model == "embedding":
        return EmbeddingModel(args.depth, args.rows, args.width)
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


def model_input(args):
    if args.model == "embedding":
        return torch.randint(args.rows, (args.depth, args.batch, 32))
    return torch.randn(args.batch, args.width)


def describe_model(args):
    if args.model == "embedding":
        params = args.depth * args.rows * args.width + args.depth * args.width * 64 + 64 + 64 + 1
        what = (f"{args.depth} x EmbeddingBag({args.rows}, {args.width}) (bags of 32) + "
                f"MLP {args.depth * args.width}-64-1")
    else:
        params = args.depth * (args.width * args.width + args.width)
        what = f"{args.depth} x Linear({args.width}, {args.width}) + ReLU"
    return (f"{what}, {params / 1e6:.1f} M float32 parameters "
            f"({params * 4 / 2**20:.0f} MiB of gradients), batch {args.batch} per rank, "
            f"bucket_cap_mb {args.bucket_cap_mb}, gradient_as_bucket_view {args.bucket_view}")


def ddp_times(ddp, steps, args, no_sync):
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    x = model_input(args)
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
    models = {name: DDP(make_model(args), process_group=pg, bucket_cap_mb=args.bucket_cap_mb,
                        gradient_as_bucket_view=args.bucket_view)
              for name, pg in groups.items()}
    results = {name: {"step": [], "compute": []} for name in groups}
    for name, m in models.items():  # warm-up: buckets rebuilt after the first step
        ddp_times(m, 3, args, False)
    for _ in range(args.rounds):
        for name, m in models.items():
            dist.barrier(group=groups[name])
            results[name]["step"] += ddp_times(m, args.steps, args, False)
            results[name]["compute"] += ddp_times(m, args.steps, args, True)
    return {name: {k: statistics.median(v) for k, v in r.items()} for name, r in results.items()}


COLLECTIVES = ("all_reduce", "broadcast", "all_gather", "reduce_scatter")


def bench_collectives(rank, size, args, groups):
    factor = {"all_reduce": 2 * (size - 1) / size, "broadcast": 1.0,
              "all_gather": (size - 1) / size, "reduce_scatter": (size - 1) / size}
    out = {}
    for coll in COLLECTIVES:
        for nbytes in args.sizes:
            n = max(1, nbytes // 4)
            t = torch.ones(n)
            big = torch.ones(n * size)
            for name, pg in groups.items():
                def once():
                    if coll == "all_reduce":
                        dist.all_reduce(t, group=pg)
                    elif coll == "broadcast":
                        dist.broadcast(t, src=0, group=pg)
                    elif coll == "all_gather":
                        dist.all_gather_into_tensor(big, t, group=pg)
                    else:
                        dist.reduce_scatter_tensor(t, big, group=pg)
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
                moved = n * 4 * (size if coll in ("all_gather", "reduce_scatter") else 1)
                out[(coll, n * 4, name)] = (sec * 1e6, moved / sec / 1e9 * factor[coll])
    return out


def worker(rank, size, init, args, queue):
    torch.set_num_threads(args.threads)  # as torchrun does (OMP_NUM_THREADS=1) with several ranks
    dist.init_process_group(ccl_torch.BACKEND, init_method=init, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=300))
    groups = {"ccl": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    if args.gloo_first:  # the order of the alternation, swapped between launches
        groups = {"gloo": groups["gloo"], "ccl": groups["ccl"]}
    ddp = bench_ddp(rank, size, args, groups)
    colls = bench_collectives(rank, size, args, groups) if args.collectives else {}
    if rank == 0:
        queue.put((ddp, colls))
    dist.barrier()
    dist.destroy_process_group()


def communication(v):
    return max(v["step"] - v["compute"], 1e-9)


def launch(size, args, with_collectives, launch_index):
    """One launch: `size` fresh rank processes; returns rank 0's (ddp, collectives) results."""
    run_args = argparse.Namespace(**vars(args))
    run_args.collectives = with_collectives
    run_args.gloo_first = launch_index % 2 == 1
    return launch_ranks(worker, size, (run_args,), 1800, "torch_bench")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--np", default="2,4", help="rank counts, comma-separated")
    p.add_argument("--model", choices=("mlp", "embedding"), default="mlp",
                   help="DDP model: an MLP, or embedding tables with an MLP head")
    p.add_argument("--width", type=int, default=1024,
                   help="DDP model: width of each Linear (mlp), embedding dimension (embedding)")
    p.add_argument("--depth", type=int, default=8,
                   help="DDP model: number of Linear layers (mlp) or of tables (embedding)")
    p.add_argument("--rows", type=int, default=16384, help="DDP model: rows of each table")
    p.add_argument("--bucket-cap-mb", type=float, default=25, help="DDP's bucket_cap_mb")
    p.add_argument("--bucket-view", action="store_true",
                   help="DDP's gradient_as_bucket_view=True (gradients live in the buckets)")
    p.add_argument("--batch", type=int, default=8, help="DDP: samples per rank and step")
    p.add_argument("--steps", type=int, default=10, help="DDP: steps per round")
    p.add_argument("--rounds", type=int, default=3, help="alternations between the backends")
    p.add_argument("--sizes", default="8,1024,65536,1048576,16777216,67108864",
                   help="collective sizes in bytes")
    p.add_argument("--threads", type=int, default=1, help="torch threads per rank")
    p.add_argument("--launches", type=int, default=5,
                   help="fresh launches per rank count (DDP and the collectives in each; the "
                        "backends' order alternates from one launch to the next)")
    p.add_argument("--no-collectives", dest="collectives", action="store_false")
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    print(f"# DDP model: {describe_model(args)}; medians of {args.rounds} x {args.steps} steps")
    print(f"# {os.cpu_count()} CPUs; torch {torch.__version__}")
    for size in [int(s) for s in args.np.split(",")]:
        launches = [launch(size, args, args.collectives, i) for i in range(args.launches)]
        print(f"\n## {size} ranks: DDP, {args.launches} launches\n")
        print("| launch | backend | step (ms) | compute-only step (ms) | communication (ms) |")
        print("|---|---|---:|---:|---:|")
        for i, (ddp, _) in enumerate(launches):
            for name, v in ddp.items():
                print(f"| {i + 1} | {name} | {v['step'] * 1e3:.2f} | {v['compute'] * 1e3:.2f} | "
                      f"{communication(v) * 1e3:.2f} |")
        # The ratios between each backend's worst launch (longest step), and between the median.
        def median_launch(runs, key):
            return sorted(runs, key=key)[len(runs) // 2]

        for label, pick in (("worst", max), ("median", median_launch)):
            c, g = (pick([ddp[name] for ddp, _ in launches], key=lambda v: v["step"])
                    for name in ("ccl", "gloo"))
            print(f"\nGloo / ccl, {label} launch of each: step {g['step'] / c['step']:.2f}x, "
                  f"communication {communication(g) / communication(c):.1f}x")
        if args.collectives:
            print(f"\n## {size} ranks: torch.distributed collectives, float32, "
                  f"{args.launches} launches\n")
            print("| collective | bytes | ccl median (us) | ccl busbw median / worst (GB/s) | "
                  "gloo median (us) | gloo busbw median / worst (GB/s) | "
                  "ccl / gloo busbw, median / worst |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for coll in COLLECTIVES:
                for nbytes in args.sizes:
                    nb = max(1, nbytes // 4) * 4
                    row = {}
                    for name in ("ccl", "gloo"):
                        runs = [colls[(coll, nb, name)] for _, colls in launches]
                        row[name] = (statistics.median(u for u, _ in runs),
                                     statistics.median(b for _, b in runs),
                                     min(b for _, b in runs))
                    (cu, cb, cw), (gu, gb, gw) = row["ccl"], row["gloo"]
                    print(f"| {coll} | {nb} | {cu:.1f} | {cb:.2f} / {cw:.2f} | {gu:.1f} | "
                          f"{gb:.2f} / {gw:.2f} | {cb / gb:.1f}x / {cw / gw:.1f}x |")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
