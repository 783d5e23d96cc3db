#!/usr/bin/python3
"""CCL_METRICS_FILE and ccl-check --prometheus, read by a Prometheus text-format parser (Debian's
python3-prometheus-client, prometheus_client.parser.text_string_to_metric_families), under
/usr/bin/python3 where it lives; exits 77 (skipped) without it.

  counts    3 ranks under cclrun (metrics_check.cc counts): while the job runs (CCL_METRICS_INTERVAL
            1) every rank's file shows its calls; after it, each rank's one file (ccl.RANK.prom)
            holds every communicator of the process, and the counters equal the calls made: per
            collective and size bucket, operations and bytes; the histogram's _count and +Inf
            bucket the same; the check mode's mismatched allreduce counted as one error on every
            rank; HELP and TYPE once per family, every series labelled comm and rank.
  failures  2 ranks (metrics_check.cc failures): a timeout counted as an error and a timeout, a
            peer's abort as an error and a peer failure, on the ranks and communicators they hit.
  interval  CCL_METRICS_INTERVAL=abc fails init with a message naming the variable.
  ccl-check 2 ranks of ccl-check --prometheus FILE (and CCL_METRICS_FILE): both files parse;
            ccl_check_passed 1, a series per check and per host, the sweep in base units.

  metrics_test.py CCLRUN METRICS_CHECK CCL_CHECK
"""
import glob
import os
import re
import subprocess
import sys
import tempfile
import time

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("prometheus_client is missing (apt-get install python3-prometheus-client): skipped")
    sys.exit(77)

HEX_TAG = re.compile(r"^(?:(?P<name>[A-Za-z0-9_-]+)-)?(?P<tag>[0-9a-f]{12})$")


def fail(what, detail=""):
    sys.exit(f"FAIL: {what}\n{detail}")


def expect(cond, what, detail=""):
    if not cond:
        fail(what, detail)


def parse(path):
    """The file's samples as (name, labels, value), after the parser and a stricter look at its
    lines: each family's HELP and TYPE once, before its samples, never interleaved."""
    text = open(path).read()
    expect(text.endswith("\n"), f"{path} does not end with a newline")
    families = list(text_string_to_metric_families(text))  # raises on malformed text
    seen, current, order = set(), None, []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            name = line.split()[2]
            expect(name not in seen, f"{path}: a second TYPE of {name}")
            seen.add(name)
            current = name
            order.append(name)
        elif not line.startswith("#"):
            sample = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0)
            expect(current and (sample == current or
                                sample in (current + "_bucket", current + "_sum", current + "_count")),
                   f"{path}: {sample} outside its family's lines")
    samples = []
    for family in families:
        expect(family.documentation, f"{path}: {family.name} has no HELP")
        for s in family.samples:
            samples.append((s.name, dict(s.labels), s.value))
    return samples, {f.name: f.type for f in families}


def total(samples, name, **labels):
    return sum(v for n, l, v in samples if n == name and all(l.get(k) == x for k, x in labels.items()))


def comm_of(samples, name):
    """The comm label of the communicator named `name` ("" for the unnamed world)."""
    found = set()
    for n, labels, _ in samples:
        if n != "ccl_communicator_ranks":
            continue
        m = HEX_TAG.match(labels["comm"])
        expect(m, f"comm label {labels['comm']!r} is not <name>-<12 hex digits>")
        if (m.group("name") or "") == name:
            found.add(labels["comm"])
    expect(len(found) == 1, f"communicator {name!r}: {sorted(found)}")
    return found.pop()


