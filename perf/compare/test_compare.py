#!/usr/bin/env python3
"""Unit tests of compare.py's and gloo_bench.py's parsing, command lines and table building.

No benchmark is run and torch is not needed: gloo_bench imports torch only inside a rank.
"""

import contextlib
import io
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402
import gloo_bench  # noqa: E402

SAMPLE = """\
# nThread 1 nGpus 1 minBytes 8 maxBytes 8 step: 1048576(bytes) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  12345 on       node device  0 [host] CPU
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1   412.50    2.54    2.54      0  1.2e+07    0.08    0.09    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 1.3
#
"""

# mpi_coll_bench -k broadcast under MPICH, as it prints (the tab in MPICH's string made a space).
MPICH_BCAST = """\
# mpi_coll_bench: MPI_Bcast float, MPI 4.0, 2 ranks, host vm
# library: MPICH Version: 4.0.2
# nThread 1 nGpus 1 minBytes 4096 maxBytes 4096 step: 1(factor) warmup iters: 1 iters: 10 agg iters: 1 validation: 0 graph: 0
#
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
        4096          1024     float    none       0    41.51    0.10    0.10    N/A    35.91    0.11    0.11    N/A
# Out of bounds values : 0 OK
"""


class FakeRunner(compare.Runner):
    def __init__(self, key, label, cfg=None):
        super().__init__(cfg)
        self.key, self.label = key, label


def config(collective="allreduce", **kw):
    return compare.Config(build_dir="/b", np=2, warmup=5, iters=None, check=1, timeout=60,
                          ccl_args=[], mpirun_args=[], collective=collective, **kw)


class ParseTest(unittest.TestCase):
    def test_parse_size(self):
        self.assertEqual(compare.parse_size("8"), 8)
        self.assertEqual(compare.parse_size("64K"), 65536)
        self.assertEqual(compare.parse_size("1M"), 1 << 20)
        self.assertEqual(compare.parse_size("256MB"), 256 << 20)
        self.assertEqual(compare.format_size(65536), "64 KiB")
        self.assertEqual(compare.format_size(8), "8 B")

    def test_parse_table(self):
        rows = compare.parse_table(SAMPLE)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0].size, 1048576)
        self.assertEqual(rows[0].time_us, 412.5)
        self.assertEqual(rows[0].busbw, 2.54)
        self.assertEqual(rows[0].time_us_inplace, 1.2e7)
        self.assertEqual(rows[0].busbw_inplace, 0.09)

    def test_parse_broadcast_table(self):
        rows = compare.parse_table(MPICH_BCAST)
        self.assertEqual([(r.size, r.time_us, r.busbw) for r in rows], [(4096, 41.51, 0.10)])
        self.assertEqual(rows[0].time_us_inplace, 35.91)

    def test_library_line(self):
        self.assertEqual(compare.parse_library(MPICH_BCAST), "MPICH Version: 4.0.2")
        self.assertIsNone(compare.parse_library(SAMPLE))
        self.assertIsNone(compare.library_mismatch("MPICH", MPICH_BCAST))
        self.assertIsNone(compare.library_mismatch(None, MPICH_BCAST))
        self.assertIsNone(compare.library_mismatch("Open MPI", SAMPLE))  # no line: no check
        why = compare.library_mismatch("Open MPI", MPICH_BCAST)
        self.assertIn("expected Open MPI", why)
        self.assertIn("MPICH", why)


