"""The launch paths torch users have, each running an example of examples/torch on ccl in 2
processes under torchrun: torchrun's elastic agent restarting a group whose worker failed (the
new workers resume from the checkpoint and end where one process ends), transformers' Trainer
through accelerate on ccl's group (a tiny GPT-2 from a config), and DeepSpeed's
init_distributed(dist_backend="ccl_torch") with a ZeRO-1 engine (ends where one process ends)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

from ccl_torch_testing import EXAMPLES_TORCH


def torchrun(script, *args, extra=(), env=None, timeout=300):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           *extra, os.path.join(EXAMPLES_TORCH, script), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))
    return proc.returncode, proc.stdout + proc.stderr


def largest_difference(out):
    found = re.findall(r"largest difference from one process: (\S+)", out)
    if not found:
        raise AssertionError("no 'largest difference' line in:\n" + out[-3000:])
    return float(found[-1])


class Launchers(unittest.TestCase):
    def test_torchrun_restarts_a_failed_group(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = torchrun("torchrun_restart.py", "--checkpoint", os.path.join(tmp, "ckpt"),
                               "--steps", "10", "--fail-at", "4", extra=("--max-restarts", "1"))
        self.assertEqual(rc, 0, out[-3000:])
        self.assertIn("attempt 0: 2 ranks start at step 0", out)
        self.assertIn("rank 1: failing in step 4 (attempt 0)", out)
        # Rank 0 may still finish step 4 (rank 1's gradients reached it) and checkpoint it
        # before the agent stops it: the new group starts after the last whole checkpoint.
        self.assertRegex(out, r"attempt 1: 2 ranks start at step [45]\b")
        self.assertIn("finished in attempt 1", out)
        self.assertLessEqual(largest_difference(out), 2e-5)

    def test_transformers_trainer_on_the_ccl_group(self):
        with tempfile.TemporaryDirectory() as tmp:
            rc, out = torchrun("hf_trainer.py", "--steps", "6", "--output", tmp)
        self.assertEqual(rc, 0, out[-3000:])
        self.assertIn("group backend: ccl_torch", out)
        self.assertIn("MULTI_CPU", out)
        self.assertIn("wrapped in DistributedDataParallel", out)
        self.assertIn("parameters equal on all 2 ranks", out)

    def test_deepspeed_init_distributed(self):
        for stage in ("0", "1", "2"):
            with self.subTest(zero=stage):
                rc, out = torchrun("deepspeed_train.py", "--zero", stage, "--steps", "4",
                                   env={"DS_ACCELERATOR": "cpu"})
                self.assertEqual(rc, 0, out[-3000:])
                self.assertIn(f"group backend: ccl_torch; ZeRO stage {stage}", out)
                self.assertLessEqual(largest_difference(out), 2e-5)


if __name__ == "__main__":
    unittest.main()
