#!/usr/bin/env python3
"""Compare ccl's allreduce with other libraries' on this machine.

For each size, every peer runs the same allreduce (float sum, out of place, the same warm-up and
iteration counts, the time averaged across ranks) in `--launches` separate launches; the table
shows the median time and bus bandwidth of each, and the ratios ccl / peer.

  perf/compare/compare.py                       # 2 ranks, 8 B .. 256 MiB, ccl vs Open MPI
  perf/compare/compare.py --np 4 --sizes 1M,64M --markdown

Peers are "runners" (see RUNNERS at the bottom): each knows how to build its command line and
read its output. ccl runs build/perf/all_reduce_perf under build/tools/cclrun; Open MPI runs
build/perf/mpi_allreduce_bench (perf/compare/mpi_allreduce_bench.c) under mpirun. Both print
nccl-tests' table, so one parser reads both. Standard library only.
"""

import argparse
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_SIZES = "8,64K,1M,16M,64M,256M"
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    t = text.strip().upper().rstrip("B")
    unit = t[-1] if t and t[-1] in "KMG" else ""
    return int(float(t[: len(t) - len(unit)]) * UNITS[unit])


def format_size(n: int) -> str:
    for suffix, unit in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {suffix}"
    return f"{n} B"


def default_iters(size: int) -> int:
    """Enough calls that small sizes are not lost in timer noise, few enough that 256 MiB is quick."""
    if size <= 64 << 10:
        return 1000
    if size <= 1 << 20:
        return 200
    if size <= 16 << 20:
        return 50
    return 20


@dataclass
class Row:
    """One row of an nccl-tests table (out-of-place and in-place halves)."""

    size: int
    time_us: float
    busbw: float
    time_us_inplace: float
    busbw_inplace: float


def parse_table(text: str) -> List[Row]:
    rows = []
    for line in text.splitlines():
        fields = line.split()
        if not fields or line.lstrip().startswith("#") or len(fields) < 13:
            continue
        try:
            rows.append(Row(int(fields[0]), float(fields[5]), float(fields[7]),
                            float(fields[9]), float(fields[11])))
        except ValueError:
            continue
    return rows


@dataclass
class Config:
    build_dir: str
    np: int
    warmup: int
    iters: Optional[int]
    check: int
    timeout: int
    ccl_args: List[str]
    mpirun_args: List[str]
    ccl_launcher: str = "cclrun"


class Runner:
    """A peer: how to launch its benchmark for one size, and where its binary lives."""

    key = ""
    label = ""

    def __init__(self, cfg: Config):
        self.cfg = cfg

    def unavailable(self) -> Optional[str]:
        """None when the peer can run here, else why not."""
        return None

    def bench_args(self, size: int) -> List[str]:
        iters = self.cfg.iters or default_iters(size)
        return ["-b", str(size), "-e", str(size), "-n", str(iters), "-w", str(self.cfg.warmup)]

    def command(self, size: int) -> List[str]:
        raise NotImplementedError

    def env(self) -> Dict[str, str]:
        return dict(os.environ)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CclRunner(Runner):
    key = "ccl"
    label = "ccl"

    def paths(self):
        return (os.path.join(self.cfg.build_dir, "tools", "cclrun"),
                os.path.join(self.cfg.build_dir, "perf", "all_reduce_perf"))

    def unavailable(self):
        cclrun, perf = self.paths()
        needed = [perf] + ([cclrun] if self.cfg.ccl_launcher == "cclrun" else [])
        for p in needed:
            if not os.access(p, os.X_OK):
                return f"{p} not built"
        if self.cfg.ccl_launcher == "mpirun" and not shutil.which("mpirun"):
            return "mpirun not found"
        return None

    def command(self, size):
        cclrun, perf = self.paths()
        if self.cfg.ccl_launcher == "mpirun":
            # cclCommInitFromEnv reads Open MPI's rank variables; rank 0 serves the rendezvous.
            launcher = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-np",
                        str(self.cfg.np), "-x", f"CCL_COMM_ID=127.0.0.1:{free_port()}"]
        else:
            launcher = [cclrun, "-np", str(self.cfg.np)]
        return (launcher + [perf] + self.bench_args(size) +
                ["-d", "float", "-o", "sum", "-c", str(self.cfg.check)] + self.cfg.ccl_args)


