#!/usr/bin/env python3
"""ccl's network transports against the link they run on: a veth pair between two network namespaces.

Makes two namespaces (the "nodes") joined by one veth pair, then, in the same run:
  - measures the link with iperf3 (`iperf3 -s -1` in one namespace, `iperf3 -c ... -t 3 -J` from the
    other, with -P 1, -P 4, and -P 4 --bidir for the per-direction limit when both directions carry
    data at once, as an allreduce's do);
  - runs build/perf/all_reduce_perf (float sum, -c 0, sizes 64 KiB..256 MiB in x4 steps) at 2 ranks
    (1 per node) and 4 ranks (2 per node: those two share memory) over tcp with 1, 2 and 4 sockets
    per peer (CCL_NSOCKS_PERTHREAD=1/2/4) and over ucx (CCL_NET=ucx UCX_TLS=tcp).
Every configuration is launched --launches times (3), the launches of all configurations
interleaved so that drift hits them alike; each table cell is "worst / best" launch.
The markdown goes to stdout and, with --out FILE, to FILE.

  python3 perf/net/net_bench.py                    # the full run (about 5 minutes on 2 cores)
  python3 perf/net/net_bench.py --quick            # smoke run: 64 KiB..16 MiB, 1 launch, iperf3 -t 1
  python3 perf/net/net_bench.py --configs tcp1,tcp4 --np 2 --out net.md

Needs root (ip netns), iperf3 and a build (--build, default build/). Standard library only.
Exit status: 0 every configuration that this build has ran (ucx in a build without UCX is shown as
"n/a: <reason>"), 1 a launch failed, 2 bad usage, 77 cannot run here (not root, no ip netns).
The targets (tcp >= 0.9x the link, ucx >= 0.8x tcp) are reported, not enforced.
"""

import argparse
import datetime
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KiB, MiB = 1 << 10, 1 << 20
RATIO_MIN_SIZE = 16 * MiB
TCP_TARGET, UCX_TARGET = 0.9, 0.8

# name -> (column title, environment); tests/netns/transport_variants.sh has the same variants.
CONFIGS: Dict[str, Tuple[str, Dict[str, str]]] = {
    "tcp1": ("tcp x1", {"CCL_NET": "tcp", "CCL_NSOCKS_PERTHREAD": "1", "CCL_SOCKET_NTHREADS": "1"}),
    "tcp2": ("tcp x2", {"CCL_NET": "tcp", "CCL_NSOCKS_PERTHREAD": "2", "CCL_SOCKET_NTHREADS": "1"}),
    "tcp4": ("tcp x4", {"CCL_NET": "tcp", "CCL_NSOCKS_PERTHREAD": "4", "CCL_SOCKET_NTHREADS": "1"}),
    "ucx": ("ucx", {"CCL_NET": "ucx", "UCX_TLS": "tcp"}),
}
# Unset for every launch: what would change the configuration behind its back.
SCRUB = ("CCL_NET", "CCL_NSOCKS_PERTHREAD", "CCL_SOCKET_NTHREADS", "UCX_TLS", "UCX_NET_DEVICES",
         "CCL_SHM_DISABLE", "CCL_ALGO", "CCL_BOOTSTRAP_LISTEN_FD")


def fmt_size(n: int) -> str:
    for suffix, unit in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {suffix}"
    return f"{n} B"


