"""torchft 0.2 on ccl (examples/torch/torchft_train.py): three replicas train through torchft's
Manager and lighthouse with ccl_torch.ft.ProcessGroupCcl; one is SIGKILLed in the middle of a
step; the two others go on as a quorum of two (dropping the step whose allreduce the dead peer
broke: ccl names it), and a replacement takes the model from them and rejoins; every replica
ends with the same parameters. The time lost is measured by perf/torch/torchft_bench.py, not here."""
import json
import os
import subprocess
import sys
import unittest
from datetime import timedelta

from ccl_torch_testing import EXAMPLES_TORCH


def run_example(*args, timeout=240):
    proc = subprocess.run([sys.executable, os.path.join(EXAMPLES_TORCH, "torchft_train.py"),
                           *args], capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


class Torchft(unittest.TestCase):
    def test_a_killed_replica_is_replaced_and_rejoins(self):
        rc, out, err = run_example("--pg", "ccl", "--replicas", "3", "--steps", "200",
                                   "--kill-at", "20")
        self.assertEqual(rc, 0, out[-3000:] + err[-3000:])
        report = json.loads(out[out.index("{"):out.rindex("}") + 1])
        print(json.dumps(report), flush=True)
        self.assertEqual(report["parameters_spread"], 0.0)
        self.assertEqual(sorted(report["survivors"]), ["replica_0", "replica_1"])
        for name, survivor in report["survivors"].items():
            # The survivors went on as a quorum of two before the replacement rejoined.
            self.assertGreaterEqual(survivor["steps_without_victim"], 1, name)
            self.assertIsNotNone(survivor["lost_at_failure_s"], name)
            self.assertIsNotNone(survivor["lost_at_rejoin_s"], name)

    def test_bad_arguments_are_refused(self):
        rc, _, err = run_example("--replicas", "1", timeout=60)
        self.assertEqual(rc, 2)
        self.assertIn("--replicas must be at least 2", err)

    def test_the_process_group_refuses_a_bad_timeout(self):
        from ccl_torch.ft import ProcessGroupCcl
        with self.assertRaisesRegex(ValueError, "timeout"):
            ProcessGroupCcl(timeout=timedelta(0))
        self.assertEqual(ProcessGroupCcl().getBackendName(), "torchft-ccl")


if __name__ == "__main__":
    unittest.main()
