"""DDP communication hooks that compress gradients with error feedback, on ccl's training layer.

    import ccl_torch.hooks as hooks
    state = hooks.TopKState(ratio=0.01)          # or hooks.OneBitState()
    ddp_model.register_comm_hook(state, hooks.topk_hook)   # onebit_hook for OneBitState

The state holds the compressor (its worker and, for 1-bit, server error buffers, one set per
DDP bucket) and counts the bytes it put on the wire (`state.bytes_sent`). The process group must
be a ccl one (the default group after init_process_group(ccl_torch.BACKEND), or
`process_group=`): the
exchange runs on its communicator, in its issue order, once the group's queued operations are
done, on the thread that runs the hook (DDP's autograd thread), so it does not overlap the rest
of the backward pass. Buckets that are not float32 go through a plain averaging allreduce.
"""
import torch
import torch.distributed as dist

from . import _training
from ._backend import backend_of

__all__ = ["CompressionState", "TopKState", "OneBitState", "topk_hook", "onebit_hook"]


class CompressionState:
    """A compressor ('topk:R', 'topk16:R', 'sign' or 'onebit') for one DDP model's buckets."""

    def __init__(self, spec, process_group=None, error_feedback=True):
        self.process_group = process_group
        self.compressor = _training.make_compressor(spec)
        self.compressor.error_feedback = error_feedback
        self._keys = {}  # a bucket's parameters -> its key (DDP renumbers buckets when it rebuilds)

    @property
    def bytes_sent(self):
        return self.compressor.bytes_sent

    def key_of(self, bucket):
        params = tuple(id(p) for p in bucket.parameters())
        return self._keys.setdefault(params, len(self._keys))

    def group(self):
        """The process group, checked to run on ccl (backend_of raises otherwise)."""
        pg = self.process_group if self.process_group is not None else dist.group.WORLD
        backend_of(pg, "ccl_torch.hooks")
        return pg


def TopKState(ratio=0.01, fp16_values=False, process_group=None, error_feedback=True):
    """TopK sparsification of each bucket, keeping `ratio` of its elements."""
    return CompressionState(f"{'topk16' if fp16_values else 'topk'}:{ratio}", process_group,
                            error_feedback)


def OneBitState(process_group=None, error_feedback=True):
    """The compressed allreduce of 1-bit Adam (DeepSpeed), worker and server error buffers."""
    return CompressionState("onebit", process_group, error_feedback)


def _compressed_hook(state, bucket):
    tensor = bucket.buffer()
    pg = state.group()
    if tensor.dtype != torch.float32 or tensor.device.type != "cpu" or not tensor.is_contiguous():
        fut = dist.all_reduce(tensor, op=dist.ReduceOp.AVG, group=pg, async_op=True).get_future()
        return fut.then(lambda f: f.value()[0])
    key = state.key_of(bucket)
    backend_of(pg)._run_exclusive(
        lambda comm: state.compressor.all_reduce(comm, key, tensor.data_ptr(), tensor.numel()))
    fut = torch.futures.Future()
    fut.set_result(tensor)
    return fut


def topk_hook(state, bucket):
    """DDP comm hook: the bucket's TopK-compressed average (state from TopKState)."""
    return _compressed_hook(state, bucket)


def onebit_hook(state, bucket):
    """DDP comm hook: the bucket through 1-bit Adam's compressed allreduce (OneBitState)."""
    return _compressed_hook(state, bucket)
