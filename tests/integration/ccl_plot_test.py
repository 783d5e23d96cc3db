#!/usr/bin/python3
"""ccl-plot on real reports: a 2-rank ccl-check --json and an all_reduce_perf --json (when given)
are plotted (busbw of both files on one plot, the pairwise heatmap), as PNG (read back: size,
colours, the axes in its metadata) and as SVG (parsed: the axis labels, ticks and legend are
text); hand-written ccl-sim --json files (8 and 128 ranks) make the scaling and crossover plots
(the crossover printed exactly); two hand-written per-rank traces are merged and read back; bad
input exits 2 with a message and no traceback. Exit 77 (skipped) when this interpreter lacks
matplotlib or PIL.

  /usr/bin/python3 ccl_plot_test.py CCL_PLOT CCLRUN CCL_CHECK [ALL_REDUCE_PERF]
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.image
    from PIL import Image
except ImportError as e:
    print(f"SKIP: {sys.executable} lacks matplotlib or PIL ({e}); "
          "apt-get install python3-matplotlib")
    sys.exit(77)

CHECK_FLAGS = ["-b", "8", "-e", "64K", "-f", "8", "--iters", "4", "--warmup", "1",
               "--repeats", "2", "--pair-bytes", "64K", "--pair-iters", "3", "--quiet"]
PERF_FLAGS = ["-b", "8", "-e", "64K", "-f", "8", "-n", "4", "-w", "1"]
SVG = "{http://www.w3.org/2000/svg}"
XLABEL, YLABEL = "message size (bytes)", "busbw (GB/s)"
K, M = 1 << 10, 1 << 20
TOOLS = {}


def run(cmd, timeout=60):
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout, out.stderr


def plot(*args):
    return run([TOOLS["plot"], *args])


def read_json(path):
    with open(path) as f:
        return json.load(f)


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)


def svg_texts(path):
    """Every <text> of an SVG, as one string each (tspans joined)."""
    root = ET.parse(path).getroot()
    return ["".join(t.itertext()).strip() for t in root.iter(SVG + "text")]


def sim_row(ranks, size, algorithm, time_us, pick):
    algbw = size / time_us / 1e3
    return {"collective": "allreduce", "bytes": size, "ranks": ranks, "algorithm": algorithm,
            "protocol": "LL", "pick": pick, "simulated": True, "ranks_run": ranks,
            "time_us": time_us, "algbw": algbw, "busbw": algbw * 2 * (ranks - 1) / ranks,
            "predicted_us": time_us}


def sim_doc(ranks, times):
    """ccl-sim's --json of one rank count: times is {size: {algorithm: time_us}}; each size's
    fastest is the pick, its first row, as ccl-sim writes it."""
    rows = []
    for size, of_algo in times.items():
        fastest_first = sorted(of_algo, key=of_algo.get)
        rows += [sim_row(ranks, size, a, of_algo[a], i == 0) for i, a in enumerate(fastest_first)]
    return {"program": "ccl-sim", "results": rows}


class PlotCase(unittest.TestCase):
    def plot_ok(self, *args):
        rc, out, err = plot(*args)
        self.assertEqual(rc, 0, f"ccl-plot {' '.join(args)}: exit {rc}\n{out}{err}")
        return out

    def assert_png(self, path, title, xlabel, ylabel, min_size=(300, 200)):
        pixels = matplotlib.image.imread(path)
        height, width = pixels.shape[:2]
        self.assertGreaterEqual(width, min_size[0])
        self.assertGreaterEqual(height, min_size[1])
        self.assertLess(max(width, height), 4000)
        colours = {tuple(p) for p in pixels.reshape(-1, pixels.shape[2])[::7].tolist()}
        self.assertGreater(len(colours), 10, "the PNG is (nearly) one colour")
        with Image.open(path) as image:
            info = image.info
        self.assertEqual(info.get("Title"), title)
        self.assertEqual(info.get("Description"), f"x: {xlabel}; y: {ylabel}")

    def assert_usage_error(self, args, names):
        rc, out, err = plot(*args)
        self.assertEqual(rc, 2, f"ccl-plot {' '.join(args)}: exit {rc}\n{out}{err}")
        self.assertNotIn("Traceback", err)
        self.assertIn(names, err)


class Reports(PlotCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name
        cls.check = cls.path("check.json")
        rc, out, err = run([TOOLS["cclrun"], "--timeout", "60", "-np", "2", TOOLS["check"],
                            *CHECK_FLAGS, "--json", cls.check], timeout=90)
        # PASS or FAIL (a busy machine) both write the report, which is all this test needs.
        if rc not in (0, 1) or not os.path.exists(cls.check):
            raise RuntimeError(f"ccl-check exited {rc} without a report\n{out}{err}")
        cls.perf = None
        if TOOLS.get("perf"):
            cls.perf = cls.path("perf.json")
            rc, out, err = run([TOOLS["cclrun"], "--timeout", "60", "-np", "2", TOOLS["perf"],
                                *PERF_FLAGS, "--json", cls.perf], timeout=90)
            if rc != 0 or not os.path.exists(cls.perf):
                raise RuntimeError(f"all_reduce_perf exited {rc}\n{out}{err}")
        cls.runs = [cls.check] + ([cls.perf] if cls.perf else [])

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def test_busbw_png_of_both_reports(self):
        out = self.path("busbw.png")
        self.plot_ok("busbw", out, "--title", "two runs", *self.runs)
        self.assert_png(out, "two runs", XLABEL, YLABEL, min_size=(600, 350))

    def test_busbw_svg_keeps_text(self):
        out = self.path("busbw.svg")
        self.plot_ok("busbw", out, *self.runs)
        texts = svg_texts(out)
        for label in (XLABEL, YLABEL, "busbw", "8B", "32K", "check: allreduce",
                      "check: broadcast"):
            self.assertIn(label, texts)
        if self.perf:
            self.assertIn("perf: all_reduce", texts)

    def test_busbw_one_collective(self):
        out = self.path("allreduce.svg")
        self.plot_ok("busbw", out, "--collective", "all_reduce", *self.runs)
        texts = svg_texts(out)
        self.assertIn("check: allreduce", texts)
        self.assertNotIn("check: broadcast", texts)
        if self.perf:
            self.assertIn("perf: all_reduce", texts)

    def test_heatmap_png_and_svg(self):
        report = read_json(self.check)
        host = report["host_of_rank"][0]
        bandwidth = report["pairs"][0]["bandwidth_gbps"]
        out = self.path("pairs.png")
        self.plot_ok("heatmap", out, self.check)
        self.assert_png(out, "pairwise bandwidth (GB/s)", "rank (host)", "rank (host)")
        out = self.path("pairs.svg")
        self.plot_ok("heatmap", out, "--title", "links", self.check)
        texts = svg_texts(out)
        for label in ("links", "bandwidth (GB/s)", f"0 ({host})", f"1 ({host})",
                      f"{bandwidth:.3g}"):
            self.assertIn(label, texts)
        # Both cells of the pair (the matrix is symmetric); a colour-bar tick may happen to read
        # the same three digits, so at least two.
        self.assertGreaterEqual(texts.count(f"{bandwidth:.3g}"), 2, "the matrix is symmetric")
        out = self.path("latency.svg")
        self.plot_ok("heatmap", out, "--metric", "latency", self.check)
        self.assertIn("latency (\u00b5s)", svg_texts(out))


class Trace(unittest.TestCase):
    def test_merge_two_ranks(self):
        with tempfile.TemporaryDirectory() as tmp:
            rank0 = {"traceEvents": [
                {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "rank 0"}},
                {"ph": "X", "pid": 0, "tid": 0, "name": "allreduce", "ts": 30.0, "dur": 4},
                {"ph": "X", "pid": 0, "tid": 0, "name": "allreduce", "ts": 10.0, "dur": 4}],
                "displayTimeUnit": "ns", "otherData": {"rank": 0, "nranks": 2}}
            rank1 = [  # the bare-array form
                {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "rank 1"}},
                {"ph": "X", "pid": 1, "tid": 0, "name": "allreduce", "ts": 20.0, "dur": 4}]
            files = []
            for i, doc in enumerate((rank0, rank1)):
                files.append(os.path.join(tmp, f"rank{i}.json"))
                write_json(files[-1], doc)
            out = os.path.join(tmp, "merged.json")
            rc, _, err = plot("trace", out, *files)
            self.assertEqual(rc, 0, err)
            merged = read_json(out)
            events = merged["traceEvents"]
            self.assertEqual(len(events), 5)
            self.assertEqual([e["ph"] for e in events[:2]], ["M", "M"])
            self.assertEqual({e["pid"] for e in events[:2]}, {0, 1})
            self.assertEqual([(e["pid"], e["ts"]) for e in events[2:]],
                             [(0, 10.0), (1, 20.0), (0, 30.0)])
            self.assertEqual(merged.get("displayTimeUnit"), "ns")
            sources = merged["otherData"]["sources"]
            self.assertEqual([s["file"] for s in sources], files)
            self.assertEqual(sources[0].get("rank"), 0)


class Simulator(PlotCase):
    """scaling and crossover of hand-written ccl-sim --json files: 8 ranks (1K, 1M, 4M) and 128
    ranks (1K, 1M); tree is the fastest up to 64K, ring from 256K."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.r8 = self.sim("r8.json", 8, {K: {"ring": 20.0, "tree": 10.0},
                                          M: {"ring": 300.0, "tree": 900.0},
                                          4 * M: {"ring": 1100.0, "tree": 3500.0}})
        self.r128 = self.sim("r128.json", 128, {K: {"ring": 300.0, "tree": 40.0},
                                                M: {"ring": 900.0, "tree": 2000.0}})
        self.cross = self.sim("cross.json", 8, {K: {"ring": 30.0, "tree": 10.0},
                                                64 * K: {"ring": 60.0, "tree": 40.0},
                                                256 * K: {"ring": 120.0, "tree": 200.0},
                                                M: {"ring": 400.0, "tree": 800.0}})

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def sim(self, name, ranks, times):
        write_json(self.path(name), sim_doc(ranks, times))
        return self.path(name)

    def test_scaling_png_of_two_rank_counts(self):
        out = self.path("scaling.png")
        self.plot_ok("scaling", out, self.r8, self.r128)
        # 1M: the largest size in both files (4M is in r8 only).
        self.assert_png(out, "allreduce busbw at 1M", "ranks", YLABEL)

    def test_scaling_svg_lines_and_ticks(self):
        out = self.path("scaling.svg")
        self.plot_ok("scaling", out, "--title", "at 1K", "--bytes", "1K", "--algorithm", "ring",
                     self.r8, self.r128)
        texts = svg_texts(out)
        for label in ("at 1K", "ranks", YLABEL, "8", "128", "tuner's pick", "ring/LL"):
            self.assertIn(label, texts)
        self.assertNotIn("tree/LL", texts)

    def test_scaling_size_missing_from_a_file(self):
        out = self.path("scaling.png")
        self.assert_usage_error(["scaling", out, "--bytes", "4M", self.r8, self.r128],
                                f"{self.r128}: no result at 4M")
        self.assert_usage_error(["scaling", out, "--bytes", "4Q", self.r8], "invalid size")
        self.assert_usage_error(["scaling", out, "--algorithm", "nccl", self.r8], "nccl")
        self.assertFalse(os.path.exists(out), "a bad run wrote OUT")

    def test_crossover_printed_and_marked(self):
        out = self.path("crossover.png")
        printed = self.plot_ok("crossover", out, self.cross)
        self.assertEqual(printed,
                         "crossover: tree/LL -> ring/LL between 65536 and 262144 bytes\n")
        self.assert_png(out, "allreduce on 8 ranks", XLABEL, "time (\u00b5s)")
        out = self.path("crossover.svg")
        self.plot_ok("crossover", out, "--metric", "busbw", self.cross)
        texts = svg_texts(out)
        for label in (XLABEL, YLABEL, "tree/LL", "ring/LL", "64K", "256K",
                      "tree/LL \u2192 ring/LL at 64K\u2013256K"):
            self.assertIn(label, texts)

    def test_bad_inputs(self):
        out = self.path("out.png")
        perf = self.path("perf.json")
        write_json(perf, {"program": "all_reduce_perf", "results": []})
        no_time = self.path("no_time.json")
        doc = sim_doc(8, {K: {"ring": 20.0}})
        del doc["results"][0]["time_us"]
        write_json(no_time, doc)
        both = self.path("both.json")
        doc = read_json(self.r8)
        doc["results"] += read_json(self.r128)["results"]
        write_json(both, doc)
        self.assert_usage_error(["scaling", out, perf], perf)
        self.assert_usage_error(["crossover", out, perf], perf)
        self.assert_usage_error(["crossover", out, no_time], f"{no_time}: results[0]: "
                                "\"time_us\" is missing")
        self.assert_usage_error(["crossover", out, both], f"{both}: several rank counts (8, 128)")
        self.assert_usage_error(["scaling", out, self.r8, self.sim("r8_again.json", 8, {
            M: {"ring": 1.0}})], "8 ranks at 1M")
        self.assertFalse(os.path.exists(out), "a bad run wrote OUT")


