"""torch.distributed.pipelining on ccl: the small language model of tiny_lm.py cut into pipeline
stages, one a rank (GPipe or 1F1B over the micro-batches); and, at 8 ranks, 3D parallelism:
pipeline x FSDP2 x DTensor tensor parallelism.

    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 4 \\
        examples/torch/pipelining.py [--schedule gpipe|1f1b] [--microbatches 4]
    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 8 \\
        examples/torch/pipelining.py --pp 2 --dp 2 --tp 2

A stage holds blocks / pp consecutive blocks (the model has as many blocks as stages, at least
2); the first also the embedding, the last the final norm, the output layer and the loss. The
stages pass activations forward and gradients back with ccl's send/recv (batched: one ccl group
per step of the schedule). With --dp and --tp, each stage is split with tensor_parallel.py's
plan over its tp group and sharded with fully_shard over its dp group; the mesh is (pp, dp, tp),
tp innermost. Rank 0 prints each step's loss (the last stage's, averaged over dp) and every rank
checks its stage's parameters against the one-process reference.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402


def config(pp):
    return tiny_lm.Config(blocks=max(2, pp))


def stage_module(cfg, stage, stages):
    """The part of the model stage `stage` of `stages` runs (same names as in the whole one)."""
    model = tiny_lm.build(cfg)
    per = cfg.blocks // stages
    keep = {str(i) for i in range(stage * per, (stage + 1) * per)}
    for name in list(model.blocks.keys()):
        if name not in keep:
            del model.blocks[name]
    if stage != 0:
        model.embed = None
    if stage != stages - 1:
        model.norm = None
        model.head = None
    return model


def train(steps, pp, dp=1, tp=1, schedule="1f1b", microbatches=4, verbose=False):
    """This rank's stage trained for `steps` steps. Returns (its whole parameters, the losses:
    the global batch's mean on the last stage, None on the others)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    world = dist.get_world_size()
    if pp * dp * tp != world:
        raise SystemExit(f"pp {pp} x dp {dp} x tp {tp} is not the {world} ranks")
    cfg = config(pp)
    if cfg.blocks % pp:
        raise SystemExit(f"{cfg.blocks} blocks do not split into {pp} stages")
    mesh = init_device_mesh("cpu", (pp, dp, tp), mesh_dim_names=("pp", "dp", "tp"))
    stage_index = mesh["pp"].get_local_rank()
    module = stage_module(cfg, stage_index, pp)
    if tp > 1 or dp > 1:
        import tensor_parallel
        from torch.distributed.fsdp import fully_shard
        if tp > 1:
            from torch.distributed.tensor.parallel import parallelize_module
            for target, plan in tensor_parallel.tp_plan(module).items():
                parallelize_module(target, mesh["tp"], plan)
        if dp > 1:
            for block in module.blocks.values():
                fully_shard(block, mesh=mesh["dp"])
            fully_shard(module, mesh=mesh["dp"])
    stage = PipelineStage(module, stage_index, pp, torch.device("cpu"),
                          group=mesh["pp"].get_group())
    kinds = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}
    sched = kinds[schedule](stage, n_microbatches=microbatches, loss_fn=tiny_lm.loss_fn)
    opt = tiny_lm.optimizer(module.parameters())
    first, last = stage_index == 0, stage_index == pp - 1
    dp_rank = mesh["dp"].get_local_rank()
    losses = []
    for step in range(steps):
        inputs, targets = (tiny_lm.shard(t, dp_rank, dp) for t in tiny_lm.batch(step, cfg))
        out = []
        if first and last:
            sched.step(inputs, target=targets, losses=out)
        elif first:
            sched.step(inputs)
        elif last:
            sched.step(target=targets, losses=out)
        else:
            sched.step()
        opt.step()
        opt.zero_grad()
        if last:
            loss = torch.stack([x.detach() for x in out]).mean()
            if dp > 1:
                dist.all_reduce(loss, op=dist.ReduceOp.AVG, group=mesh["dp"].get_group())
            losses.append(loss.item())
    if verbose and last and dp_rank == 0 and mesh["tp"].get_local_rank() == 0:
        for step, loss in enumerate(losses):
            print(f"step {step}: loss {loss:.6f}", flush=True)
    return tiny_lm.full_parameters(module), (losses if last else None)


def check_against_reference(params, steps, pp):
    """The largest difference of this stage's parameters from the one-process reference's."""
    want, _ = tiny_lm.train_reference(steps, config(pp))
    return tiny_lm.max_difference(params, {k: want[k] for k in params})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--pp", type=int, help="pipeline stages (default: all the ranks)")
    ap.add_argument("--dp", type=int, default=1)
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--schedule", choices=["gpipe", "1f1b"], default="1f1b")
    ap.add_argument("--microbatches", type=int, default=4)
    args = ap.parse_args()
    import ccl_torch
    dist.init_process_group(ccl_torch.BACKEND)
    try:
        pp = args.pp or dist.get_world_size() // (args.dp * args.tp)
        params, _ = train(args.steps, pp, args.dp, args.tp, args.schedule, args.microbatches,
                          verbose=True)
        diff = check_against_reference(params, args.steps, pp)
        print(f"rank {dist.get_rank()}: largest difference from one process {diff:.3g}",
              flush=True)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