class OpenMpiRunner(Runner):
    key = "openmpi"
    label = "Open MPI"

    def bench(self):
        return os.path.join(self.cfg.build_dir, "perf", "mpi_allreduce_bench")

    def unavailable(self):
        if not shutil.which("mpirun"):
            return "mpirun not found"
        if not os.access(self.bench(), os.X_OK):
            return f"{self.bench()} not built (needs MPI at configure time)"
        return None

    def command(self, size):
        # --allow-run-as-root: containers run as root; --oversubscribe: -np may exceed the cores.
        return (["mpirun", "--allow-run-as-root", "--oversubscribe", "-np", str(self.cfg.np)] +
                self.cfg.mpirun_args + [self.bench()] + self.bench_args(size))


class OpenMpiPersistentRunner(OpenMpiRunner):
    """Open MPI with glibc's mmap threshold raised, so its temporaries are not fresh pages on
    every call. On VMs where a page fault is expensive this is Open MPI at its best; the plain
    runner is what users get by default."""

    key = "openmpi-nofault"
    label = "Open MPI (no mmap)"

    def command(self, size):
        cmd = super().command(size)
        big = str(1 << 32)
        at = cmd.index(self.bench())
        return cmd[:at] + ["-x", "MALLOC_MMAP_THRESHOLD_=" + big,
                           "-x", "MALLOC_TRIM_THRESHOLD_=" + big] + cmd[at:]


# Later peers (MPICH's mpiexec.hydra + the same bench built against MPICH; PyTorch's Gloo through
# torchrun) plug in here with a Runner subclass each.
RUNNERS = {r.key: r for r in (CclRunner, OpenMpiRunner, OpenMpiPersistentRunner)}


@dataclass
class Measurement:
    time_us: List[float] = field(default_factory=list)
    busbw: List[float] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)

    def median(self, which: str) -> Optional[float]:
        values = getattr(self, which)
        return statistics.median(values) if values else None


