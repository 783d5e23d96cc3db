"""ccl_torch.tensor_parallel at 2 and 4 ranks on ccl's process group: the f/g operators and their
sequence-parallel forms, ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding and a
column-then-row MLP against the unsplit torch.nn modules on the same data (outputs, input
gradients, weight shards and biases), with and without sequence parallelism; misuse raises
ValueError naming the argument."""
import unittest

import torch
import torch.distributed as dist

import ccl_torch.tensor_parallel as tpl
from ccl_torch_testing import expect_value_error, expect_world_in_step, run_ranks

SEQ, BATCH, IN, OUT, VOCAB = 8, 2, 8, 12, 16
TOL = dict(rtol=1e-5, atol=1e-5)


def close(got, expected, what):
    torch.testing.assert_close(got, expected, **TOL, msg=lambda m: f"{what}: {m}")


def data(seed, *shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def check_operators(rank, size):
    group = dist.new_group(list(range(size)))
    n = size
    # f: identity forward, all-reduce backward.
    x = torch.full((3,), float(rank + 1), requires_grad=True)
    y = tpl.copy_to_region(x, group)
    close(y, x.detach(), "f forward")
    y.backward(torch.full((3,), float(rank)))
    close(x.grad, torch.full((3,), float(sum(range(n)))), "f backward")
    # g: all-reduce forward, identity backward.
    x = torch.full((3,), float(rank + 1), requires_grad=True)
    y = tpl.reduce_from_region(x, group)
    close(y.detach(), torch.full((3,), float(n * (n + 1) // 2)), "g forward")
    y.backward(torch.full((3,), 2.0))
    close(x.grad, torch.full((3,), 2.0), "g backward")
    # Sequence-parallel f: all-gather along dim 0, reduce-scatter backward.
    x = torch.full((2, 3), float(rank), requires_grad=True)
    y = tpl.gather_sequence(x, group)
    close(y.detach(), torch.arange(n).repeat_interleave(2).float()[:, None].expand(2 * n, 3),
          "gather_sequence forward")
    g = torch.arange(2 * n * 3, dtype=torch.float32).reshape(2 * n, 3) * (rank + 1)
    y.backward(g)
    expected = torch.arange(2 * n * 3, dtype=torch.float32).reshape(2 * n, 3)[2 * rank:2 * rank
                                                                               + 2]
    close(x.grad, expected * (n * (n + 1) // 2), "gather_sequence backward")
    # Sequence-parallel g: reduce-scatter forward, all-gather backward.
    x = (torch.arange(2 * n * 3, dtype=torch.float32).reshape(2 * n, 3) * (rank + 1)
         ).requires_grad_()
    y = tpl.reduce_scatter_sequence(x, group)
    close(y.detach(), expected * (n * (n + 1) // 2), "reduce_scatter_sequence forward")
    y.backward(torch.full((2, 3), float(rank)))
    close(x.grad, torch.arange(n).repeat_interleave(2).float()[:, None].expand(2 * n, 3),
          "reduce_scatter_sequence backward")


def full_linear(seed, in_features, out_features):
    torch.manual_seed(seed)
    return torch.nn.Linear(in_features, out_features)


def check_linear_layers(rank, size, sequence_parallel):
    group = dist.new_group(list(range(size)))
    n, sp = size, sequence_parallel
    x_full = data(1, SEQ, BATCH, IN)
    mine = (lambda t: tpl.shard_rows(t, n, rank)) if sp else (lambda t: t.detach().clone())

    # ColumnParallelLinear, this rank's features or all of them (gather_output).
    for gather_output in (False, True):
        ref = full_linear(2, IN, OUT)
        layer = tpl.ColumnParallelLinear.from_full(ref.weight, ref.bias, group,
                                                   gather_output=gather_output,
                                                   sequence_parallel=sp)
        r = data(3, SEQ, BATCH, OUT)
        x_ref = x_full.detach().clone().requires_grad_()
        (ref(x_ref) * r).sum().backward()
        x = mine(x_full).requires_grad_()
        y = layer(x)
        what = f"column (gather_output={gather_output}, sequence_parallel={sp})"
        if gather_output:
            close(y.detach(), ref(x_full).detach(), what + " output")
            (y * r).sum().backward()
        else:
            close(y.detach(), tpl.shard_cols(ref(x_full), n, rank), what + " output")
            (y * tpl.shard_cols(r, n, rank)).sum().backward()
        close(x.grad, mine(x_ref.grad), what + " input gradient")
        close(layer.weight.grad, tpl.shard_rows(ref.weight.grad, n, rank), what + " dW")
        close(layer.bias.grad, tpl.shard_rows(ref.bias.grad, n, rank), what + " db")
        w, b = layer.full_parameters()
        close(w, ref.weight.detach(), what + " full_parameters")
        close(b, ref.bias.detach(), what + " full bias")

    # RowParallelLinear, from this rank's features (input_is_parallel) or the whole input.
    for input_is_parallel in ((True, False) if not sp else (True,)):
        ref = full_linear(4, IN, OUT)
        layer = tpl.RowParallelLinear.from_full(ref.weight, ref.bias, group,
                                                input_is_parallel=input_is_parallel,
                                                sequence_parallel=sp)
        r = data(5, SEQ, BATCH, OUT)
        x_ref = x_full.detach().clone().requires_grad_()
        y_ref = ref(x_ref)
        (y_ref * r).sum().backward()
        x = (tpl.shard_cols(x_full, n, rank) if input_is_parallel else x_full.clone())
        x.requires_grad_()
        y = layer(x)
        what = f"row (input_is_parallel={input_is_parallel}, sequence_parallel={sp})"
        close(y.detach(), mine(y_ref.detach()), what + " output")
        (y * mine(r)).sum().backward()
        expected_dx = tpl.shard_cols(x_ref.grad, n, rank) if input_is_parallel else x_ref.grad
        close(x.grad, expected_dx, what + " input gradient")
        close(layer.weight.grad, tpl.shard_cols(ref.weight.grad, n, rank), what + " dW")
        close(layer.bias.grad, ref.bias.grad, what + " db (whole, on every rank)")

    # VocabParallelEmbedding: every id once or more, each rank holding a slice.
    torch.manual_seed(6)
    ref = torch.nn.Embedding(VOCAB, IN)
    table = tpl.VocabParallelEmbedding.from_full(ref.weight, group, sequence_parallel=sp)
    ids = torch.randint(0, VOCAB, (SEQ, BATCH), generator=torch.Generator().manual_seed(7))
    ids[0, 0], ids[-1, -1] = 0, VOCAB - 1
    r = data(8, SEQ, BATCH, IN)
    y_ref = ref(ids)
    (y_ref * r).sum().backward()
    y = table(ids)
    what = f"embedding (sequence_parallel={sp})"
    close(y.detach(), mine(y_ref.detach()), what + " output")
    (y * mine(r)).sum().backward()
    close(table.weight.grad, tpl.shard_rows(ref.weight.grad, n, rank), what + " gradient")
    close(table.full_parameters()[0], ref.weight.detach(), what + " full_parameters")


def check_mlp(rank, size, sequence_parallel):
    group = dist.new_group(list(range(size)))
    n, sp = size, sequence_parallel
    torch.manual_seed(10)
    ref = torch.nn.Sequential(torch.nn.Linear(IN, 4 * IN), torch.nn.GELU(),
                              torch.nn.Linear(4 * IN, IN))
    fc1 = tpl.ColumnParallelLinear.from_full(ref[0].weight, ref[0].bias, group,
                                             sequence_parallel=sp)
    fc2 = tpl.RowParallelLinear.from_full(ref[2].weight, ref[2].bias, group,
                                          sequence_parallel=sp)
    mine = (lambda t: tpl.shard_rows(t, n, rank)) if sp else (lambda t: t.detach().clone())
    x_full, r = data(11, SEQ, BATCH, IN), data(12, SEQ, BATCH, IN)
    x_ref = x_full.detach().clone().requires_grad_()
    y_ref = ref(x_ref)
    (y_ref * r).sum().backward()
    x = mine(x_full).requires_grad_()
    y = fc2(torch.nn.functional.gelu(fc1(x)))
    what = f"MLP (sequence_parallel={sp})"
    close(y.detach(), mine(y_ref.detach()), what + " output")
    (y * mine(r)).sum().backward()
    close(x.grad, mine(x_ref.grad), what + " input gradient")
    close(fc1.weight.grad, tpl.shard_rows(ref[0].weight.grad, n, rank), what + " fc1 dW")
    close(fc1.bias.grad, tpl.shard_rows(ref[0].bias.grad, n, rank), what + " fc1 db")
    close(fc2.weight.grad, tpl.shard_cols(ref[2].weight.grad, n, rank), what + " fc2 dW")
    close(fc2.bias.grad, ref[2].bias.grad, what + " fc2 db")


def all_checks(rank, size):
    check_operators(rank, size)
    for sp in (False, True):
        check_linear_layers(rank, size, sp)
        check_mlp(rank, size, sp)


def misuse(rank, size):
    group = None  # the default group: 2 ranks
    expect_value_error(lambda: tpl.ColumnParallelLinear(4, 5, group), "out_features 5")
    expect_value_error(lambda: tpl.RowParallelLinear(5, 4, group), "in_features 5")
    expect_value_error(lambda: tpl.VocabParallelEmbedding(7, 4, group), "num_embeddings 7")
    expect_value_error(lambda: tpl.ColumnParallelLinear(0, 4, group), "in_features")
    expect_value_error(lambda: tpl.RowParallelLinear(4, 4, group, input_is_parallel=False,
                                                     sequence_parallel=True),
                       "sequence_parallel", "input_is_parallel")
    layer = tpl.ColumnParallelLinear(4, 6, group)
    expect_value_error(lambda: layer.load_full(torch.zeros(6, 5), torch.zeros(6)),
                       "weight", "(6, 4)")
    expect_value_error(lambda: layer.load_full(torch.zeros(6, 4), None), "bias")
    table = tpl.VocabParallelEmbedding(8, 4, group)
    expect_value_error(lambda: table(torch.tensor([1, 8, 2])), "id 8", "num_embeddings 8")
    expect_value_error(lambda: table(torch.tensor([-1])), "id -1")
    sp = tpl.VocabParallelEmbedding(8, 4, group, sequence_parallel=True)
    expect_value_error(lambda: sp(torch.tensor([1, 2, 3])), "dim 0", "3")
    expect_value_error(lambda: tpl.reduce_scatter_sequence(torch.zeros(3, 2)), "dim 0", "3")
    expect_value_error(lambda: tpl.shard_rows(torch.zeros(5, 2), 2, 0), "5", "parts 2")
    expect_value_error(lambda: tpl.shard_cols(torch.zeros(2, 4), 2, 2), "index 2")
    expect_world_in_step(size)


class TensorParallel(unittest.TestCase):
    def test_two_ranks_match_the_unsplit_modules(self):
        run_ranks(all_checks, 2, timeout=120)

    def test_four_ranks_match_the_unsplit_modules(self):
        run_ranks(all_checks, 4, timeout=120)

    def test_bad_arguments_raise_value_error_naming_them(self):
        run_ranks(misuse, 2, timeout=60)

    def test_shards_without_a_group(self):
        full = torch.arange(24.0).reshape(4, 6)
        self.assertTrue(torch.equal(torch.cat([tpl.shard_rows(full, 2, i) for i in range(2)]),
                                    full))
        self.assertTrue(torch.equal(torch.cat([tpl.shard_cols(full, 3, i) for i in range(3)],
                                              dim=1), full))


if __name__ == "__main__":
    unittest.main()
