"""ccl's training layer from PyTorch: DDP's bucket assignment against torch's own function, the
TopK and 1-bit DDP communication hooks (convergence against the uncompressed run), LAMB and LARS
as torch optimizers against plain torch implementations of the same updates, and misuse."""
import random
import unittest

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import ccl_torch
import ccl_torch.hooks as hooks
import ccl_torch.optim as optim
from ccl_torch_testing import run_ranks

CODES = {torch.float16: 6, torch.float32: 7, torch.float64: 8, torch.bfloat16: 9}


class BucketAssignment(unittest.TestCase):
    def test_equals_torchs_function_on_random_parameter_lists(self):
        rng = random.Random(5)
        for _ in range(300):
            tensors = [torch.empty(rng.randint(1, 700), dtype=rng.choice(list(CODES)))
                       for _ in range(rng.randint(1, 40))]
            limits = [rng.randint(1, 5000) for _ in range(rng.randint(1, 3))]
            specs = [(t.numel(), CODES[t.dtype]) for t in tensors]
            expected = dist._compute_bucket_assignment_by_size(tensors, limits)[0]
            self.assertEqual([list(b) for b in expected], ccl_torch.assign_buckets(specs, limits))
            # As DDP rebuilds: the tensors in a ready order (one dtype: torch leaves the order of
            # several dtypes' last buckets to a hash map).
            order = list(range(len(tensors)))
            rng.shuffle(order)
            floats = [torch.empty(t.numel()) for t in tensors]
            expected = dist._compute_bucket_assignment_by_size(
                [floats[i] for i in order], limits, [], order)[0]
            got = ccl_torch.assign_buckets([(t.numel(), 7) for t in floats], limits, order)
            self.assertEqual([list(b) for b in expected], got)

    def test_refuses_an_order_that_is_not_a_permutation(self):
        with self.assertRaisesRegex(ValueError, "not a permutation"):
            ccl_torch.assign_buckets([(4, 7), (4, 7)], [16], [0, 0])


def regression_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.Tanh(), torch.nn.Linear(128, 1))


def train_ddp(rank, hook_state, hook, steps=150):
    ddp = DDP(regression_model(), bucket_cap_mb=0.01)
    if hook is not None:
        ddp.register_comm_hook(hook_state, hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    teacher = torch.Generator().manual_seed(1)
    w = torch.randn(64, 1, generator=teacher) / 8
    gen = torch.Generator().manual_seed(100 + rank)
    for _ in range(steps):
        x = torch.randn(16, 64, generator=gen)
        opt.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), torch.tanh(x @ w)).backward()
        opt.step()
    held_out = torch.randn(512, 64, generator=torch.Generator().manual_seed(9))
    with torch.no_grad():
        return torch.nn.functional.mse_loss(ddp(held_out), torch.tanh(held_out @ w)).item()


def hooks_converge(rank, size):
    plain = train_ddp(rank, None, None)
    topk_state = hooks.TopKState(ratio=0.01)
    topk = train_ddp(rank, topk_state, hooks.topk_hook)
    onebit_state = hooks.OneBitState()
    onebit = train_ddp(rank, onebit_state, hooks.onebit_hook)
    if rank == 0:
        print(f"held-out loss: plain {plain:.6f}, topk 1% {topk:.6f}, 1-bit {onebit:.6f}; "
              f"bytes topk {topk_state.bytes_sent}, 1-bit {onebit_state.bytes_sent}")
    assert topk <= 1.05 * plain, f"topk_hook: {topk} is more than 5% above {plain}"
    assert onebit <= 1.05 * plain, f"onebit_hook: {onebit} is more than 5% above {plain}"
    params = sum(p.numel() for p in regression_model().parameters())
    assert 0 < topk_state.bytes_sent < 150 * params * 4 / 20, topk_state.bytes_sent
    assert 0 < onebit_state.bytes_sent < 150 * params * 4 / 10, onebit_state.bytes_sent


