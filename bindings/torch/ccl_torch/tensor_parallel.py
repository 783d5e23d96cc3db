"""Megatron-style tensor parallelism for torch modules over a process group (a ccl group such as
ccl_torch.mesh.DeviceMesh's tp_group, or any torch group): the f and g operators, their
sequence-parallel forms, column- and row-parallel linear layers and a vocabulary-parallel
embedding. The semantics are those of ccl's C++ blocks (include/ccl/training/tensor_parallel.hpp).

    from ccl_torch import tensor_parallel as tpl
    fc1 = tpl.ColumnParallelLinear.from_full(mlp[0].weight, mlp[0].bias, group=mesh.tp_group)
    fc2 = tpl.RowParallelLinear.from_full(mlp[2].weight, mlp[2].bias, group=mesh.tp_group)
    y = fc2(torch.nn.functional.gelu(fc1(x)))   # == mlp(x) on every rank of the group

Conventions. Activations have tokens along dim 0 (sequence first: [seq, batch, hidden] or
[tokens, hidden]) and features along the last dim; a linear layer's weight is [out, in]
(torch.nn.Linear). With sequence_parallel=True the activations outside a layer hold only this
rank's block of dim 0 (dim 0 / group size rows, blocks in group-rank order): f becomes an
all-gather along dim 0 (reduce-scatter of the gradient), g a reduce-scatter (all-gather of the
gradient). Splits must be even: out_features (column-parallel), in_features (row-parallel), the
vocabulary and, with sequence parallelism, dim 0 must be multiples of the group size, or
ValueError names the argument. A rank's shard index is its rank in the group (dist.get_rank).

Initialisation. A layer built directly initialises its own shard as torch.nn.Linear /
nn.Embedding would initialise a tensor of that shape (from torch's generator, so the shards of
different ranks are only parts of one full tensor if the caller seeds them so); `from_full` and
`load_full` take the full (unsplit) tensors, which every rank of the group must hold alike, and
`full_parameters()` gathers them back (collective over the group).
"""
import math

import torch
import torch.distributed as dist
import torch.nn.functional as F

__all__ = [
    "CopyToRegion", "ReduceFromRegion", "GatherSequence", "ReduceScatterSequence",
    "GatherFeatures", "SplitFeatures",
    "copy_to_region", "reduce_from_region", "gather_sequence", "reduce_scatter_sequence",
    "gather_features", "split_features",
    "shard_rows", "shard_cols", "gather_rows", "gather_cols",
    "ColumnParallelLinear", "RowParallelLinear", "VocabParallelEmbedding",
]


# torch 2.x's public names of the backend's _allgather_base / _reduce_scatter_base.
_all_gather_into = dist.all_gather_into_tensor
_reduce_scatter_into = dist.reduce_scatter_tensor


def _size(group):
    return dist.get_world_size(group)


def _rank(group):
    return dist.get_rank(group)


def _check_divides(what, value, parts):
    if value % parts != 0:
        raise ValueError(f"ccl_torch.tensor_parallel: {what} {value} is not a multiple of the "
                         f"group size {parts}")


# The collectives below leave a group of one rank to the identity (a view, so that autograd sees
# an output of its own): the operators need no case of their own for it.

