"""ccl's torch.distributed backend, a torch 2.x c10d Backend for CPU and CUDA tensors.

    import ccl_torch                       # registers the backend ccl_torch.BACKEND ("ccl_torch")
    torch.distributed.init_process_group(ccl_torch.BACKEND, init_method="env://")

The name is "ccl_torch", not "ccl": "ccl" is what Intel's oneCCL bindings register, and
DeepSpeed, accelerate and transformers read "ccl" as oneCCL (docs/torch.md gives the evidence
and how to select ccl from each of them). A pip-installed ccl_torch also registers itself through
torch's entry point group "torch.distributed.backends", so init_process_group("ccl_torch") works
without the import. It serves CPU tensors and CUDA tensors (ccl's device collectives on a CUDA
stream of its own, as ProcessGroupNCCL's; docs/torch.md); to keep NCCL for CUDA tensors, name
both: init_process_group("cpu:ccl_torch,cuda:nccl").

Every init_method torch offers works (env://, tcp://, file://, a Store): the backend makes its
communicator through the store torch hands it. The init_process_group timeout bounds every
wait of ccl's.

ccl_torch.backend_of(group) is the BackendCcl behind a torch group: its recovery calls (abort,
revoke, agree, failed_ranks, shrink_to, grow) are what ccl_torch.elastic builds on, with the
module's get_unique_id and grow_as_newcomer.

ccl_torch.hooks (TopK and 1-bit DDP communication hooks with error feedback) and ccl_torch.optim
(LAMB, LARS) run ccl's C++ training layer; ccl_torch.assign_buckets is DDP's bucket assignment
as that layer computes it. ccl_torch.ft.ProcessGroupCcl is torchft's process group on ccl (import
it where torchft is installed). Sharding, meshes and tensor parallelism are torch's own on ccl:
FSDP2 (fully_shard), DeviceMesh and DTensor (examples/torch/, docs/torch.md).
"""
import warnings

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import BACKEND_NAME, BackendCcl, get_unique_id, grow_as_newcomer, version  # noqa: F401
from ._backend import as_process_group, backend_of  # noqa: F401
from . import hooks, optim  # noqa: F401,E402  (ccl's training layer: DDP hooks, LAMB, LARS)
from . import elastic  # noqa: F401,E402  (recovery from a failed rank)
from ._training import assign_buckets  # noqa: F401

__all__ = ["BackendCcl", "BACKEND", "backend_of", "as_process_group", "version", "hooks", "optim", "assign_buckets",
           "elastic", "get_unique_id", "grow_as_newcomer"]

BACKEND = BACKEND_NAME


def _create_backend(store, rank, size, timeout):
    return BackendCcl(store, rank, size, timeout)


def _register():
    """Registers the backend with torch.distributed (at import, and as the entry point torch
    calls for an unknown name). Never raises: a name registered by someone else is taken over
    with a warning, since importing ccl_torch asks for ccl's backend."""
    plugin = dist.Backend._plugins.get(BACKEND.upper())
    if plugin is not None and plugin.creator_fn is _create_backend:
        return
    if plugin is not None:
        warnings.warn(f"ccl_torch: the torch.distributed backend name {BACKEND!r} was registered "
                      f"by {getattr(plugin.creator_fn, '__module__', '?')}; ccl_torch takes it "
                      "over", stacklevel=2)
    try:
        dist.Backend.register_backend(BACKEND, _create_backend, devices=["cpu", "cuda"])
    except Exception as e:  # an older torch's refusal of a taken name: say so, do not fail
        warnings.warn(f"ccl_torch: could not register the backend {BACKEND!r}: {e}", stacklevel=2)


_register()


# torch before 2.14 runs torch.distributed.monitored_barrier on Gloo's groups only; from 2.14 on
# any group with a CPU backend. On the older ones, ccl's groups get it through this wrapper.
def _torch_allows_monitored_barrier():
    major, minor = (int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    return (major, minor) >= (2, 14)


if not _torch_allows_monitored_barrier():
    _torch_monitored_barrier = dist.monitored_barrier

    def monitored_barrier(group=None, timeout=None, wait_all_ranks=False):
        """torch.distributed.monitored_barrier for ccl's groups too (BackendCcl's: rank 0 names
        the ranks that did not arrive within `timeout`, every one with wait_all_ranks)."""
        c10d = dist.distributed_c10d
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
