#!/usr/bin/env python3
"""ccl-check on one host under cclrun: a clean run passes and its reports parse (JSON read back,
JUnit with its schema's required elements and attributes, CSV with its header); a threshold above
what the machine can do fails with CCL-CHECK-101 and exit 1; a baseline file round-trips (its own
report read back is matched size for size: 100x below at 256K passes, 10x above fails with
CCL-CHECK-103); bad usage exits 2.

  ccl_check_test.py CCLRUN CCL_CHECK
"""
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

FAST = ["-b", "8", "-e", "256K", "-f", "8", "--iters", "4", "--warmup", "1", "--repeats", "2",
        "--pair-bytes", "256K", "--pair-iters", "3", "--quiet"]
# --quiet leaves out the progress lines, not the inventory and ring summaries (stderr).


def run(cclrun, tool, *args, ranks=2):
    cmd = [cclrun, "--timeout", "120", "-np", str(ranks), tool, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    return out.returncode, out.stdout, out.stderr


def expect(cond, what, out=""):
    if not cond:
        sys.exit(f"FAIL: {what}\n{out}")


def main():
    cclrun, tool = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        js, xml, csv = (os.path.join(tmp, f) for f in ("r.json", "r.xml", "r.csv"))
        rc, out, err = run(cclrun, tool, *FAST, "--json", js, "--junit", xml, "--csv", csv)
        expect(rc == 0, f"a clean run exits {rc}", out + err)
        expect(" | PASS" in out and "ccl-check: PASS" in out, "no PASS lines", out)
        report = json.load(open(js))
        for key in ("ccl_version", "ranks", "host_of_rank", "environment", "sweep", "pairs",
                    "checks", "verdict"):
            expect(key in report, f"JSON lacks {key}", json.dumps(report)[:2000])
        expect(report["verdict"] == "PASS" and report["ranks"] == 2, "JSON verdict/ranks")
        expect({p["collective"] for p in report["sweep"]} ==
               {"allreduce", "broadcast", "reduce", "allgather", "reducescatter", "alltoall"},
               "the sweep misses a collective")
        expect(len(report["pairs"]) == 1 and report["pairs"][0]["bandwidth_gbps"] > 0, "pairs")
        inv = report["inventory"]
        expect(len(inv["hosts"]) == 1 and inv["hosts"][0]["ranks"] == [0, 1] and
               inv["hosts"][0]["topology"].startswith("machine"), "inventory hosts", str(inv))
        expect(inv["transport"][0][0] == "self" and inv["transport"][0][1] in ("shm", "loopback")
               and inv["transport"][0][1] == inv["transport"][1][0], "inventory transports",
               str(inv["transport"]))
        expect(report["ring"]["bandwidth_gbps"] > 0 and report["ring"]["slowest_rank"] in (0, 1),
               "ring", str(report["ring"]))
        expect("pairs by transport:" in err and "ring of all 2 ranks" in err,
               "the inventory and ring lines", err)
        root = ET.parse(xml).getroot()
        suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
        expect(suites, "JUnit has no <testsuite>")
        for suite in suites:
            for attr in ("name", "tests", "failures"):
                expect(attr in suite.attrib, f"<testsuite> lacks {attr}")
            cases = suite.findall("testcase")
            expect(cases and int(suite.attrib["tests"]) == len(cases), "JUnit testcase count")
            for case in cases:
                expect("name" in case.attrib and "classname" in case.attrib, "<testcase> attrs")
        lines = open(csv).read().splitlines()
        expect(lines[0] == "collective,bytes,time_us,algbw_gbps,busbw_gbps,runs,correct", "CSV")
        expect(len(lines) == 1 + len(report["sweep"]), "CSV rows")

        rc, out, err = run(cclrun, tool, *FAST, "--min-busbw", "allreduce:256K=100000",
                           "--junit", xml)
        expect(rc == 1 and "cluster | FAIL CCL-CHECK-101 allreduce 256K busbw" in out,
               f"an impossible threshold: exit {rc}", out + err)
        failure = ET.parse(xml).getroot().find(".//failure")
        expect(failure is not None and failure.attrib.get("type") == "CCL-CHECK-101",
               "JUnit <failure type=CCL-CHECK-101>")

        # The round trip: its own report, read back as the baseline, is matched size for size.
        # Scaled down 100x, so that a busy machine (ctest runs tests side by side) cannot fail it;
        # then 10x up, which no machine can meet.
        worse = dict(report)
        # (Only the largest size: under load an 8-byte call can take 100x its idle time.)
        worse["sweep"] = [dict(p, busbw_gbps=p["busbw_gbps"] / 100) for p in report["sweep"]
                          if p["bytes"] == 256 * 1024]
        wjs, out_js = os.path.join(tmp, "worse.json"), os.path.join(tmp, "again.json")
        json.dump(worse, open(wjs, "w"))
        rc, out, err = run(cclrun, tool, *FAST, "--baseline", wjs, "--json", out_js)
        expect(rc == 0, f"a baseline 100x below this run: exit {rc}", out + err)
        against = [c for c in json.load(open(out_js))["checks"] if "against the baseline" in c["name"]]
        expect(len(against) == len(worse["sweep"]) == 6,
               f"{len(against)} baseline checks for {len(worse['sweep'])} baseline points")
        better = dict(report)
        better["sweep"] = [dict(p, busbw_gbps=p["busbw_gbps"] * 10 + 1) for p in report["sweep"]]
        bjs = os.path.join(tmp, "better.json")
        json.dump(better, open(bjs, "w"))
        rc, out, err = run(cclrun, tool, *FAST, "--baseline", bjs)
        expect(rc == 1 and "CCL-CHECK-103" in out, f"a 10x baseline: exit {rc}", out + err)

        rc, out, err = run(cclrun, tool, "--min-busbw", "allreduce=3")
        expect(rc == 2 and "COLLECTIVE:SIZE" in err, f"bad usage: exit {rc}", out + err)
    print("PASS")


if __name__ == "__main__":
    main()
