"""ZeRO (stages 1-3) for torch modules, cut as ccl's C++ engine (ccl::training::Zero) cuts them.

    import ccl_torch.zero as zero
    model = zero.ZeroDataParallel(net, stage=3, optimizer=zero.Adam(lr=1e-3), precision="bf16")
    for x, y in batches:                    # each rank its own slice of the global batch
        model.zero_grad()
        loss_fn(model(x), y).backward()     # gradients reduce-scattered as backward goes
        model.step()                        # the optimizer on this rank's slices
    model.save("ckpt/step100")              # ckpt/step100.zero-<rank>-of-<N>, one per rank
    full = model.full_state_dict()          # collective: whole float32 values

Layout. The parameters are grouped in *units* (by default every submodule that owns parameters
directly, in registration order; or the modules passed as `units`). A unit is one flat float32
buffer, padded to a multiple of the group size N, and its parameters are views into it; rank r
owns the r-th of its N equal slices (ccl_torch._training.zero_layout: the same units, slices and
pieces as the C++ engine). A unit is what is reduce-scattered (its gradients) and all-gathered
(its parameters) in one operation.

Per rank, with P the parameter bytes (float32) and N ranks:
  stage 1: parameters whole, gradients whole (P), reduce-scattered in step(); the optimizer state
           and, in a 16-bit precision, the float32 master values only for this rank's slices;
  stage 2: gradients reduce-scattered into this rank's slice (P/N) as the backward pass completes
           each unit, the unit's whole gradient freed then;
  stage 3: parameters too: a unit's working copy exists only between a forward pre-hook that
           all-gathers it (and starts the next units' gathers, in the order of the previous
           iteration) and its forward post-hook, and again from just before its backward until
           its gradients are reduce-scattered; the master slices (P/N) are the only lasting copy.

Precision "bf16" or "fp16": gradients and parameters travel in 16 bits and the working copies
are rounded to it (the module still computes in float32); the master slices and the optimizer
stay float32. memory() counts what is held, so the working copies count 4 bytes a value (as in
the C++ engine): 16 bits halve the bytes on the wire, not the memory.

The optimizer is one of ccl's C++ optimizers (Sgd, Adam/AdamW, Lamb, Lars, as torch.optim's
formulas), stepping on this rank's pieces (Lamb and Lars add up their per-tensor norms over the
group). Parameters of fewer than 2 dimensions are excluded from weight decay and from the trust
ratio unless `exclude` says otherwise.

Limits: parameters must be float32 CPU tensors; parameters with requires_grad=False are left
alone (whole on every rank, not updated); buffers are not synchronized; in stage 3 a parameter
may be used only inside its unit's forward (a module called through __call__): elsewhere it is
empty (shape [0]); one shared by two units must be in one unit (`units=`); gradients exist only
as this rank's slices once reduced (param.grad is None after the backward pass in stage 2 and 3).
Every rank must run the same modules in the same order.
"""
import dataclasses
import os

import torch
import torch.distributed as dist

from . import _training
from ._backend import backend_of

__all__ = ["ZeroDataParallel", "Sgd", "Adam", "AdamW", "Lamb", "Lars"]

_PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
_FORMAT = "ccl_torch.zero"
# torch 2.x's public names of the backend's _reduce_scatter_base and _allgather_base.
_reduce_scatter = dist.reduce_scatter_tensor
_all_gather = dist.all_gather_into_tensor
_VERSION = 1


# ---------------------------------------------------------------------------------------------
# Optimizer options: each makes one of ccl_torch._training's optimizers.

@dataclasses.dataclass
class Sgd:
    """torch.optim.SGD's update: d = g + weight_decay·x; with momentum, b = d at the first step,
    then momentum·b + (1 − dampening)·d, and d = d + momentum·b (nesterov) or b; x −= lr·d."""
    lr: float = 0.01
    momentum: float = 0.0
    dampening: float = 0.0
    weight_decay: float = 0.0
    nesterov: bool = False
    kind = "sgd"

    def _make(self):
        return _training.Sgd(float(self.lr), float(self.momentum), float(self.dampening),
                             float(self.weight_decay), bool(self.nesterov))