def launch(runner: Runner, size: int, cfg: Config, in_place: bool, dry_run: bool,
           m: Measurement, verbose: bool):
    cmd = runner.command(size)
    if dry_run or verbose:
        print("$ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    if dry_run:
        return
    try:
        p = subprocess.run(cmd, env=runner.env(), capture_output=True, text=True,
                           timeout=cfg.timeout)
    except subprocess.TimeoutExpired:
        m.errors.append(f"timed out after {cfg.timeout} s")
        return
    rows = parse_table(p.stdout)
    if p.returncode != 0 or not rows:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        m.errors.append(f"exit {p.returncode}: " + " | ".join(tail))
        return
    row = rows[0]
    m.time_us.append(row.time_us_inplace if in_place else row.time_us)
    m.busbw.append(row.busbw_inplace if in_place else row.busbw)


def fmt(v: Optional[float], digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def build_table(sizes, runners, results):
    """Header and rows (lists of strings): per peer time and busbw, then ccl/peer ratios."""
    header = ["size"]
    for r in runners:
        header += [f"{r.label} time (us)", f"{r.label} busbw (GB/s)"]
    base = runners[0]
    for r in runners[1:]:
        header += [f"busbw {base.label}/{r.label}", f"time {base.label}/{r.label}"]
    rows = []
    for size in sizes:
        row = [format_size(size)]
        for r in runners:
            m = results[r.key][size]
            row += [fmt(m.median("time_us")), fmt(m.median("busbw"))]
        mb = results[base.key][size]
        for r in runners[1:]:
            mp = results[r.key][size]
            row += [fmt(ratio(mb.median("busbw"), mp.median("busbw"))),
                    fmt(ratio(mb.median("time_us"), mp.median("time_us")))]
        rows.append(row)
    return header, rows


def render_text(header, rows) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_markdown(header, rows) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def find_build_dir() -> str:
    candidates = [os.environ.get("CCL_BUILD_DIR", "")] + [
        os.path.join(REPO, d) for d in ("build", "build-release", "build-perf")]
    for c in candidates:
        if c and os.path.exists(os.path.join(c, "perf", "all_reduce_perf")):
            return c
    return os.path.join(REPO, "build")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--np", type=int, default=2, help="ranks (default 2)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help=f"comma-separated sizes, K/M/G suffixes (default {DEFAULT_SIZES})")
    ap.add_argument("--launches", type=int, default=3, help="launches per size and peer (median)")
    ap.add_argument("--peers", default="openmpi,openmpi-nofault",
                    help=f"peers besides ccl, comma-separated: {', '.join(RUNNERS)}")
    ap.add_argument("--iters", type=int, default=None,
                    help="timed calls per launch (default: by size, 1000 for <= 64 KiB down to "
                         "20 above 16 MiB)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up calls per launch")
    ap.add_argument("--check", type=int, default=1, help="ccl's -c (checked outside the timing)")
    ap.add_argument("--in-place", action="store_true", help="report the in-place columns")
    ap.add_argument("--build-dir", default=None, help="CMake build directory (default: found)")
    ap.add_argument("--ccl-args", default="", help="extra all_reduce_perf flags, e.g. '-y 1'")
    ap.add_argument("--ccl-launcher", choices=("cclrun", "mpirun"), default="cclrun",
                    help="how to start ccl's ranks (default cclrun)")
    ap.add_argument("--mpirun-args", default="", help="extra mpirun flags, e.g. '--bind-to none'")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per launch")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--json", default=None, help="also write every launch's numbers here")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each command")
    args = ap.parse_args(argv)

    cfg = Config(build_dir=args.build_dir or find_build_dir(), np=args.np, warmup=args.warmup,
                 iters=args.iters, check=args.check, timeout=args.timeout,
                 ccl_args=shlex.split(args.ccl_args), mpirun_args=shlex.split(args.mpirun_args),
                 ccl_launcher=args.ccl_launcher)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    keys = ["ccl"] + [k.strip() for k in args.peers.split(",") if k.strip() and k.strip() != "ccl"]
    unknown = [k for k in keys if k not in RUNNERS]
    if unknown:
        ap.error(f"unknown peer(s) {', '.join(unknown)}; known: {', '.join(RUNNERS)}")
    runners = [RUNNERS[k](cfg) for k in keys]
    if not args.dry_run:
        for r in list(runners):
            why = r.unavailable()
            if why:
                print(f"compare.py: skipping {r.label}: {why}", file=sys.stderr)
                if r.key == "ccl":
                    return 1
                runners.remove(r)

    results = {r.key: {s: Measurement() for s in sizes} for r in runners}
    for size in sizes:
        for _ in range(args.launches):  # interleaved, so drift hits every peer alike
            for r in runners:
                launch(r, size, cfg, args.in_place, args.dry_run, results[r.key][size],
                       args.verbose)
    if args.dry_run:
        return 0

    header, rows = build_table(sizes, runners, results)
    title = (f"allreduce, float sum, {'in' if args.in_place else 'out of'} place, {cfg.np} ranks, "
             f"median of {args.launches} launches")
    if args.markdown:
        print(f"{title}\n\n{render_markdown(header, rows)}")
    else:
        print(f"# {title}\n{render_text(header, rows)}")
    failed = False
    for r in runners:
        for size in sizes:
            for err in results[r.key][size].errors:
                failed = True
                print(f"compare.py: {r.label} {format_size(size)}: {err}", file=sys.stderr)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"np": cfg.np, "launches": args.launches, "in_place": args.in_place,
                       "results": {k: {str(s): vars(m) for s, m in v.items()}
                                   for k, v in results.items()}}, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