class RatioTest(unittest.TestCase):
    def test_speedup_and_verdict(self):
        self.assertEqual(compare.speedup(10.0, 37.0), 3.7)
        self.assertIsNone(compare.speedup(None, 37.0))
        self.assertIsNone(compare.speedup(10.0, None))
        self.assertIsNone(compare.speedup(0.0, 5.0))
        self.assertEqual(compare.verdict(3.7), "3.70x faster")
        self.assertEqual(compare.verdict(1.0), "1.00x faster")
        self.assertEqual(compare.verdict(1 / 1.25), "1.25x slower")
        self.assertEqual(compare.verdict(24.23), "24.2x faster")
        self.assertEqual(compare.verdict(0.004), "250x slower")
        self.assertEqual(compare.verdict(None), "n/a")

    def test_table_and_ratios(self):
        runners = [FakeRunner("ccl", "ccl"), FakeRunner("openmpi", "Open MPI"),
                   FakeRunner("gloo", "Gloo")]
        results = {"ccl": {8: compare.Measurement([10, 30, 20], [0.001] * 3)},
                   "openmpi": {8: compare.Measurement([40, 40, 40], [0.0005] * 3)},
                   "gloo": {8: compare.Measurement([10], [0.002])}}
        header, rows = compare.build_table([8], runners, results)
        self.assertEqual(header[1:3], ["ccl time (us)", "ccl busbw (GB/s)"])
        self.assertEqual(header[-2:], ["ccl vs Open MPI", "ccl vs Gloo"])
        self.assertEqual(len(header), 1 + 2 * 3 + 2)
        self.assertEqual(rows[0][0], "8 B")
        self.assertEqual(rows[0][1], "20.00")  # median
        self.assertEqual(rows[0][-2], "2.00x faster")  # 40 us / 20 us
        self.assertEqual(rows[0][-1], "2.00x slower")  # 10 us / 20 us
        md = compare.render_markdown(header, rows)
        self.assertTrue(md.startswith("| size | ccl time (us)"))
        text = compare.render_text(header, rows)
        self.assertEqual(len(set(len(line) for line in text.splitlines())), 1)  # aligned

    def test_missing_results_show_na(self):
        runners = [FakeRunner("ccl", "ccl"), FakeRunner("openmpi", "Open MPI")]
        results = {"ccl": {8: compare.Measurement()}, "openmpi": {8: compare.Measurement()}}
        _, rows = compare.build_table([8], runners, results)
        self.assertEqual(rows[0][1:], ["n/a"] * 5)


class IterationsTest(unittest.TestCase):
    def test_iterations_shrink_with_size(self):
        self.assertGreater(compare.default_iters(8), compare.default_iters(256 << 20))

    def test_gloo_capped_only_when_large(self):
        self.assertEqual(compare.gloo_iters(8, 1000), 1000)
        self.assertEqual(compare.gloo_iters(16 << 20, 50), 50)
        self.assertEqual(compare.gloo_iters(64 << 20, 20), 16)
        self.assertEqual(compare.gloo_iters(256 << 20, 20), compare.GLOO_MIN_ITERS)
        self.assertEqual(compare.gloo_iters(256 << 20, 3), 3)  # never more than asked

    def test_gloo_runner_uses_capped_count(self):
        g = compare.GlooRunner(config())
        self.assertEqual(g.iters(256 << 20), compare.GLOO_MIN_ITERS)
        self.assertEqual(compare.OpenMpiRunner(config()).iters(256 << 20), 20)


