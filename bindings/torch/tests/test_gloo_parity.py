"""What Gloo's torch backend has that ccl_torch now has too.

monitored_barrier, through torch's own torch.distributed.monitored_barrier: rank 0 names the ranks
that did not arrive in time (the first, or all with wait_all_ranks), the others hear that rank 0
did not release them, a timeout of 0 times rank 0 out at once, and the group goes on working
afterwards.

barrier with a per-call timeout (BarrierOptions.timeout; a group's own comes from new_group's).

allreduce of sparse COO tensors (SUM): the same values as the dense sum, with overlapping and
disjoint indices, dense dimensions, ranks with nothing to add, every dtype ccl carries.

recv and irecv without src (recvAnysource), as torch's own test_send_recv_any_source does it:
each rank in turn receives two messages from every other rank in whatever order they come, and
recv's return value and irecv's work._source_rank() name the sender its payload names."""
import datetime
import time
import unittest

import torch
import torch.distributed as dist

from ccl_torch_testing import expect_error, run_ranks


def everyone_arrives(rank, size):
    for _ in range(3):  # rounds: each its own check-ins
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=30))
    dist.monitored_barrier(timeout=datetime.timedelta(seconds=30), wait_all_ranks=True)
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(size))), t


def last_rank_is_late(rank, size, wait_all):
    late = [size - 1] if not wait_all else list(range(1, size))
    timeout = datetime.timedelta(seconds=1)
    if rank in late:
        time.sleep(2.5)  # past rank 0's timeout: rank 0 has given up and named this rank
    elif rank == 0:
        start = time.monotonic()
        text = expect_error(lambda: dist.monitored_barrier(timeout=timeout,
                                                           wait_all_ranks=wait_all),
                            "failed to pass monitoredBarrier in 1000 ms")
        took = time.monotonic() - start
        assert took < 1.9, f"rank 0 took {took:.2f} s to give up"
        named = ", ".join(str(r) for r in late)
        assert text.startswith(("Rank " if len(late) == 1 else "Ranks ") + named + " failed"), text
    else:
        expect_error(lambda: dist.monitored_barrier(timeout=timeout, wait_all_ranks=wait_all),
                     f"Rank {rank} successfully reached monitoredBarrier",
                     "check rank 0 logs")
    # the group still works: the late ranks never queued anything in it
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(size))), t


def zero_timeout(rank, size):
    """As torch's own test_monitored_barrier_gloo_rank_0_timeout: a timeout of 0 (Gloo takes it)
    leaves rank 0 no time to wait for anyone late, and it says so at once."""
    if rank == 0:
        start = time.monotonic()
        expect_error(lambda: dist.monitored_barrier(timeout=datetime.timedelta(seconds=0)),
                     "Rank 0 timed out in monitoredBarrier")
        assert time.monotonic() - start < 1.0
    # the group still works
    t = torch.ones(4)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((4,), float(size))), t


def rank_sparse(rank, size, dtype, dense_dims):
    """Rank r's sparse tensor: r + 1 entries at rows (r * 3 + k) % 10 (overlapping across ranks,
    some rows twice within a rank: uncoalesced), none on the last rank; values small integers."""
    count = 0 if rank == size - 1 and size > 1 else rank + 2
    rows = torch.tensor([[(rank * 3 + k) % 10 for k in range(count)]], dtype=torch.int64)
    values = torch.arange(1, count * 3**dense_dims + 1, dtype=torch.float64)
    values = values.reshape([count] + [3] * dense_dims).to(dtype)
    return torch.sparse_coo_tensor(rows, values, [10] + [3] * dense_dims)


