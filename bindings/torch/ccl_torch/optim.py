"""LAMB and LARS as torch optimizers, running ccl's C++ implementations (ccl::training).

    opt = ccl_torch.optim.Lamb(ccl_torch.optim.exclude_bias_and_norm(model), lr=1e-3)

Parameters must be contiguous float32 CPU tensors with dense gradients. A parameter group with
`exclude=True` is left out of weight decay and of the layer-wise trust ratio (biases and
normalization weights, as the LAMB and LARS papers do); `exclude_bias_and_norm(model)` makes
those groups. The step count (LAMB's bias correction) is the optimizer's, as in the paper.
"""
import torch

from . import _training

__all__ = ["Lamb", "Lars", "exclude_bias_and_norm"]


def exclude_bias_and_norm(model):
    """Two parameter groups: the tensors of 2 or more dimensions, and the rest (biases and
    normalization weights) with exclude=True."""
    decay, rest = [], []
    for p in model.parameters():
        if p.requires_grad:
            (decay if p.dim() >= 2 else rest).append(p)
    return [{"params": decay}, {"params": rest, "exclude": True}]


class _CclOptimizer(torch.optim.Optimizer):
    def __init__(self, params, defaults):
        defaults.setdefault("exclude", False)
        super().__init__(params, defaults)
        self._impl = {}

    def _make(self, group):
        raise NotImplementedError

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for index, group in enumerate(self.param_groups):
            refs = []
            for p in group["params"]:
                if p.grad is None:
                    continue
                for what, t in (("parameter", p), ("gradient", p.grad)):
                    if t.dtype != torch.float32 or t.device.type != "cpu" or t.is_sparse \
                            or not t.is_contiguous():
                        raise RuntimeError(f"ccl_torch.optim.{type(self).__name__}: a {what} is "
                                           f"{t.dtype} on {t.device} (sparse {t.is_sparse}, "
                                           f"contiguous {t.is_contiguous()}); it takes contiguous "
                                           "dense float32 CPU tensors")
                refs.append((p.data_ptr(), p.grad.data_ptr(), p.numel(), bool(group["exclude"])))
            if not refs:
                continue
            impl = self._impl.get(index)
            if impl is None:
                impl = self._impl[index] = self._make(group)
            impl.set_lr(group["lr"])
            impl.step(refs)
        return loss


class Lamb(_CclOptimizer):
    """LAMB (You et al. 2019): Adam moments with bias correction, decoupled weight decay, and a
    per-tensor trust ratio min(||x||, clamp) / ||update||."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
                 clamp=10.0):
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      clamp=clamp))

    def _make(self, group):
        b1, b2 = group["betas"]
        return _training.Lamb(group["lr"], b1, b2, group["eps"], group["weight_decay"],
                              group["clamp"])


class Lars(_CclOptimizer):
    """LARS (You et al. 2017): momentum SGD with a per-tensor local learning rate
    trust_coefficient * ||x|| / (||g|| + weight_decay * ||x|| + eps)."""

    def __init__(self, params, lr=0.1, momentum=0.9, weight_decay=1e-4, trust_coefficient=0.001,
                 eps=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay,
                                      trust_coefficient=trust_coefficient, eps=eps))

    def _make(self, group):
        return _training.Lars(group["lr"], group["momentum"], group["weight_decay"],
                              group["trust_coefficient"], group["eps"])
