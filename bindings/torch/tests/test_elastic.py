"""Recovery from a failed rank on ccl's groups (ccl_torch.elastic, BackendCcl's recovery
calls): survivors of a SIGKILL shrink and grow back to a newcomer; abort ends what is in flight
at once; a shrink past a live rank that does not take part; bad arguments raise. CCL_TIMEOUT is
10 s, so a wait that should have ended at once and did not shows as a slow failure, not a hang."""
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import torch
import torch.distributed as dist

import ccl_torch
from ccl_torch import elastic
from ccl_torch_testing import exit_codes, expect_error, expect_value_error, run_ranks

os.environ["CCL_TIMEOUT"] = "10"  # the spawned ranks inherit it
OP_TIMEOUT = 10  # init_process_group's, the communicator's timeout
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples",
                       "elastic_ddp", "elastic_ddp.py")


def world():
    """The default group's ccl backend, which holds the recovery calls."""
    return ccl_torch.backend_of()


# Half of CCL_TIMEOUT: what ends within it did not wait for the timeout (it takes milliseconds;
# the margin is for a loaded machine).
PROMPT = 5.0


def bounded(fn, seconds, what):
    start = time.monotonic()
    result = fn()
    took = time.monotonic() - start
    assert took < seconds, f"{what} took {took:.2f} s"
    return result


# ---------------------------------------------------------------------------- kill, shrink, grow

def survivor(rank, size, d):
    """Allreduces until rank 2 dies, recovers, checks the new group, then grows back to 3."""
    pg = world()
    t = torch.ones(1 << 14)
    for i in range(10000):
        if rank == 2 and i == 20:
            with open(os.path.join(d, "died"), "w") as f:
                f.write(repr(time.time()))
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            t.fill_(1)
            dist.all_reduce(t)
            assert torch.equal(t, torch.full_like(t, float(size))), t[:4]
        except RuntimeError as e:
            failure = e
            break
    else:
        raise AssertionError("rank 2's death never surfaced")
    assert elastic.is_peer_failure(failure), failure
    group, new_rank, new_size = elastic.recover(pg, failure)
    assert (new_rank, new_size) == (rank, 2), (new_rank, new_size)  # survivors keep their order
    assert pg.failed_ranks() == [2], pg.failed_ranks()
    x = torch.full((5,), float(rank + 1))
    dist.all_reduce(x, group=group)
    assert torch.equal(x, torch.full((5,), 3.0)), x
    expect_error(lambda: dist.all_reduce(t), "allreduce", "shrunk")  # the old group is done

    # Grow back: the newcomer announces itself in the rendezvous; every call is collective.
    rdv = elastic.FileRendezvous(os.path.join(d, "grow"))
    deadline = time.monotonic() + 60
    grown = group
    while grown is group:
        assert time.monotonic() < deadline, "the newcomer never came"
        grown, r, s = elastic.grow_waiting(group, rdv)
        time.sleep(0.02)
    assert (r, s) == (rank, 3), (r, s)
    y = torch.full((3,), float(r + 1))
    dist.all_reduce(y, group=grown)
    assert torch.equal(y, torch.full((3,), 6.0)), y


def newcomer(d):
    rdv = elastic.FileRendezvous(os.path.join(d, "grow"))
    group, rank, size = elastic.join_through(rdv, "newcomer", timeout=60)
    assert (rank, size) == (2, 3), (rank, size)
    y = torch.full((3,), float(rank + 1))
    dist.all_reduce(y, group=group)
    assert torch.equal(y, torch.full((3,), 6.0)), y


# ---------------------------------------------------------------------------- abort

def aborts(rank, size, d):
    pg = world()
    aborted = os.path.join(d, "aborted")
    if rank == 1:
        # Never joins rank 0's allreduce: waits until rank 0 aborted, then finds its group
        # revoked (the abort told it) at once instead of at its timeout.
        deadline = time.monotonic() + 30
        while not os.path.exists(aborted):
            assert time.monotonic() < deadline, "rank 0 never aborted"
            time.sleep(0.01)
        t = torch.ones(4)
        text = bounded(lambda: expect_error(lambda: dist.all_reduce(t), "allreduce"), PROMPT,
                       "rank 1's allreduce after rank 0's abort")
        assert elastic.is_peer_failure(RuntimeError(text)), text
        return
    # The main thread blocks in an allreduce rank 1 never joins; another thread aborts.
    aborter = threading.Timer(0.3, pg.abort)
    aborter.start()
    t = torch.ones(1 << 10)
    bounded(lambda: expect_error(lambda: dist.all_reduce(t), "allreduce"), PROMPT,
            "the allreduce in flight during the abort")
    # Later operations and calls raise at once, naming the abort (which may still be finishing
    # on its thread: the group refuses everything from its start).
    bounded(lambda: expect_error(lambda: dist.all_reduce(t), "allreduce", "aborted"), PROMPT,
            "an allreduce after the abort")
    expect_error(lambda: dist.barrier(), "barrier", "aborted")
    expect_error(lambda: pg.revoke(), "revoke", "aborted")
    expect_error(lambda: pg.shrink_to(), "shrink", "aborted")
    aborter.join(PROMPT)
    assert not aborter.is_alive(), "the abort did not return"
    pg.abort()  # again: nothing more
    with open(aborted, "w") as f:
        f.write("1")


