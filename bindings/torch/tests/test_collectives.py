"""Every collective of the ccl backend x dtype x reduction at 1-4 ranks, checked against a
reference computed from every rank's (deterministic) input and, where Gloo has the operation,
against Gloo's result on the same inputs."""
import unittest

import torch
import torch.distributed as dist

from ccl_torch_testing import run_ranks

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8, torch.uint8,
          torch.int32, torch.int64]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "PREMUL_SUM"]
N = 37  # elements: not a multiple of any vector width
FACTOR = 2


def data(rank, dtype, op="SUM", n=N, salt=0):
    """Small values, so that sums and products are exact in every dtype at 4 ranks."""
    i = torch.arange(n, dtype=torch.int64)
    if op == "PRODUCT":
        v = (i + rank + salt) % 3 + 1
    else:
        v = (i * 3 + rank * 5 + salt) % 11 + 1
    return v.to(dtype)


def reduce_op(op):
    if op == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(float(FACTOR))
    return getattr(dist.ReduceOp, op)


def reference(inputs, op, size):
    """The reduction of `inputs` (one per rank), computed in float64/int64, in their dtype."""
    dtype = inputs[0].dtype
    wide = torch.float64 if dtype.is_floating_point else torch.int64
    x = torch.stack([t.to(wide) for t in inputs])
    if op in ("SUM", "AVG", "PREMUL_SUM"):
        r = x.sum(0)
        if op == "PREMUL_SUM":
            r = r * FACTOR
        if op == "AVG":
            r = r / size if dtype.is_floating_point else torch.div(r, size, rounding_mode="trunc")
    elif op == "PRODUCT":
        r = x.prod(0)
    elif op == "MIN":
        r = x.min(0).values
    else:
        r = x.max(0).values
    return r.to(dtype)


