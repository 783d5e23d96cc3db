#!/usr/bin/env python3
"""ccl-check on the namespace "cluster" (netns_cluster.sh: 4 nodes, one rank each, tcp over a
bridge): a clean run passes; one link slowed with tc (htb + u32 on the bridge's two ports of that
link) fails naming exactly that link; every link of one node slowed (tbf on both ends of its
veth) fails naming that node; a busbw threshold above what the machine can do fails with
CCL-CHECK-101; the clean run's JSON, given back as --baseline, passes.

Exit 0 passed, 1 failed, 77 skipped (netns_cluster.sh cannot make namespaces here).

  ccl_check_netns.py NETNS_CLUSTER_SH CCL_CHECK

The four ranks share this machine's two cores, so ccl-check measures the pairs one at a time
and does not judge latency (it sees that the "hosts" share one kernel); the bandwidth rule is
loosened to 30% of the best pair (a real cluster keeps the default, 93%): the slowed links run at
200 Mbit/s, about a twentieth of a clean link here, and a loaded 2-core machine varies a clean
link's bandwidth by up to half.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

FAST = ["-b", "8", "-e", "64K", "-f", "8", "--iters", "4", "--warmup", "1", "--repeats", "2",
        "--pair-bytes", "1M", "--pair-iters", "5", "--bandwidth-fraction", "0.3", "--quiet"]
RATE = "200mbit"


def run(cluster, tool, faults, *args):
    cmd = [cluster, "--nodes", "4", "--ranks-per-node", "1", "--timeout", "150", *faults, "--",
           tool, *FAST, *args]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
    if out.returncode == 77:
        print(out.stderr, end="")
        sys.exit(77)
    return out.returncode, out.stdout + out.stderr


def verdicts(text):
    """{node index: "PASS" or "FAIL CCL-CHECK-NNN ..."} from rank 0's verdict lines."""
    found = {}
    for m in re.finditer(r"^\[0\] netns-node(\d)-\d+ \| (.*)$", text, re.M):
        node = int(m.group(1))
        found[node] = found.get(node, "") + m.group(2) + "; "
    return found


def expect(cond, what, out):
    if not cond:
        sys.exit(f"FAIL: {what}\n{out}")


def main():
    cluster, tool = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        baseline = os.path.join(tmp, "clean.json")
        # netns_cluster.sh's rank 1 exits first when rank 0 fails: it reports "rank N exited";
        # the status that matters is the script's (1 when a rank failed).
        rc, out = run(cluster, tool, [], "--json", baseline)
        v = verdicts(out)
        expect(rc == 0 and len(v) == 4 and all(x.startswith("PASS") for x in v.values()),
               f"a clean run: exit {rc}, verdicts {v}", out)
        report = json.load(open(baseline))
        expect(report["inventory"]["transport_pairs"] == {"tcp": 6},
               "the inventory's transports between nodes", json.dumps(report["inventory"])[:800])
        expect(len(report["inventory"]["hosts"]) == 4, "the inventory's hosts", out)

        rc, out = run(cluster, tool, ["--slow-link", f"0-2:{RATE}"])
        v = verdicts(out)
        expect(rc == 1, f"a slow link: exit {rc}", out)
        for node in (0, 2):
            expect("CCL-CHECK-201" in v.get(node, "") and
                   re.search(r"slow link netns-node0-\d+-netns-node2-\d+", v[node]),
                   f"node {node} is not blamed for link 0-2: {v}", out)
        for node in (1, 3):
            expect(v.get(node, "").startswith("PASS"), f"node {node} blamed: {v}", out)

        rc, out = run(cluster, tool, ["--slow-node", f"1:{RATE}"])
        v = verdicts(out)
        expect(rc == 1, f"a slow node: exit {rc}", out)
        expect("CCL-CHECK-202" in v.get(1, ""), f"node 1 is not named the slow host: {v}", out)
        for node in (0, 2, 3):
            expect(v.get(node, "").startswith("PASS"), f"node {node} blamed: {v}", out)

        rc, out = run(cluster, tool, [], "--min-busbw", "allreduce:64K=100000")
        expect(rc == 1 and "CCL-CHECK-101" in out, f"an impossible threshold: exit {rc}", out)

        # At 64K only: the small sizes' times are the scheduler's on 2 shared cores (10x apart
        # between runs), while 64K moves enough to be the links'.
        rc, out = run(cluster, tool, [], "-b", "64K", "--baseline", baseline, "--tolerance", "90")
        expect(rc == 0 and "ccl-check: PASS" in out, f"against its own baseline: exit {rc}", out)
    print("ccl-check on the namespace cluster: clean PASS, slow link and slow node named, "
          "threshold 101, baseline round trip")


if __name__ == "__main__":
    main()
