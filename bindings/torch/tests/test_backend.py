"""What torch 2.x asks of a c10d Backend beyond the collectives, on ccl's: the torchcomms names
and the coalesced forms FSDP2 calls, coalescing (batch_isend_irecv, _coalescing_manager),
futures whose value is the outputs, split_group (DeviceMesh), shrink_group, setTimeout,
getError, abort that ends a pending wait at once, and what the registration promises."""
import datetime
import os
import tempfile
import threading
import time
import unittest
import warnings

import torch
import torch.distributed as dist

import ccl_torch
from ccl_torch_testing import expect_error, expect_value_error, expect_world_in_step, run_ranks

TORCH = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])


def torchcomms_names_and_coalesced_forms(rank, size):
    n = 5
    x = torch.arange(n, dtype=torch.float32) + rank * 10
    out = torch.empty(n * size)
    pg = dist.group.WORLD  # the ProcessGroup dispatches each name to the backend
    # The torchcomms names and the old ones reach the same operation.
    for gather in ("all_gather_single", "_allgather_base"):
        out.zero_()
        fn = getattr(pg, gather, None)
        if fn is None:  # a torch without the name
            continue
        fn(out, x).wait()
        want = torch.cat([torch.arange(n, dtype=torch.float32) + r * 10 for r in range(size)])
        assert torch.equal(out, want), (gather, out)
    # FSDP2's coalesced gather and reduce-scatter: several tensors, one call.
    ins = [torch.full((k + 1,), float(rank + k)) for k in range(3)]
    outs = [torch.empty((k + 1) * size) for k in range(3)]
    work = pg.allgather_into_tensor_coalesced(outs, ins)
    work.wait()
    for k in range(3):
        want = torch.cat([torch.full((k + 1,), float(r + k)) for r in range(size)])
        assert torch.equal(outs[k], want), (k, outs[k])
    big = [torch.arange((k + 1) * size, dtype=torch.float32) for k in range(3)]
    small = [torch.empty(k + 1) for k in range(3)]
    opts = dist.ReduceScatterOptions()
    opts.reduceOp = dist.ReduceOp.AVG
    pg.reduce_scatter_tensor_coalesced(small, big, opts).wait()
    for k in range(3):
        want = torch.arange((k + 1) * size, dtype=torch.float32)[rank * (k + 1):(rank + 1) * (k + 1)]
        assert torch.equal(small[k], want), (k, small[k])
    # The future's value is the output tensors (DDP's default hook returns fut.value()[0]).
    t = torch.ones(3)
    fut = dist.all_reduce(t, async_op=True).get_future()
    value = fut.wait()
    assert torch.equal(value[0], torch.full((3,), float(size))), value
    expect_value_error(lambda: pg.allgather_into_tensor_coalesced([torch.empty(3)], ins),
                       "allgather_into_tensor_coalesced", "outputs")
    expect_world_in_step(size)