def same(actual, expected, what):
    if actual.dtype.is_floating_point:
        torch.testing.assert_close(actual, expected, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"


def gloo_has(fn):
    """Runs a Gloo call; False where Gloo lacks the dtype or the operation (it refuses on every
    rank alike, before anything is sent)."""
    try:
        fn()
        return True
    except RuntimeError:
        return False


def check_reductions(rank, size):
    for dtype in DTYPES:
        for op in OPS:
            what = f"{dtype} {op} at {size} ranks"
            everyone = [data(r, dtype, op) for r in range(size)]
            want = reference(everyone, op, size)
            # allreduce (check_against_gloo compares with Gloo where it has the operation)
            t = data(rank, dtype, op)
            dist.all_reduce(t, op=reduce_op(op))
            same(t, want, "allreduce " + what)
            # allreduce_coalesced: two tensors, one reduction
            a, b = data(rank, dtype, op, 5), data(rank, dtype, op, 9, salt=1)
            dist.all_reduce_coalesced([a, b], op=reduce_op(op))
            same(a, reference([data(r, dtype, op, 5) for r in range(size)], op, size),
                 "allreduce_coalesced[0] " + what)
            same(b, reference([data(r, dtype, op, 9, salt=1) for r in range(size)], op, size),
                 "allreduce_coalesced[1] " + what)
            # reduce to every root: the root has the result, the others keep their input
            for root in range(size):
                t = data(rank, dtype, op)
                dist.reduce(t, dst=root, op=reduce_op(op))
                same(t, want if rank == root else data(rank, dtype, op),
                     f"reduce to {root} " + what)
            # reduce_scatter (list) and _reduce_scatter_base
            pieces = [data(rank, dtype, op, salt=p) for p in range(size)]
            out = torch.empty(N, dtype=dtype)
            dist.reduce_scatter(out, pieces, op=reduce_op(op))
            same(out, reference([data(r, dtype, op, salt=rank) for r in range(size)], op, size),
                 "reduce_scatter " + what)
            out = torch.empty(N, dtype=dtype)
            dist._reduce_scatter_base(out, torch.cat(pieces), op=reduce_op(op))
            same(out, reference([data(r, dtype, op, salt=rank) for r in range(size)], op, size),
                 "_reduce_scatter_base " + what)


def check_bool(rank, size):
    x = torch.tensor([rank == 0, True, False, rank % 2 == 1])
    for op, want in [("SUM", torch.tensor([True, True, False, size > 1])),
                     ("MAX", torch.tensor([True, True, False, size > 1])),
                     ("MIN", torch.tensor([size == 1, True, False, False])),
                     ("PRODUCT", torch.tensor([size == 1, True, False, False]))]:
        t = x.clone()
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        assert torch.equal(t, want), f"bool {op}: {t} != {want}"


def check_data_movement(rank, size):
    for dtype in DTYPES + [torch.bool]:
        what = f"{dtype} at {size} ranks"
        mine = data(rank, dtype)
        everyone = [data(r, dtype) for r in range(size)]
        for root in range(size):
            t = data(rank, dtype)
            dist.broadcast(t, src=root)
            same(t, everyone[root], f"broadcast from {root} " + what)
        outs = [torch.empty(N, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs, mine)
        for r in range(size):
            same(outs[r], everyone[r], f"all_gather[{r}] " + what)
        flat = torch.empty(size * N, dtype=dtype)
        dist._all_gather_base(flat, mine)
        same(flat, torch.cat(everyone), "_all_gather_base " + what)
        # all_gather_coalesced: two tensors of different shapes
        small = data(rank, dtype, n=3).reshape(3, 1)
        lists = [[torch.empty(N, dtype=dtype), torch.empty(3, 1, dtype=dtype)] for _ in range(size)]
        dist.all_gather_coalesced(lists, [mine, small])
        for r in range(size):
            same(lists[r][0], everyone[r], f"all_gather_coalesced[{r}][0] " + what)
            same(lists[r][1], data(r, dtype, n=3).reshape(3, 1),
                 f"all_gather_coalesced[{r}][1] " + what)
        for root in range(size):
            gathered = [torch.empty(N, dtype=dtype) for _ in range(size)] if rank == root else None
            dist.gather(mine, gather_list=gathered, dst=root)
            if rank == root:
                for r in range(size):
                    same(gathered[r], everyone[r], f"gather to {root} [{r}] " + what)
            out = torch.empty(N, dtype=dtype)
            dist.scatter(out, scatter_list=[data(root, dtype, salt=r) for r in range(size)]
                         if rank == root else None, src=root)
            same(out, data(root, dtype, salt=rank), f"scatter from {root} " + what)
        # alltoall: equal splits, uneven splits, and the list form
        send = torch.cat([data(rank, dtype, n=4, salt=p) for p in range(size)])
        recv = torch.empty(4 * size, dtype=dtype)
        dist.all_to_all_single(recv, send)
        same(recv, torch.cat([data(r, dtype, n=4, salt=rank) for r in range(size)]),
             "all_to_all_single " + what)
        in_splits = [(rank + p) % 3 + 1 for p in range(size)]       # rows this rank sends to p
        out_splits = [(r + rank) % 3 + 1 for r in range(size)]      # rows r sends to this rank
        send = torch.cat([data(rank, dtype, n=2 * in_splits[p], salt=p).reshape(-1, 2)
                          for p in range(size)])
        recv = torch.empty(sum(out_splits), 2, dtype=dtype)
        dist.all_to_all_single(recv, send, output_split_sizes=out_splits,
                               input_split_sizes=in_splits)
        want = torch.cat([data(r, dtype, n=2 * out_splits[r], salt=rank).reshape(-1, 2)
                          for r in range(size)])
        same(recv, want, "all_to_all_single with splits " + what)
        sends = [data(rank, dtype, n=p + 1, salt=p) for p in range(size)]
        recvs = [torch.empty(rank + 1, dtype=dtype) for _ in range(size)]
        dist.all_to_all(recvs, sends)
        for r in range(size):
            same(recvs[r], data(r, dtype, n=rank + 1, salt=rank), f"all_to_all[{r}] " + what)
    dist.barrier()


def check_against_gloo(rank, size, gloo):
    """The same calls on both backends give the same tensors (where Gloo has them)."""
    for dtype in [torch.float32, torch.float64, torch.int32, torch.int64, torch.uint8,
                  torch.int8, torch.float16]:
        for op in ["SUM", "PRODUCT", "MIN", "MAX"]:
            a, b = data(rank, dtype, op), data(rank, dtype, op)
            dist.all_reduce(a, op=reduce_op(op))
            if not gloo_has(lambda: dist.all_reduce(b, op=reduce_op(op), group=gloo)):
                continue
            same(a, b, f"allreduce {dtype} {op} vs gloo")
            a, b = data(rank, dtype, op), data(rank, dtype, op)
            dist.reduce(a, dst=size - 1, op=reduce_op(op))
            if gloo_has(lambda: dist.reduce(b, dst=size - 1, op=reduce_op(op), group=gloo)) and rank == size - 1:
                same(a, b, f"reduce {dtype} {op} vs gloo")
        a, b = data(rank, dtype), data(rank, dtype)
        dist.broadcast(a, src=0)
        dist.broadcast(b, src=0, group=gloo)
        same(a, b, f"broadcast {dtype} vs gloo")
        outs_a = [torch.empty(N, dtype=dtype) for _ in range(size)]
        outs_b = [torch.empty(N, dtype=dtype) for _ in range(size)]
        dist.all_gather(outs_a, data(rank, dtype))
        dist.all_gather(outs_b, data(rank, dtype), group=gloo)
        for x, y in zip(outs_a, outs_b):
            same(x, y, f"all_gather {dtype} vs gloo")
        send = torch.cat([data(rank, dtype, n=4, salt=p) for p in range(size)])
        ra, rb = torch.empty(4 * size, dtype=dtype), torch.empty(4 * size, dtype=dtype)
        dist.all_to_all_single(ra, send)
        if gloo_has(lambda: dist.all_to_all_single(rb, send, group=gloo)):
            same(ra, rb, f"all_to_all_single {dtype} vs gloo")


def check_non_contiguous(rank, size):
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4) + rank
    t = base.t()  # 4x3, not contiguous
    assert not t.is_contiguous()
    dist.all_reduce(t)
    want = (torch.arange(12, dtype=torch.float32).reshape(3, 4) * size
            + sum(range(size))).t()
    same(t, want, "allreduce of a transposed tensor")
    t = (torch.arange(12, dtype=torch.float32).reshape(3, 4) + rank).t()
    dist.broadcast(t, src=size - 1)
    same(t, (torch.arange(12, dtype=torch.float32).reshape(3, 4) + size - 1).t(),
         "broadcast of a transposed tensor")
    outs = [torch.empty(4, 3).t() for _ in range(size)]
    dist.all_gather(outs, (torch.arange(12, dtype=torch.float32).reshape(4, 3) + rank).t())
    for r in range(size):
        same(outs[r], (torch.arange(12, dtype=torch.float32).reshape(4, 3) + r).t(),
             f"all_gather of transposed tensors [{r}]")


def all_collectives(rank, size):
    gloo = dist.new_group(backend="gloo")
    check_reductions(rank, size)
    check_bool(rank, size)
    check_data_movement(rank, size)
    check_against_gloo(rank, size, gloo)
    check_non_contiguous(rank, size)


class Collectives(unittest.TestCase):
    def test_every_collective_dtype_and_op_at_1_to_4_ranks(self):
        for size in (1, 2, 3, 4):
            with self.subTest(ranks=size):
                run_ranks(all_collectives, size, timeout=300)


if __name__ == "__main__":
    unittest.main()