def hook_on_gloo_refuses(rank, size):
    gloo = dist.new_group(backend="gloo")
    state = hooks.TopKState(process_group=gloo)
    ddp = DDP(regression_model(), process_group=gloo)
    ddp.register_comm_hook(state, hooks.topk_hook)
    try:
        ddp(torch.randn(4, 64)).sum().backward()
    except RuntimeError as e:
        assert "not ccl's" in str(e) and "ProcessGroupGloo" in str(e), e
    else:
        raise AssertionError("topk_hook ran on a Gloo group")


class Hooks(unittest.TestCase):
    def test_topk_and_onebit_converge_within_5_percent_of_the_uncompressed_run(self):
        run_ranks(hooks_converge, 2, timeout=300)

    def test_a_hook_on_another_backend_raises(self):
        run_ranks(hook_on_gloo_refuses, 2)


def lamb_reference(params, grads, state, step, lr, b1, b2, eps, wd, clamp, exclude):
    for i, (x, g) in enumerate(zip(params, grads)):
        m, v = state.setdefault(i, (torch.zeros_like(x, dtype=torch.float64),
                                    torch.zeros_like(x, dtype=torch.float64)))
        g = g.double()
        m.mul_(b1).add_(g, alpha=1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        u = (m / (1 - b1 ** step)) / ((v / (1 - b2 ** step)).sqrt() + eps)
        if not exclude[i]:
            u = u + wd * x.double()
        xn, un = x.double().norm().item(), u.norm().item()
        r = 1.0 if exclude[i] or xn == 0 or un == 0 else min(xn, clamp) / un
        x.sub_((lr * r * u).float())


def lars_reference(params, grads, state, lr, mom, wd, eta, eps, exclude):
    for i, (x, g) in enumerate(zip(params, grads)):
        buf = state.setdefault(i, torch.zeros_like(x, dtype=torch.float64))
        d = 0.0 if exclude[i] else wd
        xn, gn = x.double().norm().item(), g.double().norm().item()
        local = 1.0 if exclude[i] or xn == 0 or gn == 0 else eta * xn / (gn + d * xn + eps)
        buf.mul_(mom).add_(lr * local * (g.double() + d * x.double()))
        x.sub_(buf.float())


class Optimizers(unittest.TestCase):
    def setUp(self):
        torch.manual_seed(3)
        self.model = torch.nn.Sequential(torch.nn.Linear(20, 30), torch.nn.Linear(30, 5))

    def run_steps(self, opt, reference):
        params = [p.detach().clone() for p in self.model.parameters()]
        exclude = [p.dim() < 2 for p in self.model.parameters()]
        state = {}
        for step in range(1, 4):
            gen = torch.Generator().manual_seed(step)
            grads = [torch.randn(p.shape, generator=gen) for p in self.model.parameters()]
            for p, g in zip(self.model.parameters(), grads):
                p.grad = g.clone()
            opt.step()
            reference(params, grads, state, step, exclude)
        for mine, theirs in zip(self.model.parameters(), params):
            torch.testing.assert_close(mine.detach(), theirs, rtol=1e-5, atol=1e-6)

    def test_lamb_matches_the_update_written_in_torch(self):
        opt = optim.Lamb(optim.exclude_bias_and_norm(self.model), lr=0.01)
        self.run_steps(opt, lambda p, g, s, t, ex: lamb_reference(
            p, g, s, t, 0.01, 0.9, 0.999, 1e-6, 0.01, 10.0, ex))

    def test_lars_matches_the_update_written_in_torch(self):
        opt = optim.Lars(optim.exclude_bias_and_norm(self.model), lr=0.5)
        self.run_steps(opt, lambda p, g, s, t, ex: lars_reference(
            p, g, s, 0.5, 0.9, 1e-4, 0.001, 0.0, ex))

    def test_refuses_tensors_it_cannot_take(self):
        p = torch.nn.Parameter(torch.zeros(4, dtype=torch.float64))
        p.grad = torch.zeros(4, dtype=torch.float64)
        with self.assertRaisesRegex(RuntimeError, "float64"):
            optim.Lamb([p]).step()
        for q in self.model.parameters():
            q.grad = torch.zeros_like(q)
        with self.assertRaisesRegex(ValueError, "lr"):
            optim.Lamb(self.model.parameters(), lr=-1.0).step()


if __name__ == "__main__":
    unittest.main()