class CommandTest(unittest.TestCase):
    def flags(self, cmd, flag):
        return cmd[cmd.index(flag) + 1]

    def test_ccl(self):
        ar = compare.CclRunner(config()).command(1024)
        self.assertEqual(ar[:3], ["/b/tools/cclrun", "-np", "2"])
        self.assertEqual(ar[3], "/b/perf/all_reduce_perf")
        self.assertEqual(self.flags(ar, "-o"), "sum")
        bc = compare.CclRunner(config("broadcast")).command(1024)
        self.assertEqual(bc[3], "/b/perf/broadcast_perf")
        self.assertEqual(self.flags(bc, "-r"), "0")
        self.assertNotIn("-o", bc)
        for cmd in (ar, bc):
            self.assertEqual(self.flags(cmd, "-b"), "1024")
            self.assertEqual(self.flags(cmd, "-n"), "1000")
            self.assertEqual(self.flags(cmd, "-d"), "float")
            self.assertEqual(self.flags(cmd, "-y"), "1")  # blocking, like the peers
            self.assertNotIn("-R", cmd)

    def test_ccl_collectives(self):
        want = {"allgather": ("all_gather_perf", None),
                "reducescatter": ("reduce_scatter_perf", "sum"),
                "alltoall": ("alltoall_perf", None)}
        for coll, (binary, op) in want.items():
            cmd = compare.CclRunner(config(coll)).command(1 << 20)
            self.assertEqual(cmd[3], "/b/perf/" + binary)
            self.assertEqual(self.flags(cmd, "-b"), str(1 << 20))  # nccl-tests' size: the whole
            self.assertNotIn("-r", cmd)
            if op:
                self.assertEqual(self.flags(cmd, "-o"), op)
            else:
                self.assertNotIn("-o", cmd)
        self.assertEqual(set(compare.COLLECTIVES),
                         {"allreduce", "broadcast", "allgather", "reducescatter", "alltoall"})

    def test_ccl_modes(self):
        stream = compare.CclStreamRunner(config()).command(1024)
        self.assertNotIn("-y", stream)
        registered = compare.CclRegisteredRunner(config("broadcast")).command(1024)
        self.assertEqual(self.flags(registered, "-R"), "1")
        self.assertEqual(self.flags(registered, "-y"), "1")
        self.assertEqual(registered[3], "/b/perf/broadcast_perf")

    def test_mpi_peers(self):
        for coll in compare.COLLECTIVES:
            ompi = compare.OpenMpiRunner(config(coll)).command(64 << 20)
            self.assertIn(os.path.basename(ompi[0]), compare.OPENMPI_LAUNCHERS)
            self.assertIn("--oversubscribe", ompi)
            self.assertIn("/b/perf/mpi_coll_bench", ompi)
            self.assertEqual(self.flags(ompi, "-k"), coll)
            self.assertEqual(self.flags(ompi, "-n"), "20")
            mpich = compare.MpichRunner(config(coll)).command(64 << 20)
            self.assertIn(os.path.basename(mpich[0]), compare.MPICH_LAUNCHERS)
            self.assertIn("/b/perf/mpich_coll_bench", mpich)
            self.assertEqual(self.flags(mpich, "-k"), coll)
            self.assertEqual("-r" in mpich, coll == "broadcast")
        nofault = compare.OpenMpiPersistentRunner(config()).command(8)
        at = nofault.index("/b/perf/mpi_coll_bench")
        self.assertIn("-x", nofault[:at])
        self.assertTrue(any(a.startswith("MALLOC_MMAP_THRESHOLD_=") for a in nofault[:at]))

    def test_gloo(self):
        cmd = compare.GlooRunner(config("broadcast")).command(256 << 20)
        self.assertEqual(cmd[0], compare.DEFAULT_GLOO_PYTHON)
        self.assertTrue(cmd[0].endswith(".venv/bin/python"))
        self.assertTrue(cmd[1].endswith("gloo_bench.py"))
        self.assertEqual(self.flags(cmd, "-np"), "2")
        self.assertEqual(self.flags(cmd, "-k"), "broadcast")
        self.assertEqual(self.flags(cmd, "-r"), "0")
        self.assertEqual(self.flags(cmd, "-n"), str(compare.GLOO_MIN_ITERS))
        self.assertLess(int(self.flags(cmd, "--timeout")), 60)  # stops before compare.py would
        opt = gloo_bench.parse_args(cmd[2:])  # gloo_bench accepts what compare.py passes
        self.assertEqual((opt.np, opt.collective, opt.minbytes, opt.iters, opt.root),
                         (2, "broadcast", 256 << 20, compare.GLOO_MIN_ITERS, 0))

    def test_gloo_new_collectives(self):
        for coll in compare.PIECE_COLLECTIVES:
            cmd = compare.GlooRunner(config(coll)).command(1 << 20)
            self.assertEqual(self.flags(cmd, "-k"), coll)
            self.assertNotIn("-r", cmd)
            opt = gloo_bench.parse_args(cmd[2:])
            self.assertEqual(opt.collective, coll)
            probe = compare.GlooRunner(config(coll)).probe_command()
            self.assertEqual(self.flags(probe, "-np"), "1")
            self.assertEqual(gloo_bench.parse_args(probe[2:]).collective, coll)

    def test_dry_run_and_unknown_peer(self):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = compare.main(["--dry-run", "--build-dir", "/b", "--sizes", "8",
                               "--launches", "1", "--collective", "broadcast"])
        self.assertEqual(rc, 0)
        lines = err.getvalue().splitlines()
        self.assertEqual(len(lines), len(compare.RUNNERS))  # ccl + every default peer
        self.assertTrue(all(line.startswith("$ ") for line in lines))
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            compare.main(["--dry-run", "--peers", "nope"])


