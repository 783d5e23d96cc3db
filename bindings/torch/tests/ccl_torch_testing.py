"""Runs a function on N ranks, each a process with ccl's process group as the default group.

Bounded: a run that does not finish in its timeout is killed and fails; the first rank that
raises fails the run with its traceback.
"""
import datetime
import os
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import ccl_torch  # registers ccl_torch.BACKEND

# examples/torch (tiny_lm.py and the scripts that train it): the tests import them by name, in
# the spawned ranks too (they import this module first).
EXAMPLES_TORCH = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                               "..", "..", "examples", "torch"))
if EXAMPLES_TORCH not in sys.path:
    sys.path.insert(0, EXAMPLES_TORCH)


# How the ranks start: forked from the test's process, which imported torch once, instead of
# spawned, each importing torch anew (about 4 s of CPU a rank: the 23 torch.* tests took 725 s
# spawned). The test's process runs no collective and no thread of torch's before it forks.
START = "fork"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _entry(rank, fn, size, init_method, timeout_s, args):
    dist.init_process_group(ccl_torch.BACKEND, init_method=init_method, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=timeout_s))
    try:
        fn(rank, size, *args)
    finally:
        dist.destroy_process_group()


def _bare_entry(rank, fn, size, args):
    fn(rank, size, *args)


def run_ranks(fn, size, *args, timeout=180, init_method=None, op_timeout=60, init=True):
    """fn(rank, size, *args) on `size` processes (forked: START), with init_process_group(ccl_torch.BACKEND) first
    unless init=False. Raises the first rank's failure, or AssertionError after `timeout` s."""
    with tempfile.TemporaryDirectory() as tmp:
        if init:
            method = init_method or "file://" + os.path.join(tmp, "init")
            ctx = mp.start_processes(_entry, args=(fn, size, method, op_timeout, args),
                                     nprocs=size, join=False, start_method=START)
        else:
            ctx = mp.start_processes(_bare_entry, args=(fn, size, args), nprocs=size,
                                     join=False, start_method=START)
        deadline = time.monotonic() + timeout
        try:
            while not ctx.join(timeout=1):
                if time.monotonic() > deadline:
                    raise AssertionError(f"{fn.__name__} on {size} ranks did not finish in "
                                         f"{timeout} s")
        finally:
            for p in ctx.processes:
                if p.is_alive():
                    p.kill()
            for p in ctx.processes:
                p.join(5)


def _coded_entry(rank, fn, size, init_method, timeout_s, args):
    import traceback
    try:
        if init_method is None:
            fn(*args)
        else:
            _entry(rank, fn, size, init_method, timeout_s, args)
    except BaseException:  # noqa: BLE001
        traceback.print_exc()
        os._exit(1)
    os._exit(0)


def exit_codes(fn, size, *args, timeout=120, op_timeout=60, extra=()):
    """Like run_ranks, but every rank runs to its end whatever the others do (one may be killed
    on purpose): returns each rank's exit code (negative: the signal that ended it). `extra`:
    (function, args) pairs, each run as fn(*args) in one more process with no process group
    (a newcomer that joins later); their exit codes follow the ranks'."""
    ctx = mp.get_context(START)
    with tempfile.TemporaryDirectory() as tmp:
        method = "file://" + os.path.join(tmp, "init")
        procs = [ctx.Process(target=_coded_entry, args=(r, fn, size, method, op_timeout, args))
                 for r in range(size)]
        procs += [ctx.Process(target=_coded_entry, args=(-1, f, 0, None, 0, a)) for f, a in extra]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.1, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        return [p.exitcode for p in procs]


def _expect(kind, fn, words):
    try:
        fn()
    except kind as e:
        text = str(e)
        for w in words:
            assert w in text, f"{w!r} not in the error: {text}"
        return text
    raise AssertionError(f"no {kind.__name__} (expected one naming {words})")


def expect_error(fn, *words):
    """Runs fn, which must raise a RuntimeError whose text has every one of `words`; returns
    that text."""
    return _expect(RuntimeError, fn, words)


def expect_value_error(fn, *words):
    """Runs fn, which must raise a ValueError (a bad argument) whose text has every one of
    `words`; returns that text."""
    return _expect(ValueError, fn, words)


def expect_world_in_step(size):
    """After a test's refused calls, one more collective over the default group still agrees:
    no refusal left a rank a collective ahead or behind."""
    x = torch.ones(1)
    dist.all_reduce(x)
    assert x.item() == size, f"the world is out of step: {x.item()} of {size}"
