"""Keeping a job going when a rank dies, and taking a replacement back in, on ccl's groups.

A collective whose peer died raises a RuntimeError that quotes ccl's "remote process exited or
there was a network error" (or "operation timed out") promptly (about 0.1 s between the processes
of one host, as ccl's recovery listener sees the dead process's sockets close). The survivors then
call :func:`recover` with that exception: it revokes the group (the other survivors, perhaps
blocked in another operation, fail at once too), shrinks it to the live ranks and returns the new
group. The shrink talks over ccl's recovery plane, not through a store: rank 0, which hosts
torch's TCPStore under env://, may be the rank that died.

A replacement joins through :func:`grow_waiting` (the members, between steps) and
:func:`join_through` (the newcomer), which meet in a :class:`FileRendezvous`: a directory every
rank sees, served by no rank, so it outlives any of them. :func:`grow` and :func:`join` are the
bare calls, for a unique id that travels another way.

The new groups are torch ProcessGroups on ccl's backend (ccl_torch.as_process_group), but not
torch.distributed's registered groups: pass them as ``group=`` to the collectives that take no
rank argument (all_reduce, all_gather, barrier), or call their methods
(``group.broadcast(t, root).wait()``), and to DDP as ``process_group=``. examples/elastic_ddp
puts it all together.
"""
import json
import os
import time

import torch

from . import _C
from ._backend import as_process_group, backend_of

__all__ = ["is_peer_failure", "recover", "grow", "join", "grow_waiting", "join_through",
           "FileRendezvous", "get_unique_id"]

get_unique_id = _C.get_unique_id


def is_peer_failure(exc):
    """True if `exc` is ccl's report of a failed peer (cclRemoteError: a rank died, or revoked
    the group) or of a wait that ran out (cclTimeout), the failures :func:`recover` handles.

        try:
            dist.all_reduce(t, group=group)
        except RuntimeError as e:
            if not ccl_torch.elastic.is_peer_failure(e):
                raise
    """
    text = str(exc)
    return "ccl" in text and any(t in text for t in _C._peer_failure_texts)


def recover(group, exc=None, attempts=3):
    """After a collective on ccl's `group` raised `exc`, called by every survivor: revokes the
    group, shrinks it to the ranks still alive (CCL_SHRINK_ABORT, the dead ones agreed on) and
    returns (new_group, new_rank, new_size). The survivors keep their order. A rank that dies
    during the shrink makes it fail on every survivor; it is tried again, `attempts` times in
    all. `exc` that is not a peer failure (is_peer_failure) is raised again, untouched. The old
    group takes no more operations; group.failed_ranks() names the dead.

        try:
            loss.backward()
        except RuntimeError as e:
            group, rank, size = ccl_torch.elastic.recover(group, e)
            model = DDP(module, process_group=group)
    """
    if exc is not None and not is_peer_failure(exc):
        raise exc
    # The other survivors may be blocked in an operation that only waits for a live rank: the
    # revoke ends it, so that each of them reaches the shrink now, not at its timeout.
    backend = backend_of(group, "ccl_torch.elastic.recover")
    backend.revoke()
    failure = None
    for _ in range(max(1, attempts)):
        try:
            new = backend.shrink_to(abort=True)
            return as_process_group(new), new.rank(), new.size()
        except RuntimeError as e:
            if not is_peer_failure(e):
                raise
            failure = e
    raise failure


def grow(group, nranks, unique_id):
    """Called by every member of ccl's `group` at the same point: grows it to `nranks` ranks,
    the newcomers (:func:`join`) taking ranks group.size() .. nranks - 1; each member keeps its
    rank. All meet at `unique_id`, made by one member with get_unique_id() and handed to the
    others (grow_waiting broadcasts it over the group). Returns (new_group, rank, size).

        uid = ccl_torch.elastic.get_unique_id() if rank == 0 else None
        ...  # hand uid to the other members and to the newcomer
        group, rank, size = ccl_torch.elastic.grow(group, size + 1, uid)
    """
    new = backend_of(group, "ccl_torch.elastic.grow").grow(nranks, unique_id)
    return as_process_group(new), new.rank(), new.size()


def join(nranks, rank, unique_id, timeout=None):
    """Called by a newcomer: joins the members that call grow(group, nranks, unique_id), as
    `rank`; returns (new_group, rank, size). `timeout` (a datetime.timedelta) bounds every wait
    of the new group (default: CCL_TIMEOUT).

        group, rank, size = ccl_torch.elastic.join(3, 2, uid)
    """
    new = _C.grow_as_newcomer(nranks, rank, unique_id, timeout)
    return as_process_group(new), new.rank(), new.size()


