"""examples/parallel3d/train_3d.py, the 3D-parallel training (tensor × pipeline × data parallel on
ccl_torch.mesh and ccl_torch.tensor_parallel), against its one-process reference: after a few
SGD steps the unsplit parameters (tp shards concatenated, pp stages combined) and every step's
loss equal the reference's to float tolerance. 8 ranks (tp 2 x pp 2 x dp 2, with and without
sequence parallelism), 4 ranks (other shapes, GPipe, pp 4), and the example under torchrun."""
import importlib.util
import math
import os
import re
import subprocess
import sys
import unittest

import torch

from ccl_torch_testing import run_ranks

EXAMPLE = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                        "..", "examples", "parallel3d", "train_3d.py"))
TINY = dict(vocab=32, dim=16, heads=4, seq=8, blocks=2, microbatches=2, micro_batch_size=2,
            steps=3, lr=0.5)
TOL = dict(rtol=1e-5, atol=1e-5)


def load_example():
    if "train_3d" not in sys.modules:
        spec = importlib.util.spec_from_file_location("train_3d", EXAMPLE)
        module = importlib.util.module_from_spec(spec)
        sys.modules["train_3d"] = module
        spec.loader.exec_module(module)
    return sys.modules["train_3d"]


def matches_reference(rank, size, configs):
    example = load_example()
    for options in configs:
        cfg = example.Config(**{**TINY, **options})
        losses, params = example.train(cfg)
        if rank != 0:
            continue
        what = ", ".join(f"{k} {v}" for k, v in options.items())
        ref_losses, ref_params = example.reference(cfg)
        assert all(math.isfinite(x) and x < 10 for x in ref_losses), (what, ref_losses)
        torch.testing.assert_close(torch.tensor(losses, dtype=torch.float64),
                                   torch.tensor(ref_losses, dtype=torch.float64), **TOL,
                                   msg=lambda m: f"{what}: losses {losses} vs {ref_losses}: {m}")
        assert sorted(params) == sorted(ref_params), (sorted(params), sorted(ref_params))
        for name, value in ref_params.items():
            torch.testing.assert_close(params[name], value, **TOL,
                                       msg=lambda m: f"{what}: {name}: {m}")
        # The training moved the parameters: the comparison is not of the initial ones.
        initial = example.full_parameters(cfg)
        assert any((initial[n] - v).abs().max() > 1e-3 for n, v in ref_params.items())


class PipelineSchedule(unittest.TestCase):
    def test_the_bound_schedules(self):
        from ccl_torch import _training
        f, b = "forward", "backward"
        self.assertEqual(_training.pipeline_schedule("1f1b", 2, 3, 0),
                         [(f, 0, 0), (f, 1, 0), (b, 0, 0), (f, 2, 0), (b, 1, 0), (b, 2, 0)])
        self.assertEqual(_training.pipeline_schedule("1f1b", 2, 3, 1),
                         [(f, 0, 0), (b, 0, 0), (f, 1, 0), (b, 1, 0), (f, 2, 0), (b, 2, 0)])
        self.assertEqual(_training.pipeline_schedule("gpipe", 3, 2, 1),
                         [(f, 0, 0), (f, 1, 0), (b, 0, 0), (b, 1, 0)])
        chunks = {c for _, _, c in _training.pipeline_schedule("interleaved", 2, 4, 0, 2)}
        self.assertEqual(chunks, {0, 1})
        with self.assertRaisesRegex(ValueError, "kind"):
            _training.pipeline_schedule("zigzag", 2, 2, 0)
        with self.assertRaisesRegex(ValueError, "stage 2"):
            _training.pipeline_schedule("1f1b", 2, 2, 2)


class Parallel3d(unittest.TestCase):
    def test_eight_ranks_tp2_pp2_dp2_match_the_one_process_reference(self):
        run_ranks(matches_reference, 8,
                  [dict(tp=2, pp=2, dp=2),
                   dict(tp=2, pp=2, dp=2, sequence_parallel=True, microbatches=3)],
                  timeout=150)

    def test_four_ranks_other_shapes_and_schedules(self):
        run_ranks(matches_reference, 4,
                  [dict(tp=2, pp=2, dp=1, schedule="gpipe", microbatches=4),
                   dict(tp=2, pp=1, dp=2, sequence_parallel=True),
                   dict(tp=1, pp=4, dp=1, blocks=4, microbatches=3, lr=0.1),
                   dict(tp=1, pp=2, dp=2)],
                  timeout=150)

    def test_the_example_under_torchrun(self):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        run = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node",
             "8", "--redirects", "1", "--tee", "1", EXAMPLE, "--steps", "5"],
            env=env, capture_output=True, text=True, timeout=150)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("device mesh: 8 ranks = tp 2 x pp 2 x dp 2", run.stdout)
        self.assertIn("tp0: ranks 0 1  transports 0-1 shm", run.stdout)
        losses = [float(x) for x in re.findall(r"\[default0\]:step +\d+ +loss ([0-9.]+)",
                                               run.stdout)]
        ref = subprocess.run([sys.executable, EXAMPLE, "--reference", "--steps", "5"], env=env,
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(ref.returncode, 0, ref.stdout + ref.stderr)
        expected = [float(x) for x in re.findall(r"step +\d+ +loss ([0-9.]+)", ref.stdout)]
        self.assertEqual(len(losses), 5, run.stdout)
        for got, want in zip(losses, expected):
            self.assertAlmostEqual(got, want, places=5)


if __name__ == "__main__":
    unittest.main()
