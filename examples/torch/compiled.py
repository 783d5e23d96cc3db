"""A torch.compile'd data-parallel training step whose collectives run on ccl: the small language
model of tiny_lm.py compiled with torch.compile, and the gradient averaging compiled with
fullgraph=True (so a graph break on a collective would be an error, not a silent fallback).

    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 2 \\
        examples/torch/compiled.py [--inplace] [--show-code]

The gradients are averaged in one flat buffer, either with the functional collective
torch.distributed._functional_collectives.all_reduce (the default) or with the in-place
torch.distributed.all_reduce (--inplace), which dynamo rewrites into the functional one. Either
way the compiled graph holds _c10d_functional.all_reduce_ and wait_tensor operators that name
the group; when the graph runs, they call ccl's backend for that group, and the wait comes as
late as the graph allows. --show-code prints the code Inductor generated for the averaging
(rank 0). Rank 0 prints each step's loss and the largest difference of the final parameters
from the one-process reference.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402


def average_functional(grads):
    """Averages the gradients over the default group with a functional all-reduce."""
    import torch.distributed._functional_collectives as funcol
    flat = torch.cat([g.reshape(-1) for g in grads])
    flat = funcol.all_reduce(flat, "avg", dist.group.WORLD)
    return list(torch.split(flat, [g.numel() for g in grads]))


def average_inplace(grads):
    """The same with torch.distributed.all_reduce (dynamo makes it functional)."""
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.AVG)
    return list(torch.split(flat, [g.numel() for g in grads]))


def graph_breaks(fn, *args):
    """How many graph breaks dynamo finds in fn(*args) (torch._dynamo.explain)."""
    return torch._dynamo.explain(fn)(*args).graph_break_count


def train(steps, cfg=tiny_lm.Config(), inplace=False, show_code=False, verbose=False):
    """Returns (whole parameters, global-batch losses, graph breaks in the averaging)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_lm.build(cfg)
    forward = torch.compile(model)
    average = torch.compile(average_inplace if inplace else average_functional, fullgraph=True)
    opt = tiny_lm.optimizer(model.parameters())
    losses = []
    breaks = None
    for step in range(steps):
        inputs, targets = (tiny_lm.shard(t, rank, world) for t in tiny_lm.batch(step, cfg))
        loss = tiny_lm.loss_fn(forward(inputs), targets)
        loss.backward()
        grads = [p.grad for p in model.parameters()]
        if breaks is None:
            breaks = graph_breaks(average_inplace if inplace else average_functional, grads)
        if show_code and step == 0:  # every rank runs it (a collective); rank 0 prints
            from torch._inductor.utils import run_and_get_code
            averaged, code = run_and_get_code(average, grads)
            if rank == 0:
                print("".join(line for line in code[0].splitlines(keepends=True)
                              if "_c10d_functional" in line), flush=True)
        else:
            averaged = average(grads)
        for g, averaged in zip(grads, averaged):
            g.copy_(averaged.view_as(g))
        opt.step()
        opt.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        losses.append(total.item())
        if verbose and rank == 0:
            print(f"step {step}: loss {total.item():.6f}", flush=True)
    if verbose and rank == 0:
        print(f"graph breaks in the averaging: {breaks}", flush=True)
    return tiny_lm.full_parameters(model), losses, breaks


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--inplace", action="store_true")
    ap.add_argument("--show-code", action="store_true")
    args = ap.parse_args()
    tiny_lm.run_on_ccl(lambda: train(args.steps, inplace=args.inplace, show_code=args.show_code,
                                     verbose=True), args.steps)


if __name__ == "__main__":
    main()
