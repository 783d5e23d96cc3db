"""DTensor tensor parallelism composed with FSDP2 on ccl: the small language model of tiny_lm.py
on a 2-D DeviceMesh (dp x tp), each block split Megatron-style over the tp ranks with
parallelize_module and sharded over the dp ranks with fully_shard.

    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 4 \\
        examples/torch/tensor_parallel.py [--tp 2] [--no-sequence-parallel] [--no-fsdp]

The plan (torch.distributed.tensor.parallel):
  - the embedding is RowwiseParallel (each tp rank holds a slice of the vocabulary);
  - in each block, q, k and v are ColwiseParallel (a tp rank holds heads / tp whole heads, so
    attention needs no communication) and the output projection RowwiseParallel; the MLP's up
    projection ColwiseParallel and its down projection RowwiseParallel;
  - with sequence parallelism (the default) the layer norms are SequenceParallel: between the
    parallel parts the activations are split along the sequence, an all-gather before each
    column-parallel part and a reduce-scatter after each row-parallel one; without it the
    activations are whole on every tp rank and the row-parallel parts all-reduce;
  - the output layer is ColwiseParallel with its logits gathered (Replicate), so every tp rank
    computes the same loss.
The dp ranks each take their slice of the global batch; the tp ranks of a dp rank take the
same one. Rank 0 prints each step's loss and the largest difference of the final parameters
from the one-process reference.
"""
import argparse
import os
import sys

import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402


def tp_plan(model, sequence_parallel=True):
    """parallelize_module plans: {module: plan} for the model and each block."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel)
    between = Shard(1) if sequence_parallel else Replicate()
    top = {}  # a pipeline stage may hold neither the embedding nor the head
    if model.embed is not None:
        top["embed"] = RowwiseParallel(input_layouts=Replicate(), output_layouts=between)
    if model.head is not None:
        top["head"] = ColwiseParallel(input_layouts=between, output_layouts=Replicate())
        if sequence_parallel:
            top["norm"] = SequenceParallel()
    block = {
        "attn.q": ColwiseParallel(),
        "attn.k": ColwiseParallel(),
        "attn.v": ColwiseParallel(),
        "attn.o": RowwiseParallel(output_layouts=between),
        "mlp.up": ColwiseParallel(),
        "mlp.down": RowwiseParallel(output_layouts=between),
    }
    if sequence_parallel:
        block.update({
            "attn_norm": SequenceParallel(),
            "attn": PrepareModuleInput(input_layouts=(Shard(1),),
                                       desired_input_layouts=(Replicate(),)),
            "mlp_norm": SequenceParallel(),
            "mlp": PrepareModuleInput(input_layouts=(Shard(1),),
                                      desired_input_layouts=(Replicate(),)),
        })
    plans = {model: top} if top else {}
    for b in model.blocks.values():
        plans[b] = block
    return plans


def parallelize(model, mesh, sequence_parallel=True, fsdp=True):
    """TP over mesh["tp"], then (fsdp) FSDP2 over mesh["dp"]: each block, then the model."""
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module
    for module, plan in tp_plan(model, sequence_parallel).items():
        parallelize_module(module, mesh["tp"], plan)
    if fsdp:
        for block in model.blocks.values():
            fully_shard(block, mesh=mesh["dp"])
        fully_shard(model, mesh=mesh["dp"])
    return model


def train(steps, tp=2, cfg=tiny_lm.Config(), sequence_parallel=True, fsdp=True, verbose=False):
    """Returns (whole parameters, global-batch losses) after `steps` steps on the default group."""
    from torch.distributed.device_mesh import init_device_mesh
    world = dist.get_world_size()
    if world % tp or cfg.heads % tp or cfg.seq % tp:
        raise SystemExit(f"tp {tp} must divide the ranks ({world}), heads and sequence length")
    dp = world // tp
    mesh = init_device_mesh("cpu", (dp, tp), mesh_dim_names=("dp", "tp"))
    model = parallelize(tiny_lm.build(cfg), mesh, sequence_parallel, fsdp)
    opt = tiny_lm.optimizer(model.parameters())
    dp_rank = mesh["dp"].get_local_rank()
    losses = []
    for step in range(steps):
        inputs, targets = (tiny_lm.shard(t, dp_rank, dp) for t in tiny_lm.batch(step, cfg))
        loss = tiny_lm.loss_fn(model(inputs), targets)
        loss.backward()
        if not fsdp and dp > 1:  # plain data parallelism over dp: average the gradients
            for p in model.parameters():
                dist.all_reduce(p.grad.to_local(), op=dist.ReduceOp.AVG,
                                group=mesh["dp"].get_group())
        opt.step()
        opt.zero_grad()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        losses.append(total.item())
        if verbose and dist.get_rank() == 0:
            print(f"step {step}: loss {total.item():.6f}", flush=True)
    return tiny_lm.full_parameters(model), losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--no-sequence-parallel", action="store_true")
    ap.add_argument("--no-fsdp", action="store_true")
    args = ap.parse_args()
    tiny_lm.run_on_ccl(lambda: train(args.steps, args.tp,
                                     sequence_parallel=not args.no_sequence_parallel,
                                     fsdp=not args.no_fsdp, verbose=True), args.steps)

if __name__ == "__main__":
    main()
