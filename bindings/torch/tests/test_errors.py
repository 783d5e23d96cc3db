"""Bad input raises a RuntimeError naming the operation and the reason (and the group still
works afterwards); a rank that dies makes the survivors' waits raise promptly, naming it."""
import os
import signal
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

from ccl_torch_testing import exit_codes, expect_error, run_ranks


def bad_input(rank, size):
    t = torch.ones(4)
    expect_error(lambda: dist.all_reduce(t, op=dist.ReduceOp.BAND), "allreduce", "bitwise")
    expect_error(lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "allreduce",
                 "int16")  # torch calls it Short
    # torch itself reduces a complex tensor as its real view (SUM): that works
    c = torch.full((3,), 1 + 2j, dtype=torch.complex64)
    dist.all_reduce(c)
    assert torch.equal(c, torch.full((3,), size * (1 + 2j), dtype=torch.complex64)), c
    sparse = torch.sparse_coo_tensor(torch.tensor([[0, 2]]), torch.tensor([1.0, 2.0]), (4,))
    expect_error(lambda: dist.all_reduce(sparse, op=dist.ReduceOp.MAX), "allreduce", "sparse",
                 "SUM")
    # torch 2.x's dispatcher refuses a sparse tensor for every collective but allreduce before
    # any backend sees it ("Could not run 'c10d::broadcast_' ... 'SparseCPU' backend")
    expect_error(lambda: dist.broadcast(sparse, src=0), "broadcast", "SparseCPU")
    expect_error(lambda: dist.broadcast(t, src=size + 3), "broadcast", "root")
    expect_error(lambda: dist.all_gather([torch.ones(4)] * (size + 1), t), "allgather",
                 "output tensors")
    expect_error(lambda: dist.all_gather([torch.ones(3)] * size, t), "allgather", "elements")
    expect_error(lambda: dist.recv(torch.ones(0)), "recv from any source", "count is 0")
    expect_error(lambda: dist.all_to_all_single(torch.empty(3 * size), torch.ones(3 * size),
                                                input_split_sizes=[1] * (size + 1)),
                 "alltoall_base", "split sizes")
    # the group still works
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(size)))


def dies(rank, size, stamp_dir):
    t = torch.ones(1 << 16)
    dist.all_reduce(t)
    victim = size - 1
    if rank == victim:
        with open(os.path.join(stamp_dir, "died"), "w") as f:
            f.write(repr(time.time()))
        os.kill(os.getpid(), signal.SIGKILL)
    pending = dist.all_reduce(t, async_op=True)
    try:
        pending.wait()
        raise AssertionError("an allreduce with a dead rank completed")
    except RuntimeError as e:
        caught = time.time()
        text = str(e)
    died = float(open(os.path.join(stamp_dir, "died")).read())
    assert f"rank {victim}" in text, text
    assert caught - died < 2.0, f"the failure took {caught - died:.2f} s to surface: {text}"
    # later operations fail at once too
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        raise AssertionError("an allreduce after the failure completed")
    except RuntimeError:
        pass
    assert time.monotonic() - start < 2.0


class Errors(unittest.TestCase):
    def test_bad_input_is_refused_clearly(self):
        for size in (1, 2):
            with self.subTest(ranks=size):
                run_ranks(bad_input, size)

    def test_a_killed_rank_fails_the_survivors_within_2_s(self):
        with tempfile.TemporaryDirectory() as d:
            codes = exit_codes(dies, 3, d, timeout=60)
        # The victim ends by its SIGKILL; the survivors pass their checks (exit code 0).
        self.assertEqual(codes, [0, 0, -signal.SIGKILL])

if __name__ == "__main__":
    unittest.main()
