#!/usr/bin/python3
"""gloo_bench: the all_reduce_perf / broadcast_perf sweep through PyTorch's Gloo, for perf/compare.

  /usr/bin/python3 perf/compare/gloo_bench.py -np 2 --collective broadcast -b 8 -e 64M -f 4 -n 20

Starts -np local ranks (subprocesses of this script, told their RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT as torchrun would), each calling torch.distributed (backend "gloo") on float32 CPU
tensors: all_reduce (sum) or broadcast (from -r, default 0). Per size: -w warm-up calls, a barrier,
-n timed back-to-back calls, the per-call time averaged across ranks; then, with -c 1, one checked
call outside the timing. Rank 0 prints nccl-tests' table (same columns, units and bus bandwidth
factors as all_reduce_perf and broadcast_perf), so compare.py's parser reads it.

Every wait is bounded: --timeout limits the whole run (the launcher kills its ranks when it
expires) and each rank's process-group operations.

Needs torch with distributed support (Debian: python3-torch, under /usr/bin/python3).
"""

import argparse
import datetime
import os
import signal
import socket
import subprocess
import sys
import time

UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
FLOAT_BYTES = 4


def parse_size(text):
    """nccl-tests' size syntax: a number with an optional K/M/G suffix (binary units)."""
    t = text.strip().upper()
    unit = t[-1] if t and t[-1] in "KMG" else ""
    value = float(t[: len(t) - len(unit)])
    if value < 0:
        raise ValueError(text)
    return int(value * UNITS[unit])


def format_number(value, width):
    """As the perf binaries print numbers: 2 decimals while they fit in `width`, then fewer."""
    digits, limit = 0, 1.0
    if value == value and value not in (float("inf"), float("-inf")):
        while value >= limit and digits < 40:
            digits += 1
            limit *= 10
    elif value > 0:
        digits = 40
    if digits < width - 2:
        return f"{value:{width}.2f}"
    if digits < width - 1:
        return f"{value:{width}.1f}"
    if digits < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def sizes(opt):
    """The sweep, as all_reduce_perf walks it: by -f when > 1, else by -i bytes."""
    out, size = [], opt.minbytes
    while size <= opt.maxbytes:
        out.append(size)
        nxt = size * opt.stepfactor if opt.stepfactor > 1 else size + opt.stepbytes
        if nxt <= size:
            break
        size = nxt
    return out


def bus_factor(collective, nranks):
    """nccl-tests' factors: a broadcast moves every byte once per link, allreduce 2(n-1)/n."""
    return 1.0 if collective == "broadcast" else 2.0 * (nranks - 1) / nranks


def row_text(size, collective, root, sec, busfactor, wrong):
    """One table row. torch has no out-of-place allreduce (all_reduce overwrites its tensor) and
    broadcast has one tensor too, so there is only one measurement: it fills both the
    out-of-place and the in-place columns."""
    algbw = size / 1e9 / sec if sec > 0 else 0.0
    wrong_text = "N/A" if wrong is None else str(wrong)
    half = "  ".join([format_number(sec * 1e6, 7), format_number(algbw, 6),
                      format_number(algbw * busfactor, 6), f"{wrong_text:>5}"])
    redop, r = ("none", root) if collective == "broadcast" else ("sum", -1)
    return (f"{size:12d}  {size // FLOAT_BYTES:12d}  {'float':>8s}  {redop:>6s}  {r:6d}"
            f"  {half}  {half}")


def header_text(opt, nranks, torch_version):
    what = "broadcast float" if opt.collective == "broadcast" else "all_reduce float sum"
    step = (f"{opt.stepfactor}(factor)" if opt.stepfactor > 1 else f"{opt.stepbytes}(bytes)")
    return "\n".join([
        f"# gloo_bench: torch.distributed gloo {what}, torch {torch_version}, {nranks} ranks, "
        f"host {socket.gethostname()}",
        "# library: Gloo (PyTorch)",
        f"# nThread 1 nGpus 1 minBytes {opt.minbytes} maxBytes {opt.maxbytes} step: {step} "
        f"warmup iters: {opt.warmup_iters} iters: {opt.iters} agg iters: 1 "
        f"validation: {opt.check} graph: 0",
        "#",
        "#                                                              out-of-place"
        "                       in-place          ",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong"
        "     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)       "
        "     (us)  (GB/s)  (GB/s)       ",
    ])


