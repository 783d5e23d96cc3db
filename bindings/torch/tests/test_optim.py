"""ccl's optimizers from Python (ccl_torch._training: Sgd, Adam, Lamb, Lars): SGD and Adam/AdamW
against torch.optim's own, saved and loaded state, and sharded steps over a ccl process group
against the whole-tensor step."""
import unittest

import torch
import torch.distributed as dist

import ccl_torch
from ccl_torch import _training
from ccl_torch_testing import run_ranks


def refs(params, grads, exclude):
    return [(p.data_ptr(), g.data_ptr(), p.numel(), ex) for p, g, ex in zip(params, grads, exclude)]


def model_tensors(seed):
    gen = torch.Generator().manual_seed(seed)
    shapes = [(7, 5), (33,), (3, 4, 2), (1,)]
    return [torch.randn(s, generator=gen) for s in shapes], [False, False, False, True]


def step_both(ours, theirs_factory, seed, steps=4):
    """Steps ccl's optimizer and torch's (two groups: decayed, excluded with weight_decay 0) on
    the same tensors and gradients; returns both parameter lists."""
    params, exclude = model_tensors(seed)
    mine = [p.clone() for p in params]
    torch_params = [torch.nn.Parameter(p.clone()) for p in params]
    theirs = theirs_factory([
        {"params": [p for p, ex in zip(torch_params, exclude) if not ex]},
        {"params": [p for p, ex in zip(torch_params, exclude) if ex], "weight_decay": 0.0}])
    gen = torch.Generator().manual_seed(seed + 100)
    for _ in range(steps):
        grads = [torch.randn(p.shape, generator=gen) for p in params]
        ours.step(refs(mine, grads, exclude))
        for p, g in zip(torch_params, grads):
            p.grad = g.clone()
        theirs.step()
    return mine, [p.detach() for p in torch_params]


class AgainstTorch(unittest.TestCase):
    def assert_same(self, mine, theirs):
        for a, b in zip(mine, theirs):
            torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)

    def test_sgd_matches_torch_optim_sgd(self):
        cases = [dict(lr=0.1), dict(lr=0.1, momentum=0.9), dict(lr=0.1, momentum=0.9, dampening=0.3),
                 dict(lr=0.05, momentum=0.8, weight_decay=0.01, nesterov=True),
                 dict(lr=0.1, weight_decay=0.05)]
        for i, kw in enumerate(cases):
            with self.subTest(**kw):
                mine, theirs = step_both(_training.Sgd(**kw),
                                         lambda groups: torch.optim.SGD(groups, **kw), seed=i)
                self.assert_same(mine, theirs)

    def test_adam_and_adamw_match_torch_optim(self):
        cases = [(dict(lr=0.01), torch.optim.Adam, {}),
                 (dict(lr=0.01, weight_decay=0.1), torch.optim.Adam, {}),
                 (dict(lr=0.01, beta1=0.8, beta2=0.99, eps=1e-6, weight_decay=0.1, decoupled=True),
                  torch.optim.AdamW, dict(betas=(0.8, 0.99)))]
        for i, (kw, cls, extra) in enumerate(cases):
            with self.subTest(cls=cls.__name__, **kw):
                torch_kw = {k: v for k, v in kw.items()
                            if k in ("lr", "eps", "weight_decay")}
                torch_kw.update(extra)
                if cls is torch.optim.AdamW:
                    torch_kw.setdefault("weight_decay", 0.0)
                mine, theirs = step_both(_training.Adam(**kw),
                                         lambda groups: cls(groups, **torch_kw), seed=10 + i)
                self.assert_same(mine, theirs)

    def test_refuses_bad_options_and_refs(self):
        with self.assertRaisesRegex(ValueError, "nesterov"):
            _training.Sgd(lr=0.1, nesterov=True)
        with self.assertRaisesRegex(ValueError, "beta2 = 1"):
            _training.Adam(beta2=1.0)
        x, g = torch.ones(3), torch.ones(3)
        with self.assertRaisesRegex(ValueError, "not a tuple of 3"):
            _training.Sgd().step([(x.data_ptr(), g.data_ptr(), 3)])


