"""DistributedDataParallel on ccl ends with the parameters of the same run on Gloo (to float
tolerance), identical on every rank; no_sync accumulation too."""
import unittest

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from ccl_torch_testing import run_ranks


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                               torch.nn.ReLU(), torch.nn.Linear(64, 8))


def train(ddp, rank, steps, accumulate):
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(steps):
        opt.zero_grad()
        if accumulate and step % 2 == 0:
            with ddp.no_sync():
                x, y = torch.randn(16, 32, generator=gen), torch.randn(16, 8, generator=gen)
                torch.nn.functional.mse_loss(ddp(x), y).backward()
        x, y = torch.randn(16, 32, generator=gen), torch.randn(16, 8, generator=gen)
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()
    return [p.detach().clone() for p in ddp.parameters()]


def ddp_matches_gloo(rank, size):
    gloo = dist.new_group(backend="gloo")
    for accumulate in (False, True):
        # small buckets, so several allreduces overlap the backward pass
        on_ccl = train(DDP(model(), bucket_cap_mb=0.01), rank, 6, accumulate)
        on_gloo = train(DDP(model(), process_group=gloo, bucket_cap_mb=0.01), rank, 6, accumulate)
        for a, b in zip(on_ccl, on_gloo):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
        # identical on every rank
        flat = torch.cat([p.reshape(-1) for p in on_ccl])
        everyone = [torch.empty_like(flat) for _ in range(size)]
        dist.all_gather(everyone, flat)
        for r in range(size):
            assert torch.equal(everyone[r], flat), f"rank {r} ended with other parameters"


class Ddp(unittest.TestCase):
    def test_ddp_matches_gloo(self):
        for size in (2, 4):
            with self.subTest(ranks=size):
                run_ranks(ddp_matches_gloo, size, timeout=300)


if __name__ == "__main__":
    unittest.main()
