#!/usr/bin/env python3
"""DDP training that goes on when a rank is SIGKILLed mid-step, and takes a replacement back in.

    PYTHONPATH=<ccl build>/bindings/torch python3 elastic_ddp.py --nprocs 3 --kill-rank 1

starts 3 ranks (this script is also their launcher); rank 1 kills itself in the middle of a
backward pass at --kill-step. The survivors' failed step raises; they recover with
ccl_torch.elastic (revoke, shrink to the live ranks), bring their state to the newest one any of
them holds, rebuild DDP on the new group and train on. The launcher starts a replacement for the
killed rank (CCL_REPLACEMENT=1, as `cclrun --restart-failed` does); it announces itself in the
run's directory, the members take it in at their next step (grow) and send it the model and the
optimizer's state. Every rank checks that all ranks hold the same parameters after each change
of the group and at the end. examples/elastic_ddp/README.md says more.
"""
import time

STARTED = time.time()  # before the imports: a newcomer reports how long it took to join

import argparse  # noqa: E402
import datetime  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

import ccl_torch  # noqa: E402  (registers ccl_torch.BACKEND)
from ccl_torch import elastic  # noqa: E402


def log(*words):
    print(f"[world rank {os.environ.get('CCL_RANK', '?')}]", *words, flush=True)


# ---------------------------------------------------------------------------- the training state

