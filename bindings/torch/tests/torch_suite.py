"""torch's own distributed test suite (torch.testing._internal.distributed.distributed_test) on
ccl, as torch's test_distributed_spawn.py runs it for Gloo: each test spawns WORLD_SIZE
processes that init_process_group(backend="ccl") through a file. Pass unittest's selection:

  /usr/bin/python3 bindings/torch/tests/torch_suite.py -k any_source          # 3 ranks
  WORLD_SIZE=2 /usr/bin/python3 bindings/torch/tests/torch_suite.py -k test_send_recv

Needs PYTHONPATH=<build>/bindings/torch (ccl_torch). Tests torch marks Gloo-only are skipped by
torch itself; the suite as a whole is not expected to pass (see README, torch section)."""
import os
import sys
import tempfile

# torch's run_tests() writes JUnit XML through xmlrunner (not packaged in Debian 12) whenever CI
# is set, as it is in .ci/run: this runner reports on standard output only.
os.environ.pop("CI", None)
os.environ.setdefault("BACKEND", "ccl")
os.environ.setdefault("WORLD_SIZE", "3")
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="ccl_torch_suite_"))

try:
    import expecttest  # noqa: F401  (torch's common_utils imports it; not packaged in Debian 12)
except ImportError:
    # Only its TestCase base is used by the distributed tests (for assertExpectedInline, which
    # they never call): a plain unittest.TestCase stands in, for this runner only.
    import types
    import unittest
    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase, ACCEPT=False)

import ccl_torch  # noqa: E402,F401  (registers the "ccl" backend in every spawned process)
from torch.testing._internal.common_distributed import MultiProcessTestCase  # noqa: E402
from torch.testing._internal.common_utils import run_tests  # noqa: E402
from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest, TestDistBackend)


class TestCclWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        self._spawn_processes()


if __name__ == "__main__":
    assert MultiProcessTestCase is not None
    sys.exit(run_tests())
