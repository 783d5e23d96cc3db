"""torch's own ZeroRedundancyOptimizer (torch.distributed.optim) on ccl's process
group at 2 and 3 ranks, with SGD (momentum) and Adam, around a small DDP model: after a few steps
the parameters equal those of plain DDP with the unsharded optimizer, and consolidate_state_dict
then state_dict on rank 0 gives the whole optimizer state (each parameter's, equal to the
unsharded optimizer's)."""
import unittest

import torch
import torch.distributed as dist
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

from ccl_torch_testing import run_ranks

STEPS = 4
TOL = dict(rtol=1e-5, atol=1e-6)


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 6),
                               torch.nn.Tanh(), torch.nn.Linear(6, 3))


OPTIMIZERS = {
    "sgd": (torch.optim.SGD, dict(lr=0.1, momentum=0.9)),
    "adam": (torch.optim.Adam, dict(lr=0.01)),
}


def train(rank, ddp, opt):
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(STEPS):
        x, y = torch.randn(5, 8, generator=gen), torch.randn(5, 3, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()


def zero_matches_the_unsharded_optimizer(rank, size, name, bucket_view):
    cls, kwargs = OPTIMIZERS[name]
    plain = DDP(model())
    plain_opt = cls(plain.parameters(), **kwargs)
    train(rank, plain, plain_opt)

    sharded = DDP(model())
    zero = ZeroRedundancyOptimizer(sharded.parameters(), optimizer_class=cls,
                                   parameters_as_bucket_view=bucket_view, **kwargs)
    train(rank, sharded, zero)
    what = f"{name} (parameters_as_bucket_view={bucket_view}) at {size} ranks"
    # Sharded: this rank's local optimizer holds only some of the parameters.
    local = sum(len(g["params"]) for g in zero.optim.param_groups)
    assert 0 < local < len(list(sharded.parameters())), (what, local)
    for i, (a, b) in enumerate(zip(sharded.parameters(), plain.parameters())):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL,
                                   msg=lambda m: f"{what}, parameter {i}: {m}")
    # Each rank updated only its shard: every rank holds every parameter all the same.
    for p in sharded.parameters():
        copies = [torch.empty_like(p) for _ in range(size)]
        dist.all_gather(copies, p.detach())
        assert all(torch.equal(c, copies[0]) for c in copies), what

    zero.consolidate_state_dict(to=0)
    if rank == 0:
        state = zero.state_dict()
        expected = plain_opt.state_dict()
        assert len(state["state"]) == len(expected["state"]), (state["state"].keys(),
                                                               expected["state"].keys())
        for index, mine in state["state"].items():
            for key, value in expected["state"][index].items():
                if torch.is_tensor(value):
                    torch.testing.assert_close(mine[key], value, **TOL,
                                               msg=lambda m: f"{what}, state {index} {key}: {m}")
        # The consolidated state loads back (every rank then takes its own shard).
        state_list = [state]
    else:
        try:
            zero.state_dict()
        except RuntimeError:
            pass  # torch: only the rank that consolidated holds it
        else:
            raise AssertionError("state_dict on a rank that did not consolidate")
        state_list = [None]
    dist.broadcast_object_list(state_list, src=0)
    zero.load_state_dict(state_list[0])
    train(rank, sharded, zero)
    train(rank, plain, plain_opt)
    for i, (a, b) in enumerate(zip(sharded.parameters(), plain.parameters())):
        torch.testing.assert_close(a.detach(), b.detach(), **TOL,
                                   msg=lambda m: f"{what} after load_state_dict, {i}: {m}")


def every_case(rank, size):
    for name in OPTIMIZERS:
        for bucket_view in (False, True):
            zero_matches_the_unsharded_optimizer(rank, size, name, bucket_view)


class ZeroRedundancy(unittest.TestCase):
    def test_two_ranks(self):
        run_ranks(every_case, 2, timeout=120)

    def test_three_ranks(self):
        run_ranks(every_case, 3, timeout=120)


if __name__ == "__main__":
    unittest.main()