def coalescing(rank, size):
    # batch_isend_irecv: a ring exchange, every rank's sends and receives posted together.
    right, left = (rank + 1) % size, (rank - 1) % size
    send = torch.full((1 << 16,), float(rank))
    recv = torch.empty(1 << 16)
    ops = [dist.P2POp(dist.isend, send, right), dist.P2POp(dist.irecv, recv, left)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    assert torch.equal(recv, torch.full((1 << 16,), float(left))), recv[:4]
    # _coalescing_manager of allreduces: one allreduce_coalesced; the manager's works complete.
    ts = [torch.full((k + 2,), float(rank + 1)) for k in range(4)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    total = float(sum(range(1, size + 1)))
    for t in ts:
        assert torch.equal(t, torch.full_like(t, total)), t
    assert ccl_torch.backend_of().supports_coalescing
    expect_world_in_step(size)


def split_and_device_mesh(rank, size):
    backend = ccl_torch.backend_of()
    assert backend.supports_splitting
    # split_group: two halves, by ccl's split (no new rendezvous). torch before 2.14 splits only
    # a default group bound to a device (init_process_group(device_id=...)).
    if TORCH >= (2, 14):
        halves = [list(range(0, size // 2)), list(range(size // 2, size))]
        group = dist.split_group(split_ranks=halves)
        mine = halves[0] if rank in halves[0] else halves[1]
        assert group is not None and dist.get_world_size(group) == len(mine)
        t = torch.full((4,), float(rank))
        dist.all_reduce(t, group=group)
        assert torch.equal(t, torch.full((4,), float(sum(mine)))), t
        assert isinstance(ccl_torch.backend_of(group), ccl_torch.BackendCcl)
    # init_device_mesh on ccl: a 2 x 2 mesh's row and column groups.
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("dp", "tp"))
    for dim in ("dp", "tp"):
        g = mesh.get_group(dim)
        x = torch.ones(2)
        dist.all_reduce(x, group=g)
        assert torch.equal(x, torch.full((2,), float(dist.get_world_size(g)))), (dim, x)
    expect_world_in_step(size)


def shrink(rank, size):
    backend = ccl_torch.backend_of()
    if not hasattr(dist, "shrink_group"):  # torch before 2.10
        return
    assert backend.supports_shrinking
    # Without rank 1, which does not call it (it may be dead; here it is alive and leaves). torch
    # then makes the shrunk group the default one, in the old one's place.
    if rank == 1:
        return
    small = dist.shrink_group([1])
    assert dist.get_world_size() == size - 1 and dist.get_rank() == rank // 2
    t = torch.ones(3)
    dist.all_reduce(t, group=small)
    assert torch.equal(t, torch.full((3,), float(size - 1))), t
    expect_world_in_step(size - 1)
    assert isinstance(ccl_torch.backend_of(small), ccl_torch.BackendCcl)


def timeout_and_errors(rank, size):
    backend = ccl_torch.backend_of()
    if hasattr(backend, "get_error"):  # torch's Python binding of getError (2.14 on)
        assert str(backend.get_error()).endswith("SUCCESS"), backend.get_error()
    # setTimeout: a later wait is bounded by it (rank 1 joins the barrier late). torch 2.14 on
    # calls it dist.set_timeout; before, its _set_pg_timeout serves Gloo and NCCL only, and the
    # backend's own set_timeout is the way.
    set_timeout = getattr(dist, "set_timeout", None) or backend.set_timeout
    set_timeout(datetime.timedelta(seconds=1))
    if rank == 0:
        start = time.monotonic()
        expect_error(lambda: dist.barrier(), "barrier", "Timed out")
        took = time.monotonic() - start
        assert 0.9 < took < 5.0, took
    else:
        time.sleep(2.0)
        dist.barrier()  # meets rank 0's first barrier: its wait timed out, the barrier stays queued
    set_timeout(datetime.timedelta(seconds=60))
    dist.barrier()
    expect_value_error(lambda: backend.set_timeout(datetime.timedelta(seconds=0)),
                       "setTimeout", "positive")
    expect_world_in_step(size)


def abort_ends_a_pending_wait(rank, size, init_file):
    # Its own init: an aborted default group is not destroyed again at the end.
    dist.init_process_group(ccl_torch.BACKEND, init_method=init_file, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=60))
    if rank == 1:
        time.sleep(6)  # never joins rank 0's allreduce before the abort
        return
    t = torch.ones(1 << 10)
    work = dist.all_reduce(t, async_op=True)
    threading.Timer(0.3, dist.distributed_c10d._abort_process_group).start()
    start = time.monotonic()
    expect_error(work.wait, "allreduce")
    assert time.monotonic() - start < 3.0, time.monotonic() - start


class Backend(unittest.TestCase):
    def test_registration(self):
        assert ccl_torch.BACKEND == "ccl_torch"
        assert dist.Backend.CCL_TORCH == "ccl_torch"
        # CUDA tensors too (the group's CUDA lane, cuda_lane.h); cuda keeps NCCL as its default.
        assert dist.Backend.backend_capability["ccl_torch"] == ["cpu", "cuda"]
        assert dist.Backend.default_device_backend_map["cuda"] == "nccl"
        # Importing again, or registering again, never fails.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ccl_torch._register()
        # A name taken by someone else is taken over with a warning, not an error.
        dist.Backend.register_backend("ccl_torch", lambda *a: None, devices=["cpu"])
        with self.assertWarns(UserWarning):
            ccl_torch._register()
        assert dist.Backend._plugins["CCL_TORCH"].creator_fn is ccl_torch._create_backend

    def test_torchcomms_names_and_coalesced_forms(self):
        for size in (1, 3):
            with self.subTest(ranks=size):
                run_ranks(torchcomms_names_and_coalesced_forms, size)

    def test_coalescing(self):
        run_ranks(coalescing, 3)

    def test_split_group_and_device_mesh(self):
        run_ranks(split_and_device_mesh, 4, timeout=300)

    def test_shrink_group(self):
        run_ranks(shrink, 3)

    def test_set_timeout_and_get_error(self):
        run_ranks(timeout_and_errors, 2)

    def test_abort_ends_a_pending_wait_at_once(self):
        with tempfile.TemporaryDirectory() as tmp:
            run_ranks(abort_ends_a_pending_wait, 2, "file://" + os.path.join(tmp, "init"),
                      init=False)


if __name__ == "__main__":
    unittest.main()
