"""torch.profiler sees the backend's operations: each is a span named "ccl:<operation>" with its
input tensors' sizes (record_shapes), in the chrome trace and in key_averages(), as Gloo's
"gloo:all_reduce" spans are. A DDP training step shows one "ccl:all_reduce" per gradient bucket,
whose sizes add up to the model's parameters; the direct calls show their own names and sizes."""
import json
import os
import tempfile
import time
import unittest

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile

from ccl_torch_testing import run_ranks


def trace_events(path):
    """The events of a chrome trace file: kineto writes {"traceEvents": [...]}, the legacy
    profiler (a torch built without kineto) a bare list."""
    with open(path) as f:
        data = json.load(f)
    return data["traceEvents"] if isinstance(data, dict) else data


def spans(prof, name):
    return [e for e in prof.events() if e.name == name]


def model():
    torch.manual_seed(0)
    # 2 MiB of parameters: past DDP's first bucket (1 MiB), so the step has several buckets
    return torch.nn.Sequential(torch.nn.Linear(32, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                               torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
                               torch.nn.Linear(512, 8))


def ddp_step_traced(rank, size, out_dir):
    # 1 MiB buckets: several allreduces overlap the backward pass
    ddp = DDP(model(), bucket_cap_mb=1)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16, 8)

    def step():
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        opt.step()

    step()  # the first step rebuilds DDP's buckets; the traced one is a steady step
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        step()
    path = os.path.join(out_dir, f"trace{rank}.json")
    prof.export_chrome_trace(path)

    # The chrome trace holds the spans, complete ("X": a start and a duration).
    traced = [e for e in trace_events(path) if e.get("name") == "ccl:all_reduce"]
    assert traced, f"no ccl:all_reduce span in the trace of a DDP step (rank {rank})"
    for e in traced:
        assert e["ph"] == "X" and e["dur"] >= 0, f"not a complete span: {e}"
        # kineto's exporter writes the sizes into the trace; the legacy one writes no args
        if torch.autograd.kineto_available():
            assert e["args"].get("Input Dims"), f"a span without its input dims: {e}"

    # One span per bucket, each on its bucket's flat gradient: the sizes add up to the model's.
    events = spans(prof, "ccl:all_reduce")
    assert len(events) == len(traced), f"{len(events)} events, {len(traced)} spans in the trace"
    params = sum(p.numel() for p in ddp.parameters())
    assert len(events) >= 2, f"{len(events)} bucket allreduces; 2 MiB of gradients should make more"
    for e in events:
        assert len(e.input_shapes) == 1 and len(e.input_shapes[0]) == 1, e.input_shapes
    reduced = sum(e.input_shapes[0][0] for e in events)
    assert reduced == params, f"the spans carry {reduced} elements, the model has {params}"

    averages = {a.key: a for a in prof.key_averages()}
    assert "ccl:all_reduce" in averages, sorted(averages)
    assert averages["ccl:all_reduce"].count == len(events)
    by_shape = [a for a in prof.key_averages(group_by_input_shape=True)
                if a.key == "ccl:all_reduce"]
    assert sum(a.count for a in by_shape) == len(events)
    assert all(a.input_shapes for a in by_shape), [a.input_shapes for a in by_shape]


def direct_ops_traced(rank, size):
    t = torch.ones(5, 7)
    gathered = [torch.empty(5, 7) for _ in range(size)]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        dist.all_reduce(t)
        dist.broadcast(t, 0)
        dist.all_gather(gathered, t)
        dist.reduce_scatter(torch.empty(3), [torch.ones(3) for _ in range(size)])
        if rank == 0:
            dist.send(torch.ones(2, 2), 1)
        elif rank == 1:
            dist.recv(torch.empty(2, 2), 0)
        dist.all_reduce(torch.ones(4).to_sparse())
        dist.reduce(t, 0)
        dist.gather(torch.ones(2), [torch.empty(2) for _ in range(size)] if rank == 0 else None)
        dist.scatter(torch.empty(2), [torch.ones(2) for _ in range(size)] if rank == 0 else None)
        dist.all_to_all_single(torch.empty(2 * size), torch.ones(2 * size))
        dist.all_gather_into_tensor(torch.empty(2 * size), torch.ones(2))
        dist.reduce_scatter_tensor(torch.empty(2), torch.ones(2 * size))
        dist.barrier()
    expected = {
        "ccl:all_reduce": [[5, 7]],
        "ccl:broadcast": [[5, 7]],
        "ccl:all_gather": [[5, 7]],
        "ccl:reduce_scatter": [[3]] * size,
        "ccl:sparse_all_reduce": [[4]],
        "ccl:reduce": [[5, 7]],
        "ccl:gather": [[2]],
        # the root's span carries what it scatters, the others' what they receive
        "ccl:scatter": [[2]] * size if rank == 0 else [[2]],
        "ccl:all_to_all": [[2 * size]],
        "ccl:_all_gather_base": [[2]],
        "ccl:_reduce_scatter_base": [[2 * size]],
        "ccl:barrier": [],
    }
    if rank == 0:
        expected["ccl:send"] = [[2, 2]]
    elif rank == 1:
        expected["ccl:recv"] = [[2, 2]]
    for name, shapes in expected.items():
        found = spans(prof, name)
        assert len(found) == 1, f"rank {rank}: {len(found)} {name} spans"
        assert found[0].input_shapes == shapes, f"{name}: {found[0].input_shapes}, not {shapes}"
    names = {e.name for e in prof.events() if e.name.startswith("ccl:")}
    assert names == set(expected), f"rank {rank}: spans {sorted(names)}"

    # An operation still in flight when the profiler stops completes as usual afterwards.
    if rank == 1:
        time.sleep(0.2)
    x = torch.ones(3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True):
        work = dist.all_reduce(x, async_op=True)
    assert work.wait(), "the allreduce issued under the profiler did not complete"
    assert torch.equal(x, torch.full((3,), float(size)))

    # Without a profiler nothing is recorded, and the operations work as before.
    y = torch.ones(2)
    dist.all_reduce(y)
    assert torch.equal(y, torch.full((2,), float(size)))


class Profiler(unittest.TestCase):
    def test_ddp_step_shows_ccl_spans(self):
        with tempfile.TemporaryDirectory() as out:
            run_ranks(ddp_step_traced, 2, out, timeout=120)
            for rank in range(2):
                # every rank exported its trace, with the spans
                events = trace_events(os.path.join(out, f"trace{rank}.json"))
                self.assertIn("ccl:all_reduce", {e.get("name") for e in events})

    def test_direct_operations_named_with_sizes(self):
        run_ranks(direct_ops_traced, 2, timeout=120)


if __name__ == "__main__":
    unittest.main()
