"""Point-to-point operations and the asynchronous Work: isend/irecv rings, batch_isend_irecv,
waits from other threads, futures, issue order, a wait's own timeout."""
import datetime
import threading
import time
import unittest

import torch
import torch.distributed as dist

from ccl_torch_testing import run_ranks


def p2p(rank, size):
    right, left = (rank + 1) % size, (rank - 1) % size
    # isend to the right, irecv from the left, then wait for both: every rank sends first.
    for n in (1, 1000, 1 << 20):  # the last one larger than any buffer on the way
        send = torch.full((n,), float(rank))
        recv = torch.empty(n)
        reqs = [dist.isend(send, right), dist.irecv(recv, left)]
        for r in reqs:
            r.wait()
        assert torch.equal(recv, torch.full((n,), float(left))), f"ring of {n} from {left}"
    # batch_isend_irecv, the same ring
    send, recv = torch.arange(5) + 10 * rank, torch.empty(5, dtype=torch.int64)
    ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
    for r in dist.batch_isend_irecv(ops):
        r.wait()
    assert torch.equal(recv, torch.arange(5) + 10 * left)
    # blocking send/recv between 0 and the last rank, both ways, non-contiguous receive
    if size > 1:
        last = size - 1
        t = torch.arange(12.0).reshape(3, 4)
        if rank == 0:
            dist.send(t, last)
            back = torch.empty(4, 3).t()
            dist.recv(back, last)
            assert torch.equal(back, t * 2)
        elif rank == last:
            got = torch.empty(3, 4)
            dist.recv(got, 0)
            assert torch.equal(got, t)
            dist.send((got * 2).contiguous(), 0)
    dist.barrier()


def work_api(rank, size):
    t = torch.ones(1000) * rank
    w = dist.all_reduce(t, async_op=True)
    deadline = time.monotonic() + 30
    while not w.is_completed():
        assert time.monotonic() < deadline, "is_completed never became true"
        time.sleep(0.001)
    assert w.is_success()
    assert w.wait()
    assert torch.equal(t, torch.full((1000,), float(sum(range(size)))))
    # the future holds the output tensors
    t = torch.ones(8)
    fut = dist.all_reduce(t, async_op=True).get_future()
    value = fut.wait()
    assert isinstance(value, list) and torch.equal(value[0], torch.full((8,), float(size)))
    chained = dist.all_reduce(torch.ones(4), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    assert torch.equal(chained.wait(), torch.full((4,), 2.0 * size))
    # many outstanding operations, waited in reverse order from other threads
    tensors = [torch.full((64,), float(i + rank)) for i in range(50)]
    works = [dist.all_reduce(x, async_op=True) for x in tensors]
    errors = []

    def waiter(chunk):
        try:
            for w in reversed(chunk):
                w.wait()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=waiter, args=(works[i::3],)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not any(th.is_alive() for th in threads), "a waiter thread was still waiting after 60 s"
    assert not errors, errors
    for i, x in enumerate(tensors):
        assert torch.equal(x, torch.full((64,), float(i * size + sum(range(size))))), i
    # issue order: an allreduce then a broadcast of the same tensor, the second waited first
    t = torch.full((3,), float(rank + 1))
    a = dist.all_reduce(t, async_op=True)
    b = dist.broadcast(t, src=0, async_op=True)
    b.wait()
    a.wait()
    assert torch.equal(t, torch.full((3,), float(sum(range(1, size + 1)))))


def wait_timeout(rank, size):
    # Rank 1 joins the allreduce late: rank 0's wait with a short timeout raises, a later
    # wait without one completes.
    t = torch.ones(4)
    if rank == 1:
        time.sleep(1.5)
    w = dist.all_reduce(t, async_op=True)
    if rank == 0:
        start = time.monotonic()
        try:
            w.wait(timeout=datetime.timedelta(milliseconds=200))
            raise AssertionError("a wait with a 200 ms timeout returned before the peer joined")
        except RuntimeError as e:
            assert "timeout" in str(e) and "allreduce" in str(e), str(e)
        assert time.monotonic() - start < 1.4
    w.wait()
    assert torch.equal(t, torch.full((4,), float(size)))


def callbacks_that_wait(rank, size):
    # A future's callback issues operations on the same group and waits for them (torch's
    # PowerSGD hook does): the thread that ran the callback cannot complete them itself, another
    # watcher thread of the group does (op_lane.h). Two levels deep, many times over.
    for _ in range(20):
        def doubled_then_summed_twice(fut):
            u = fut.value()[0] * 2
            v = dist.all_reduce(u, async_op=True).get_future().wait()[0]
            return dist.all_reduce(v.clone(), async_op=True).get_future().wait()[0]
        t = torch.ones(4)
        got = dist.all_reduce(t, async_op=True).get_future().then(doubled_then_summed_twice).wait()
        assert torch.equal(got, torch.full((4,), float(2 * size ** 3))), got


class Work(unittest.TestCase):
    def test_point_to_point(self):
        for size in (1, 2, 3, 4):
            with self.subTest(ranks=size):
                run_ranks(p2p, size)

    def test_work_and_futures(self):
        for size in (1, 2, 4):
            with self.subTest(ranks=size):
                run_ranks(work_api, size)

    def test_wait_with_a_timeout(self):
        run_ranks(wait_timeout, 2)

    def test_callbacks_that_wait_for_the_group(self):
        for size in (2, 3):
            with self.subTest(ranks=size):
                run_ranks(callbacks_that_wait, size, timeout=60, op_timeout=10)


if __name__ == "__main__":
    unittest.main()
