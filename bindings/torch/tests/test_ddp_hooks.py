"""DDP communication hooks on torch 2.x and ccl, through examples/torch/ddp_hooks.py: torch's
allreduce hook equals the one-process reference; fp16 and bf16 compression come within their
precision of it; PowerSGD (rank 2, error feedback) ends with the parameters it ends with on Gloo;
ccl's TopK and 1-bit hooks (error feedback) leave every rank with the same parameters, lower the
loss and send less than the plain allreduce."""
import unittest

import torch
import torch.distributed as dist

from ccl_torch_testing import run_ranks

STEPS = 6


def same_on_every_rank(params, group=None):
    flat = torch.cat([p.reshape(-1) for p in params.values()])
    everyone = [torch.empty_like(flat) for _ in range(dist.get_world_size(group))]
    dist.all_gather(everyone, flat, group=group)
    return all(torch.equal(x, flat) for x in everyone)


def check_torch_hooks(rank, size):
    import ddp_hooks
    import tiny_lm
    want, _ = tiny_lm.train_reference(STEPS)
    for hook, tolerance in (("allreduce", 2e-5), ("fp16", 2e-3), ("bf16", 2e-2)):
        params, _, _ = ddp_hooks.train(STEPS, hook)
        diff = tiny_lm.max_difference(params, want)
        assert diff <= tolerance, (hook, diff)
        assert same_on_every_rank(params), hook
        if rank == 0:
            print(f"{hook}: largest difference from one process {diff:.3g}", flush=True)
    gloo = dist.new_group(backend="gloo")
    on_ccl, _, _ = ddp_hooks.train(STEPS, "powersgd")
    on_gloo, _, _ = ddp_hooks.train(STEPS, "powersgd", group=gloo)
    diff = tiny_lm.max_difference(on_ccl, on_gloo)
    assert diff <= 1e-5, diff
    assert same_on_every_rank(on_ccl)
    if rank == 0:
        print(f"powersgd: ccl against Gloo {diff:.3g}, against one process "
              f"{tiny_lm.max_difference(on_ccl, want):.3g}", flush=True)


def check_ccl_hooks(rank, size):
    import ddp_hooks
    for hook in ("topk", "onebit"):
        params, losses, state = ddp_hooks.train(3 * STEPS, hook)
        assert same_on_every_rank(params), hook
        assert losses[-1] < losses[0], (hook, losses)
        whole = sum(p.numel() for p in params.values()) * 4 * 3 * STEPS
        assert 0 < state.bytes_sent < whole, (hook, state.bytes_sent, whole)
        if rank == 0:
            print(f"{hook}: loss {losses[0]:.3f} -> {losses[-1]:.3f}, sent "
                  f"{state.bytes_sent / whole:.3f} of the float32 gradients", flush=True)


class DdpHooks(unittest.TestCase):
    def test_torch_hooks(self):
        run_ranks(check_torch_hooks, 2, timeout=300)

    def test_ccl_compression_hooks(self):
        run_ranks(check_ccl_hooks, 2, timeout=300)


if __name__ == "__main__":
    unittest.main()
