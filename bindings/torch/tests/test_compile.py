"""torch.compile and functional collectives on ccl, through examples/torch/compiled.py: a
compiled model's data-parallel training at 2 ranks whose gradient averaging is compiled with
fullgraph=True, through a functional all_reduce and through the in-place dist.all_reduce that
dynamo rewrites: no graph break, the parameters equal the one-process reference; and the eager
functional collectives (all_reduce, all_gather_tensor, reduce_scatter_tensor, all_to_all_single)
give what the ordinary ones give."""
import unittest

import torch
import torch.distributed as dist

from ccl_torch_testing import run_ranks

STEPS = 3


def check_training(rank, size, inplace):
    import compiled
    import tiny_lm
    params, losses, breaks = compiled.train(STEPS, inplace=inplace)
    assert breaks == 0, breaks
    want, _ = tiny_lm.train_reference(STEPS)
    diff = tiny_lm.max_difference(params, want)
    assert diff <= 2e-5, diff
    if rank == 0:
        print(f"inplace={inplace}: graph breaks 0, largest parameter difference {diff:.3g}",
              flush=True)


def check_eager_functional(rank, size):
    import torch.distributed._functional_collectives as funcol
    group = dist.group.WORLD
    x = torch.arange(4, dtype=torch.float32) + rank
    total = sum(torch.arange(4, dtype=torch.float32) + r for r in range(size))
    assert torch.equal(funcol.all_reduce(x, "sum", group).wait(), total)
    gathered = funcol.all_gather_tensor(x, 0, group).wait()
    assert torch.equal(gathered, torch.cat([torch.arange(4, dtype=torch.float32) + r
                                            for r in range(size)]))
    scattered = funcol.reduce_scatter_tensor(torch.arange(4.0 * size), "sum", 0, group).wait()
    assert torch.equal(scattered, size * torch.arange(4.0 * size)[rank * 4:(rank + 1) * 4])
    sent = torch.full((size,), float(rank))
    got = funcol.all_to_all_single(sent, None, None, group).wait()
    assert torch.equal(got, torch.arange(size, dtype=torch.float32)), got


class Compiled(unittest.TestCase):
    def test_functional_all_reduce(self):
        run_ranks(check_training, 2, False, timeout=400)

    def test_inplace_all_reduce_rewritten(self):
        run_ranks(check_training, 2, True, timeout=400)

    def test_eager_functional_collectives(self):
        run_ranks(check_eager_functional, 3)


if __name__ == "__main__":
    unittest.main()