def run(cmd: List[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: status {out.returncode}: {out.stderr.strip()}")
    return out


class Veth:
    """Two namespaces joined by one veth pair; removed (with whatever runs in them) on close."""

    def __init__(self) -> None:
        pid = os.getpid()
        self.ns = [f"cclnb{pid}-a", f"cclnb{pid}-b"]
        self.dev = ["nbveth0", "nbveth1"]
        net = f"10.{200 + (pid >> 8) % 50}.{pid % 256}"
        self.addr = [f"{net}.1", f"{net}.2"]
        self.made: List[str] = []
        try:
            for ns in self.ns:
                run(["ip", "netns", "add", ns])
                self.made.append(ns)
                run(["ip", "-n", ns, "link", "set", "lo", "up"])
            run(["ip", "-n", self.ns[0], "link", "add", self.dev[0], "type", "veth", "peer", "name",
                 self.dev[1], "netns", self.ns[1]])
            for ns, dev, addr in zip(self.ns, self.dev, self.addr):
                run(["ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev])
                run(["ip", "-n", ns, "link", "set", dev, "up"])
            for ns, dev in zip(self.ns, self.dev):  # bounded wait for the carrier
                for _ in range(50):
                    if "LOWER_UP" in run(["ip", "-n", ns, "-br", "link", "show", dev]).stdout:
                        break
                    time.sleep(0.1)
        except BaseException:
            self.close()
            raise

    def kill_all(self) -> None:
        for ns in self.made:
            pids = run(["ip", "netns", "pids", ns], check=False).stdout.split()
            for p in pids:
                try:
                    os.kill(int(p), signal.SIGKILL)
                except (OSError, ValueError):
                    pass

    def close(self) -> None:
        self.kill_all()
        for ns in self.made:
            run(["ip", "netns", "delete", ns], check=False)
        self.made = []


# --- iperf3 -------------------------------------------------------------------------------------

def iperf(veth: Veth, streams: int, seconds: int, bidir: bool) -> float:
    """Bits per second of one iperf3 run from node 0 to node 1 (--bidir: per direction, the mean
    of the two)."""
    port = str(5201 + secrets.randbelow(1000))
    server = subprocess.Popen(["ip", "netns", "exec", veth.ns[1], "iperf3", "-s", "-1", "-B",
                               veth.addr[1], "-p", port], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        cmd = ["ip", "netns", "exec", veth.ns[0], "iperf3", "-c", veth.addr[1], "-p", port, "-t",
               str(seconds), "-P", str(streams), "-J"] + (["--bidir"] if bidir else [])
        for _ in range(100):  # up to 5 s for the server to listen
            ss = run(["ip", "netns", "exec", veth.ns[1], "ss", "-Htln", f"sport = :{port}"],
                     check=False)
            if ss.stdout.strip() or server.poll() is not None:
                break
            time.sleep(0.05)
        out = run(cmd, check=False, timeout=seconds + 30)
        try:
            data = json.loads(out.stdout)
        except ValueError:
            data = {}
        if out.returncode != 0 or "error" in data or "sum_received" not in data.get("end", {}):
            raise RuntimeError(f"iperf3 failed (status {out.returncode}): "
                               f"{data.get('error') or out.stdout[-200:] + out.stderr[-200:]}")
        end = data["end"]
        if bidir:  # the client's receive side of the reverse streams
            return (end["sum_received"]["bits_per_second"] +
                    end["sum_received_bidir_reverse"]["bits_per_second"]) / 2
        return end["sum_received"]["bits_per_second"]
    finally:
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


# --- ccl ----------------------------------------------------------------------------------------

def ucx_missing(build: str) -> Optional[str]:
    """Why this build cannot run CCL_NET=ucx, or None (ccl-topo --net says it)."""
    topo = os.path.join(build, "tools", "ccl-topo")
    if not os.access(topo, os.X_OK):
        return None  # the launch will say
    env = dict(os.environ, CCL_NET="ucx", UCX_TLS="tcp")
    out = run([topo, "--net"], check=False, env=env)
    for line in (out.stdout + out.stderr).splitlines():
        if "does not have" in line:
            return line.replace("Init would fail: ", "").strip()
    return None


def launch(veth: Veth, build: str, np: int, env_extra: Dict[str, str], sizes: Tuple[int, int],
           iters: int, warmup: int, timeout: int, workdir: str) -> Dict[int, float]:
    """One all_reduce_perf launch (block placement, np/2 ranks per node): size -> out-of-place
    busbw in GB/s. Raises RuntimeError with the reason when a rank fails."""
    per_node = np // 2
    port = 20000 + secrets.randbelow(20000)
    secret = secrets.token_hex(16)
    json_path = os.path.join(workdir, "result.json")
    if os.path.exists(json_path):
        os.unlink(json_path)
    prog = [os.path.join(build, "perf", "all_reduce_perf"), "-b", str(sizes[0]), "-e",
            str(sizes[1]), "-f", "4", "-n", str(iters), "-w", str(warmup), "-c", "0", "-d", "float",
            "-o", "sum", "--json", json_path]
    base = {k: v for k, v in os.environ.items() if k not in SCRUB}
    procs = []
    logs = []
    tag = secrets.token_hex(4)
    try:
        for r in range(np):
            k, local = r // per_node, r % per_node
            env = dict(base, **env_extra, CCL_COMM_ID=f"{veth.addr[0]}:{port}",
                       CCL_COMM_SECRET=secret, CCL_RANK=str(r), CCL_WORLD_SIZE=str(np),
                       CCL_LOCAL_RANK=str(local), CCL_LOCAL_SIZE=str(per_node),
                       CCL_HOSTID=f"netbench-node{k}-{tag}", CCL_SOCKET_IFNAME=veth.dev[k])
            log = open(os.path.join(workdir, f"rank{r}.log"), "w+")
            logs.append(log)
            procs.append(subprocess.Popen(["ip", "netns", "exec", veth.ns[k]] + prog, env=env,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + timeout
        failed = None
        while any(p.poll() is None for p in procs):
            for r, p in enumerate(procs):
                if p.returncode not in (None, 0) and failed is None:
                    failed = (r, p.returncode)
            if failed is not None:
                break
            if time.monotonic() > deadline:
                failed = (-1, "timeout")
                break
            time.sleep(0.05)
        for r, p in enumerate(procs):
            if failed is None and p.returncode not in (None, 0):
                failed = (r, p.returncode)
        if failed is not None:
            r = max(failed[0], 0)
            logs[r].seek(0)
            tail = [l.strip() for l in logs[r].read().splitlines() if l.strip()][-3:]
            what = "timed out" if failed[1] == "timeout" else f"rank {r} exited {failed[1]}"
            raise RuntimeError(f"{what}: {' | '.join(tail)}")
        with open(json_path) as f:
            data = json.load(f)
        return {row["size"]: row["out_of_place"]["busbw"] for row in data["results"]}
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for log in logs:
            log.close()
        veth.kill_all()


# --- the report ---------------------------------------------------------------------------------

def cell(values: List[float]) -> str:
    return f"{min(values):.2f} / {max(values):.2f}" if values else "-"


def report(args, sizes: List[int], link: Dict[str, List[float]],
           results: Dict[Tuple[int, str], Dict[int, List[float]]],
           missing: Dict[Tuple[int, str], str]) -> str:
    out = []
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    out.append(f"## ccl over a veth pair between two network namespaces ({now}"
               f"{', --quick' if args.quick else ''})\n")
    out.append(f"all_reduce_perf float sum, -n {args.iters} -w {args.warmup} -c 0, out-of-place "
               f"busbw in GB/s (10^9 B/s); {args.launches} launch(es) per configuration, "
               f"interleaved; cells are worst / best launch. tcp xK: CCL_NET=tcp "
               f"CCL_NSOCKS_PERTHREAD=K (K sockets per peer); ucx: CCL_NET=ucx UCX_TLS=tcp.\n")
    out.append("### Link limits (iperf3 on the same veth, this run)\n")
    out.append("| iperf3 | Gbit/s worst / best | GB/s worst / best |")
    out.append("|---|---|---|")
    for name, bps in link.items():
        if not bps:
            out.append(f"| {name} | n/a | n/a |")
            continue
        out.append(f"| {name} | {min(bps) / 1e9:.2f} / {max(bps) / 1e9:.2f} | "
                   f"{min(bps) / 8e9:.2f} / {max(bps) / 8e9:.2f} |")
    out.append("")
    limit_key = "-P 4"
    limit = max(link.get(limit_key) or [0]) / 8e9  # GB/s, best launch
    bidir = max(link.get("-P 4 --bidir, per direction") or [0]) / 8e9
    for np in args.np:
        out.append(f"### {np} ranks ({np // 2} per node)\n")
        names = [c for c in args.configs]
        out.append("| size | " + " | ".join(CONFIGS[c][0] for c in names) + " |")
        out.append("|---" * (len(names) + 1) + "|")
        for s in sizes:
            row = [fmt_size(s)]
            for c in names:
                if (np, c) in missing and not results.get((np, c)):
                    row.append("n/a")
                else:
                    row.append(cell(results.get((np, c), {}).get(s, [])))
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        for c in names:
            if (np, c) in missing:
                out.append(f"{CONFIGS[c][0]}: n/a: {missing[(np, c)]}\n")
        big = [s for s in sizes if s >= RATIO_MIN_SIZE]
        tcps = [c for c in names if c.startswith("tcp") and results.get((np, c))]
        if not big or not tcps:
            out.append(f"(no ratios: they need sizes >= {fmt_size(RATIO_MIN_SIZE)} and a tcp "
                       "configuration)\n")
            continue
        out.append(f"Ratios at >= {fmt_size(RATIO_MIN_SIZE)}, best launches: ccl tcp at its best "
                   f"socket count against iperf3 {limit_key} (target >= {TCP_TARGET}x) and against "
                   f"iperf3 -P 4 --bidir per direction; ucx against that tcp (target >= "
                   f"{UCX_TARGET}x).\n")
        out.append("| size | tcp best (sockets) GB/s | / iperf3 -P 4 | / bidir per direction | "
                   "ucx / tcp best |")
        out.append("|---|---|---|---|---|")
        for s in big:
            best_c, best = None, 0.0
            for c in tcps:
                v = results.get((np, c), {}).get(s, [])
                if v and max(v) > best:
                    best_c, best = c, max(v)
            if best_c is None:
                out.append(f"| {fmt_size(s)} | - | - | - | - |")
                continue

            def ratio(num: float, den: float, target: Optional[float]) -> str:
                if den <= 0:
                    return "n/a"
                mark = "" if target is None else (" ok" if num / den >= target else " BELOW")
                return f"{num / den:.2f}x{mark}"

            if "ucx" not in names:
                ucx = "not run"
            elif not results.get((np, "ucx")):
                ucx = "n/a"
            else:
                v = results.get((np, "ucx"), {}).get(s, [])
                ucx = ratio(max(v), best, UCX_TARGET) if v else "-"
            out.append(f"| {fmt_size(s)} | {best:.2f} ({CONFIGS[best_c][0]}) | "
                       f"{ratio(best, limit, TCP_TARGET)} | {ratio(best, bidir, None)} | {ucx} |")
        out.append("")
    out.append(
        "How the comparison is made: iperf3 reports the bytes received per second in one direction "
        "(-P 4: four streams summed; --bidir: both directions at once, the mean per direction). "
        "A 2-rank allreduce of S bytes sends about S bytes each way (S/2 in its reduce-scatter, "
        "S/2 in its allgather) while receiving as much, so its busbw (= algbw x 2(n-1)/n = algbw) "
        "is the bytes on the wire per second per direction: the number compared with iperf3's. "
        "At 4 ranks busbw (= 1.5 x algbw) is the per-direction wire rate of a ring (each rank "
        "sends 2(n-1)/n x S bytes to its neighbour, one ring edge each way across the veth); an "
        "algorithm that reduces inside a node first puts only about algbw bytes each way on the "
        "veth, so there the ratio understates the link's use. The veth has no wire of its own: "
        "its limit is the CPU copying packets, shared with the ranks' own reductions.\n")
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build"))
    p.add_argument("--quick", action="store_true",
                   help="smoke run: 64 KiB..16 MiB, 1 launch, -n 3 -w 1, iperf3 -t 1")
    p.add_argument("--out", help="write the markdown here too")
    p.add_argument("--np", default="2,4", help="rank counts, even (default 2,4)")
    p.add_argument("--configs", default="tcp1,tcp2,tcp4,ucx",
                   help=f"among {','.join(CONFIGS)} (default all)")
    p.add_argument("--launches", type=int, default=None, help="per configuration (default 3)")
    p.add_argument("--iters", type=int, default=None, help="all_reduce_perf -n (default 5)")
    p.add_argument("--warmup", type=int, default=None, help="all_reduce_perf -w (default 2)")
    p.add_argument("--max-size", default=None, help="largest size (default 256M; --quick 16M)")
    p.add_argument("--iperf-seconds", type=int, default=None, help="iperf3 -t (default 3)")
    p.add_argument("--timeout", type=int, default=180, help="seconds per launch (default 180)")
    args = p.parse_args()

    args.np = [int(x) for x in args.np.split(",") if x]
    args.configs = [c for c in args.configs.split(",") if c]
    if any(n not in (2, 4) for n in args.np) or not args.np:
        p.error("--np takes 2 and/or 4 (1 and 2 ranks per node)")
    if any(c not in CONFIGS for c in args.configs) or not args.configs:
        p.error(f"--configs takes {','.join(CONFIGS)}")
    q = args.quick
    args.launches = args.launches or (1 if q else 3)
    args.iters = args.iters or (3 if q else 5)
    args.warmup = args.warmup if args.warmup is not None else (1 if q else 2)
    args.iperf_seconds = args.iperf_seconds or (1 if q else 3)
    max_text = (args.max_size or ("16M" if q else "256M")).upper()
    mult = {"K": KiB, "M": MiB, "G": 1 << 30}
    max_size = int(max_text[:-1]) * mult[max_text[-1]] if max_text[-1] in mult else int(max_text)
    if not 1 <= args.launches <= 20 or not 1 <= args.iters <= 1000 or not 1 <= args.iperf_seconds <= 30:
        p.error("--launches 1..20, --iters 1..1000, --iperf-seconds 1..30")
    if max_size < 64 * KiB or max_size > 1 << 30:
        p.error("--max-size must be 64K..1G")
    sizes = []
    s = 64 * KiB
    while s <= max_size:
        sizes.append(s)
        s *= 4

    if os.geteuid() != 0:
        print("SKIP: network namespaces need root", file=sys.stderr)
        return 77
    if run(["ip", "netns", "list"], check=False).returncode != 0:
        print("SKIP: 'ip netns' does not work here", file=sys.stderr)
        return 77
    perf = os.path.join(args.build, "perf", "all_reduce_perf")
    if not os.access(perf, os.X_OK):
        p.error(f"{perf} is not built (--build)")

    # SIGTERM and SIGHUP end the run through the finally below, namespaces removed.
    def stop(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)

    results: Dict[Tuple[int, str], Dict[int, List[float]]] = {}
    missing: Dict[Tuple[int, str], str] = {}
    link: Dict[str, List[float]] = {"-P 1": [], "-P 4": [], "-P 4 --bidir, per direction": []}
    failures = 0
    why_ucx = ucx_missing(args.build) if "ucx" in args.configs else None
    if why_ucx:
        for np in args.np:
            missing[(np, "ucx")] = why_ucx
    has_iperf = run(["sh", "-c", "command -v iperf3"], check=False).returncode == 0
    veth = Veth()
    try:
        with tempfile.TemporaryDirectory(prefix="ccl-net-bench.") as workdir:
            for launch_no in range(1, args.launches + 1):
                if has_iperf:
                    for name, streams, bidir in (("-P 1", 1, False), ("-P 4", 4, False),
                                                 ("-P 4 --bidir, per direction", 4, True)):
                        try:
                            link[name].append(iperf(veth, streams, args.iperf_seconds, bidir))
                        except (RuntimeError, subprocess.TimeoutExpired, KeyError, ValueError) as e:
                            print(f"net_bench: iperf3 {name}: {e}", file=sys.stderr)
                for np in args.np:
                    for c in args.configs:
                        if (np, c) in missing:
                            continue
                        t0 = time.monotonic()
                        try:
                            row = launch(veth, args.build, np, CONFIGS[c][1],
                                         (sizes[0], sizes[-1]), args.iters, args.warmup,
                                         args.timeout, workdir)
                        except (RuntimeError, OSError, ValueError, KeyError) as e:
                            failures += 1
                            missing[(np, c)] = f"launch {launch_no} failed: {e}"
                            print(f"net_bench: {np} ranks {c}: {e}", file=sys.stderr)
                            continue
                        for size, busbw in row.items():
                            results.setdefault((np, c), {}).setdefault(size, []).append(busbw)
                        print(f"net_bench: launch {launch_no}/{args.launches}: {np} ranks {c}: "
                              f"{time.monotonic() - t0:.1f} s", file=sys.stderr)
    finally:
        veth.close()
    if not has_iperf:
        print("net_bench: iperf3 is not installed: no link limits", file=sys.stderr)

    text = report(args, sizes, link, results, missing)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
