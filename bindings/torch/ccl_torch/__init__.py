"""ccl's torch.distributed backend.

    import ccl_torch                       # registers the backend "ccl"
    torch.distributed.init_process_group("ccl", init_method="env://")

Every init_method torch offers works (env://, tcp://, file://, a Store): the backend makes its
communicator through the store torch hands it. The init_process_group timeout bounds every
wait of ccl's.

ccl_torch.hooks (TopK and 1-bit DDP communication hooks with error feedback) and ccl_torch.optim
(LAMB, LARS) run ccl's C++ training layer; ccl_torch.assign_buckets is DDP's bucket assignment
as that layer computes it.
"""
import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import ProcessGroupCcl, version  # noqa: F401
from . import hooks, optim  # noqa: F401,E402  (ccl's training layer: DDP hooks, LAMB, LARS)
from ._training import assign_buckets  # noqa: F401

__all__ = ["ProcessGroupCcl", "version", "BACKEND", "hooks", "optim", "assign_buckets"]

BACKEND = "ccl"


def _create_process_group(store, rank, size, timeout):
    return ProcessGroupCcl(store, rank, size, timeout)


if BACKEND.upper() not in dist.Backend._plugins:
    dist.Backend.register_backend(BACKEND, _create_process_group)