def run_rank(opt):
    """One rank: the sweep, rank 0 printing the table."""
    import torch
    import torch.distributed as dist

    # One compute thread per rank, as the other peers run: the ranks share the machine's cores.
    torch.set_num_threads(1)
    rank, nranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=nranks,
                            timeout=datetime.timedelta(seconds=opt.timeout))
    if opt.root >= nranks:
        raise SystemExit(f"gloo_bench: root {opt.root} out of range ({nranks} ranks)")
    all_sizes = sizes(opt)
    # One buffer, touched once here, so no timed call pays first-touch page faults.
    buf = torch.zeros(max(all_sizes) // FLOAT_BYTES if all_sizes else 0, dtype=torch.float32)
    busfactor = bus_factor(opt.collective, nranks)

    def call(t):
        if opt.collective == "broadcast":
            dist.broadcast(t, src=opt.root)
        else:
            dist.all_reduce(t, op=dist.ReduceOp.SUM)

    if rank == 0:
        print(header_text(opt, nranks, torch.__version__), flush=True)
    busbw_sum, rows = 0.0, 0
    for size in all_sizes:
        count = size // FLOAT_BYTES
        if count == 0:
            continue
        t = buf[:count]
        for _ in range(opt.warmup_iters):
            call(t)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(opt.iters):
            call(t)
        sec = torch.tensor([(time.perf_counter() - t0) / opt.iters], dtype=torch.float64)
        dist.all_reduce(sec)  # as the others' -a 1: the per-call time averaged across ranks
        sec = sec.item() / nranks
        wrong = None
        if opt.check:
            # Outside the timing: inputs whose result is exact in float32 for any small n.
            if opt.collective == "broadcast":
                t.fill_(1.0 if rank == opt.root else 0.0)
                expected = 1.0
            else:
                t.fill_(float(rank + 1))
                expected = float(nranks * (nranks + 1) // 2)
            call(t)
            bad = torch.tensor([int((t != expected).sum().item())], dtype=torch.int64)
            dist.all_reduce(bad)
            wrong = int(bad.item())
            t.zero_()
        busbw_sum += size / 1e9 / sec * busfactor if sec > 0 else 0.0
        rows += 1
        if rank == 0:
            print(row_text(size, opt.collective, opt.root, sec, busfactor, wrong), flush=True)
    dist.barrier()
    if rank == 0:
        print("# Out of bounds values : 0 OK")
        print(f"# Avg bus bandwidth    : {busbw_sum / rows if rows else 0.0:g} \n#", flush=True)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(opt, argv):
    """Starts opt.np ranks of this script and waits for them, at most opt.timeout seconds."""
    port = free_port()
    procs = []
    for rank in range(opt.np):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(opt.np), LOCAL_RANK=str(rank),
                   LOCAL_WORLD_SIZE=str(opt.np), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        # Gloo picks its interface from the hostname by default, which in a container may not
        # be reachable; every rank is local, so loopback is right.
        env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        # Each rank in its own process group, so that a timeout can kill whatever it started.
        procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv, env=env,
                                      start_new_session=True))
    deadline = time.monotonic() + opt.timeout
    status = 0
    try:
        pending = list(procs)
        while pending:
            for p in list(pending):
                rc = p.poll()
                if rc is None:
                    continue
                pending.remove(p)
                if rc != 0 and status == 0:
                    status = rc if rc > 0 else 128 - rc
                    print(f"gloo_bench: a rank exited with {rc}; stopping the others",
                          file=sys.stderr)
                    deadline = min(deadline, time.monotonic() + 5)
            if pending and time.monotonic() > deadline:
                if status == 0:
                    print(f"gloo_bench: timed out after {opt.timeout} s", file=sys.stderr)
                    status = 124
                break
            time.sleep(0.02)
    finally:
        # Kill every survivor before waiting for any, so none outlives its peers for long.
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for p in procs:
            p.wait()
    return status


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-np", "--np", dest="np", type=int, default=2, help="ranks (default 2)")
    # -k, not -C: -C is nccl-tests' report_cputime.
    ap.add_argument("-k", "--collective", choices=("allreduce", "broadcast"), default="allreduce")
    ap.add_argument("-b", "--minbytes", type=parse_size, default=32 << 20)
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=32 << 20)
    ap.add_argument("-i", "--stepbytes", type=parse_size, default=1 << 20)
    ap.add_argument("-f", "--stepfactor", type=int, default=1)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=1)
    ap.add_argument("-c", "--check", type=int, default=1, help="check one call per size (0/1)")
    ap.add_argument("-r", "--root", type=int, default=0, help="broadcast root (default 0)")
    ap.add_argument("--timeout", type=int, default=600,
                    help="seconds for the whole run, and for each process-group operation")
    opt = ap.parse_args(argv)
    if (opt.np < 1 or opt.iters < 1 or opt.warmup_iters < 0 or opt.timeout < 1 or opt.root < 0
            or opt.minbytes > opt.maxbytes or (opt.stepfactor > 1 and opt.minbytes == 0)):
        ap.error("invalid arguments")
    return opt


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    opt = parse_args(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ and "MASTER_PORT" in os.environ:
        run_rank(opt)
        return 0
    # Only look for torch here (importing it takes seconds); a rank reports a torch without gloo.
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        print(f"gloo_bench: no torch for {sys.executable}; Debian: python3-torch, run with "
              "/usr/bin/python3", file=sys.stderr)
        return 2
    return launch(opt, argv)


if __name__ == "__main__":
    sys.exit(main())
