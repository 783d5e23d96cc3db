#!/usr/bin/env python3
"""gloo_bench: the *_perf sweeps through PyTorch's Gloo, for perf/compare.

  .venv/bin/python perf/compare/gloo_bench.py -np 2 --collective broadcast -b 8 -e 64M -f 4 -n 20

Starts -np local ranks (subprocesses of this script, told their RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT as torchrun would), each calling torch.distributed (backend "gloo") on float32 CPU
tensors: all_reduce (sum), broadcast (from -r, default 0), all_gather_into_tensor,
reduce_scatter_tensor (sum) or all_to_all_single. Per size: -w warm-up calls, a barrier, -n timed
back-to-back calls, the per-call time averaged across ranks; then, with -c 1, one checked call
outside the timing. Rank 0 prints nccl-tests' table (same sizes, columns, units and bus bandwidth
factors as the matching *_perf binary), so compare.py's parser reads it. As in all_gather_perf,
reduce_scatter_perf and alltoall_perf, a size is the whole buffer: nranks pieces of size / nranks,
rounded down to 16 bytes.

A collective this torch's Gloo does not have (older versions lack all_gather_into_tensor and
reduce_scatter_tensor) is reported on one "# unsupported: ..." line, with exit status 3.

Every wait is bounded: --timeout limits the whole run (the launcher kills its ranks when it
expires) and each rank's process-group operations.

Needs torch with distributed support (the project's .venv: scripts/install-venv.sh).
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
COLLECTIVES = ("allreduce", "broadcast", "allgather", "reducescatter", "alltoall")
# The collectives that move nranks pieces, and the torch.distributed call for each.
PIECE_CALLS = {"allgather": "all_gather_into_tensor", "reducescatter": "reduce_scatter_tensor",
               "alltoall": "all_to_all_single"}
UNSUPPORTED = 3  # exit status when this torch's Gloo lacks the collective


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


def geometry(collective, size, nranks):
    """(count argument, bytes of the whole buffer) for a requested size, as the *_perf binaries
    compute them: pieces of size / nranks floats rounded down to 16 bytes for the collectives
    with pieces, size floats for the others."""
    count = size // FLOAT_BYTES
    if collective not in PIECE_CALLS:
        return count, count * FLOAT_BYTES
    count = count // nranks // 4 * 4
    return count, count * nranks * FLOAT_BYTES


def bus_factor(collective, nranks):
    """nccl-tests' factors: a broadcast moves every byte once per link, allreduce 2(n-1)/n, the
    collectives with pieces (n-1)/n of the whole buffer."""
    if collective == "broadcast":
        return 1.0
    if collective == "allreduce":
        return 2.0 * (nranks - 1) / nranks
    return (nranks - 1) / nranks


def row_text(size, count, collective, root, sec, busfactor, wrong):
    """One table row (`size`: the whole buffer in bytes). There is only one measurement: torch
    has no out-of-place allreduce (all_reduce overwrites its tensor) and broadcast has one tensor
    too, and the collectives with pieces are timed with separate tensors only. It fills both the
    out-of-place and the in-place columns."""
    algbw = size / 1e9 / sec if sec > 0 else 0.0
    wrong_text = "N/A" if wrong is None else str(wrong)
    half = "  ".join([format_number(sec * 1e6, 7), format_number(algbw, 6),
                      format_number(algbw * busfactor, 6), f"{wrong_text:>5}"])
    redop = "sum" if collective in ("allreduce", "reducescatter") else "none"
    r = root if collective == "broadcast" else -1
    return (f"{size:12d}  {count:12d}  {'float':>8s}  {redop:>6s}  {r:6d}"
            f"  {half}  {half}")


def header_text(opt, nranks, torch_version):
    what = {"allreduce": "all_reduce float sum", "broadcast": "broadcast float",
            "allgather": "all_gather_into_tensor float",
            "reducescatter": "reduce_scatter_tensor float sum",
            "alltoall": "all_to_all_single float"}[opt.collective]
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


def unsupported(torch, dist, collective, nranks):
    """Why this torch's Gloo cannot run `collective`, or None. Gloo refuses a call it lacks
    locally, before any communication, so every rank finds the same answer without waiting."""
    name = PIECE_CALLS.get(collective)
    if name is None:
        return None
    if not hasattr(dist, name):
        return f"torch {torch.__version__} has no torch.distributed.{name}"
    a = torch.zeros(4 * nranks, dtype=torch.float32)
    b = torch.zeros(4 * nranks, dtype=torch.float32)
    try:
        if collective == "allgather":
            dist.all_gather_into_tensor(b, a[:4])
        elif collective == "reducescatter":
            dist.reduce_scatter_tensor(b[:4], a, op=dist.ReduceOp.SUM)
        else:
            dist.all_to_all_single(b, a)
    except (RuntimeError, NotImplementedError, ValueError) as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return f"Gloo in torch {torch.__version__} does not support {name} ({first})"
    return None


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
    why = unsupported(torch, dist, opt.collective, nranks)
    if why:
        if rank == 0:
            print(f"# unsupported: {why}", flush=True)
        dist.destroy_process_group()
        return UNSUPPORTED
    all_sizes = sizes(opt)
    # Two buffers (input and output; one-tensor calls use the second), touched once here, so no
    # timed call pays first-touch page faults.
    elems = max(all_sizes) // FLOAT_BYTES if all_sizes else 0
    src = torch.zeros(elems, dtype=torch.float32)
    dst = torch.zeros(elems, dtype=torch.float32)
    busfactor = bus_factor(opt.collective, nranks)
    coll = opt.collective

    def call(inp, out):
        if coll == "broadcast":
            dist.broadcast(out, src=opt.root)
        elif coll == "allreduce":
            dist.all_reduce(out, op=dist.ReduceOp.SUM)
        elif coll == "allgather":
            dist.all_gather_into_tensor(out, inp)
        elif coll == "reducescatter":
            dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.SUM)
        else:
            dist.all_to_all_single(out, inp)

    def check(inp, out, count):
        """One call on data whose result is exact in float32 for any small n; wrong elements."""
        piece = torch.arange(nranks, dtype=torch.float32).repeat_interleave(count)
        if coll == "broadcast":
            out.fill_(1.0 if rank == opt.root else 0.0)
            expected = torch.ones_like(out)
        elif coll == "allreduce":
            out.fill_(float(rank + 1))
            expected = torch.full_like(out, float(nranks * (nranks + 1) // 2))
        elif coll == "allgather":  # piece r holds r + 1
            inp.fill_(float(rank + 1))
            expected = piece + 1
        elif coll == "reducescatter":
            inp.fill_(float(rank + 1))
            expected = torch.full_like(out, float(nranks * (nranks + 1) // 2))
        else:  # alltoall: piece p of rank r's input is r * n + p; it lands at rank p, piece r
            inp.copy_(piece + rank * nranks)
            expected = piece * nranks + rank
        call(inp, out)
        bad = torch.tensor([int((out != expected).sum().item())], dtype=torch.int64)
        dist.all_reduce(bad)
        inp.zero_()
        out.zero_()
        return int(bad.item())

    if rank == 0:
        print(header_text(opt, nranks, torch.__version__), flush=True)
    busbw_sum, rows, errors = 0.0, 0, 0
    for size in all_sizes:
        count, total = geometry(coll, size, nranks)
        if count == 0:
            continue
        n_in = count if coll == "allgather" else total // FLOAT_BYTES
        n_out = count if coll == "reducescatter" else total // FLOAT_BYTES
        inp, out = src[:n_in], dst[:n_out]
        for _ in range(opt.warmup_iters):
            call(inp, out)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(opt.iters):
            call(inp, out)
        sec = torch.tensor([(time.perf_counter() - t0) / opt.iters], dtype=torch.float64)
        dist.all_reduce(sec)  # as the others' -a 1: the per-call time averaged across ranks
        sec = sec.item() / nranks
        wrong = check(inp, out, count) if opt.check else None
        errors += wrong or 0
        busbw_sum += total / 1e9 / sec * busfactor if sec > 0 else 0.0
        rows += 1
        if rank == 0:
            print(row_text(total, count, coll, opt.root, sec, busfactor, wrong), flush=True)
    dist.barrier()
    if rank == 0:
        print(f"# Out of bounds values : {errors} {'FAILED' if errors else 'OK'}")
        print(f"# Avg bus bandwidth    : {busbw_sum / rows if rows else 0.0:g} \n#", flush=True)
    dist.destroy_process_group()
    return 1 if errors else 0


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
    ap.add_argument("-k", "--collective", choices=COLLECTIVES, default="allreduce")
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
        return run_rank(opt)
    # Only look for torch here (importing it takes seconds); a rank reports a torch without gloo.
    import importlib.util
    if importlib.util.find_spec("torch") is None:
        print(f"gloo_bench: no torch for {sys.executable}; run it with the project's "
              ".venv/bin/python (scripts/install-venv.sh)", file=sys.stderr)
        return 2
    return launch(opt, argv)


if __name__ == "__main__":
    sys.exit(main())
