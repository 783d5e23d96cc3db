"""torch's own distributed test suite (torch.testing._internal.distributed.distributed_test, shipped
in the torch wheel) on a backend, as torch's test_distributed_spawn.py runs it for Gloo: each test
spawns WORLD_SIZE processes (3, as torch's CI on a machine without GPUs) that init_process_group
through a file.

For ccl (--backend ccl_torch) the suite's gates that name Gloo are opened to ccl in a copy of the
module patched at run time, as out-of-tree backends (torch_npu) run it: the DistTestCases feature
sets ("ddp", "subgroup", "plugin"), require_backend_is_available({"gloo", ...}) and the tests'
BACKEND == "gloo" / != "gloo" checks. Nothing else of the suite changes: a test ccl fails is a
test that Gloo's reading of it fails on ccl.

  torch_suite.py --backend ccl_torch -k test_all_reduce_sum        # unittest's -k selection
  torch_suite.py --backend gloo --json gloo.json --jobs 2           # every test, a result each
  torch_suite.py --compare gloo.json ccl.json                       # the table of docs/torch.md
  torch_suite.py --backend ccl_torch --expect gloo.json  # Gloo's passes only; fails where ccl not

--start fork forks each test's ranks from the runner instead of spawning them (the suite's
MultiProcessTestCase._start_processes with a fork context): a spawned rank imports torch and the
suite anew (about 4 s of CPU each), so the 90 tests Gloo passes take 612 s of 2 cores spawned
and 43 s forked, with the same outcomes; `make test` runs the suite forked and the any-source
tests spawned.

Needs PYTHONPATH=<build>/bindings/torch (ccl_torch) for ccl. --json writes {test: [outcome,
detail]} with outcome pass, fail or skip and detail the skip's reason or the failure's last
line; --expect exits 1 if a test that passed in the given results did not pass here."""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import types

CCL = "ccl_torch"
SUITE = "torch.testing._internal.distributed.distributed_test"


def _parse_own_args(argv):
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--backend", default=os.environ.get("BACKEND", CCL))
    parser.add_argument("--json")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--names")  # a file of test names, one a line (a --jobs worker's share)
    parser.add_argument("--expect")
    parser.add_argument("--compare", nargs=2)
    parser.add_argument("--world-size", default=os.environ.get("WORLD_SIZE", "3"))
    parser.add_argument("--start", choices=("spawn", "fork"), default="spawn")
    return parser.parse_known_args(argv)


OWN, UNITTEST_ARGV = _parse_own_args(sys.argv[1:])
# Set before the suite is imported: it reads them at import, and the spawned ranks (which import
# this file again) inherit them.
os.environ["BACKEND"] = OWN.backend
os.environ["WORLD_SIZE"] = OWN.world_size
os.environ.setdefault("TEMP_DIR", tempfile.mkdtemp(prefix="torch_suite_"))
# torch's run_tests() writes JUnit XML when CI is set; this runner reports on its own.
os.environ.pop("CI", None)


def _patched_suite():
    """The suite's module, its Gloo gates opened to ccl; registered under the suite's own name,
    so that pickled test state and the spawned ranks find the same module."""
    import importlib.util
    import re

    spec = importlib.util.find_spec(SUITE)
    with open(spec.origin) as f:
        source = f.read()
    gloo_like = f'("gloo", "{CCL}")'
    source, eq = re.subn(r'BACKEND\s*==\s*"gloo"', f"BACKEND in {gloo_like}", source)
    source, ne = re.subn(r'BACKEND\s*!=\s*"gloo"', f"BACKEND not in {gloo_like}", source)
    marker = "def require_backend_is_available(backends):\n"
    assert marker in source, "torch's suite no longer has require_backend_is_available"
    source = source.replace(marker, marker + f'    if "gloo" in backends:\n'
                                             f'        backends = set(backends) | {{"{CCL}"}}\n', 1)
    module = types.ModuleType(SUITE)
    module.__file__ = spec.origin
    sys.modules[SUITE] = module
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    return module, eq + ne


