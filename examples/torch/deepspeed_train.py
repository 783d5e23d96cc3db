"""DeepSpeed on ccl, on CPU: deepspeed.init_distributed(dist_backend="ccl_torch"), then a
DeepSpeed engine (ZeRO stage 0, 1 or 2) trains tiny_lm.py data-parallel; the result equals one
process's.

    DS_ACCELERATOR=cpu PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone \\
        --nproc_per_node 2 examples/torch/deepspeed_train.py [--zero 1] [--steps 6]

init_distributed with a backend name goes to DeepSpeed's TorchBackend, that is to
torch.distributed.init_process_group("ccl_torch"); without it, DeepSpeed's CPU accelerator would
ask for "ccl" (oneCCL's name) or Gloo. The engine takes a torch optimizer (SGD with momentum, as
tiny_lm's reference: DeepSpeed's own fused optimizers are compiled kernels this example does not
need). Rank 0 prints the backend, each step's loss and the largest difference from the
one-process reference.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--zero", type=int, default=1, choices=[0, 1, 2])
    args = ap.parse_args()

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    import ccl_torch
    import deepspeed

    deepspeed.init_distributed(dist_backend=ccl_torch.BACKEND)
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = tiny_lm.Config()
    model = tiny_lm.build(cfg)
    config = {
        "train_batch_size": cfg.batch,
        "train_micro_batch_size_per_gpu": cfg.batch // world,
        "gradient_accumulation_steps": 1,
        "zero_optimization": {"stage": args.zero},
        "zero_allow_untested_optimizer": True,
        "steps_per_print": 10 ** 9,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, config=config,
                                           optimizer=tiny_lm.optimizer(model.parameters()))
    if rank == 0:
        print(f"group backend: {dist.get_backend()}; ZeRO stage {args.zero}", flush=True)
    for step in range(args.steps):
        inputs, targets = (tiny_lm.shard(t, rank, world) for t in tiny_lm.batch(step, cfg))
        loss = tiny_lm.loss_fn(engine(inputs), targets)
        engine.backward(loss)
        engine.step()
        total = loss.detach().clone()
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
        if rank == 0:
            print(f"step {step}: loss {total.item():.6f}", flush=True)
    tiny_lm.report_against_reference(tiny_lm.full_parameters(engine.module), args.steps, cfg)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
