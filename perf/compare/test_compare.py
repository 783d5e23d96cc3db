#!/usr/bin/env python3
"""Unit tests of compare.py's parsing and table building (no benchmark is run)."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402

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


class FakeRunner(compare.Runner):
    def __init__(self, key, label):
        super().__init__(None)
        self.key, self.label = key, label


class CompareTest(unittest.TestCase):
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

    def test_table_and_ratios(self):
        runners = [FakeRunner("ccl", "ccl"), FakeRunner("openmpi", "Open MPI")]
        results = {"ccl": {8: compare.Measurement([10, 30, 20], [0.001] * 3)},
                   "openmpi": {8: compare.Measurement([40, 40, 40], [0.0005] * 3)}}
        header, rows = compare.build_table([8], runners, results)
        self.assertEqual(header[1:3], ["ccl time (us)", "ccl busbw (GB/s)"])
        self.assertEqual(header[-2:], ["busbw ccl/Open MPI", "time ccl/Open MPI"])
        self.assertEqual(rows[0][0], "8 B")
        self.assertEqual(rows[0][1], "20.00")  # median
        self.assertEqual(rows[0][-2], "2.00")
        self.assertEqual(rows[0][-1], "0.50")
        md = compare.render_markdown(header, rows)
        self.assertTrue(md.startswith("| size | ccl time (us)"))
        text = compare.render_text(header, rows)
        self.assertEqual(len(set(len(line) for line in text.splitlines())), 1)  # aligned

    def test_missing_results_show_na(self):
        runners = [FakeRunner("ccl", "ccl"), FakeRunner("openmpi", "Open MPI")]
        results = {"ccl": {8: compare.Measurement()}, "openmpi": {8: compare.Measurement()}}
        _, rows = compare.build_table([8], runners, results)
        self.assertEqual(rows[0][1:], ["n/a"] * 6)

    def test_iterations_shrink_with_size(self):
        self.assertGreater(compare.default_iters(8), compare.default_iters(256 << 20))


if __name__ == "__main__":
    unittest.main()