# Tests no out-of-tree backend can pass, whatever it does: skipped on ccl with the reason (the
# table of docs/torch.md shows them as such).
TORCH_LIMITS = {
    "test_ddp_logging_data_cpu":
        "torch limit: DDP's logging data names every plugin backend 'custom' "
        "(ProcessGroup::getBackendName of BackendType::CUSTOM), never its registered name",
}


def load_suite():
    """The suite's test class for OWN.backend."""
    if OWN.backend == CCL:
        import ccl_torch  # noqa: F401  (registers the backend, here and in every spawned rank)
        from torch.testing._internal.common_distributed import DistTestCases

        for feature in ("ddp", "subgroup", "plugin"):
            DistTestCases.backend_feature[feature].add(CCL)
        suite, _ = _patched_suite()
    else:
        import importlib

        suite = importlib.import_module(SUITE)

    class TestDistBackendWithSpawn(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            if OWN.start == "fork":
                import torch.multiprocessing as tmp
                self._start_processes(tmp.get_context("fork").Process)
            else:
                self._spawn_processes()

    if OWN.backend == CCL:
        import unittest

        for name, reason in TORCH_LIMITS.items():
            if hasattr(TestDistBackendWithSpawn, name):
                setattr(TestDistBackendWithSpawn, name,
                        unittest.skip(reason)(getattr(TestDistBackendWithSpawn, name)))
    TestDistBackendWithSpawn.__module__ = __name__  # pickled by the spawned ranks by name
    TestDistBackendWithSpawn.__qualname__ = "TestDistBackendWithSpawn"
    return TestDistBackendWithSpawn


# Not for --compare, which only reads results.
TestDistBackendWithSpawn = None if OWN.compare else load_suite()


def _test_names(selection):
    import unittest

    names = unittest.TestLoader().getTestCaseNames(TestDistBackendWithSpawn)
    if selection:
        names = [n for n in names if any(s in n for s in selection)]
    return names


class _Recorder:
    """A unittest result that keeps one (outcome, detail) per test."""

    def __init__(self):
        import unittest

        class Result(unittest.TextTestResult):
            outcomes = {}

            def addSuccess(self, test):
                super().addSuccess(test)
                self.outcomes[test._testMethodName] = ["pass", ""]

            def addSkip(self, test, reason):
                super().addSkip(test, reason)
                self.outcomes[test._testMethodName] = ["skip", str(reason)]

            def _failed(self, test, err):
                # The last line that names an error (a rank's assertion, inside torch's report).
                lines = [l for l in self._exc_info_to_string(err, test).splitlines() if l.strip()]
                named = [l for l in lines if "Error" in l or "Exception" in l] or lines or [""]
                self.outcomes[test._testMethodName] = ["fail", named[-1].strip()[:300]]

            def addFailure(self, test, err):
                super().addFailure(test, err)
                self._failed(test, err)

            def addError(self, test, err):
                super().addError(test, err)
                self._failed(test, err)

            def addExpectedFailure(self, test, err):
                super().addExpectedFailure(test, err)
                self.outcomes[test._testMethodName] = ["pass", "expected failure"]

            def addUnexpectedSuccess(self, test):
                super().addUnexpectedSuccess(test)
                self.outcomes[test._testMethodName] = ["fail", "unexpected success"]

        self.Result = Result


def run_in_process(names, json_path):
    import unittest

    recorder = _Recorder()
    suite = unittest.TestSuite(TestDistBackendWithSpawn(n) for n in names)
    runner = unittest.TextTestRunner(resultclass=recorder.Result, verbosity=2, stream=sys.stderr)
    result = runner.run(suite)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(recorder.Result.outcomes, f, indent=0, sort_keys=True)
    return result.wasSuccessful()


def run_sharded(names, json_path, jobs):
    """Runs the tests in `jobs` worker processes (every jobs-th test each) and merges their
    results into `json_path`."""
    workers = []
    tmp = tempfile.mkdtemp(prefix="torch_suite_shards_")
    for i in range(jobs):
        out = os.path.join(tmp, f"{i}.json")
        share = os.path.join(tmp, f"{i}.names")
        with open(share, "w") as f:
            f.write("\n".join(names[i::jobs]))
        cmd = [sys.executable, __file__, "--backend", OWN.backend, "--world-size", OWN.world_size,
               "--start", OWN.start, "--names", share, "--json", out]
        log = open(os.path.join(tmp, f"{i}.log"), "w")
        workers.append((subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), out, log))
    merged = {}
    for proc, out, log in workers:
        proc.wait()
        log.close()
        if os.path.exists(out):
            with open(out) as f:
                merged.update(json.load(f))
    missing = [n for n in names if n not in merged]
    for n in missing:  # a worker that died: its tests say so
        merged[n] = ["fail", f"no result (worker logs in {tmp})"]
    with open(json_path, "w") as f:
        json.dump(merged, f, indent=0, sort_keys=True)
    return all(o != "fail" for o, _ in merged.values())


