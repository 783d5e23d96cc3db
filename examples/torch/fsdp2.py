"""torch's FSDP2 (fully_shard) on ccl: the small language model of tiny_lm.py, each block and the
whole model sharded over the data-parallel ranks, each rank on its slice of the global batch.

    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 4 \\
        examples/torch/fsdp2.py [--no-reshard] [--mixed-precision] [--accumulate K] [--hsdp]
        [--divide-factor F] [--prefetch]
    .venv/bin/python examples/torch/fsdp2.py --reference [--accumulate K]

--no-reshard keeps the gathered parameters from the forward to the backward
(reshard_after_forward=False); --mixed-precision computes in bfloat16 and reduces gradients in
float32; --accumulate K runs K micro-batches a step, syncing gradients only on the last; --hsdp
shards over half the ranks and replicates over the two halves (a 2-D mesh); --divide-factor F
has FSDP2 divide gradients by F (a PREMUL_SUM of 1/F unless F is the group size) while each
rank scales its loss by F / ranks, so the result is the same as without it; --prefetch issues
the all-gathers asynchronously, each block's prefetched by its neighbour, so that they overlap
the compute (on CPU, FSDP2 by default waits for each where it issues it). Each run prints the
loss of each step and the largest difference of the final parameters from the one-process
reference (trained here too, on rank 0).
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402


def shard_model(model, mesh, reshard=True, mixed=False, prefetch=False):
    """Each block a fully_shard unit, then the root. prefetch: each unit's pre-forward and
    pre-backward all-gather issued as an asynchronous work, prefetched by the block before it
    (forward) or after it (backward), so that it runs while the rank computes. Without it, on
    CPU, FSDP2 waits for each all-gather where it issues it: its overlap comes from CUDA
    streams, which a CPU group does not have (perf/torch/fsdp2_overlap.py measures both)."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    policy = MixedPrecisionPolicy()
    if mixed:
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    blocks = list(model.blocks.values())
    for block in blocks:
        fully_shard(block, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard, mp_policy=policy)
    if prefetch:
        model._set_unshard_async_op(True)  # every unit's (torch's name for it is private)
        for i, block in enumerate(blocks):
            block.set_modules_to_forward_prefetch(blocks[i + 1:i + 2])
            block.set_modules_to_backward_prefetch(blocks[max(0, i - 1):i])
    return model


def train(steps, cfg=tiny_lm.Config(), reshard=True, mixed=False, accumulate=1, hsdp=False,
          divide_factor=None, prefetch=False, verbose=False):
    """FSDP2 on the default group (ccl's). Returns (whole parameters, global-batch losses)."""
    from torch.distributed.device_mesh import init_device_mesh
    rank, world = dist.get_rank(), dist.get_world_size()
    if hsdp:
        if world % 2:
            raise SystemExit("--hsdp needs an even number of ranks")
        mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("shard",))
    model = shard_model(tiny_lm.build(cfg), mesh, reshard, mixed, prefetch)
    scale = 1.0
    if divide_factor is not None:
        from torch.distributed.fsdp import FSDPModule
        for module in model.modules():  # each fully_shard unit has its own factor
            if isinstance(module, FSDPModule):
                module.set_gradient_divide_factor(float(divide_factor))
        scale = divide_factor / world
    opt = tiny_lm.optimizer(model.parameters())
    losses = []
    for step in range(steps):
        inputs, targets = (tiny_lm.shard(t, rank, world) for t in tiny_lm.batch(step, cfg))
        total = torch.zeros(())
        micro = list(zip(inputs.chunk(accumulate), targets.chunk(accumulate)))
        for i, (x, y) in enumerate(micro):
            model.set_requires_gradient_sync(i == len(micro) - 1)
            loss = tiny_lm.loss_fn(model(x), y) / accumulate
            (loss * scale).backward()
            total += loss.detach().float()
        opt.step()
        opt.zero_grad()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        losses.append(total.item())
        if verbose and rank == 0:
            print(f"step {step}: loss {total.item():.6f}", flush=True)
    return tiny_lm.full_parameters(model), losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--no-reshard", action="store_true")
    ap.add_argument("--mixed-precision", action="store_true")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--hsdp", action="store_true")
    ap.add_argument("--divide-factor", type=float)
    ap.add_argument("--prefetch", action="store_true",
                    help="asynchronous all-gathers, each block's prefetched by its neighbour")
    ap.add_argument("--reference", action="store_true", help="train in one process only")
    args = ap.parse_args()
    if args.reference:
        _, losses = tiny_lm.train_reference(args.steps, accumulate=args.accumulate)
        for step, loss in enumerate(losses):
            print(f"step {step}: loss {loss:.6f}")
        return
    tiny_lm.run_on_ccl(lambda: train(args.steps, reshard=not args.no_reshard,
                                     mixed=args.mixed_precision, accumulate=args.accumulate,
                                     hsdp=args.hsdp, divide_factor=args.divide_factor,
                                     prefetch=args.prefetch, verbose=True),
                      args.steps, args.accumulate)

if __name__ == "__main__":
    main()