def _all_gather_dim0(x, group):
    n = _size(group)
    if n == 1:
        return x.view_as(x)
    x = x.contiguous()
    out = torch.empty((n * x.shape[0],) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    _all_gather_into(out, x, group=group)
    return out


def _reduce_scatter_dim0(x, group):
    n = _size(group)
    if n == 1:
        return x.view_as(x)
    _check_divides("dim 0 (the sequence) of size", x.shape[0], n)
    x = x.contiguous()
    out = torch.empty((x.shape[0] // n,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)
    _reduce_scatter_into(out, x, group=group)
    return out


def _all_reduce(x, group):
    if _size(group) == 1:
        return x.view_as(x)
    y = x.contiguous().clone()  # never in place: autograd may hold x or share the gradient
    dist.all_reduce(y, group=group)
    return y


# ---- The operators --------------------------------------------------------------------------

class CopyToRegion(torch.autograd.Function):
    """f: the identity forward (every rank holds the whole input); all-reduce (sum) of the
    gradient backward, each rank having contributed what flows through its shard."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return _all_reduce(grad, ctx.group), None


class ReduceFromRegion(torch.autograd.Function):
    """g: all-reduce (sum) of the partial outputs forward; the identity backward."""

    @staticmethod
    def forward(ctx, x, group):
        return _all_reduce(x, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


class GatherSequence(torch.autograd.Function):
    """Sequence-parallel f: all-gather of each rank's block of dim 0 (blocks in group-rank
    order) forward; reduce-scatter (sum) of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _all_gather_dim0(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _reduce_scatter_dim0(grad, ctx.group), None


class ReduceScatterSequence(torch.autograd.Function):
    """Sequence-parallel g: reduce-scatter (sum) of the partial outputs along dim 0 forward,
    this rank keeping its block; all-gather of the gradient backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _reduce_scatter_dim0(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_dim0(grad, ctx.group), None


class GatherFeatures(torch.autograd.Function):
    """All-gather along the last dim (a column-parallel layer's gather_output) forward; this
    rank's slice of the gradient backward (every rank holds the whole output gradient)."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        return _all_gather_last(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _own_slice(grad, ctx.group), None


class SplitFeatures(torch.autograd.Function):
    """This rank's slice of the last dim (a row-parallel layer's input when it is not parallel
    yet) forward; all-gather of the gradient along the last dim backward."""

    @staticmethod
    def forward(ctx, x, group):
        ctx.group = group
        _check_divides("the last dim of size", x.shape[-1], _size(group))
        return _own_slice(x, group)

    @staticmethod
    def backward(ctx, grad):
        return _all_gather_last(grad, ctx.group), None


def _all_gather_last(x, group):
    if _size(group) == 1:
        return x.view_as(x)
    return torch.cat(_gather_list(x, group), dim=-1)


def _own_slice(x, group):
    n = _size(group)
    if n == 1:
        return x
    width = x.shape[-1] // n
    return x.narrow(-1, _rank(group) * width, width).contiguous()


class _AddSequenceParallelBias(torch.autograd.Function):
    """y + bias where y holds this rank's block of tokens (sequence parallel): the bias gradient
    is summed over every rank's tokens (an all-reduce), so each rank's replicated bias gets the
    whole gradient, as the C++ RowParallelLinear gives it."""

    @staticmethod
    def forward(ctx, y, bias, group):
        ctx.group = group
        return y + bias

    @staticmethod
    def backward(ctx, grad):
        return grad, _all_reduce(grad.reshape(-1, grad.shape[-1]).sum(dim=0), ctx.group), None


def copy_to_region(x, group=None):
    """f over `group` (identity forward, all-reduce backward)."""
    return CopyToRegion.apply(x, group)


def reduce_from_region(x, group=None):
    """g over `group` (all-reduce forward, identity backward)."""
    return ReduceFromRegion.apply(x, group)


def gather_sequence(x, group=None):
    """Sequence-parallel f over `group` (all-gather along dim 0 forward, reduce-scatter
    backward)."""
    return GatherSequence.apply(x, group)


def reduce_scatter_sequence(x, group=None):
    """Sequence-parallel g over `group` (reduce-scatter along dim 0 forward, all-gather
    backward). ValueError when dim 0 is not a multiple of the group size."""
    _check_divides("dim 0 (the sequence) of size", x.shape[0], _size(group))
    return ReduceScatterSequence.apply(x, group)


def gather_features(x, group=None):
    """All-gather along the last dim forward, this rank's slice of the gradient backward."""
    return GatherFeatures.apply(x, group)


def split_features(x, group=None):
    """This rank's slice of the last dim forward, all-gather of the gradient backward."""
    return SplitFeatures.apply(x, group)


# ---- Shards of full tensors -----------------------------------------------------------------

def shard_rows(full, parts, index):
    """Block `index` of `parts` equal blocks of dim 0 of `full` (a column-parallel weight or
    bias, an embedding table's vocabulary slice, a sequence), as a new tensor."""
    return _shard(full, 0, parts, index)


def shard_cols(full, parts, index):
    """Block `index` of `parts` equal blocks of the last dim of `full` (a row-parallel weight's
    slice of input features), as a new tensor."""
    return _shard(full, -1, parts, index)


def _shard(full, dim, parts, index):
    if not isinstance(parts, int) or parts < 1:
        raise ValueError(f"ccl_torch.tensor_parallel: parts must be an int >= 1, not {parts!r}")
    if not isinstance(index, int) or not 0 <= index < parts:
        raise ValueError(f"ccl_torch.tensor_parallel: index {index!r} is outside [0, {parts})")
    size = full.shape[dim]
    if size % parts != 0:
        raise ValueError(f"ccl_torch.tensor_parallel: dim {dim} of size {size} of the full "
                         f"tensor is not a multiple of parts {parts}")
    width = size // parts
    return full.detach().narrow(dim, index * width, width).clone()


def gather_rows(shard, group=None):
    """The full tensor whose dim-0 blocks the ranks of `group` hold (inverse of shard_rows);
    collective over the group; no autograd."""
    return torch.cat(_gather_list(shard, group), dim=0)


def gather_cols(shard, group=None):
    """The full tensor whose last-dim blocks the ranks of `group` hold (inverse of shard_cols);
    collective over the group; no autograd."""
    return torch.cat(_gather_list(shard, group), dim=-1)


def _gather_list(shard, group):
    shard = shard.detach().contiguous()
    parts = [torch.empty_like(shard) for _ in range(_size(group))]
    dist.all_gather(parts, shard, group=group)
    return parts


# ---- Layers ---------------------------------------------------------------------------------

def _check_positive(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"ccl_torch.tensor_parallel: {name} must be an int >= 1, not {value!r}")


def _check_full(what, tensor, shape):
    if tensor is None or tuple(tensor.shape) != tuple(shape):
        got = None if tensor is None else tuple(tensor.shape)
        raise ValueError(f"ccl_torch.tensor_parallel: the full {what} must have shape "
                         f"{tuple(shape)}, not {got}")


def _init_linear(weight, bias, fan_in):
    # torch.nn.Linear's initialisation, for a shard whose fan-in is the full layer's.
    torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is not None:
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
        torch.nn.init.uniform_(bias, -bound, bound)


class _ParallelLinear(torch.nn.Module):
    """What the column- and row-parallel layers share: made from the full (unsplit) weights."""

    @classmethod
    def from_full(cls, weight, bias=None, group=None, **kwargs):
        """A layer holding this rank's shard of the full weight [out, in] (and bias [out]): the
        constructor's arguments from the weight's shape, then load_full."""
        out_features, in_features = weight.shape
        layer = cls(in_features, out_features, group, bias=bias is not None,
                    dtype=weight.dtype, **kwargs)
        layer.load_full(weight, bias)
        return layer


class ColumnParallelLinear(_ParallelLinear):
    """y = x·Wᵀ + b split by output features: this rank holds rows [r·out/n, (r+1)·out/n) of W
    (`weight`, [out/n, in]) and the same slice of b (`bias`).

    forward: f on x (sequence parallel: all-gather of x's dim 0), the local product: y holds this
    rank's out/n features ([..., out/n]), or all of them with gather_output=True. The input
    gradient is all-reduced (sequence parallel: reduce-scattered to this rank's rows).
    """

    def __init__(self, in_features, out_features, group=None, bias=True, gather_output=False,
                 sequence_parallel=False, dtype=None):
        super().__init__()
        _check_positive("in_features", in_features)
        _check_positive("out_features", out_features)
        n = _size(group)
        _check_divides("out_features", out_features, n)
        self.in_features, self.out_features = in_features, out_features
        self.group, self.gather_output = group, gather_output
        self.sequence_parallel = sequence_parallel
        self.world, self.rank = n, _rank(group)
        self.local_out = out_features // n
        self.weight = torch.nn.Parameter(torch.empty(self.local_out, in_features, dtype=dtype))
        self.bias = (torch.nn.Parameter(torch.empty(self.local_out, dtype=dtype)) if bias
                     else None)
        with torch.no_grad():
            _init_linear(self.weight, self.bias, in_features)

    def load_full(self, weight, bias=None):
        """Copies this rank's shard of the full weight [out, in] (and bias [out])."""
        _check_full("weight", weight, (self.out_features, self.in_features))
        with torch.no_grad():
            self.weight.copy_(shard_rows(weight, self.world, self.rank))
            if self.bias is not None:
                _check_full("bias", bias, (self.out_features,))
                self.bias.copy_(shard_rows(bias, self.world, self.rank))

    def full_parameters(self):
        """(weight, bias) of the whole layer, gathered from the group (collective)."""
        bias = None if self.bias is None else gather_rows(self.bias, self.group)
        return gather_rows(self.weight, self.group), bias

    def forward(self, x):
        if self.sequence_parallel:
            x = gather_sequence(x, self.group)
        else:
            x = copy_to_region(x, self.group)
        y = F.linear(x, self.weight, self.bias)
        return gather_features(y, self.group) if self.gather_output else y

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features} "
                f"({self.local_out} here, shard {self.rank} of {self.world}), "
                f"bias={self.bias is not None}, gather_output={self.gather_output}, "
                f"sequence_parallel={self.sequence_parallel}")


class RowParallelLinear(_ParallelLinear):
    """y = x·Wᵀ + b split by input features: this rank holds columns [r·in/n, (r+1)·in/n) of W
    (`weight`, [out, in/n]) and the whole b (`bias`, replicated).

    forward: (input_is_parallel=False: this rank's slice of x's last dim first) the partial
    product, g (all-reduce; sequence parallel: reduce-scatter to this rank's block of dim 0),
    then + b, added once after the reduction. Every rank's bias gets the whole gradient (with
    sequence parallelism its local sums are all-reduced).
    """

    def __init__(self, in_features, out_features, group=None, bias=True, input_is_parallel=True,
                 sequence_parallel=False, dtype=None):
        super().__init__()
        _check_positive("in_features", in_features)
        _check_positive("out_features", out_features)
        n = _size(group)
        _check_divides("in_features", in_features, n)
        if sequence_parallel and not input_is_parallel:
            raise ValueError("ccl_torch.tensor_parallel.RowParallelLinear: sequence_parallel "
                             "needs input_is_parallel=True (the input of a sequence-parallel "
                             "block comes from a column-parallel layer)")
        self.in_features, self.out_features = in_features, out_features
        self.group, self.input_is_parallel = group, input_is_parallel
        self.sequence_parallel = sequence_parallel
        self.world, self.rank = n, _rank(group)
        self.local_in = in_features // n
        self.weight = torch.nn.Parameter(torch.empty(out_features, self.local_in, dtype=dtype))
        self.bias = torch.nn.Parameter(torch.empty(out_features, dtype=dtype)) if bias else None
        with torch.no_grad():
            _init_linear(self.weight, self.bias, in_features)

    def load_full(self, weight, bias=None):
        """Copies this rank's shard of the full weight [out, in] and the bias [out]."""
        _check_full("weight", weight, (self.out_features, self.in_features))
        with torch.no_grad():
            self.weight.copy_(shard_cols(weight, self.world, self.rank))
            if self.bias is not None:
                _check_full("bias", bias, (self.out_features,))
                self.bias.copy_(bias.detach())

    def full_parameters(self):
        """(weight, bias) of the whole layer, the weight gathered from the group (collective)."""
        bias = None if self.bias is None else self.bias.detach().clone()
        return gather_cols(self.weight, self.group), bias

    def forward(self, x):
        if not self.input_is_parallel:
            x = split_features(x, self.group)
        partial = F.linear(x, self.weight)
        if self.sequence_parallel:
            y = reduce_scatter_sequence(partial, self.group)
            return y if self.bias is None else _AddSequenceParallelBias.apply(y, self.bias,
                                                                              self.group)
        y = reduce_from_region(partial, self.group)
        return y if self.bias is None else y + self.bias

    def extra_repr(self):
        return (f"in_features={self.in_features} ({self.local_in} here, shard {self.rank} of "
                f"{self.world}), out_features={self.out_features}, "
                f"bias={self.bias is not None}, input_is_parallel={self.input_is_parallel}, "
                f"sequence_parallel={self.sequence_parallel}")


class VocabParallelEmbedding(torch.nn.Module):
    """An embedding table [num_embeddings, embedding_dim] split by vocabulary: this rank holds
    rows [r·V/n, (r+1)·V/n) (`weight`, [V/n, dim]).

    forward: each id in this rank's slice gets its row, every other id zeros; the all-reduce
    (sequence parallel: reduce-scatter along dim 0) then gives every id its row, exactly one rank
    having contributed it. Every id must be in [0, num_embeddings) (ValueError naming the first
    that is not, before any communication; every rank sees the same ids).
    """

    def __init__(self, num_embeddings, embedding_dim, group=None, sequence_parallel=False,
                 dtype=None):
        super().__init__()
        _check_positive("num_embeddings", num_embeddings)
        _check_positive("embedding_dim", embedding_dim)
        n = _size(group)
        _check_divides("num_embeddings", num_embeddings, n)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.group, self.sequence_parallel = group, sequence_parallel
        self.world, self.rank = n, _rank(group)
        self.local_vocab = num_embeddings // n
        self.vocab_begin = self.rank * self.local_vocab
        self.weight = torch.nn.Parameter(torch.empty(self.local_vocab, embedding_dim,
                                                     dtype=dtype))
        with torch.no_grad():
            torch.nn.init.normal_(self.weight)  # nn.Embedding's initialisation

    @classmethod
    def from_full(cls, weight, group=None, **kwargs):
        """A table holding this rank's vocabulary slice of the full weight [V, dim]."""
        num_embeddings, embedding_dim = weight.shape
        layer = cls(num_embeddings, embedding_dim, group, dtype=weight.dtype, **kwargs)
        layer.load_full(weight)
        return layer

    def load_full(self, weight):
        """Copies this rank's vocabulary slice of the full weight [V, dim]."""
        _check_full("weight", weight, (self.num_embeddings, self.embedding_dim))
        with torch.no_grad():
            self.weight.copy_(shard_rows(weight, self.world, self.rank))

    def full_parameters(self):
        """(weight,) of the whole table, gathered from the group (collective)."""
        return (gather_rows(self.weight, self.group),)

    def forward(self, ids):
        if ids.numel() > 0:
            bad = (ids < 0) | (ids >= self.num_embeddings)
            if bool(bad.any()):
                first = ids[bad].flatten()[0].item()
                raise ValueError(f"ccl_torch.tensor_parallel.VocabParallelEmbedding: id {first} "
                                 f"is outside [0, num_embeddings {self.num_embeddings})")
        if self.sequence_parallel:
            _check_divides("dim 0 (the sequence) of size", ids.shape[0], self.world)
        outside = (ids < self.vocab_begin) | (ids >= self.vocab_begin + self.local_vocab)
        local = (ids - self.vocab_begin).masked_fill(outside, 0)
        rows = F.embedding(local, self.weight).masked_fill(outside.unsqueeze(-1), 0.0)
        if self.sequence_parallel:
            return reduce_scatter_sequence(rows, self.group)
        return reduce_from_region(rows, self.group)

    def extra_repr(self):
        return (f"{self.num_embeddings}, {self.embedding_dim} (rows {self.vocab_begin}.."
                f"{self.vocab_begin + self.local_vocab - 1} here, shard {self.rank} of "
                f"{self.world}), sequence_parallel={self.sequence_parallel}")