class BadInput(PlotCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def file(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_bad_inputs(self):
        out = os.path.join(self.tmp.name, "out.png")
        missing = os.path.join(self.tmp.name, "missing.json")
        invalid = self.file("invalid.json", '{"sweep": [')
        neither = self.file("neither.json", '{"hello": 1}')
        bad_point = self.file("bad_point.json", '{"sweep": [{"collective": "allreduce"}]}')
        no_pairs = self.file("no_pairs.json", '{"sweep": [], "pairs": []}')
        not_trace = self.file("not_trace.json", '{"events": []}')
        good = self.file("good.json", json.dumps({"sweep": [
            {"collective": "allreduce", "bytes": 8, "busbw_gbps": 1.0}]}))
        self.assert_usage_error(["busbw", out, missing], missing)
        self.assert_usage_error(["busbw", out, invalid], invalid)
        self.assert_usage_error(["busbw", out, neither], neither)
        self.assert_usage_error(["busbw", out, bad_point], "bytes")
        self.assert_usage_error(["busbw", out, good, invalid], invalid)
        pdf = os.path.join(self.tmp.name, "out.pdf")
        self.assert_usage_error(["busbw", pdf, good], ".pdf")
        self.assert_usage_error(["heatmap", pdf, good], ".pdf")
        self.assert_usage_error(["heatmap", out, no_pairs], no_pairs)
        self.assert_usage_error(["heatmap", out, good], good)
        self.assert_usage_error(["trace", out, missing], missing)
        self.assert_usage_error(["trace", out, invalid], invalid)
        self.assert_usage_error(["trace", out, not_trace], not_trace)
        self.assert_usage_error(["frobnicate"], "invalid choice")
        self.assertFalse(os.path.exists(out) or os.path.exists(pdf), "a bad run wrote OUT")


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    TOOLS.update(zip(("plot", "cclrun", "check", "perf"), sys.argv[1:]))
    result = unittest.main(argv=[sys.argv[0], "-v"], exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)


if __name__ == "__main__":
    main()
