"""Starts the ranks of one benchmark launch and collects rank 0's result (shared by perf/torch/)."""
import os
import sys
import tempfile
import time

import torch.multiprocessing as mp


def launch_ranks(target, size, extra_args, timeout_s, what):
    """Runs target(rank, size, init_method, *extra_args, queue) in `size` fresh processes (spawn)
    and returns the one object rank 0 puts on the queue; exits naming `what` when a rank dies or
    nothing arrives within timeout_s."""
    ctx = mp.get_context("spawn")
    queue = ctx.SimpleQueue()
    with tempfile.TemporaryDirectory() as tmp:
        init = "file://" + os.path.join(tmp, "init")
        procs = [ctx.Process(target=target, args=(r, size, init, *extra_args, queue))
                 for r in range(size)]
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout_s
        while queue.empty():
            if not all(p.is_alive() for p in procs) or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                sys.exit(f"{what}: a rank of the {size}-rank run failed or hung")
            time.sleep(0.2)
        result = queue.get()
        for p in procs:
            p.join(300)
    return result
