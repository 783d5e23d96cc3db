"""A device mesh for 3D parallelism: torch process groups for tensor (tp), pipeline (pp) and
data (dp) parallelism, placed by ccl's training layer.

    import ccl_torch.mesh
    mesh = ccl_torch.mesh.DeviceMesh(tp=2, pp=2, dp=2)     # collective over the default group
    if dist.get_rank() == 0:
        print(mesh.describe())
    dist.all_reduce(partial, group=mesh.tp_group)            # the ranks of this rank's tp group

The placement is ccl::training::place_mesh's (include/ccl/training/mesh.hpp): the world ranks in
locality order (hosts by their lowest rank, then the locality key each rank passes, then rank),
and position p gets tp = p % tp, dp = (p // tp) % dp, pp = p // (tp * dp): tp innermost, pp
outermost (Megatron-LM's order), so a tp group is neighbours on one host and pipeline stages
land on different hosts first. A shape whose tp groups would cross hosts is refused.

Group ranks. torch numbers the members of a group made by new_group in increasing world rank,
whatever order the placement gives them. With no locality keys on one host the two agree
(dist.get_rank(mesh.tp_group) == mesh.coord.tp); where they do not (locality keys that reorder a
host's ranks, hosts whose ranks interleave), the coordinates stay the placement's and the
`*_ranks` lists are in coordinate order: a pipeline finds its neighbours as
pp_ranks[coord.pp ± 1], and the tensor-parallel layers (ccl_torch.tensor_parallel) use the
group's own rank as their shard index, which is consistent with the group's collectives.
"""
import collections
import socket

import torch.distributed as dist

from . import _training
from ._backend import backend_of

__all__ = ["DeviceMesh", "MeshCoord", "AXES"]

AXES = ("tp", "pp", "dp")

MeshCoord = collections.namedtuple("MeshCoord", AXES)
MeshCoord.__doc__ = "A rank's coordinates in the mesh: (tp, pp, dp)."


def _check_shape(shapes):
    """The shape every rank passed (shapes[r] is world rank r's (tp, pp, dp)), or ValueError:
    every rank sees the same list, so every rank raises the same error. The sizes' ranges and
    their product are place_mesh's to check."""
    first = shapes[0]
    for r, shape in enumerate(shapes):
        if shape != first:
            raise ValueError(f"ccl_torch.mesh.DeviceMesh: world rank {r} passed tp {shape[0]} x "
                             f"pp {shape[1]} x dp {shape[2]}, world rank 0 tp {first[0]} x pp "
                             f"{first[1]} x dp {first[2]}: every rank must pass the same shape")
    for name, value in zip(AXES, first):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"ccl_torch.mesh.DeviceMesh: {name} must be an int, not "
                             f"{type(value).__name__} {value!r}")
    return first


def _check_locality(localities):
    for r, loc in enumerate(localities):
        if loc is None:
            continue
        if not isinstance(loc, (list, tuple)) or not all(
                isinstance(k, int) and not isinstance(k, bool) for k in loc):
            raise ValueError(f"ccl_torch.mesh.DeviceMesh: locality must be a list of ints (e.g. "
                             f"[gpu] or [numa, gpu]) or None; world rank {r} passed {loc!r}")