class FileRendezvous:
    """Where newcomers and the members of a group meet to grow it: a directory all ranks see
    (on one host, any local directory). A newcomer announces itself under a name of its own and
    waits for an offer (the unique id, nranks and its rank); the members' rank 0 lists those
    waiting and writes their offers. Files are written whole and renamed into place, so a reader
    never sees half of one.

        rdv = ccl_torch.elastic.FileRendezvous("/shared/job42")
        # the newcomer
        group, rank, size = ccl_torch.elastic.join_through(rdv, "worker-1")
        # every member, between steps
        group, rank, size = ccl_torch.elastic.grow_waiting(group, rdv)
    """

    def __init__(self, directory):
        self.directory = directory
        for sub in ("waiting", "offers"):
            os.makedirs(os.path.join(directory, sub), exist_ok=True)

    def _write(self, path, text):
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)

    def announce(self, name):
        """A newcomer: asks to be taken in at the members' next grow_waiting."""
        self._write(os.path.join(self.directory, "waiting", name), str(time.time()))

    def waiting(self):
        """The names of the newcomers waiting, sorted (the order of their ranks)."""
        names = os.listdir(os.path.join(self.directory, "waiting"))
        return sorted(n for n in names if not n.endswith(".tmp"))

    def offer(self, name, unique_id, nranks, rank):
        """The members' rank 0: tells newcomer `name` where to join, and takes it off the list."""
        offer = {"unique_id": unique_id.hex(), "nranks": nranks, "rank": rank}
        self._write(os.path.join(self.directory, "offers", name), json.dumps(offer))
        try:
            os.unlink(os.path.join(self.directory, "waiting", name))
        except FileNotFoundError:
            pass

    def wait_offer(self, name, timeout=60.0, poll=0.01):
        """A newcomer: its offer, (unique_id, nranks, rank), once written. Raises TimeoutError
        after `timeout` s, RuntimeError if the rendezvous is closed first."""
        path = os.path.join(self.directory, "offers", name)
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if os.path.exists(os.path.join(self.directory, "closed")):
                raise RuntimeError(f"ccl elastic: the rendezvous in {self.directory} was closed "
                                   f"before {name} was taken in")
            if time.monotonic() > deadline:
                raise TimeoutError(f"ccl elastic: no offer for {name} in {self.directory} "
                                   f"after {timeout} s")
            time.sleep(poll)
        with open(path) as f:
            offer = json.load(f)
        os.unlink(path)
        return bytes.fromhex(offer["unique_id"]), offer["nranks"], offer["rank"]

    def close(self):
        """No more grows (the job ends): newcomers still waiting give up at once."""
        self._write(os.path.join(self.directory, "closed"), str(time.time()))


def grow_waiting(group, rendezvous):
    """Called by every member of ccl's `group` at the same point (between training steps):
    takes in the newcomers waiting in `rendezvous` (a FileRendezvous). Rank 0 decides who is
    waiting and makes the unique id; one allreduce tells the members how many, one broadcast
    gives them the id. Returns (group, rank, size): the grown group, or `group` itself when
    nobody waits (then it cost one allreduce of one number).

        for step in range(steps):
            group, rank, size = ccl_torch.elastic.grow_waiting(group, rdv)
            if group is not ddp.process_group:
                ...  # bring the newcomers up to date, then rebuild DDP on the new group
    """
    rank, size = group.rank(), group.size()
    names = rendezvous.waiting() if rank == 0 else []
    count = torch.tensor([len(names)], dtype=torch.int64)
    group.allreduce([count]).wait()  # SUM: only rank 0 counts
    joining = int(count.item())
    if joining == 0:
        return group, rank, size
    nranks = size + joining
    uid = torch.zeros(_C.UNIQUE_ID_BYTES, dtype=torch.uint8)
    if rank == 0:
        made = get_unique_id()
        uid = torch.tensor(list(made), dtype=torch.uint8)
        for i, name in enumerate(names):
            rendezvous.offer(name, made, nranks, size + i)
    group.broadcast(uid, 0).wait()
    return grow(group, nranks, bytes(uid.tolist()))


def join_through(rendezvous, name, timeout=60.0, comm_timeout=None):
    """A newcomer: announces itself in `rendezvous` as `name`, waits up to `timeout` s for the
    members' grow_waiting, and joins (comm_timeout: join's timeout); returns (group, rank, size).

        group, rank, size = ccl_torch.elastic.join_through(rdv, f"rank{os.environ['CCL_RANK']}")
    """
    rendezvous.announce(name)
    unique_id, nranks, rank = rendezvous.wait_offer(name, timeout)
    return join(nranks, rank, unique_id, comm_timeout)
