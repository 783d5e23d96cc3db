"""torch.distributed.pipelining on ccl, through examples/torch/pipelining.py: the small language
model cut into 2 and 4 stages, GPipe and 1F1B over 4 micro-batches, equals the one-process
reference (every stage's parameters and the last stage's losses); and 3D parallelism at 8 ranks
(pipeline 2 x FSDP2 2 x DTensor tensor parallel 2) equals it too."""
import unittest

from ccl_torch_testing import run_ranks

STEPS = 3


def check(rank, size, pp, dp, tp, schedule):
    import pipelining
    import tiny_lm
    params, losses = pipelining.train(STEPS, pp, dp, tp, schedule)
    diff = pipelining.check_against_reference(params, STEPS, pp)
    assert diff <= 2e-5, (rank, diff)
    if losses is not None:
        _, want = tiny_lm.train_reference(STEPS, pipelining.config(pp))
        for got, expected in zip(losses, want):
            assert abs(got - expected) <= 1e-5, (losses, want)
    if rank == 0:
        print(f"pp {pp} dp {dp} tp {tp} {schedule}: largest parameter difference {diff:.3g}",
              flush=True)


class Pipelining(unittest.TestCase):
    def test_two_stages_gpipe(self):
        run_ranks(check, 2, 2, 1, 1, "gpipe")

    def test_two_stages_1f1b(self):
        run_ranks(check, 2, 2, 1, 1, "1f1b")

    def test_four_stages_gpipe(self):
        run_ranks(check, 4, 4, 1, 1, "gpipe")

    def test_four_stages_1f1b(self):
        run_ranks(check, 4, 4, 1, 1, "1f1b")

    def test_3d_pp_fsdp_tp_eight_ranks(self):
        run_ranks(check, 8, 2, 2, 2, "1f1b", timeout=400)


if __name__ == "__main__":
    unittest.main()