class DeviceMesh:
    """This rank's tp, pp and dp process groups on a tp × pp × dp mesh of the default group.

    Collective over the default group: every rank must call it, with the same shape. `locality`
    is where this rank runs inside its host, as a list of ints compared lexicographically (e.g.
    [gpu] or [numa node, gpu]); None when unknown (then world rank order decides). `timeout`
    (a timedelta) is handed to every dist.new_group (torch's default when None). `backend`: the
    groups' backend (the default group's when None); describe() names the transport of each pair
    only for ccl groups.

    Raises ValueError naming the argument on every rank alike when a size is not an int >= 1,
    tp * pp * dp is not the world size, ranks passed different shapes, a locality is not a list
    of ints, or a tp group would cross hosts.

    Attributes: `coord` (MeshCoord(tp, pp, dp)), `shape` (MeshCoord of the sizes), `world_rank`,
    `tp_group`, `pp_group`, `dp_group` (torch process groups), `tp_ranks`, `pp_ranks`,
    `dp_ranks` (the world ranks of this rank's groups, in coordinate order), `order` (world
    ranks in mesh order), `coords` (every world rank's MeshCoord), `groups` ({'tp'|'pp'|'dp':
    every group's world ranks}), `places` (every rank's (host, locality)).
    """

    def __init__(self, tp, pp, dp, locality=None, timeout=None, backend=None):
        if not dist.is_initialized():
            raise RuntimeError("ccl_torch.mesh.DeviceMesh: init_process_group first")
        self.world_rank = dist.get_rank()
        world_size = dist.get_world_size()
        if isinstance(locality, tuple):
            locality = list(locality)
        mine = (socket.gethostname(), locality, (tp, pp, dp))
        gathered = [None] * world_size
        # Everything is gathered before anything is checked, so a bad argument on one rank fails
        # every rank alike instead of leaving the others waiting.
        dist.all_gather_object(gathered, mine)
        self.shape = MeshCoord(*_check_shape([g[2] for g in gathered]))
        _check_locality([g[1] for g in gathered])
        self.places = [(host, list(loc or [])) for host, loc, _ in gathered]
        try:
            placement = _training.place_mesh(*self.shape, self.places)
        except RuntimeError as e:  # ccl::Error (cclInvalidArgument): sizes, product, hosts
            raise ValueError(f"ccl_torch.mesh.DeviceMesh: {e}") from None
        self.order = list(placement["order"])
        self.coords = [MeshCoord(*c) for c in placement["coords"]]
        self.groups = {axis: [list(g) for g in placement["groups"][axis]] for axis in AXES}
        self.coord = self.coords[self.world_rank]

        # torch needs every rank to make every group, in the same order.
        kwargs = {} if timeout is None else {"timeout": timeout}
        if backend is not None:
            kwargs["backend"] = backend
        self._group = {}
        self._ranks = {}
        for axis in AXES:
            for ranks in self.groups[axis]:
                group = dist.new_group(ranks, **kwargs)
                if self.world_rank in ranks:
                    self._group[axis] = group
                    self._ranks[axis] = ranks
        self._transports = self._gather_transports()

    # ------------------------------------------------------------------------------ the groups

    @property
    def tp_group(self):
        return self._group["tp"]

    @property
    def pp_group(self):
        return self._group["pp"]

    @property
    def dp_group(self):
        return self._group["dp"]

    @property
    def tp_ranks(self):
        return list(self._ranks["tp"])

    @property
    def pp_ranks(self):
        return list(self._ranks["pp"])

    @property
    def dp_ranks(self):
        return list(self._ranks["dp"])

    def group(self, axis):
        """This rank's process group along `axis` ('tp', 'pp' or 'dp')."""
        return self._group[self._axis(axis)]

    def ranks(self, axis):
        """The world ranks of this rank's group along `axis`, in coordinate order."""
        return list(self._ranks[self._axis(axis)])

    @staticmethod
    def _axis(axis):
        if axis not in AXES:
            raise ValueError(f"ccl_torch.mesh.DeviceMesh: axis must be one of {AXES}, not "
                             f"{axis!r}")
        return axis

    # ---------------------------------------------------------------------------- description

    def _gather_transports(self):
        """{(axis, world rank a, world rank b): the transport a uses to b} for every pair of every
        group, from one all_gather_object (each rank asks its own ccl groups)."""
        mine = {}
        for axis in AXES:
            group = self._group[axis]
            try:
                run_exclusive = backend_of(group)._run_exclusive
            except RuntimeError:  # not a ccl group: nothing to say
                continue
            members = sorted(self._ranks[axis])  # torch's group ranks: increasing world rank

            def ask(handle, members=members, axis=axis):
                for group_rank, b in enumerate(members):
                    mine[(axis, self.world_rank, b)] = _training.peer_transport(handle,
                                                                                group_rank)
            run_exclusive(ask)
        gathered = [None] * dist.get_world_size()
        dist.all_gather_object(gathered, mine)
        transports = {}
        for part in gathered:
            transports.update(part)
        return transports

    def transport(self, axis, a, b):
        """The transport world rank `a` uses to world rank `b` of its group along `axis` (a ccl
        transport name: 'shm', 'tcp', ...; 'self' when a == b; None when unknown)."""
        return self._transports.get((self._axis(axis), a, b))

    def describe(self):
        """ccl::training::describe_mesh's text: one line per world rank (host, locality, tp, pp,
        dp), then every group along each axis with its members and the transport of each pair.
        The same text on every rank; local (the transports were gathered at construction)."""
        return _training.describe_mesh(*self.shape, self.places, self._transports)

    def __repr__(self):
        s = self.shape
        return (f"DeviceMesh(tp={s.tp}, pp={s.pp}, dp={s.dp}; world rank {self.world_rank} at "
                f"tp {self.coord.tp} pp {self.coord.pp} dp {self.coord.dp})")