class State(unittest.TestCase):
    def test_a_loaded_optimizer_continues_as_the_original(self):
        for make in (lambda: _training.Sgd(lr=0.1, momentum=0.9),
                     lambda: _training.Adam(lr=0.01, weight_decay=0.1, decoupled=True),
                     lambda: _training.Lamb(0.01, 0.9, 0.999, 1e-6, 0.01, 10.0),
                     lambda: _training.Lars(0.5, 0.9, 1e-4, 0.001, 0.0)):
            params, exclude = model_tensors(3)
            copies = [p.clone() for p in params]
            first, second = make(), make()
            gen = torch.Generator().manual_seed(4)
            grads = [torch.randn(p.shape, generator=gen) for p in params]
            first.step(refs(params, grads, exclude))
            blob = first.save_state(refs(params, grads, exclude))
            self.assertIsInstance(blob, bytes)
            self.assertTrue(blob.startswith(b"CCLOPTIM"))
            for c, p in zip(copies, params):
                c.copy_(p)
            second.load_state(refs(copies, grads, exclude), blob)
            self.assertEqual(second.steps, 1)
            self.assertEqual(second.state_bytes, first.state_bytes)
            first.step(refs(params, grads, exclude))
            second.step(refs(copies, grads, exclude))
            for a, b in zip(params, copies):
                self.assertTrue(torch.equal(a, b))
            with self.assertRaisesRegex(ValueError, "refs, but 1 were given"):
                make().load_state(refs(copies, grads, exclude)[:1], blob)


# Uneven tensors, flattened and cut at 70 (inside tensor 1) between 2 ranks.
SIZES = [35, 60, 5, 20]
CUT = 70


def sharded_step_equals_the_whole(rank, size):
    pg = dist.group.WORLD
    offsets = [sum(SIZES[:i]) for i in range(len(SIZES) + 1)]
    gen = torch.Generator().manual_seed(8)
    flat = torch.rand(offsets[-1], generator=gen) + 0.5
    grads = [torch.randn(offsets[-1], generator=gen) for _ in range(3)]
    exclude = [False, False, True, False]
    lo, hi = (0, CUT) if rank == 0 else (CUT, offsets[-1])
    makers = [lambda: _training.Sgd(lr=0.1, momentum=0.9),
              lambda: _training.Adam(lr=0.01, decoupled=True, weight_decay=0.1),
              lambda: _training.Lamb(0.05, 0.9, 0.99, 1e-6, 0.1, 2.0),
              lambda: _training.Lars(0.5, 0.9, 0.01, 0.02, 1e-8)]
    for make in makers:
        whole, mine, opt, ref = flat.clone(), flat[lo:hi].clone(), make(), make()
        g_mine = torch.empty(hi - lo)
        for step in range(3):
            ref.step([(whole[offsets[t]:].data_ptr(), grads[step][offsets[t]:].data_ptr(),
                       SIZES[t], exclude[t]) for t in range(len(SIZES))])
            g_mine.copy_(grads[step][lo:hi])
            pieces = []
            for t in range(len(SIZES)):
                b, e = max(lo, offsets[t]), min(hi, offsets[t + 1])
                if b < e:
                    pieces.append((mine[b - lo:].data_ptr(), g_mine[b - lo:].data_ptr(), e - b,
                                   exclude[t], t))
            ccl_torch.backend_of(pg)._run_exclusive(
                lambda comm: opt.step_sharded(pieces, len(SIZES), comm))
        torch.testing.assert_close(mine, whole[lo:hi], rtol=1e-6, atol=1e-6)
        assert opt.steps == 3, opt.steps


class Sharded(unittest.TestCase):
    def test_step_sharded_over_a_ccl_group_equals_the_whole_step(self):
        run_ranks(sharded_step_equals_the_whole, 2)


if __name__ == "__main__":
    unittest.main()