@dataclasses.dataclass
class Adam:
    """torch.optim.Adam's update (no amsgrad); decoupled=True: AdamW's weight decay."""
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False
    kind = "adam"

    def _make(self):
        b1, b2 = self.betas
        return _training.Adam(float(self.lr), float(b1), float(b2), float(self.eps),
                              float(self.weight_decay), bool(self.decoupled))


def AdamW(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01):
    """torch.optim.AdamW's update: Adam with decoupled weight decay."""
    return Adam(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, decoupled=True)


@dataclasses.dataclass
class Lamb:
    """LAMB (as ccl_torch.optim.Lamb): Adam moments with bias correction, weight decay in the
    update, and the per-tensor trust ratio min(‖x‖, clamp)/‖update‖ over the whole tensor."""
    lr: float = 1e-3
    betas: tuple = (0.9, 0.999)
    eps: float = 1e-6
    weight_decay: float = 0.01
    clamp: float = 10.0
    kind = "lamb"

    def _make(self):
        b1, b2 = self.betas
        return _training.Lamb(float(self.lr), float(b1), float(b2), float(self.eps),
                              float(self.weight_decay), float(self.clamp))


@dataclasses.dataclass
class Lars:
    """LARS (as ccl_torch.optim.Lars): momentum SGD with the per-tensor local learning rate
    trust_coefficient·‖x‖/(‖g‖ + weight_decay·‖x‖ + eps) over the whole tensor."""
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    trust_coefficient: float = 0.001
    eps: float = 0.0
    kind = "lars"

    def _make(self):
        return _training.Lars(float(self.lr), float(self.momentum), float(self.weight_decay),
                              float(self.trust_coefficient), float(self.eps))


_OPTIMIZERS = {"sgd": Sgd, "adam": Adam, "adamw": AdamW, "lamb": Lamb, "lars": Lars}


def _optimizer_options(optimizer):
    if isinstance(optimizer, (Sgd, Adam, Lamb, Lars)):
        return optimizer
    if isinstance(optimizer, str):
        optimizer = (optimizer, {})
    if not (isinstance(optimizer, (tuple, list)) and len(optimizer) == 2
            and isinstance(optimizer[0], str) and isinstance(optimizer[1], dict)):
        raise ValueError(f"ZeroDataParallel: optimizer must be a ccl_torch.zero.Sgd/Adam/Lamb/"
                         f"Lars object or a (name, options) pair, not {optimizer!r}")
    name, options = optimizer
    make = _OPTIMIZERS.get(name.lower())
    if make is None:
        raise ValueError(f"ZeroDataParallel: optimizer {name!r} is unknown; it takes one of "
                         f"{', '.join(sorted(_OPTIMIZERS))}")
    try:
        return make(**options)
    except TypeError as e:
        raise ValueError(f"ZeroDataParallel: optimizer {name!r}: {e}") from None


# ---------------------------------------------------------------------------------------------

_RELEASED, _GATHERING, _GATHERED = 0, 1, 2
_RELEASED_PARAM = torch.empty(0)   # what a released parameter holds (stage 3)


class _Unit:
    """One unit: its parameters, flat working buffer, master and gradient slices."""

    def __init__(self, index, module, module_name):
        self.index = index
        self.module = module
        self.module_name = module_name
        self.params = []        # torch.nn.Parameter, in order
        self.names = []
        self.shapes = []        # their shapes (a released parameter's own is [0])
        self.first = 0          # global index of its first parameter
        self.count = 0
        self.shard = 0
        self.padded = 0
        self.offsets = []
        self.pieces = []        # (global param, param_offset, shard_offset, count)
        self.flat = None        # float32 [padded]: the working parameters
        self.master = None      # float32 [shard]: this rank's master slice
        self.grad_shard = None  # float32 [shard]: this rank's averaged gradient slice
        self.grad_fresh = True  # grad_shard holds zeros (the next reduction may overwrite it)
        self.grad_flat = None   # float32 [padded]: whole gradients (stage 1; 2/3 in backward)
        self.state = _GATHERED
        self.gather = None      # (work, 16-bit receive buffer or None, 16-bit send or None)
        self.ready = set()      # local parameter indices whose gradient is complete
        self.complete = False


class _Reduction:
    def __init__(self, unit, work, send, out, overwrite):
        self.unit = unit
        self.work = work
        self.send = send            # the input, kept until the exchange is done
        self.out = out              # the output: the gradient slice itself, or a buffer
        self.overwrite = overwrite  # the result replaces the slice (else adds to it)


