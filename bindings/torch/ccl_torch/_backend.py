"""The ccl backend behind a torch ProcessGroup: torch 2.x groups dispatch each device's operations
to a Backend; ccl's is ccl_torch.BackendCcl, which holds the recovery calls and the communicator
the training layer runs on."""
import torch
import torch.distributed as dist

from ._C import BackendCcl


def backend_of(group=None, caller="ccl_torch"):
    """The BackendCcl serving `group`'s CPU tensors (the default group when None); raises
    RuntimeError naming `caller` when that is not ccl's."""
    if isinstance(group, BackendCcl):
        return group
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    try:
        backend = pg._get_backend(torch.device("cpu"))
    except (RuntimeError, AttributeError):
        backend = None
    if not isinstance(backend, BackendCcl):
        from . import BACKEND
        raise RuntimeError(f"{caller}: the group's CPU backend is {type(backend).__name__}, not "
                           f"ccl's: init_process_group({BACKEND!r}) or pass a group made with it")
    return backend


def as_process_group(backend, store=None):
    """A torch ProcessGroup whose CPU operations run on `backend` (a BackendCcl a shrink, a grow
    or a split made, or one made from `store`), for the torch.distributed calls that take group=
    and for DDP. It is not registered with torch.distributed (its ranks are its own); `store`,
    the group's store where it has one (a HashStore of its own without)."""
    btype = dist.ProcessGroup.BackendType.CUSTOM
    pg = dist.ProcessGroup(store if store is not None else dist.HashStore(), backend.rank(),
                           backend.size())
    pg._set_default_backend(btype)
    pg._register_backend(torch.device("cpu"), btype, backend)
    return pg
