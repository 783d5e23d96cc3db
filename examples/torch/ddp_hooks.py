"""DistributedDataParallel with a communication hook, on ccl: torch's own hooks (allreduce, fp16
and bf16 compression, PowerSGD) and ccl's (TopK and 1-bit with error feedback), training the small
language model of tiny_lm.py, each rank on its slice of the global batch.

    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 2 \\
        examples/torch/ddp_hooks.py --hook powersgd [--steps 20]

Hooks: none (DDP's built-in allreduce), allreduce, fp16, bf16 (torch's default_hooks),
powersgd (torch's powerSGD_hook: rank-2 approximation after 2 plain steps, error feedback),
topk (ccl_torch.hooks.topk_hook keeping 10% of each bucket) and onebit (ccl_torch.hooks.
onebit_hook). Rank 0 prints each step's loss and, at the end, the largest difference from the
one-process reference (zero up to rounding without compression; the compressed hooks train a
different, approximate, update).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402

HOOKS = ["none", "allreduce", "fp16", "bf16", "powersgd", "topk", "onebit"]


def register(ddp, hook, group=None):
    """Registers `hook` (a name of HOOKS) on the DDP model; returns its state (or None)."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    import ccl_torch.hooks as ccl_hooks
    if hook == "none":
        return None
    if hook in ("allreduce", "fp16", "bf16"):
        fn = {"allreduce": default_hooks.allreduce_hook,
              "fp16": default_hooks.fp16_compress_hook,
              "bf16": default_hooks.bf16_compress_hook}[hook]
        ddp.register_comm_hook(group, fn)
        return None
    if hook == "powersgd":
        state = powerSGD_hook.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                            start_powerSGD_iter=2, random_seed=0)
        ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        return state
    if hook == "topk":
        state = ccl_hooks.TopKState(ratio=0.1, process_group=group)
        ddp.register_comm_hook(state, ccl_hooks.topk_hook)
        return state
    if hook == "onebit":
        state = ccl_hooks.OneBitState(process_group=group)
        ddp.register_comm_hook(state, ccl_hooks.onebit_hook)
        return state
    raise ValueError(f"unknown hook {hook!r}: one of {', '.join(HOOKS)}")


def bucket_cap_mb(hook):
    """Small buckets (several per step, so that communication overlaps the backward pass), but one
    for PowerSGD: its hook issues each bucket's second allreduce from the completion callback of
    the first, and on CPU (Gloo or ccl) that callback runs when the allreduce ends, so with
    several buckets the order of that allreduce and the next bucket's first depends on timing,
    and may differ between ranks (Gloo then fails on a size mismatch or hangs). With NCCL the
    callback runs when the allreduce is enqueued, in issue order."""
    return 25 if hook == "powersgd" else 0.05


def train(steps, hook="none", group=None, verbose=False, cfg=tiny_lm.Config()):
    """DDP over `group` (default: the default group). Returns (parameters, global-batch losses,
    the hook's state)."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    rank = dist.get_rank(group)
    world = dist.get_world_size(group)
    ddp = DDP(tiny_lm.build(cfg), process_group=group, bucket_cap_mb=bucket_cap_mb(hook))
    state = register(ddp, hook, group)
    opt = tiny_lm.optimizer(ddp.parameters())
    losses = []
    for step in range(steps):
        inputs, targets = (tiny_lm.shard(t, rank, world) for t in tiny_lm.batch(step, cfg))
        loss = tiny_lm.loss_fn(ddp(inputs), targets)
        loss.backward()
        opt.step()
        opt.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG, group=group)
        losses.append(total.item())
        if verbose and rank == 0:
            print(f"step {step}: loss {total.item():.6f}", flush=True)
    return tiny_lm.full_parameters(ddp.module), losses, state


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--hook", choices=HOOKS, default="none")
    args = ap.parse_args()
    tiny_lm.run_on_ccl(lambda: train(args.steps, args.hook, verbose=True), args.steps)


if __name__ == "__main__":
    main()