def run(cmd, env, timeout=180):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def counts(cclrun, check, tmp):
    np_ = 3
    env = dict(os.environ, CCL_METRICS_FILE=os.path.join(tmp, "ccl.prom"), CCL_METRICS_INTERVAL="1")
    job = subprocess.Popen([cclrun, "--timeout", "150", "-np", str(np_), check, "counts", tmp],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 90
        while len(glob.glob(os.path.join(tmp, "ready.*"))) < np_:
            expect(job.poll() is None and time.time() < deadline, "the ranks never got ready",
                   "" if job.poll() is None else job.communicate()[1])
            time.sleep(0.05)
        # While it lives: every rank's file shows its 15 world allreduces within a few intervals.
        while True:
            live = {}
            for rank in range(np_):
                path = os.path.join(tmp, f"ccl.{rank}.prom")
                if os.path.exists(path):
                    samples, _ = parse(path)
                    live[rank] = total(samples, "ccl_operations_total", collective="allreduce",
                                       rank=str(rank), size="le_256B")
            if all(live.get(r, 0) >= 6 for r in range(np_)):
                break
            expect(time.time() < deadline, "the live files never showed the calls", str(live))
            time.sleep(0.1)
        open(os.path.join(tmp, "go"), "w").close()
        out, err = job.communicate(timeout=120)
    finally:
        if job.poll() is None:
            job.kill()
            job.communicate()
    expect(job.returncode == 0, f"the counts job exited {job.returncode}", out + err)
    expect(sorted(os.path.basename(p) for p in glob.glob(os.path.join(tmp, "*.prom*"))) ==
           [f"ccl.{r}.prom" for r in range(np_)], "one file per rank, nothing else",
           str(os.listdir(tmp)))
    for rank in range(np_):
        path = os.path.join(tmp, f"ccl.{rank}.prom")
        samples, types = parse(path)
        expect(types.get("ccl_operations") == "counter" and
               types.get("ccl_operation_seconds") == "histogram" and
               types.get("ccl_communicator_ranks") == "gauge", f"{path}: types", str(types))
        world, half, checked = (comm_of(samples, c) for c in ("", "half", "checked"))
        # The rank label is the rank in the communicator: half holds ranks 0, 2 and rank 1 alone.
        rank_in = {world: str(rank), checked: str(rank), half: str(rank // 2)}
        for n, labels, _ in samples:
            expect(labels.get("comm") in rank_in and labels.get("rank") == rank_in[labels["comm"]],
                   f"{path}: {n}{labels}: comm or rank")

        def ops(comm, coll, size=None, name="ccl_operations_total"):
            labels = dict(comm=comm, rank=rank_in[comm], collective=coll)
            if size:
                labels["size"] = size
            return total(samples, name, **labels)

        # World: allreduces by size bucket, count and bytes.
        for size, n, nbytes in (("le_256B", 6, 4), ("le_4KiB", 4, 4096), ("le_64KiB", 3, 4100),
                                ("le_16MiB", 2, 1200000)):
            expect(ops(world, "allreduce", size) == n, f"rank {rank} allreduce {size}: "
                   f"{ops(world, 'allreduce', size)} operations, not {n}")
            expect(ops(world, "allreduce", size, "ccl_operation_bytes_total") == n * nbytes,
                   f"rank {rank} allreduce {size} bytes")
        expect(ops(world, "allreduce") == 15, f"rank {rank}: world allreduces")
        expect(ops(world, "broadcast", "le_256B") == 5 and
               ops(world, "broadcast", "le_256B", "ccl_operation_bytes_total") == 500 and
               ops(world, "broadcast", "le_64KiB") == 2 and
               ops(world, "broadcast", "le_64KiB", "ccl_operation_bytes_total") == 2 * 65536,
               f"rank {rank}: world broadcasts")
        expect(ops(world, "broadcast") == 7, f"rank {rank}: world broadcasts")
        expect(ops(half, "allreduce", "le_256B") == 7 and
               ops(half, "allreduce", "le_256B", "ccl_operation_bytes_total") == 280 and
               total(samples, "ccl_operations_total", comm=half) == 7, f"rank {rank}: half")
        # The histogram counts the same operations.
        for comm, coll, n in ((world, "allreduce", 15), (world, "broadcast", 7), (half, "allreduce", 7)):
            expect(ops(comm, coll, name="ccl_operation_seconds_count") == n and
                   total(samples, "ccl_operation_seconds_bucket", comm=comm, collective=coll,
                         le="+Inf") == n, f"rank {rank}: {coll} histogram")
            buckets = [v for name, l, v in samples if name == "ccl_operation_seconds_bucket" and
                       l["comm"] == comm and l["collective"] == coll]
            expect(buckets == sorted(buckets), f"rank {rank}: {coll} buckets not cumulative")
        # No failures on world and half; the mismatch on checked: one error, each rank's own size.
        for name in ("ccl_operation_errors_total", "ccl_operation_timeouts_total",
                     "ccl_peer_failures_total"):
            expect(total(samples, name, comm=world) + total(samples, name, comm=half) == 0,
                   f"rank {rank}: {name} on world or half")
        expect(ops(checked, "allreduce", "le_256B") == 1 and
               ops(checked, "allreduce", "le_256B", "ccl_operation_errors_total") == 1 and
               ops(checked, "allreduce", "le_256B", "ccl_operation_bytes_total") == 4 * (1 + rank) and
               total(samples, "ccl_peer_failures_total", comm=checked) == 0,
               f"rank {rank}: the check mode's mismatch")
        expect(total(samples, "ccl_communicator_ranks", comm=half) == (2 if rank % 2 == 0 else 1),
               f"rank {rank}: half's ranks")
    # All members of a communicator carry one label.
    for name in ("", "half", "checked"):
        labels = {comm_of(parse(os.path.join(tmp, f"ccl.{r}.prom"))[0], name)
                  for r in ((0, 2) if name == "half" else range(np_))}
        expect(len(labels) == 1, f"communicator {name!r} has several labels", str(labels))


def failures(cclrun, check, tmp):
    env = dict(os.environ, CCL_METRICS_FILE=os.path.join(tmp, "m-%r.prom"))
    out = run([cclrun, "--timeout", "120", "-np", "2", check, "failures", tmp], env)
    expect(out.returncode == 0, f"the failures job exited {out.returncode}", out.stdout + out.stderr)
    for rank in range(2):
        samples, _ = parse(os.path.join(tmp, f"m-{rank}.prom"))
        slow, lost = comm_of(samples, "slow"), comm_of(samples, "lost")
        got = {name: (total(samples, name, comm=slow, collective="allreduce"),
                      total(samples, name, comm=lost, collective="allreduce"))
               for name in ("ccl_operations_total", "ccl_operation_errors_total",
                            "ccl_operation_timeouts_total", "ccl_peer_failures_total")}
        want = {"ccl_operations_total": (1, 1), "ccl_operation_errors_total": (1, 1),
                "ccl_operation_timeouts_total": (1, 0), "ccl_peer_failures_total": (0, 1)}
        if rank == 1:  # it called nothing on slow, aborted lost
            want = {k: (0, 0) for k in want}
        expect(got == want, f"rank {rank}: (slow, lost) counters", f"{got}\nwanted {want}")
        if rank == 0:
            expect(total(samples, "ccl_operation_seconds_sum", comm=slow) >= 1.9,
                   "the timed-out allreduce took its 2 s")


def bad_interval(cclrun, check, tmp):
    env = dict(os.environ, CCL_METRICS_FILE=os.path.join(tmp, "x.prom"), CCL_METRICS_INTERVAL="abc")
    out = run([cclrun, "--timeout", "60", "-np", "1", check, "counts", tmp], env)
    expect(out.returncode != 0 and "CCL_METRICS_INTERVAL" in out.stderr,
           "a malformed CCL_METRICS_INTERVAL must fail init naming it", out.stdout + out.stderr)


def ccl_check(cclrun, tool, tmp):
    prom = os.path.join(tmp, "ccl_check.prom")
    env = dict(os.environ, CCL_METRICS_FILE=os.path.join(tmp, "ops.prom"))
    out = run([cclrun, "--timeout", "120", "-np", "2", tool, "-b", "8", "-e", "64K", "-f", "8",
               "--iters", "3", "--warmup", "1", "--repeats", "1", "--pair-bytes", "64K",
               "--pair-iters", "2", "--collectives", "allreduce,broadcast", "--quiet",
               "--prometheus", prom], env)
    expect(out.returncode == 0, f"ccl-check exited {out.returncode}", out.stdout + out.stderr)
    samples, types = parse(prom)
    expect(all(t == "gauge" for t in types.values()), "ccl-check's series are gauges", str(types))
    expect(total(samples, "ccl_check_passed") == 1, "ccl_check_passed")
    expect(total(samples, "ccl_check_ranks") == 2, "ccl_check_ranks")
    checks = [l for n, l, _ in samples if n == "ccl_check_check_passed"]
    expect(checks and all("check" in l and "code" in l and "hosts" in l for l in checks),
           "ccl_check_check_passed{check,code,hosts}", str(checks))
    hosts = [l["host"] for n, l, v in samples if n == "ccl_check_host_passed" and v == 1]
    expect(len(hosts) == 1, "one host, passed", str(hosts))
    expect(total(samples, "ccl_check_sweep_busbw_bytes_per_second", collective="allreduce",
                 size="32K") > 1e6, "the sweep's busbw in bytes per second")
    expect(total(samples, "ccl_check_last_run_timestamp_seconds") > time.time() - 600,
           "the run's timestamp")
    expect(total(samples, "ccl_check_host_min_pair_bandwidth_bytes_per_second", host=hosts[0]) > 0,
           "the host's pair bandwidth")
    # ccl-check's own operations, counted by its metrics file: a real program's file parses.
    for rank in range(2):
        ops_samples, _ = parse(os.path.join(tmp, f"ops.{rank}.prom"))
        expect(total(ops_samples, "ccl_operations_total", collective="allreduce") > 0,
               f"ccl-check rank {rank}'s allreduces")


def main():
    cclrun, check, tool = sys.argv[1:4]
    for name, body in (("counts", lambda t: counts(cclrun, check, t)),
                       ("failures", lambda t: failures(cclrun, check, t)),
                       ("interval", lambda t: bad_interval(cclrun, check, t)),
                       ("ccl-check", lambda t: ccl_check(cclrun, tool, t))):
        with tempfile.TemporaryDirectory() as tmp:
            started = time.time()
            body(tmp)
            print(f"{name}: ok ({time.time() - started:.1f} s)")
    print("metrics_test: PASS")


if __name__ == "__main__":
    main()
