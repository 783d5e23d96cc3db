"""ccl_torch.zero.ZeroDataParallel (ZeRO stages 1-3) against plain torch DDP with the same
update rule on the whole parameters: every stage with Adam, every optimizer (SGD with momentum,
Adam, AdamW, LAMB, LARS) with stage 3, at 2 and 3 ranks (3: units padded), an MLP and an
embedding model; 16-bit precisions within a loose tolerance; what memory() reports per stage;
a save/load round trip that resumes exactly; wrong arguments; and examples/zero3 at 4 ranks
against its one-process reference."""
import importlib.util
import os
import tempfile
import unittest

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import ccl_torch.optim as ccl_optim
import ccl_torch.zero as zero
from ccl_torch_testing import run_ranks

GLOBAL_BATCH = 6  # divisible by 2 and 3 ranks
EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "examples",
                       "zero3", "train_zero3.py")


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(10, 24), nn.Tanh(), nn.Linear(24, 17), nn.ReLU(),
                         nn.Linear(17, 3))


class EmbeddingModel(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.embed = nn.Embedding(20, 8)
        self.norm = nn.LayerNorm(8)
        self.out = nn.Linear(8, 4)

    def forward(self, tokens):
        return self.out(self.norm(self.embed(tokens)).mean(1))


def batch(model_name, step, rank, size):
    """This rank's slice of the global batch of `step` (the same global batch at any size)."""
    gen = torch.Generator().manual_seed(100 + step)
    if model_name == "mlp":
        x = torch.randn(GLOBAL_BATCH, 10, generator=gen)
        y = torch.randn(GLOBAL_BATCH, 3, generator=gen)
    else:
        x = torch.randint(0, 20, (GLOBAL_BATCH, 5), generator=gen)
        y = torch.randint(0, 4, (GLOBAL_BATCH,), generator=gen)
    n = GLOBAL_BATCH // size
    return x[rank * n:(rank + 1) * n], y[rank * n:(rank + 1) * n]


def loss_of(model_name, out, y):
    if model_name == "mlp":
        return nn.functional.mse_loss(out, y)
    return nn.functional.cross_entropy(out, y)


def make_model(name):
    return mlp() if name == "mlp" else EmbeddingModel()


def decay_groups(model, weight_decay):
    """torch.optim parameter groups that decay as ZeRO's default exclusion does (not < 2 dims)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    return [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]


# name -> (ZeRO's optimizer options, the torch optimizer of the same update on whole tensors)
OPTIMIZERS = {
    "adam": (lambda: zero.Adam(lr=1e-2, weight_decay=0.01),
             lambda m: torch.optim.Adam(decay_groups(m, 0.01), lr=1e-2)),
    "adamw": (lambda: ("adamw", {"lr": 1e-2, "weight_decay": 0.1}),
              lambda m: torch.optim.AdamW(decay_groups(m, 0.1), lr=1e-2)),
    "sgd": (lambda: zero.Sgd(lr=0.05, momentum=0.9, weight_decay=1e-3, nesterov=True),
            lambda m: torch.optim.SGD(decay_groups(m, 1e-3), lr=0.05, momentum=0.9,
                                      nesterov=True)),
    "sgd_dampened": (lambda: ("sgd", {"lr": 0.05, "momentum": 0.8, "dampening": 0.3}),
                     lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.8,
                                               dampening=0.3)),
    "lamb": (lambda: zero.Lamb(lr=1e-2),
             lambda m: ccl_optim.Lamb(ccl_optim.exclude_bias_and_norm(m), lr=1e-2)),
    "lars": (lambda: ("lars", {"lr": 0.5}),
             lambda m: ccl_optim.Lars(ccl_optim.exclude_bias_and_norm(m), lr=0.5)),
}


def train_both(rank, size, model_name, stage, opt_name, precision="fp32", steps=3, micro=1,
               group=None, **kw):
    """ZeRO and DDP + the torch optimizer, side by side on the same batches; `micro` backward
    passes (on parts of this rank's slice) per step."""
    zopt, ref_opt = OPTIMIZERS[opt_name]
    zdp = zero.ZeroDataParallel(make_model(model_name), stage=stage, optimizer=zopt(),
                                precision=precision, group=group, **kw)
    ref = make_model(model_name)
    ddp = DDP(ref, process_group=group)
    opt = ref_opt(ref)
    for step in range(steps):
        x, y = batch(model_name, step, rank, size)
        zdp.zero_grad()
        opt.zero_grad()
        for part in range(micro):
            xs, ys = x[part::micro], y[part::micro]
            loss_of(model_name, zdp(xs), ys).backward()
            loss_of(model_name, ddp(xs), ys).backward()
        zdp.step()
        opt.step()
    return zdp, ref


def compare(zdp, ref, atol, what):
    full = zdp.full_state_dict()
    moved = 0.0
    for name, p in ref.named_parameters():
        torch.testing.assert_close(full[name], p.detach(), atol=atol, rtol=0,
                                   msg=lambda m: f"{what}: {name}: {m}")
        moved = max(moved, (p.detach() - make_initial(ref, name)).abs().max().item())
    assert moved > 1e-3, f"{what}: the parameters did not move ({moved})"


def make_initial(ref, name):
    initial = make_model("mlp" if isinstance(ref, nn.Sequential) else "embedding")
    return dict(initial.named_parameters())[name].detach()


def matches_ddp(rank, size, cases):
    for model_name, stage, opt_name in cases:
        what = f"{model_name}, stage {stage}, {opt_name}, {size} ranks"
        zdp, ref = train_both(rank, size, model_name, stage, opt_name)
        compare(zdp, ref, 1e-5, what)


def accumulates_and_subgroups(rank, size):
    # Two backward passes per step: stage 2 and 3 reduce each, adding to the slices.
    for stage in (1, 2, 3):
        zdp, ref = train_both(rank, size, "mlp", stage, "adam", micro=2)
        compare(zdp, ref, 1e-5, f"stage {stage}, 2 backward passes per step")
    # A group of ranks 1 and 2 of 3 (rank 0 takes no part).
    sub = dist.new_group([1, 2])
    if rank != 0:
        zdp, ref = train_both(sub.rank(), sub.size(), "embedding", 3, "lamb", group=sub)
        compare(zdp, ref, 1e-5, "stage 3 on ranks 1 and 2 of 3")


def sixteen_bits_close(rank, size):
    # SGD with momentum: Adam would scale the rounding of near-zero gradients up to whole steps.
    # bf16 keeps 8 bits of mantissa, fp16 11: the working copies of values up to ~0.5 round by
    # up to 1e-3 and 1.2e-4.
    for stage, precision, atol in ((1, "bf16", 3e-3), (2, "bf16", 3e-3), (3, "fp16", 3e-4),
                                   (3, "bf16", 3e-3)):
        zdp, ref = train_both(rank, size, "mlp", stage, "sgd", precision=precision)
        compare(zdp, ref, atol, f"stage {stage}, {precision}")
        # The working copies are the master values rounded to the precision.
        full = zdp.full_state_dict()
        if stage < 3:
            for name, p in zdp.module.named_parameters():
                dtype = torch.bfloat16 if precision == "bf16" else torch.float16
                torch.testing.assert_close(p.detach(), full[name].to(dtype).float(), atol=0,
                                           rtol=0)


def memory_by_stage(rank, size):
    whole = sum(p.numel() for p in mlp().parameters()) * 4
    for stage in (1, 2, 3):
        zdp, _ = train_both(rank, size, "mlp", stage, "adam")
        mem = zdp.memory()
        peak = zdp.peak_memory()
        shards = sum(u.shard for u in zdp._units) * 4       # this rank's slices
        padded = sum(u.padded for u in zdp._units) * 4      # whole flat buffers
        pieces = sum(piece[3] for u in zdp._units for piece in u.pieces) * 4  # slices less padding
        assert mem["optimizer"] == 2 * pieces, (stage, mem, pieces)   # Adam: m and v, sliced
        assert mem["total"] == sum(mem[k] for k in ("parameters", "master", "gradients",
                                                    "optimizer")), mem
        if stage == 1:
            assert mem["parameters"] == padded and mem["master"] == 0, mem
            assert mem["gradients"] == padded + shards, mem       # whole, and the slices
        elif stage == 2:
            assert mem["parameters"] == padded and mem["master"] == 0, mem
            assert mem["gradients"] == shards, mem
            assert peak["gradients"] > shards, peak               # units during the backward
        else:
            assert mem["parameters"] == 0, mem                    # nothing gathered after step
            assert mem["master"] == shards, mem
            assert abs(mem["master"] - whole / size) <= 4 * len(zdp._units), (mem, whole)
            assert mem["gradients"] == shards, mem
            assert 0 < peak["parameters"] < padded, peak          # never all units at once
        if rank == 0:
            print(f"stage {stage}: now {mem}, peak {peak} (whole parameters {whole} B)")


def save_and_load(rank, size, prefix):
    for stage, precision, opt_name in ((3, "fp32", "adam"), (2, "bf16", "lamb"),
                                       (1, "fp32", "sgd")):
        p = f"{prefix}-s{stage}"

        def one_step(zdp, step):
            x, y = batch("mlp", step, rank, size)
            zdp.zero_grad()
            loss_of("mlp", zdp(x), y).backward()
            zdp.step()

        zopt = OPTIMIZERS[opt_name][0]
        a = zero.ZeroDataParallel(mlp(), stage=stage, precision=precision, optimizer=zopt())
        for step in range(2):
            one_step(a, step)
        path = a.save(p)
        assert os.path.exists(path) and path.endswith(f".zero-{rank}-of-{size}"), path
        for step in range(2, 4):
            one_step(a, step)
        # A fresh model (other initial values) resumes from the checkpoint.
        torch.manual_seed(99)
        b = zero.ZeroDataParallel(nn.Sequential(nn.Linear(10, 24), nn.Tanh(), nn.Linear(24, 17),
                                                nn.ReLU(), nn.Linear(17, 3)),
                                  stage=stage, precision=precision, optimizer=zopt())
        b.load(p)
        assert b.optimizer.steps == 2, b.optimizer.steps
        for step in range(2, 4):
            one_step(b, step)
        fa, fb = a.full_state_dict(), b.full_state_dict()
        for name in fa:
            assert torch.equal(fa[name], fb[name]), f"stage {stage}: {name} differs after load"
        # A checkpoint of another stage is refused, naming it.
        other = zero.ZeroDataParallel(mlp(), stage=1 if stage != 1 else 2, precision=precision,
                                      optimizer=zopt())
        try:
            other.load(p)
        except ValueError as e:
            assert "stage" in str(e), e
        else:
            raise AssertionError("a checkpoint of another stage loaded")


def refuses_groups_and_parameters(rank, size):
    gloo = dist.new_group(backend="gloo")
    try:
        zero.ZeroDataParallel(mlp(), group=gloo)
    except ValueError as e:
        assert "group" in str(e) and "ProcessGroupGloo" in str(e), e
    else:
        raise AssertionError("a Gloo group was taken")
    model = mlp().double()
    try:
        zero.ZeroDataParallel(model)
    except ValueError as e:
        assert "'0.weight'" in str(e) and "float64" in str(e), e
    else:
        raise AssertionError("a float64 parameter was taken")
    for kwargs, word in (({"exclude": ["0.weight", "9.bias"]}, "'9.bias'"),
                         ({"units": [nn.Linear(2, 2)]}, "units[0]")):
        try:
            zero.ZeroDataParallel(mlp(), **kwargs)
        except ValueError as e:
            assert word in str(e), e
        else:
            raise AssertionError(f"{kwargs} was taken")
    zdp = zero.ZeroDataParallel(mlp(), stage=2)
    try:
        zdp.step()
    except RuntimeError as e:
        assert "backward" in str(e), e
    else:
        raise AssertionError("step() without a backward pass ran")


def units_and_views(rank, size):
    model = EmbeddingModel()
    zdp = zero.ZeroDataParallel(model, stage=3, units=[model.embed, model.out],
                                optimizer=zero.Sgd(lr=0.1))
    # norm was in no unit: it goes to a unit of the module itself, first.
    assert zdp.units == [("", ["norm.weight", "norm.bias"]), ("embed", ["embed.weight"]),
                         ("out", ["out.weight", "out.bias"])], zdp.units
    for step in range(2):
        x, y = batch("embedding", step, rank, size)
        zdp.zero_grad()
        loss_of("embedding", zdp(x), y).backward()
        zdp.step()
    assert zdp.memory()["parameters"] == 0
    assert zdp._prefetched > 0, "no unit was gathered ahead in the second iteration"
    # Released, a stage-3 parameter is empty: a use outside its unit fails (it reads nothing
    # freed); calling the unit gathers it.
    assert model.out.weight.shape == (0,), model.out.weight.shape
    try:
        nn.functional.linear(torch.ones(1, 8), model.out.weight)
    except RuntimeError:
        pass
    else:
        raise AssertionError("a released parameter was used")
    with torch.no_grad():
        assert model.out(torch.ones(1, 8)).shape == (1, 4)
    with torch.no_grad():   # evaluation: units gathered and released again, no gradient
        zdp(batch("embedding", 9, rank, size)[0])
    assert zdp.memory()["parameters"] == 0 and all(p.grad is None for p in model.parameters())
    stage1 = zero.ZeroDataParallel(mlp(), stage=1)
    for u in stage1._units:   # each parameter a view of its unit's flat buffer
        for p, off in zip(u.params, u.offsets):
            assert p.data_ptr() == u.flat.data_ptr() + 4 * off
            assert p.grad.data_ptr() == u.grad_flat.data_ptr() + 4 * off


def example_matches_reference(rank, size, steps):
    spec = importlib.util.spec_from_file_location("train_zero3", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    full, _, memory = example.train_zero3(steps, verbose=True)   # its printing too
    expected, _ = example.train_reference(steps, verbose=False)
    for name, value in expected.items():
        torch.testing.assert_close(full[name], value, atol=1e-5, rtol=0,
                                   msg=lambda m: f"{name}: {m}")
    assert memory["parameters"] == 0 and memory["master"] > 0, memory


class MatchesDdp(unittest.TestCase):
    def test_stages_1_2_3_with_adam_at_2_ranks(self):
        run_ranks(matches_ddp, 2, [("mlp", s, "adam") for s in (1, 2, 3)], timeout=120)

    def test_stage_3_with_sgd_adamw_lamb_lars_at_2_ranks(self):
        run_ranks(matches_ddp, 2, [("mlp", 3, o) for o in ("sgd", "adamw", "lamb", "lars")]
                  + [("embedding", 3, "adamw")], timeout=120)

    def test_padded_units_at_3_ranks(self):
        run_ranks(matches_ddp, 3, [("mlp", 1, "sgd_dampened"), ("mlp", 2, "lamb"),
                                   ("mlp", 3, "lars"), ("embedding", 3, "adam")], timeout=120)

    def test_accumulated_backward_passes_and_a_subgroup_at_3_ranks(self):
        run_ranks(accumulates_and_subgroups, 3, timeout=120)

    def test_bf16_and_fp16_within_a_loose_tolerance(self):
        run_ranks(sixteen_bits_close, 2, timeout=120)


class Memory(unittest.TestCase):
    def test_what_each_stage_holds(self):
        run_ranks(memory_by_stage, 2, timeout=120)


class Checkpoint(unittest.TestCase):
    def test_save_and_load_resume_exactly(self):
        with tempfile.TemporaryDirectory() as tmp:
            run_ranks(save_and_load, 2, os.path.join(tmp, "ckpt", "step2"), timeout=120)


class Layout(unittest.TestCase):
    def test_units_given_and_parameters_as_views(self):
        run_ranks(units_and_views, 2, timeout=120)


class Errors(unittest.TestCase):
    def test_arguments_named(self):
        for kwargs, word in (({"stage": 4}, "stage"), ({"precision": "fp8"}, "precision"),
                             ({"optimizer": ("rmsprop", {})}, "rmsprop"),
                             ({"optimizer": ("adam", {"momentum": 0.9})}, "momentum"),
                             ({"optimizer": ("sgd", {"lr": -1.0})}, "lr"),
                             ({"prefetch": -1}, "prefetch"),
                             ({"reductions_in_flight": 0}, "reductions_in_flight")):
            with self.assertRaisesRegex(ValueError, word):
                zero.ZeroDataParallel(mlp(), **kwargs)
        with self.assertRaisesRegex(RuntimeError, "init_process_group"):
            zero.ZeroDataParallel(mlp())

    def test_groups_parameters_and_misuse(self):
        run_ranks(refuses_groups_and_parameters, 2, timeout=120)


class Example(unittest.TestCase):
    def test_zero3_example_at_4_ranks_matches_the_one_process_reference(self):
        run_ranks(example_matches_reference, 4, 3, timeout=150)


if __name__ == "__main__":
    unittest.main()