# ---------------------------------------------------------------------------- explicit exclude

def excludes_a_live_rank(rank, size):
    t = torch.full((4,), float(rank + 1))
    if rank != 1:
        # Rank 1 is alive and does not call shrink. Without abort, the old group goes on.
        group = ccl_torch.as_process_group(world().shrink_to(exclude=[1], abort=False))
        assert (group.rank(), group.size()) == (rank // 2, 2), (group.rank(), group.size())
        x = t.clone()
        dist.all_reduce(x, group=group)
        assert torch.equal(x, torch.full((4,), 4.0)), x  # ranks 0 and 2: 1 + 3
    dist.all_reduce(t)  # every rank, on the old group
    assert torch.equal(t, torch.full((4,), 6.0)), t


# ---------------------------------------------------------------------------- bad arguments

def bad_arguments(rank, size):
    pg = world()
    uid = ccl_torch.get_unique_id()
    assert isinstance(uid, bytes) and len(uid) == ccl_torch._C.UNIQUE_ID_BYTES, uid
    expect_value_error(lambda: pg.shrink_to(exclude=[0]), "shrink", "this rank")
    expect_value_error(lambda: pg.shrink_to(exclude=[7]), "shrink", "7", "out of range")
    expect_value_error(lambda: pg.grow(0, uid), "grow", "nranks 0")
    expect_value_error(lambda: pg.grow(2, b"short"), "grow", "5 bytes")
    expect_value_error(lambda: ccl_torch.grow_as_newcomer(2, 5, uid), "grow", "rank 5")
    expect_value_error(lambda: ccl_torch.grow_as_newcomer(2, 1, b""), "grow", "0 bytes")
    try:
        pg.agree("yes")
        raise AssertionError("agree took a string")
    except TypeError:
        pass
    assert pg.agree(6) == 6 and pg.failed_ranks() == []
    # recover leaves alone what is not a peer failure
    assert not elastic.is_peer_failure(RuntimeError("ccl allreduce: invalid argument"))
    try:
        elastic.recover(pg, KeyError("mine"))
        raise AssertionError("recover took a KeyError")
    except KeyError:
        pass
    # a group made by shrink has no store: monitored_barrier says so
    group = pg.shrink_to(abort=False)
    expect_error(lambda: group.monitored_barrier(), "monitored_barrier", "no store")
    dist.all_reduce(torch.ones(2))  # the old group goes on after a shrink without abort


class Elastic(unittest.TestCase):
    def test_survivors_of_a_kill_recover_and_grow_back(self):
        with tempfile.TemporaryDirectory() as d:
            codes = exit_codes(survivor, 3, d, timeout=90, op_timeout=OP_TIMEOUT,
                               extra=[(newcomer, (d,))])
        self.assertEqual(codes, [0, 0, -signal.SIGKILL, 0])

    def test_abort_ends_work_in_flight_at_once(self):
        with tempfile.TemporaryDirectory() as d:
            codes = exit_codes(aborts, 2, d, timeout=60, op_timeout=OP_TIMEOUT)
        self.assertEqual(codes, [0, 0])

    def test_shrink_past_a_live_rank_that_does_not_call_it(self):
        run_ranks(excludes_a_live_rank, 3, timeout=60, op_timeout=OP_TIMEOUT)

    def test_bad_arguments_raise(self):
        run_ranks(bad_arguments, 1, timeout=60, op_timeout=OP_TIMEOUT)

    def test_example_ddp_loop_survives_a_kill_and_grows_back(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        out = subprocess.run([sys.executable, EXAMPLE, "--nprocs", "3", "--steps", "80",
                              "--kill-rank", "1", "--kill-step", "10", "--log-every", "1000",
                              "--await-replacement", "40", "--job-timeout", "80"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=100).stdout
        self.assertEqual(out.count("RECOVERED: rank"), 2, out)
        self.assertEqual(out.count("LOST"), 2, out)
        self.assertEqual(out.count("JOINED as rank 2 of 3"), 1, out)
        self.assertEqual(out.count("GREW: rank"), 2, out)
        self.assertEqual(out.count("DONE at step 80 on 3 ranks"), 3, out)


if __name__ == "__main__":
    unittest.main()