class OutputTest(unittest.TestCase):
    def test_notes(self):
        cfg = config()
        runners = [compare.CclRunner(cfg), compare.OpenMpiRunner(cfg), compare.GlooRunner(cfg)]
        notes = compare.notes([8, 256 << 20], runners, in_place=False)
        self.assertTrue(any("ccl vs X" in n for n in notes))
        gloo = [n for n in notes if n.startswith("Gloo runs fewer")]
        self.assertEqual(len(gloo), 1)
        self.assertIn("256 MiB 5 (others 20)", gloo[0])
        self.assertNotIn("8 B", gloo[0])
        self.assertTrue(any(n.startswith("Gloo: no out-of-place") for n in notes))
        # Broadcast: MPI_Bcast has one buffer too.
        cfg = config("broadcast")
        runners = [compare.CclRunner(cfg), compare.OpenMpiRunner(cfg), compare.GlooRunner(cfg)]
        notes = compare.notes([8], runners, in_place=False)
        self.assertTrue(any(n.startswith("Open MPI, Gloo: no out-of-place") for n in notes))
        self.assertFalse(any("fewer" in n for n in notes))
        self.assertFalse(any("out-of-place" in n for n in compare.notes([8], runners, True)))

    def test_render(self):
        header, rows = ["size", "x"], [["8 B", "1.00"]]
        title = compare.title(config("broadcast"), 3, False)
        self.assertEqual(title, "broadcast, float, root 0, out of place, 2 ranks, "
                                "median of 3 launches")
        md = compare.render(title, ["a note"], header, rows, markdown=True).splitlines()
        self.assertEqual(md[:4], [title, "", "- a note", ""])
        self.assertTrue(md[4].startswith("| size"))
        text = compare.render(title, ["a note"], header, rows, markdown=False).splitlines()
        self.assertEqual(text[:2], ["# " + title, "# a note"])


class GlooBenchTest(unittest.TestCase):
    def opt(self, *argv):
        return gloo_bench.parse_args(list(argv))

    def test_sizes(self):
        self.assertEqual(gloo_bench.sizes(self.opt("-b", "8", "-e", "1M", "-f", "128")),
                         [8, 1024, 131072])
        self.assertEqual(gloo_bench.sizes(self.opt("-b", "1K", "-e", "3K", "-i", "1K")),
                         [1024, 2048, 3072])
        self.assertEqual(gloo_bench.parse_size("64M"), 64 << 20)

    def test_bus_factor(self):
        self.assertEqual(gloo_bench.bus_factor("broadcast", 4), 1.0)
        self.assertEqual(gloo_bench.bus_factor("allreduce", 4), 1.5)
        self.assertEqual(gloo_bench.bus_factor("allreduce", 1), 0.0)

    def test_format_number(self):
        self.assertEqual(gloo_bench.format_number(412.5, 7), " 412.50")
        self.assertEqual(gloo_bench.format_number(123456.0, 7), " 123456")
        self.assertEqual(gloo_bench.format_number(12345678.0, 7), "1.2e+07")
        self.assertEqual(gloo_bench.format_number(0.004, 6), "  0.00")

    def test_output_parses(self):
        opt = self.opt("-k", "broadcast", "-b", "1M", "-e", "1M", "-n", "5")
        text = "\n".join([gloo_bench.header_text(opt, 2, "1.13"),
                          gloo_bench.row_text(1 << 20, 1 << 18, "broadcast", 0, 1e-3, 1.0, 0)])
        self.assertEqual(compare.parse_library(text), "Gloo (PyTorch)")
        self.assertIsNone(compare.library_mismatch(compare.GlooRunner.library, text))
        rows = compare.parse_table(text)
        self.assertEqual(len(rows), 1)
        self.assertEqual(rows[0].size, 1 << 20)
        self.assertEqual(rows[0].time_us, 1000.0)
        self.assertEqual(rows[0].busbw, 1.05)  # 1 MiB / 1 ms, factor 1
        self.assertEqual((rows[0].time_us_inplace, rows[0].busbw_inplace), (1000.0, 1.05))
        fields = text.splitlines()[-1].split()
        self.assertEqual(fields[3:5], ["none", "0"])
        self.assertEqual((fields[8], fields[12]), ("0", "0"))
        allreduce = gloo_bench.row_text(8, 2, "allreduce", 0, 2e-6, 1.0, None).split()
        self.assertEqual(allreduce[3:5], ["sum", "-1"])
        self.assertEqual(allreduce[8], "N/A")

    def test_bad_arguments(self):
        with contextlib.redirect_stderr(io.StringIO()):
            for argv in (["-b", "2M", "-e", "1M"], ["-k", "reduce"], ["-n", "0"]):
                with self.assertRaises(SystemExit):
                    self.opt(*argv)