def make_model():
    torch.manual_seed(0)  # the same initial parameters on every rank, newcomers included
    return nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def make_optimizer(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    # Momentum buffers from the start, so that every rank's state has the same tensors to send.
    for p in model.parameters():
        opt.state[p]["momentum_buffer"] = torch.zeros_like(p)
    return opt


def state_tensors(model, opt):
    params = [p.data for p in model.parameters()]
    return params + [opt.state[p]["momentum_buffer"] for p in model.parameters()]


def batch(step, rank, size, per_rank=32):
    """Rank `rank`'s slice of step `step`'s global batch (the same data whoever computes it)."""
    g = torch.Generator().manual_seed(step)
    x = torch.randn(size * per_rank, 64, generator=g)
    y = (x[:, :10] * 2).sin()  # something to learn
    return x[rank * per_rank:(rank + 1) * per_rank], y[rank * per_rank:(rank + 1) * per_rank]


def sync_state(group, model, opt, step):
    """Every member: brings all to the newest state one of them holds; returns its step and the
    rank that sent it. A survivor may have finished the step the others failed in (its last
    allreduce completed before the death); a newcomer holds nothing yet (step -1)."""
    rank, size = group.rank(), group.size()
    newest = torch.tensor([step])
    dist.all_reduce(newest, op=dist.ReduceOp.MAX, group=group)
    source = torch.tensor([rank if step == newest.item() else size])
    dist.all_reduce(source, op=dist.ReduceOp.MIN, group=group)
    tensors = state_tensors(model, opt)
    flat = torch.cat([t.reshape(-1) for t in tensors])
    group.broadcast(flat, int(source.item())).wait()
    at = 0
    for t in tensors:
        t.copy_(flat[at:at + t.numel()].view_as(t))
        at += t.numel()
    return int(newest.item()), int(source.item())


def check_identical(group, model, opt, step):
    """Every member: the checksums of all ranks' parameters and momentum, gathered, must be one.
    Returns the checksum."""
    sums = [t.double().sum().item() for t in state_tensors(model, opt)]
    mine = torch.tensor([float(step)] + sums, dtype=torch.float64)
    everyone = [torch.empty_like(mine) for _ in range(group.size())]
    dist.all_gather(everyone, mine, group=group)
    for r, theirs in enumerate(everyone):
        if not torch.equal(theirs, mine):
            raise AssertionError(f"rank {r} of the group holds other parameters or another step "
                                 f"({theirs[:3].tolist()} vs {mine[:3].tolist()})")
    return mine[1:].sum().item()


# ---------------------------------------------------------------------------- one rank

class Killer:
    """The victim: at step `at`, SIGKILLs itself from inside the backward pass, once DDP has
    started the allreduce of the last layers' gradients (the first layer's are computed last);
    or, with `after` seconds, from a timer started at that step, wherever the step then is."""

    def __init__(self, model, at, after, stamp):
        self.at, self.after, self.stamp, self.step = at, after, stamp, -1
        model[0].weight.register_hook(self.hook)

    def die(self):
        with open(self.stamp, "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)

    def at_step(self, step):
        self.step = step
        if step == self.at and self.after is not None:
            threading.Timer(self.after, self.die).start()

    def hook(self, grad):
        if self.step == self.at and self.after is None:
            self.die()
        return grad


def worker(args):
    world_rank = int(os.environ.get("CCL_RANK", os.environ.get("RANK", "0")))
    world_size = int(os.environ.get("CCL_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
    replacement = os.environ.get("CCL_REPLACEMENT") == "1"
    run_dir = args.dir
    if "ELASTIC_RUN_DIR" not in os.environ:
        # Started by cclrun: one subdirectory per run (its secret), which a replacement shares.
        run_dir = os.path.join(args.dir, os.environ.get("CCL_COMM_SECRET", "run")[:16])
    os.makedirs(run_dir, exist_ok=True)
    rdv = elastic.FileRendezvous(os.path.join(run_dir, "grow"))
    timeout = datetime.timedelta(seconds=args.timeout)

    model = make_model()
    opt = make_optimizer(model)
    loss_fn = nn.MSELoss()
    killer = None
    if world_rank == args.kill_rank and not replacement:
        killer = Killer(model, args.kill_step, args.kill_after,
                        os.path.join(run_dir, f"killed.{world_rank}"))

    changed = None  # why the group just changed, until all its members are in one state
    if replacement:
        try:
            group, rank, size = elastic.join_through(rdv, f"rank{world_rank}",
                                                     timeout=args.join_timeout,
                                                     comm_timeout=timeout)
        except RuntimeError as e:  # the job ended first
            log(f"not taken in: {e}")
            return 0
        step, changed, changed_at = -1, "JOINED", time.time()
        ddp = None
    else:
        # file:// in the run's directory: a store no rank hosts (env:// would have rank 0 host
        # it). Only this first group uses it; the shrunk and grown groups need none.
        dist.init_process_group(ccl_torch.BACKEND, init_method=f"file://{run_dir}/init", rank=world_rank,
                                world_size=world_size, timeout=timeout)
        group, rank, size = dist.distributed_c10d._get_default_group(), world_rank, world_size
        step = 0
        ddp = DDP(model, process_group=group, bucket_cap_mb=0.25)

    failed_at = None  # when a step failed, until the survivors complete one
    lost = []
    # With fewer ranks than it started with, the job waits at its end for a replacement, this
    # many passes of 20 ms (the same count on every member, so they stop waiting together).
    holds = int(args.await_replacement / 0.02)
    while True:
        try:
            if changed is not None:
                # Every member of the new group: the newest state everywhere, checked, then DDP
                # on the new group (the old DDP first, so that its hooks are gone).
                ddp = None
                step, source = sync_state(group, model, opt, step)
                checksum = check_identical(group, model, opt, step)
                ddp = DDP(model, process_group=group, bucket_cap_mb=0.25)
                took = time.time() - changed_at
                if changed == "JOINED":
                    log(f"JOINED as rank {rank} of {size} at step {step}, "
                        f"{time.time() - STARTED:.2f} s after its process started")
                else:
                    log(f"{changed}: rank {rank} of {size} at step {step}, state from rank "
                        f"{source}, in {took:.3f} s; parameters identical on all {size} ranks "
                        f"(checksum {checksum:.6f})")
                changed = None
            before = time.time()
            grown, rank, size = elastic.grow_waiting(group, rdv)
            if grown is not group:
                group, changed, changed_at = grown, "GREW", before
                continue
            if step >= args.steps:
                if size >= world_size or holds <= 0:
                    break
                holds -= 1
                time.sleep(0.02)
                continue
            if killer is not None:
                killer.at_step(step)
            opt.zero_grad(set_to_none=False)
            x, y = batch(step, rank, size)
            loss = loss_fn(ddp(x), y)
            loss.backward()
            opt.step()
            step += 1
        except RuntimeError as e:
            # A peer died (now, or during the last change of the group): shrink to the living.
            if failed_at is None:
                failed_at = time.time()
            changed_at = time.time()
            group, rank, size = elastic.recover(group, e)
            changed = "RECOVERED"
            continue
        if failed_at is not None:
            # The time lost: from the kill to the survivors' first completed step after it.
            stamps = [f for f in os.listdir(run_dir) if f.startswith("killed.")]
            killed = max(float(open(os.path.join(run_dir, f)).read()) for f in stamps) \
                if stamps else failed_at
            lost.append(time.time() - killed)
            log(f"LOST {lost[-1]:.3f} s to the failure (kill -> step {step} completed on "
                f"{size} ranks; the failure surfaced here after {failed_at - killed:.3f} s)")
            failed_at = None
        if rank == 0 and step % args.log_every == 0:
            log(f"step {step} loss {loss.item():.5f} on {size} ranks")

    checksum = check_identical(group, model, opt, step)
    if rank == 0:
        rdv.close()
    log(f"DONE at step {step} on {size} ranks: rank {rank}, checksum {checksum:.6f} the same on "
        f"all" + (f"; lost per failure: {', '.join(f'{t:.3f} s' for t in lost)}" if lost else ""))
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------- the launcher

def launch(args):
    """Starts --nprocs ranks of this script and, as `cclrun --restart-failed` does, starts a
    replacement (same CCL_RANK, CCL_REPLACEMENT=1) for a rank that a signal killed."""
    run_dir = args.dir or tempfile.mkdtemp(prefix="elastic_ddp.")
    env = dict(os.environ, CCL_WORLD_SIZE=str(args.nprocs), ELASTIC_RUN_DIR=run_dir)
    env.setdefault("CCL_TIMEOUT", str(args.timeout))
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--dir", run_dir] + \
        [a for a in sys.argv[1:] if a != "--worker"]

    def start(rank, replacement):
        e = dict(env, CCL_RANK=str(rank))
        if replacement:
            e["CCL_REPLACEMENT"] = "1"
        return subprocess.Popen(argv, env=e)

    procs = {r: start(r, False) for r in range(args.nprocs)}
    restarts, status = args.restarts, 0
    deadline = time.monotonic() + args.job_timeout
    while procs:
        if time.monotonic() > deadline:
            for p in procs.values():
                p.kill()
            print(f"elastic_ddp: the job did not end in {args.job_timeout} s", flush=True)
            return 124
        for rank, p in list(procs.items()):
            code = p.poll()
            if code is None:
                continue
            del procs[rank]
            if code < 0 and restarts > 0:
                restarts -= 1
                print(f"elastic_ddp: rank {rank} died of signal {-code}; starting a replacement",
                      flush=True)
                procs[rank] = start(rank, True)
            elif code != 0 and status == 0:
                status = code if code > 0 else 128 - code
        time.sleep(0.02)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nprocs", type=int, default=3, help="ranks the launcher starts")
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--kill-rank", type=int, default=1, help="-1: nobody dies")
    ap.add_argument("--kill-step", type=int, default=100)
    ap.add_argument("--kill-after", type=float,
                    help="die this many seconds after --kill-step starts, wherever it is then "
                         "(default: in that step's backward pass)")
    ap.add_argument("--restarts", type=int, default=1, help="replacements the launcher starts")
    ap.add_argument("--timeout", type=int, default=10, help="ccl's timeout, s")
    ap.add_argument("--join-timeout", type=float, default=120, help="a newcomer's wait, s")
    ap.add_argument("--await-replacement", type=float, default=0,
                    help="at the end, how long fewer ranks than started wait for a replacement")
    ap.add_argument("--job-timeout", type=float, default=600, help="the launcher's bound, s")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--dir", help="a directory all ranks see (default: a fresh one in /tmp)")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    # A rank when started by a launcher (this one, cclrun, torchrun), else the launcher.
    if args.worker or "CCL_RANK" in os.environ or "RANK" in os.environ:
        if not args.dir:
            ap.error("a rank needs --dir, a directory all ranks see")
        return worker(args)
    return launch(args)


if __name__ == "__main__":
    sys.exit(main())
