"""ccl_torch.mesh.DeviceMesh at 4 ranks on ccl's process group: the coordinates of Megatron's
order (tp fastest, pp outermost), the groups and their world ranks, describe()'s text with the
transport of each pair, an all_reduce on each group summing exactly its members, placements
that reorder ranks (locality keys, interleaved hosts), and bad shapes raising ValueError naming
the argument on every rank alike."""
import datetime
import re
import unittest
from unittest import mock

import torch
import torch.distributed as dist

import ccl_torch.mesh as cmesh
from ccl_torch_testing import expect_value_error, expect_world_in_step, run_ranks

TIMEOUT = datetime.timedelta(seconds=60)


def expected_coords(tp, pp, dp, order):
    coords = {}
    for p, r in enumerate(order):
        coords[r] = (p % tp, p // (tp * dp), (p // tp) % dp)
    return coords


def group_sums(mesh, rank):
    """Each group's all_reduce of the world rank + 1 is the sum over its members."""
    for axis in cmesh.AXES:
        x = torch.tensor([float(rank + 1)])
        dist.all_reduce(x, group=mesh.group(axis))
        expected = sum(r + 1 for r in mesh.ranks(axis))
        assert x.item() == expected, f"{axis}: {x.item()} != {expected} ({mesh.ranks(axis)})"


def check_shape(rank, size, tp, pp, dp, locality=None, order=None):
    mesh = cmesh.DeviceMesh(tp, pp, dp, locality=locality, timeout=TIMEOUT)
    order = order or list(range(size))
    coords = expected_coords(tp, pp, dp, order)
    assert mesh.order == order, mesh.order
    assert tuple(mesh.coord) == coords[rank], (mesh.coord, coords[rank])
    assert mesh.shape == cmesh.MeshCoord(tp, pp, dp)
    assert [tuple(c) for c in mesh.coords] == [coords[r] for r in range(size)]
    # Each group: the ranks sharing the other two coordinates, in coordinate order.
    for i, axis in enumerate(cmesh.AXES):
        members = sorted((r for r in range(size)
                          if all(coords[r][j] == coords[rank][j] for j in range(3) if j != i)),
                         key=lambda r: coords[r][i])
        assert mesh.ranks(axis) == members, (axis, mesh.ranks(axis), members)
        assert mesh.ranks(axis)[mesh.coord[i]] == rank
        group = mesh.group(axis)
        assert dist.get_world_size(group) == len(members)
        # torch numbers a group's members by world rank.
        assert dist.get_rank(group) == sorted(members).index(rank)
        assert members in mesh.groups[axis]
    assert mesh.tp_group is mesh.group("tp") and mesh.pp_ranks == mesh.ranks("pp")
    group_sums(mesh, rank)

    text = mesh.describe()
    assert text.startswith(f"device mesh: {size} ranks = tp {tp} x pp {pp} x dp {dp}"), text
    for axis, n in zip(cmesh.AXES, (tp, pp, dp)):
        assert f"{axis} groups ({size // n}):" in text, text
        members = mesh.ranks(axis)
        if n > 1:
            a, b = members[0], members[1]
            assert mesh.transport(axis, a, b) == "shm", mesh.transport(axis, a, b)
            assert f"{a}-{b} shm" in text, text
        assert mesh.transport(axis, rank, rank) == "self"
    # The same text on every rank.
    texts = [None] * size
    dist.all_gather_object(texts, text)
    assert all(t == text for t in texts)
    return mesh


def shapes(rank, size):
    check_shape(rank, size, 2, 2, 1)
    check_shape(rank, size, 1, 2, 2)
    check_shape(rank, size, 2, 1, 2)
    check_shape(rank, size, 4, 1, 1)
    check_shape(rank, size, 1, 4, 1)
    check_shape(rank, size, 1, 1, 4)


def reordered(rank, size):
    # Locality keys in reverse rank order: the mesh order is 3 2 1 0, so the coordinates are
    # no longer torch's group ranks, and the *_ranks lists stay in coordinate order.
    mesh = check_shape(rank, size, 2, 2, 1, locality=[size - rank], order=[3, 2, 1, 0])
    assert mesh.tp_ranks == ([3, 2] if rank >= 2 else [1, 0]), mesh.tp_ranks
    # Rank 0's line shows its locality key (4) and its coordinates (tp 1, pp 1, dp 0).
    assert re.search(r"^0 +\S+ +4 +1 +1 +0$", mesh.describe(), re.M), mesh.describe()
    # Two hosts whose ranks interleave (h0: 0 2, h1: 1 3): tp groups stay inside a host.
    with mock.patch.object(cmesh.socket, "gethostname", return_value=f"h{rank % 2}"):
        mesh = check_shape(rank, size, 2, 2, 1, order=[0, 2, 1, 3])
        assert mesh.places[rank][0] == f"h{rank % 2}"
        assert mesh.tp_ranks == ([0, 2] if rank % 2 == 0 else [1, 3])
        # tp 4 would cross the hosts: refused.
        expect_value_error(lambda: cmesh.DeviceMesh(4, 1, 1, timeout=TIMEOUT), "tp 4")


def bad_shapes(rank, size):
    expect_value_error(lambda: cmesh.DeviceMesh(3, 1, 1),
                       "tp 3 x pp 1 x dp 1 = 3 must equal the number of ranks 4")
    expect_value_error(lambda: cmesh.DeviceMesh(2, 1, 1), "tp 2 x pp 1 x dp 1 = 2")
    expect_value_error(lambda: cmesh.DeviceMesh(0, 2, 2), "tp 0 must be at least 1")
    expect_value_error(lambda: cmesh.DeviceMesh(2, -1, -2), "pp -1 must be at least 1")
    expect_value_error(lambda: cmesh.DeviceMesh(2, 2, 1.0), "dp must be an int")
    # One rank passes another shape: every rank raises, naming it.
    expect_value_error(lambda: cmesh.DeviceMesh(2, 2, 1) if rank != 1 else
                       cmesh.DeviceMesh(1, 2, 2), "world rank 1 passed tp 1 x pp 2 x dp 2")
    expect_value_error(lambda: cmesh.DeviceMesh(2, 2, 1, locality="gpu0" if rank == 2 else None),
                       "locality", "world rank 2")
    expect_value_error(lambda: cmesh.DeviceMesh(2, 2, 1).group("xp"), "axis")
    expect_world_in_step(size)


class Mesh(unittest.TestCase):
    def test_coordinates_groups_and_description_at_four_ranks(self):
        run_ranks(shapes, 4, timeout=120)

    def test_locality_and_interleaved_hosts_reorder_the_placement(self):
        run_ranks(reordered, 4, timeout=120)

    def test_bad_shapes_raise_on_every_rank(self):
        run_ranks(bad_shapes, 4, timeout=120)


if __name__ == "__main__":
    unittest.main()
