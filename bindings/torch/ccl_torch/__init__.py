"""ccl's torch.distributed backend.

    import ccl_torch                       # registers the backend "ccl"
    torch.distributed.init_process_group("ccl", init_method="env://")

Every init_method torch offers works (env://, tcp://, file://, a Store): the backend makes its
communicator through the store torch hands it. The init_process_group timeout bounds every
wait of ccl's.

ccl_torch.hooks (TopK and 1-bit DDP communication hooks with error feedback) and ccl_torch.optim
(LAMB, LARS) run ccl's C++ training layer; ccl_torch.assign_buckets is DDP's bucket assignment
as that layer computes it.

ccl_torch.mesh.DeviceMesh places the ranks on a tensor × pipeline × data parallel mesh (ccl's
placement: tp innermost, pp outermost) and makes its torch process groups;
ccl_torch.tensor_parallel holds Megatron-style layers over a group (ColumnParallelLinear,
RowParallelLinear, VocabParallelEmbedding, the f/g operators and their sequence-parallel forms).
examples/parallel3d trains a small model with all three.

ccl_torch.zero.ZeroDataParallel shards a module's optimizer state (ZeRO stage 1), gradients
(stage 2) and parameters (stage 3) over a ccl group, as ccl::training::Zero cuts them, with ccl's
C++ optimizers (SGD, Adam/AdamW, LAMB, LARS) on each rank's slices; examples/zero3 trains a
small model with it.

ccl_torch.elastic keeps a job going when a rank dies (revoke, shrink to the survivors) and takes
a replacement back in (grow), on the recovery calls of ProcessGroupCcl (abort, revoke, agree,
failed_ranks, shrink, grow) and the module's get_unique_id and grow_as_newcomer.

Importing it also lets torch.distributed.monitored_barrier run on ccl's groups (torch 1.13's
refuses every backend but Gloo).
"""
import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import ProcessGroupCcl, get_unique_id, grow_as_newcomer, version  # noqa: F401
from . import hooks, optim  # noqa: F401,E402  (ccl's training layer: DDP hooks, LAMB, LARS)
from . import elastic  # noqa: F401,E402  (recovery from a failed rank)
from . import mesh, tensor_parallel  # noqa: F401,E402  (3D parallelism: the mesh, tp layers)
from . import zero  # noqa: F401,E402  (ZeRO stages 1-3: ZeroDataParallel)
from ._training import assign_buckets  # noqa: F401

__all__ = ["ProcessGroupCcl", "version", "BACKEND", "hooks", "optim", "assign_buckets", "elastic",
           "get_unique_id", "grow_as_newcomer", "mesh", "tensor_parallel", "zero"]

BACKEND = "ccl"


def _create_process_group(store, rank, size, timeout):
    return ProcessGroupCcl(store, rank, size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group)


_torch_monitored_barrier = dist.monitored_barrier


def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
    """torch.distributed.monitored_barrier, which torch 1.13 lets only Gloo's groups run, for
    ccl's groups too (ProcessGroupCcl.monitored_barrier: rank 0 names the ranks that did not
    arrive within `timeout`, every one of them with wait_all_ranks); other groups go to torch's."""
    c10d = dist.distributed_c10d
    if group is None:
        group = c10d.GroupMember.WORLD
    if group is not None and c10d._rank_not_in_group(group):
        return _torch_monitored_barrier(group, timeout, wait_all_ranks)
    if dist.get_backend(group) != BACKEND:
        return _torch_monitored_barrier(group, timeout, wait_all_ranks)
    if timeout is None:
        timeout = c10d.default_pg_timeout
    group_to_use = c10d._get_default_group() if group is None else group
    return group_to_use.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)


dist.monitored_barrier = monitored_barrier
dist.distributed_c10d.monitored_barrier = monitored_barrier