def sparse_sum(rank, size):
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64, torch.bfloat16):
        for dense_dims in (0, 1):
            t = rank_sparse(rank, size, dtype, dense_dims)
            expected = sum(rank_sparse(r, size, dtype, dense_dims).to_dense().double()
                           for r in range(size))
            work = dist.all_reduce(t, async_op=True)
            work.wait()
            assert t.is_sparse, t
            assert torch.equal(t.to_dense().double(), expected), (dtype, dense_dims, t, expected)
            assert work.is_completed()
    # every rank empty
    empty = torch.sparse_coo_tensor(torch.empty((1, 0), dtype=torch.int64), torch.empty(0), [5])
    dist.all_reduce(empty)
    assert empty.to_dense().count_nonzero() == 0
    # the group goes on with dense work
    d = torch.ones(3)
    dist.all_reduce(d)
    assert torch.equal(d, torch.full((3,), float(size)))


def barrier_with_its_own_timeout(rank, size):
    opts = dist.BarrierOptions()
    opts.timeout = datetime.timedelta(seconds=1)
    group = dist.distributed_c10d._get_default_group()
    if rank == size - 1:
        time.sleep(2.5)  # late for rank 0's bound, well within the group's (60 s)
        group.barrier(opts).wait()
    else:
        start = time.monotonic()
        work = group.barrier(opts)
        expect_error(work.wait, "barrier", "Timed out waiting 1000ms")
        assert time.monotonic() - start < 1.9, time.monotonic() - start
        work.wait(datetime.timedelta(seconds=30))  # the late rank meets it
    t = torch.ones(2)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((2,), float(size)))


def send_recv_any_source(rank, size):
    senders = []
    for receiver in range(size):
        if receiver != rank:
            for _ in range(2):  # one for recv, one for irecv
                dist.send(torch.full((10,), float(rank)), receiver)
            continue
        for _ in range(size - 1):
            for mode in ("recv", "irecv"):
                out = torch.full((10,), -1.0)
                if mode == "recv":
                    sender = dist.recv(out)
                else:
                    work = dist.irecv(out)
                    work.wait()
                    sender = work._source_rank()
                assert sender != rank and torch.equal(out, torch.full((10,), float(sender))), \
                    (mode, sender, out)
                senders.append(sender)
    assert sorted(senders) == sorted(2 * [r for r in range(size) if r != rank]), senders
    # a large message (many slots), a strided tensor, then dense work: the group goes on
    if rank == 0:
        big = torch.empty(1 << 18, 2)[:, 0]  # non-contiguous: staged, copied back
        assert dist.recv(big) == 1 and torch.equal(big, torch.arange(1 << 18, dtype=torch.float32))
    elif rank == 1:
        dist.send(torch.arange(1 << 18, dtype=torch.float32), 0)
    t = torch.ones(3)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((3,), float(size)))


def any_source_alone(rank, size):
    expect_error(lambda: dist.recv(torch.ones(2)), "recv from any source", "no peer")
    t = torch.ones(3)
    dist.all_reduce(t)


class RecvAnySource(unittest.TestCase):
    def test_each_rank_takes_every_other_rank_s_messages(self):
        for size in (2, 3):
            with self.subTest(ranks=size):
                run_ranks(send_recv_any_source, size)

    def test_a_group_of_one_is_refused(self):
        run_ranks(any_source_alone, 1)


class BarrierTimeout(unittest.TestCase):
    def test_a_call_s_timeout_bounds_its_wait(self):
        run_ranks(barrier_with_its_own_timeout, 2)


class SparseAllreduce(unittest.TestCase):
    def test_sums_as_the_dense_tensors_would(self):
        for size in (1, 3):
            with self.subTest(ranks=size):
                run_ranks(sparse_sum, size)


class MonitoredBarrier(unittest.TestCase):
    def test_everyone_arrives(self):
        for size in (1, 3):
            with self.subTest(ranks=size):
                run_ranks(everyone_arrives, size)

    def test_rank_0_names_the_first_late_rank(self):
        run_ranks(last_rank_is_late, 3, False)

    def test_rank_0_names_every_late_rank_with_wait_all_ranks(self):
        run_ranks(last_rank_is_late, 3, True)

    def test_a_zero_timeout_times_rank_0_out_at_once(self):
        run_ranks(zero_timeout, 2)


if __name__ == "__main__":
    unittest.main()