def compare(gloo_path, ccl_path):
    """The table of docs/torch.md: every test Gloo passes, and what ccl does on it; then the
    counts. Exit status 1 if a test Gloo passes does not pass on ccl."""
    with open(gloo_path) as f:
        gloo = json.load(f)
    with open(ccl_path) as f:
        ccl = json.load(f)
    passed = sorted(n for n, (o, _) in gloo.items() if o == "pass")
    print("| test (Gloo passes) | ccl |")
    print("|---|---|")
    regressions = 0
    for n in passed:
        outcome, detail = ccl.get(n, ["missing", ""])
        if outcome != "pass" and n not in TORCH_LIMITS:
            regressions += 1
        text = outcome if outcome == "pass" else f"{outcome}: {detail}".replace("|", "\\|")
        print(f"| {n} | {text} |")
    count = lambda d, o: sum(1 for v in d.values() if v[0] == o)  # noqa: E731
    print()
    print(f"Gloo: {count(gloo, 'pass')} pass, {count(gloo, 'skip')} skip, {count(gloo, 'fail')} "
          f"fail; ccl: {count(ccl, 'pass')} pass, {count(ccl, 'skip')} skip, "
          f"{count(ccl, 'fail')} fail; Gloo passes and ccl does not: {regressions} (and "
          f"{len(TORCH_LIMITS)} that no plugin backend can pass, skipped with the reason)")
    extra = sorted(n for n, (o, _) in ccl.items() if o == "pass" and gloo.get(n, [""])[0] != "pass")
    if extra:
        print(f"ccl passes and Gloo does not: {', '.join(extra)}")
    return regressions == 0


def main():
    if OWN.compare:
        return 0 if compare(*OWN.compare) else 1
    selection = [UNITTEST_ARGV[i + 1] for i, a in enumerate(UNITTEST_ARGV) if a == "-k"]
    if OWN.names:
        with open(OWN.names) as f:
            names = [line.strip() for line in f if line.strip()]
    else:
        names = _test_names(selection)
    if OWN.expect:
        # Only the tests that pass there: what this run must show (the others' outcomes are in
        # the table of a full run).
        with open(OWN.expect) as f:
            expected = json.load(f)
        names = [n for n in names if expected.get(n, [""])[0] == "pass"]
    start = time.time()
    json_path = OWN.json
    if OWN.expect and not json_path:
        json_path = os.path.join(tempfile.mkdtemp(prefix="torch_suite_"), "results.json")
    if OWN.jobs > 1 and not OWN.names:
        ok = run_sharded(names, json_path or os.devnull, OWN.jobs)
    else:
        ok = run_in_process(names, json_path)
    print(f"torch_suite: {len(names)} tests on {OWN.backend} in {time.time() - start:.0f} s",
          file=sys.stderr)
    if OWN.expect:
        with open(OWN.expect) as f:
            expected = json.load(f)
        with open(json_path) as f:
            got = json.load(f)
        lost = sorted(n for n in names if expected.get(n, [""])[0] == "pass"
                      and got.get(n, [""])[0] != "pass" and n not in TORCH_LIMITS)
        for n in lost:
            print(f"torch_suite: {n} passes in {OWN.expect} but here: {got.get(n)}",
                  file=sys.stderr)
        print(f"torch_suite: {len(lost)} of the tests that pass in {OWN.expect} do not pass here")
        return 1 if lost else 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
