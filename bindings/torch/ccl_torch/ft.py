"""torchft on ccl: ProcessGroupCcl, the reconfigurable process group torchft's Manager takes
(torchft 0.2), with ccl's backend inside.

    from ccl_torch.ft import ProcessGroupCcl
    manager = torchft.Manager(pg=ProcessGroupCcl(timeout=timedelta(seconds=10)), ...)

torchft replaces the group at every quorum change: configure() aborts the group it holds and
makes a new one from the quorum's store. What ccl changes against torchft's Gloo groups is the
abort: torchft.ProcessGroupGloo cannot stop an operation in flight (Gloo has no abort), so an
allreduce whose peer died blocks the replica until Gloo's timeout, and torchft's answer is
ProcessGroupBabyGloo, which runs Gloo in a subprocess that it kills, paying a copy of every
tensor through shared memory and a process start at each reconfiguration. BackendCcl.abort ends
what is in flight at once, in the trainer's process (docs/torch.md, torchft; perf/README.md has
the training a failure costs on ccl and on torchft's ProcessGroupGloo).

Only this module imports torchft: import it where torchft is installed.
"""
from datetime import timedelta

import torch.distributed as dist
from torchft.process_group import ProcessGroupWrapper

from ._C import BackendCcl
from ._backend import as_process_group

__all__ = ["ProcessGroupCcl"]


class ProcessGroupCcl(ProcessGroupWrapper):
    """torchft's ProcessGroupWrapper over ccl: each configure() aborts the previous group (ccl's
    abort: its operations in flight fail now, here and on the peers) and makes a BackendCcl for
    the new quorum through the store torchft hands it. `timeout` bounds the rendezvous and every
    wait of ccl's, as init_process_group's timeout does."""

    def __init__(self, timeout: timedelta = timedelta(seconds=60)) -> None:
        if not isinstance(timeout, timedelta) or timeout <= timedelta(0):
            raise ValueError(f"ProcessGroupCcl: timeout must be a positive timedelta, not "
                             f"{timeout!r}")
        super().__init__(timeout=timeout)

    def _create_pg(self, store: dist.Store, rank: int, world_size: int) -> dist.ProcessGroup:
        return as_process_group(BackendCcl(store, rank, world_size, self._timeout), store)

    def getBackendName(self) -> str:
        return "torchft-ccl"