class PieceCollectivesTest(unittest.TestCase):
    """allgather, reducescatter and alltoall: sizes, factors, rows, notes and Gloo's probe."""

    def test_geometry_is_nccl_tests(self):
        # 1 MiB of float over 3 ranks: 87381 per rank, rounded down to 4 floats (16 bytes).
        for coll in compare.PIECE_COLLECTIVES:
            self.assertEqual(gloo_bench.geometry(coll, 1 << 20, 3), (87380, 87380 * 3 * 4))
            self.assertEqual(gloo_bench.geometry(coll, 8, 2), (0, 0))  # no row
        self.assertEqual(gloo_bench.geometry("allreduce", 1 << 20, 3), (1 << 18, 1 << 20))
        self.assertEqual(gloo_bench.geometry("broadcast", 7, 3), (1, 4))

    def test_bus_factors(self):
        for coll in compare.PIECE_COLLECTIVES:
            self.assertEqual(gloo_bench.bus_factor(coll, 4), 0.75)
            self.assertEqual(gloo_bench.bus_factor(coll, 1), 0.0)

    def test_rows(self):
        text = gloo_bench.row_text(992, 124, "allgather", 0, 1e-6, 0.5, 0)
        ag = text.split()
        self.assertEqual(ag[:5], ["992", "124", "float", "none", "-1"])
        self.assertEqual((ag[6], ag[7]), ("0.99", "0.50"))  # algbw on the whole buffer
        rs = gloo_bench.row_text(992, 124, "reducescatter", 0, 1e-6, 0.5, None).split()
        self.assertEqual(rs[3:5], ["sum", "-1"])
        rows = compare.parse_table(text)
        self.assertEqual((rows[0].size, rows[0].busbw), (992, 0.5))

    def test_notes_and_title(self):
        cfg = config("alltoall")
        runners = [compare.CclRunner(cfg), compare.OpenMpiRunner(cfg), compare.GlooRunner(cfg)]
        out_of_place = compare.notes([8], runners, in_place=False)
        self.assertTrue(any(n.startswith("size: the whole buffer, 2 pieces") for n in out_of_place))
        self.assertFalse(any("no out-of-place" in n for n in out_of_place))
        in_place = compare.notes([8], runners, in_place=True)
        self.assertTrue(any(n.startswith("Gloo: no in-place form") for n in in_place))
        self.assertEqual(compare.title(cfg, 1, True),
                         "alltoall, float, in place, 2 ranks, median of 1 launches")
        self.assertIsNone(compare.OpenMpiRunner(cfg).only_form())
        self.assertEqual(compare.GlooRunner(config()).only_form(), "in-place")

    def test_probe_verdict(self):
        unsupported = (3, "# unsupported: Gloo in torch 1.13 does not support x (boom)\n", "")
        self.assertEqual(compare.probe_verdict(unsupported),
                         "Gloo in torch 1.13 does not support x (boom)")
        self.assertIsNone(compare.probe_verdict((0, "", "")))
        self.assertIn("exit 1", compare.probe_verdict((1, "", "Traceback\nImportError: x")))
        self.assertIn("ImportError", compare.probe_verdict((1, "", "Traceback\nImportError: x")))
        self.assertIn("timed out", compare.probe_verdict(None))

    def test_gloo_skips_a_collective_it_lacks(self):
        class Lacking(compare.GlooRunner):
            _lacks = {}
            runs = 0

            def probe_command(self):
                Lacking.runs += 1
                return [sys.executable, "-c",
                        "print('# unsupported: no reduce_scatter_tensor'); raise SystemExit(3)"]

        cfg = config("reducescatter", gloo_python=sys.executable)
        self.assertEqual(Lacking(cfg).collective_missing(sys.executable),
                         "no reduce_scatter_tensor")
        self.assertEqual(Lacking(cfg).collective_missing(sys.executable),
                         "no reduce_scatter_tensor")
        self.assertEqual(Lacking.runs, 1)  # probed once per interpreter and collective
        self.assertIsNone(Lacking(config("allreduce")).collective_missing(sys.executable))
        self.assertEqual(Lacking.runs, 1)  # allreduce: not probed


class BoundedTest(unittest.TestCase):
    def test_timeout_kills_the_process_group(self):
        # A child that starts a grandchild, both sleeping: a timeout must take both down.
        code = ("import subprocess, sys, time; "
                "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
                "print('started', flush=True); time.sleep(60)")
        t0 = time.monotonic()
        self.assertIsNone(compare.run_bounded([sys.executable, "-c", code], dict(os.environ), 2))
        self.assertLess(time.monotonic() - t0, 30)

    def test_exit_status_and_output(self):
        rc, out, _ = compare.run_bounded([sys.executable, "-c", "print('x'); raise SystemExit(3)"],
                                         dict(os.environ), 30)
        self.assertEqual((rc, out.strip()), (3, "x"))


if __name__ == "__main__":
    unittest.main()