def _tensors_in(value, out):
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif isinstance(value, (tuple, list)):
        for v in value:
            _tensors_in(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            _tensors_in(v, out)
    return out


def _world_rank(group, rank):
    if group is dist.group.WORLD or group is dist.distributed_c10d._get_default_group():
        return rank
    return dist.distributed_c10d.get_global_rank(group, rank)


class ZeroDataParallel(torch.nn.Module):
    """ZeRO data parallelism of `module` over `group` (default: the world group, which must be
    ccl's).

    stage: 1 (optimizer state sharded), 2 (and gradients), 3 (and parameters).
    optimizer: a ccl_torch.zero.Sgd/Adam/AdamW/Lamb/Lars object, or (name, options) with name
        "sgd", "adam", "adamw", "lamb" or "lars" and the options of that class.
    precision: "fp32", "bf16" or "fp16" (what gradients and parameters travel as).
    units: the submodules whose parameters form one unit each (a parameter in none of them goes
        to a unit of `module` itself); default: every submodule owning parameters directly.
    prefetch: stage 3: how many units a gather starts ahead (0: none).
    reductions_in_flight: stage 2, 3: at most this many units' reduce-scatters queued at once
        (launching another first waits for the oldest, whose whole gradient then goes), as the
        C++ engine's ZeroOptions::reductions_in_flight.
    exclude: which parameters skip weight decay and the trust ratio: a function (name, param) ->
        bool, or a collection of parameter names or parameters; default: those of < 2 dims.

    Every rank's `module` gets rank 0's values (a broadcast, as DDP does). The wrapper's
    forward runs `module`; the backward pass reduces gradients (stage 2, 3); step() averages
    what is left, steps the optimizer and (stage 1, 2) all-gathers the new parameters. Raises
    ValueError naming the argument that is wrong.
    """

    def __init__(self, module, *, stage=2, optimizer=("adam", {"lr": 1e-3}), precision="fp32",
                 group=None, units=None, prefetch=1, exclude=None, reductions_in_flight=2):
        super().__init__()
        if not isinstance(module, torch.nn.Module):
            raise ValueError(f"ZeroDataParallel: module must be a torch.nn.Module, not "
                             f"{type(module).__name__}")
        if stage not in (1, 2, 3) or isinstance(stage, bool):
            raise ValueError(f"ZeroDataParallel: stage must be 1, 2 or 3, not {stage!r}")
        if precision not in _PRECISIONS:
            raise ValueError(f"ZeroDataParallel: precision must be 'fp32', 'bf16' or 'fp16', not "
                             f"{precision!r}")
        if not isinstance(prefetch, int) or isinstance(prefetch, bool) or prefetch < 0:
            raise ValueError(f"ZeroDataParallel: prefetch must be an int >= 0, not {prefetch!r}")
        if not isinstance(reductions_in_flight, int) or isinstance(reductions_in_flight, bool) \
                or reductions_in_flight < 1:
            raise ValueError(f"ZeroDataParallel: reductions_in_flight must be an int >= 1, not "
                             f"{reductions_in_flight!r}")
        self._reductions_in_flight = reductions_in_flight
        self._options = _optimizer_options(optimizer)
        self._opt = self._options._make()   # ValueError (from C++) for options out of range
        if group is None:
            if not dist.is_initialized():
                raise RuntimeError("ZeroDataParallel: group is None and torch.distributed is not "
                                   "initialized: call init_process_group(ccl_torch.BACKEND) first")
            group = dist.group.WORLD
        try:
            self._backend = backend_of(group, "ZeroDataParallel")
        except RuntimeError as e:
            raise ValueError(str(e)) from None
        self.module = module
        self.stage = stage
        self.precision = precision
        self.prefetch = prefetch
        self._dtype = _PRECISIONS[precision]
        self._group = group
        self._nranks = group.size()
        self._rank = group.rank()

        self._units = self._make_units(module, units)
        self._params = [p for u in self._units for p in u.params]
        self._names = [n for u in self._units for n in u.names]
        self._exclude = self._resolve_exclude(exclude)
        counts = [p.numel() for p in self._params]
        unit_of = [u.index for u in self._units for _ in u.params]
        self._unit_of = unit_of
        layout = _training.zero_layout(counts, unit_of, self._nranks, self._rank)
        self._counts = counts
        for u, lay in zip(self._units, layout):
            assert lay["first_param"] == u.first and lay["params"] == len(u.params)
            u.count, u.shard = lay["count"], lay["shard"]
            u.padded = u.shard * self._nranks
            u.offsets = list(lay["offsets"])
            u.pieces = [tuple(piece) for piece in lay["pieces"]]
        self._build_buffers()
        self._refs = self._piece_refs()

        self._grad_accs = []   # the AccumulateGrad nodes (held, so their hooks stay)
        self._handles = []
        self._register_hooks()
        self._in_flight = []          # reductions launched, not yet finished
        self._next_reduce = len(self._units) - 1
        self._backward_seen = False   # a gradient arrived since the last step()
        self._callback_queued = False
        self._order, self._last_order, self._position = [], [], 0
        self._prefetched = 0          # gathers started ahead (stage 3), for the tests
        self._peak = None
        self._track()

    # --- construction ---------------------------------------------------------------------

    def _make_units(self, module, units):
        names = {id(p): n for n, p in module.named_parameters()}
        module_names = {id(m): n for n, m in module.named_modules()}
        claimed = {}
        groups = []   # (module, [params])
        if units is None:
            for m in module.modules():
                mine = []
                for p in m._parameters.values():
                    if p is None or not p.requires_grad:
                        continue
                    if id(p) in claimed:
                        if self.stage == 3 and claimed[id(p)] is not m:
                            raise ValueError(
                                f"ZeroDataParallel: units: parameter {names[id(p)]!r} is shared "
                                f"by {module_names.get(id(claimed[id(p)]), '?')!r} and "
                                f"{module_names.get(id(m), '?')!r}; stage 3 needs them in one "
                                "unit: pass units= with a module that holds both")
                        continue
                    claimed[id(p)] = m
                    mine.append(p)
                if mine:
                    groups.append((m, mine))
        else:
            units = list(units)
            for i, m in enumerate(units):
                if not isinstance(m, torch.nn.Module) or id(m) not in module_names:
                    raise ValueError(f"ZeroDataParallel: units[{i}] is not a submodule of module")
                mine = []
                for p in m.parameters():
                    if not p.requires_grad:
                        continue
                    if id(p) in claimed:
                        raise ValueError(f"ZeroDataParallel: units: parameter {names[id(p)]!r} is "
                                         f"in units[{claimed[id(p)]}] and units[{i}]")
                    claimed[id(p)] = i
                    mine.append(p)
                if mine:
                    groups.append((m, mine))
            rest = [p for p in module.parameters() if p.requires_grad and id(p) not in claimed]
            if rest:   # gathered for the whole forward (stage 3): module's own unit, first
                groups.insert(0, (module, rest))
        if not groups:
            raise ValueError("ZeroDataParallel: module has no parameter that requires a gradient")
        out, first = [], 0
        for index, (m, params) in enumerate(groups):
            u = _Unit(index, m, module_names.get(id(m), ""))
            u.first = first
            first += len(params)
            for p in params:
                name = names[id(p)]
                if p.dtype != torch.float32 or p.device.type != "cpu" or p.is_sparse:
                    raise ValueError(f"ZeroDataParallel: parameter {name!r} is {p.dtype} on "
                                     f"{p.device}; ZeRO takes float32 CPU parameters")
                if p.numel() == 0:
                    raise ValueError(f"ZeroDataParallel: parameter {name!r} is empty")
                u.params.append(p)
                u.names.append(name)
                u.shapes.append(p.shape)
            out.append(u)
        return out

    def _resolve_exclude(self, exclude):
        if exclude is None:
            return [p.dim() < 2 for p in self._params]
        if callable(exclude):
            return [bool(exclude(n, p)) for n, p in zip(self._names, self._params)]
        try:
            items = list(exclude)
        except TypeError:
            raise ValueError("ZeroDataParallel: exclude must be None, a function (name, param) -> "
                             "bool, or a collection of parameter names or parameters") from None
        names = {x for x in items if isinstance(x, str)}
        ids = {id(x) for x in items if isinstance(x, torch.Tensor)}
        unknown = sorted(names - set(self._names))
        if unknown or len(names) + len(ids) != len(items):
            what = unknown or "an object that is neither a name nor a tensor"
            raise ValueError(f"ZeroDataParallel: exclude names what is not a parameter of module: "
                             f"{what}")
        return [n in names or id(p) in ids for n, p in zip(self._names, self._params)]

    def _build_buffers(self):
        src = _world_rank(self._group, 0)
        sixteen = self._dtype != torch.float32
        with torch.no_grad():
            for u in self._units:
                flat = torch.zeros(u.padded, dtype=torch.float32)
                for p, off in zip(u.params, u.offsets):
                    flat[off:off + p.numel()].copy_(p.detach().reshape(-1))
                if self._nranks > 1:
                    dist.broadcast(flat, src, group=self._group)
                mine = flat[self._rank * u.shard:(self._rank + 1) * u.shard]
                if self.stage == 3 or sixteen:
                    u.master = mine.clone()
                else:
                    u.master = mine   # stage 1/2 in fp32: the working copy's own slice
                if sixteen:
                    flat.copy_(flat.to(self._dtype))   # the working copy, rounded
                u.flat = flat
                self._point_params(u)
                u.grad_shard = torch.zeros(u.shard, dtype=torch.float32)
                if self.stage == 1:
                    u.grad_flat = torch.zeros(u.padded, dtype=torch.float32)
                    self._attach_grads(u)

    def _piece_refs(self):
        refs = []
        for u in self._units:
            base_x = u.master.data_ptr()
            base_g = u.grad_shard.data_ptr()
            for param, _, shard_offset, count in u.pieces:
                refs.append((base_x + 4 * shard_offset, base_g + 4 * shard_offset, count,
                             self._exclude[param], param))
        return refs

    def _register_hooks(self):
        for u in self._units:
            for local, p in enumerate(u.params):
                with torch.enable_grad():
                    acc = p.expand_as(p).grad_fn.next_functions[0][0]
                acc.register_hook(self._make_ready_hook(u, local))
                self._grad_accs.append(acc)
            if self.stage == 3:
                self._handles.append(u.module.register_forward_pre_hook(
                    self._make_pre_forward(u)))
            if self.stage >= 2:
                self._handles.append(u.module.register_forward_hook(self._make_post_forward(u)))
        if self.stage == 3:
            for u in self._units:
                self._release(u)

    # --- hooks ----------------------------------------------------------------------------

    def _make_pre_forward(self, u):
        def hook(module, inputs):
            self._gather(u)
        return hook

    def _make_post_forward(self, u):
        def hook(module, inputs, output):
            if self.stage == 3:
                self._release(u)
            if torch.is_grad_enabled():
                for t in _tensors_in(output, []):
                    if t.requires_grad:
                        t.register_hook(self._make_pre_backward(u))
        return hook

    def _make_pre_backward(self, u):
        def hook(grad):
            self._queue_callback()
            if self.stage == 3:
                self._gather(u)
            if u.grad_flat is None:
                self._finish_done()   # free what finished before allocating more
                u.grad_flat = torch.zeros(u.padded, dtype=torch.float32)
                self._attach_grads(u)
                self._track()
        return hook

    def _make_ready_hook(self, u, local):
        def hook(*unused):
            self._backward_seen = True
            if self.stage == 1:
                return
            self._queue_callback()
            p = u.params[local]
            if u.grad_flat is None:   # its gradient came before the unit's pre-backward hook
                u.grad_flat = torch.zeros(u.padded, dtype=torch.float32)
                self._attach_grads(u)
            view = self._grad_view(u, local)
            if p.grad is not None and p.grad.data_ptr() != view.data_ptr():
                view.add_(p.grad.reshape(view.shape))   # accumulated elsewhere: bring it in
                p.grad = view
            if local not in u.ready:
                u.ready.add(local)
                if len(u.ready) == len(u.params):
                    u.complete = True
                    self._launch_ready()
        return hook

    def _queue_callback(self):
        if not self._callback_queued:
            self._callback_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)

    def _end_of_backward(self):
        """At the end of a backward pass: the units not reduced yet (one of their parameters
        got no gradient: zeros for it) are now, in decreasing order; stage 3 releases all."""
        self._callback_queued = False
        while self._next_reduce >= 0:
            self._launch_reduce(self._units[self._next_reduce])
            self._next_reduce -= 1
        self._next_reduce = len(self._units) - 1
        for u in self._units:
            u.ready.clear()
            u.complete = False
            if self.stage == 3:
                self._release(u)
        self._track()

    # --- gradients ------------------------------------------------------------------------

    def _grad_view(self, u, local):
        shape, off = u.shapes[local], u.offsets[local]
        return u.grad_flat[off:off + shape.numel()].view(shape)

    def _attach_grads(self, u):
        for local, p in enumerate(u.params):
            p.grad = self._grad_view(u, local)

    def _launch_ready(self):
        while self._next_reduce >= 0 and self._units[self._next_reduce].complete:
            self._launch_reduce(self._units[self._next_reduce])
            self._next_reduce -= 1
        self._finish_done()

    def _launch_reduce(self, u):
        """Starts unit u's reduce-scatter (AVG) into its gradient slice, once fewer than
        reductions_in_flight are queued (the oldest finished first: launch order)."""
        while self.stage >= 2 and len(self._in_flight) >= self._reductions_in_flight:
            self._finish(self._in_flight.pop(0))
        if u.grad_flat is None:
            u.grad_flat = torch.zeros(u.padded, dtype=torch.float32)
        # Stage 1 reduces the whole accumulated gradient; stage 2 and 3 add each backward
        # pass's average to the slice until zero_grad().
        overwrite = self.stage == 1 or u.grad_fresh
        if self._dtype != torch.float32:
            send = u.grad_flat.to(self._dtype)
            out = torch.empty(u.shard, dtype=self._dtype)
        else:
            send = u.grad_flat
            out = u.grad_shard if overwrite else torch.empty(u.shard, dtype=torch.float32)
        work = _reduce_scatter(out, send, op=dist.ReduceOp.AVG, group=self._group, async_op=True)
        self._in_flight.append(_Reduction(u, work, send, out, overwrite))
        u.grad_fresh = False
        if self.stage >= 2:
            for p in u.params:
                p.grad = None
            u.grad_flat = None
            if self.stage == 3:
                self._release(u)
        self._track()

    def _finish(self, r):
        r.work.wait()
        if r.out is r.unit.grad_shard:
            return
        with torch.no_grad():
            if r.overwrite:
                r.unit.grad_shard.copy_(r.out)
            else:
                r.unit.grad_shard.add_(r.out.float())

    def _finish_done(self):
        """Finishes the reductions already complete, in launch order (freeing their buffers)."""
        done = 0
        while done < len(self._in_flight) and self._in_flight[done].work.is_completed():
            self._finish(self._in_flight[done])
            done += 1
        del self._in_flight[:done]

    def _finish_all(self):
        for r in self._in_flight:
            self._finish(r)
        self._in_flight = []

    # --- parameters (stage 3) -------------------------------------------------------------

    def _gather(self, u):
        """Makes u's parameters present and starts the prefetch of the next units."""
        if u.state == _GATHERED:
            return
        self._order.append(u.index)
        if u.state == _RELEASED:
            self._launch_gather(u)
        for k in self._next_in_order(u.index):
            if self._units[k].state == _RELEASED:
                self._launch_gather(self._units[k])
                self._prefetched += 1
        self._wait_gather(u)
        self._track()

    def _next_in_order(self, index):
        last = self._last_order
        if not last or self.prefetch == 0:
            return []
        pos = self._position
        while pos < len(last) and last[pos] != index:
            pos += 1
        if pos == len(last):
            return []
        self._position = pos + 1
        return last[pos + 1:pos + 1 + self.prefetch]

    def _launch_gather(self, u):
        u.flat.storage().resize_(u.padded)
        if self._dtype != torch.float32:
            send = u.master.to(self._dtype)
            recv = torch.empty(u.padded, dtype=self._dtype)
            work = _all_gather(recv, send, group=self._group, async_op=True)
            u.gather = (work, recv, send)
        else:
            work = _all_gather(u.flat, u.master, group=self._group, async_op=True)
            u.gather = (work, None, None)
        u.state = _GATHERING

    def _wait_gather(self, u):
        if u.state != _GATHERING:
            return
        work, recv, _ = u.gather
        work.wait()
        if recv is not None:
            with torch.no_grad():
                u.flat.copy_(recv)
        u.gather = None
        u.state = _GATHERED
        self._point_params(u)

    @staticmethod
    def _point_params(u):
        """The unit's parameters become views of its flat buffer."""
        for p, shape, off in zip(u.params, u.shapes, u.offsets):
            p.data = u.flat[off:off + shape.numel()].view(shape)

    def _release(self, u):
        if self.stage != 3 or u.state == _RELEASED:
            return
        self._wait_gather(u)
        # The parameters become empty (a use outside the unit fails on its shape, where a view
        # of the freed buffer would read freed memory); the buffer's memory goes.
        for p in u.params:
            p.data = _RELEASED_PARAM
        u.flat.storage().resize_(0)
        u.state = _RELEASED

    # --- the step -------------------------------------------------------------------------

    def step(self):
        """Averages the gradients over the group (stage 1 now; stage 2 and 3 wait for theirs),
        steps the optimizer on this rank's slices and (stage 1, 2) all-gathers the new
        parameters. Collective. RuntimeError when no backward pass ran since the last step()."""
        if not self._backward_seen:
            raise RuntimeError("ZeroDataParallel.step(): no gradient since the last step(): run "
                               "the backward pass first")
        if self.stage == 1:
            for u in reversed(self._units):
                self._launch_reduce(u)
        self._finish_all()
        self._track()
        refs, tensors, opt = self._refs, len(self._params), self._opt
        self._backend._run_exclusive(lambda comm: opt.step_sharded(refs, tensors, comm))
        if self.stage == 3:
            for u in self._units:   # a prefetch no forward used: stale now
                self._release(u)
        else:
            self._gather_working_copies()
        self._backward_seen = False
        self._last_order, self._order, self._position = self._order, [], 0
        self._track()

    def _gather_working_copies(self):
        launched = []
        for u in self._units:
            if self._dtype != torch.float32:
                send = u.master.to(self._dtype)
                recv = torch.empty(u.padded, dtype=self._dtype)
            else:   # in place: the master is the working copy's own slice
                send, recv = u.master, u.flat
            work = _all_gather(recv, send, group=self._group, async_op=True)
            launched.append((u, work, recv, send))
        with torch.no_grad():
            for u, work, recv, _ in launched:
                work.wait()
                if recv is not u.flat:
                    u.flat.copy_(recv)

    def zero_grad(self, set_to_none=None):
        """Zeroes the gradients (stage 1: the whole ones; stage 2, 3: this rank's slices, after
        any reduction in flight). `set_to_none` is accepted for torch's signature and ignored."""
        self._finish_all()
        for u in self._units:
            u.grad_shard.zero_()
            u.grad_fresh = True
            if self.stage == 1:
                u.grad_flat.zero_()
                self._attach_grads(u)
            else:
                u.grad_flat = None
                for p in u.params:
                    p.grad = None

    def forward(self, *args, **kwargs):
        if self.stage == 1 and torch.is_grad_enabled():
            for u in self._units:   # grads set to None elsewhere: views of the buffer again
                for local, p in enumerate(u.params):
                    if p.grad is None or p.grad.data_ptr() != self._grad_view(u, local).data_ptr():
                        self._attach_grads(u)
                        break
        return self.module(*args, **kwargs)

    # --- learning rate, memory ------------------------------------------------------------

    @property
    def optimizer(self):
        """The C++ optimizer (ccl_torch._training): set_lr, steps, state_bytes."""
        return self._opt

    def set_lr(self, lr):
        """The learning rate of the next steps."""
        self._opt.set_lr(float(lr))

    @property
    def units(self):
        """[(module name, [parameter names])] per unit, in unit order."""
        return [(u.module_name, list(u.names)) for u in self._units]

    def _state_bytes(self):
        v = self._opt.state_bytes
        return int(v() if callable(v) else v)

    def _held(self):
        params = master = grads = 0
        for u in self._units:
            params += u.flat.storage().size() * 4
            if u.gather is not None and u.gather[1] is not None:
                params += (u.gather[1].numel() + u.gather[2].numel()) * u.gather[1].element_size()
            if self.stage == 3 or self._dtype != torch.float32:
                master += u.master.numel() * 4
            grads += u.grad_shard.numel() * 4
            if u.grad_flat is not None:
                grads += u.grad_flat.numel() * 4
        for r in self._in_flight:
            if r.send is not r.unit.grad_flat:
                grads += r.send.numel() * r.send.element_size()
            if r.out is not r.unit.grad_shard:
                grads += r.out.numel() * r.out.element_size()
        return {"parameters": params, "master": master, "gradients": grads,
                "optimizer": self._state_bytes()}

    def _track(self):
        held = self._held()
        if self._peak is None or sum(held.values()) > sum(self._peak.values()):
            self._peak = held

    def memory(self):
        """Bytes this rank holds now, by kind: {"parameters": working copies (whole, or the
        gathered units in stage 3), "master": float32 master slices (stage 3 or 16-bit),
        "gradients": whole gradients and slices, and buffers in flight, "optimizer": optimizer
        state, "total": their sum}."""
        held = self._held()
        held["total"] = sum(held.values())
        return held

    def peak_memory(self):
        """memory() at the moment its total was highest (since construction or
        reset_peak_memory()); tracked at each exchange, allocation and step."""
        self._track()
        peak = dict(self._peak)
        peak["total"] = sum(peak.values())
        return peak

    def reset_peak_memory(self):
        self._peak = None
        self._track()

    # --- whole values, checkpoints --------------------------------------------------------

    def full_state_dict(self):
        """Collective: {name: whole float32 master value} of every parameter of `module` (the
        ones not trained as they are), and its buffers."""
        out = {}
        with torch.no_grad():
            for u in self._units:
                whole = torch.empty(u.padded, dtype=torch.float32)
                _all_gather(whole, u.master.clone(), group=self._group)
                for shape, name, off in zip(u.shapes, u.names, u.offsets):
                    out[name] = whole[off:off + shape.numel()].view(shape).clone()
            managed = {id(p) for p in self._params}
            for name, p in self.module.named_parameters():
                if id(p) not in managed:
                    out[name] = p.detach().clone()
            for name, b in self.module.named_buffers():
                out[name] = b.detach().clone()
        return out

    def _describe(self):
        return {"nranks": self._nranks, "rank": self._rank, "stage": self.stage,
                "precision": self.precision, "counts": list(self._counts),
                "units": list(self._unit_of), "optimizer": self._options.kind}

    def checkpoint_path(self, prefix):
        return f"{prefix}.zero-{self._rank}-of-{self._nranks}"

    def save(self, prefix):
        """Writes this rank's master slices and optimizer state to
        `prefix + ".zero-<rank>-of-<N>"`. Not collective (a rank may save alone). Call it
        between step() and the next backward pass."""
        blob = self._opt.save_state(self._refs)
        state = dict(self._describe(), format=_FORMAT, version=_VERSION,
                     masters=[u.master.clone() for u in self._units],
                     optimizer_state=bytes(blob))
        path = self.checkpoint_path(prefix)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        torch.save(state, path)
        return path

    def load(self, prefix):
        """Reads what save() wrote for this rank; stage 1 and 2 then all-gather the working
        parameters (collective). ValueError naming what does not match (group size, stage,
        precision, parameters, units, optimizer)."""
        path = self.checkpoint_path(prefix)
        state = torch.load(path)
        if not isinstance(state, dict) or state.get("format") != _FORMAT:
            raise ValueError(f"ZeroDataParallel.load: {path} is not a ccl_torch.zero checkpoint")
        if state.get("version") != _VERSION:
            raise ValueError(f"ZeroDataParallel.load: {path} has version {state.get('version')}, "
                             f"this reads {_VERSION}")
        mine = self._describe()
        for key, value in mine.items():
            if state.get(key) != value:
                what = {"counts": "parameter counts", "units": "units of the parameters",
                        "nranks": "group size"}.get(key, key)
                raise ValueError(f"ZeroDataParallel.load: {path}: the {what} differ (saved "
                                 f"{state.get(key)!r}, here {value!r})")
        self._finish_all()
        self._opt.load_state(self._refs, state["optimizer_state"])
        with torch.no_grad():
            for u, m in zip(self._units, state["masters"]):
                u.master.copy_(m)
        self.zero_grad()
        if self.stage == 3:
            for u in self._units:
                self._release(u)
        else:
            self._gather_working_copies()
        self._backward_seen = False
        self._track()
