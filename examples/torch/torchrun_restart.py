"""torchrun's elastic agent on ccl: a worker dies, the agent restarts the group, the workers
make a new ccl process group, load the last checkpoint and finish; the result equals one
process's.

    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 2 \\
        --max-restarts 1 examples/torch/torchrun_restart.py --checkpoint /tmp/ckpt \\
        [--steps 12] [--fail-at 5]

DDP on ccl trains tiny_lm.py; rank 0 saves a checkpoint (model, optimizer, step) after every
step. In the first attempt (TORCHELASTIC_RESTART_COUNT 0) the last rank exits with an error in
the middle of step --fail-at, after its backward pass; the agent sees it, stops the other worker
and starts both again (torchrun restarts the whole group: --max-restarts bounds how often).
The new workers resume after the last checkpointed step. Rank 0 prints each attempt's start,
and at the end the largest difference from the one-process reference.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402


def load(path, model, opt):
    """The step to start from: 0, or the one after the checkpoint's."""
    if not os.path.exists(path):
        return 0
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optim"])
    return state["step"] + 1


def save(path, model, opt, step):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, path)  # a rank killed while saving leaves the previous checkpoint whole


def train(args):
    from torch.nn.parallel import DistributedDataParallel as DDP
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank, world = dist.get_rank(), dist.get_world_size()
    model = tiny_lm.build()
    opt = tiny_lm.optimizer(model.parameters())
    first = load(args.checkpoint, model, opt)  # every rank reads the same file
    ddp = DDP(model)
    if rank == 0:
        print(f"attempt {attempt}: {world} ranks start at step {first}", flush=True)
    for step in range(first, args.steps):
        inputs, targets = (tiny_lm.shard(t, rank, world) for t in tiny_lm.batch(step))
        tiny_lm.loss_fn(ddp(inputs), targets).backward()
        if attempt == 0 and step == args.fail_at and rank == world - 1:
            # The failure: this rank's gradients are reduced, its peer's step is not done.
            raise SystemExit(f"rank {rank}: failing in step {step} (attempt {attempt})")
        opt.step()
        opt.zero_grad()
        if rank == 0:
            save(args.checkpoint, model, opt, step)
        # The checkpoint of this step exists before any rank starts the next.
        dist.barrier()
    return tiny_lm.full_parameters(model), attempt


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", required=True, help="file for the checkpoint (a fresh path)")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--fail-at", type=int, default=5)
    args = ap.parse_args()
    if not 0 <= args.fail_at < args.steps:
        ap.error("--fail-at must lie in [0, --steps)")
    params, attempt = tiny_lm.run_on_ccl(lambda: train(args), args.steps)
    if int(os.environ.get("RANK", "0")) == 0:
        print(f"finished in attempt {attempt}", flush=True)


if __name__ == "__main__":
    main()
