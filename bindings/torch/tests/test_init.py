"""Every init_method (env://, tcp://, file://), init_process_group's timeout as the communicator's
bound, subgroups, and two groups in a row in one process."""
import datetime
import os
import tempfile
import time
import unittest

import torch
import torch.distributed as dist

import ccl_torch

from ccl_torch_testing import free_port, run_ranks


def one_allreduce(rank, size):
    t = torch.full((10,), float(rank))
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((10,), float(sum(range(size)))))
    assert dist.get_backend() == ccl_torch.BACKEND


def env_init(rank, size, port, tcp_port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(size))
    dist.init_process_group(ccl_torch.BACKEND, init_method="env://")
    one_allreduce(rank, size)
    dist.destroy_process_group()
    # and again in the same process, through tcp:// on another port
    dist.init_process_group(ccl_torch.BACKEND, init_method=f"tcp://127.0.0.1:{tcp_port}", rank=rank,
                            world_size=size)
    one_allreduce(rank, size)
    dist.destroy_process_group()


def arrive_together(rank, size, directory, bound_s=120):
    """A file barrier before init_process_group: spawned ranks import torch at different speeds
    (seconds apart on a loaded 2-core machine), and a 3 s timeout also bounds the rendezvous."""
    open(os.path.join(directory, f"arrived.{rank}"), "w").close()
    deadline = time.monotonic() + bound_s
    while not all(os.path.exists(os.path.join(directory, f"arrived.{r}")) for r in range(size)):
        assert time.monotonic() < deadline, "the other ranks never started"
        time.sleep(0.01)


def timeout_bounds_waits(rank, size, directory):
    # init_process_group(timeout=3 s): rank 1 never joins the second allreduce.
    arrive_together(rank, size, directory)
    dist.init_process_group(ccl_torch.BACKEND, init_method="file://" + os.path.join(directory, "init"),
                            rank=rank, world_size=size, timeout=datetime.timedelta(seconds=3))
    t = torch.ones(4)
    dist.all_reduce(t)
    if rank == 0:
        start = time.monotonic()
        try:
            dist.all_reduce(t)
            raise AssertionError("an allreduce without its peer completed")
        except RuntimeError as e:
            elapsed = time.monotonic() - start
            assert "allreduce" in str(e) and "timed out" in str(e), str(e)
        assert 2.0 < elapsed < 30, elapsed
    else:
        time.sleep(8)
    dist.destroy_process_group()


def subgroups(rank, size):
    evens = dist.new_group([r for r in range(size) if r % 2 == 0])
    odds = dist.new_group([r for r in range(size) if r % 2 == 1])
    mine = evens if rank % 2 == 0 else odds
    t = torch.full((5,), float(rank))
    dist.all_reduce(t, group=mine)
    members = [r for r in range(size) if r % 2 == rank % 2]
    assert torch.equal(t, torch.full((5,), float(sum(members)))), t
    # a broadcast inside the subgroup names the source by its global rank
    b = torch.full((3,), float(rank))
    dist.broadcast(b, src=members[-1], group=mine)
    assert torch.equal(b, torch.full((3,), float(members[-1])))
    # a group that leaves rank 0 out, in another order
    if size >= 3:
        tail = dist.new_group(list(range(size - 1, 0, -1)))
        if rank != 0:
            x = torch.ones(2)
            dist.all_reduce(x, group=tail)
            assert torch.equal(x, torch.full((2,), float(size - 1)))
    # the default group still works, after the subgroups
    one_allreduce(rank, size)


class Init(unittest.TestCase):
    def test_file_init(self):
        run_ranks(one_allreduce, 2)

    def test_env_then_tcp_init(self):
        env_port = free_port()
        tcp_port = free_port()
        while tcp_port == env_port:
            tcp_port = free_port()
        run_ranks(env_init, 2, env_port, tcp_port, init=False)

    def test_init_timeout_bounds_every_wait(self):
        with tempfile.TemporaryDirectory() as directory:
            run_ranks(timeout_bounds_waits, 2, directory, init=False, timeout=180)

    def test_subgroups(self):
        for size in (2, 3, 4):
            with self.subTest(ranks=size):
                run_ranks(subgroups, size)


if __name__ == "__main__":
    unittest.main()
