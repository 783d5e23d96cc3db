"""Fault-tolerant data parallelism with torchft on ccl: replicas (one process each) train
tiny_lm.py through torchft's Manager, lighthouse and DDP wrapper, with ccl_torch.ft.
ProcessGroupCcl between the replicas. The driver SIGKILLs one replica in the middle of a step;
the others go on without it; a replacement starts, takes the model from a survivor (torchft's
checkpoint transport) and rejoins.

    PYTHONPATH=build/bindings/torch .venv/bin/python examples/torch/torchft_train.py \\
        [--replicas 3] [--steps 200] [--kill-at 20] [--pg ccl|gloo]

The driver prints each replica's end, whether every replica ends with the same parameters, and
the training the survivors lost to the failure: for each survivor, the time from its last
committed step before the kill to its first committed step after it, less one median step, and
the same around the replacement's joining (the survivors pause to send it the model). --pg gloo
runs torchft's own ProcessGroupGloo for comparison (perf/README.md, torchft). torchft's
ProcessGroupBabyGloo (Gloo in a subprocess it can kill) is not offered: in torchft 0.2.0 on CPU
every step of this loop fails with it, on an assertion in the Manager's future callback.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# Lighthouse: a replica silent for this long is out of the next quorum. torchft's default is 5 s;
# a failure costs the survivors at least this much (the quorum waits for the dead replica until
# then), so the example takes 1 s, ten of the replicas' 100 ms heartbeats.
HEARTBEAT_TIMEOUT_MS = 1000
# Bounds every collective and rendezvous of a replica's group: an operation whose peer died
# fails at the latest after this, if the transport did not say so first.
OP_TIMEOUT = timedelta(seconds=10)


def make_pg(kind):
    if kind == "ccl":
        from ccl_torch.ft import ProcessGroupCcl
        return ProcessGroupCcl(timeout=OP_TIMEOUT)
    from torchft.process_group import ProcessGroupGloo
    if kind == "gloo":
        return ProcessGroupGloo(timeout=OP_TIMEOUT)
    raise ValueError(f"--pg: ccl or gloo, not {kind!r}")


def fault_tolerant_ddp(manager, model, on_allreduce=None):
    """torchft's DDP wrapper (gradients averaged by manager.allreduce over the step's quorum)
    with a communication hook that outlives a failed allreduce. torchft 0.2's own hook asserts
    when the allreduce's wait raised, as it does when a peer died (with ccl's group and with
    Gloo's): the step's backward pass then fails instead of the step being dropped. This one
    leaves the error with the manager (its should_commit answers False) and returns the bucket."""
    import torch
    from torchft.ddp import DistributedDataParallel

    class FaultTolerantDDP(DistributedDataParallel):
        @staticmethod
        def _comm_hook(state, bucket):
            if on_allreduce is not None:
                on_allreduce(state.current_step())
            work = state.allreduce(bucket.buffer())  # averages in place when it succeeds
            work.wait()  # False when it failed: reported to the manager
            done = torch.futures.Future()
            done.set_result(bucket.buffer())
            return done

    return FaultTolerantDDP(manager, model)


def replica(args):
    """One replica: trains until the Manager's step reaches args.steps, logging each step's end
    (one JSON line: step, time, whether it committed) to args.log; writes its final parameters
    to args.out."""
    import torch
    import torch.distributed as dist
    from torchft import Manager
    import tiny_lm

    cfg = tiny_lm.Config(width=args.width, blocks=args.blocks)
    model = tiny_lm.build(cfg)
    inner = tiny_lm.optimizer(model.parameters())

    def state_dict():
        return {"model": model.state_dict(), "optim": inner.state_dict()}

    def load_state_dict(sd):
        model.load_state_dict(sd["model"])
        inner.load_state_dict(sd["optim"])

    store = dist.TCPStore("localhost", 0, is_master=True, wait_for_workers=False)
    manager = Manager(pg=make_pg(args.pg), load_state_dict=load_state_dict,
                      state_dict=state_dict, min_replica_size=args.min_replicas,
                      replica_id=f"replica_{args.replica}", store_addr="localhost",
                      store_port=store.port, rank=0, world_size=1,
                      lighthouse_addr=args.lighthouse, timeout=OP_TIMEOUT,
                      quorum_timeout=timedelta(seconds=30),
                      connect_timeout=timedelta(seconds=30))
    # torchft.optim.OptimizerWrapper makes the quorum and commit calls below; they are spelled
    # out here to show them.
    log = open(args.log, "a", buffering=1)

    def die_mid_step(step):
        # The victim: SIGKILL in the backward pass of step --die-at, when its quorum holds it and
        # its peers' allreduce waits for it.
        if step == args.die_at:
            log.write(json.dumps({"step": step, "t": time.time(), "killed": True}) + "\n")
            os.kill(os.getpid(), signal.SIGKILL)

    ddp = fault_tolerant_ddp(manager, model, die_mid_step if args.die_at is not None else None)
    log.write(json.dumps({"started": True, "t": time.time()}) + "\n")
    with log:
        while manager.current_step() < args.steps:
            step = manager.current_step()
            started = time.monotonic()
            inputs, targets = tiny_lm.batch(step * 7 + args.replica, cfg)
            manager.start_quorum()  # a changed quorum reconfigures the group (ProcessGroupCcl)
            inner.zero_grad()
            tiny_lm.loss_fn(ddp(inputs), targets).backward()
            # False when an allreduce of this step failed on any replica: the step is dropped
            # and retried with the next quorum.
            committed = manager.should_commit()
            if committed:
                inner.step()
            # The rest of a step of --step-seconds: the compute of a larger model.
            time.sleep(max(0.0, args.step_seconds - (time.monotonic() - started)))
            # The manager's step: the steps committed so far (a replacement heals to its peers'
            # step in its first quorum).
            log.write(json.dumps({"step": manager.current_step(), "t": time.time(),
                                  "committed": bool(committed),
                                  "replicas": manager.num_participants()}) + "\n")
    torch.save(tiny_lm.full_parameters(model), args.out)
    manager.shutdown(wait=False)


def read_log(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def lost_time(steps, since, replicas, median):
    """From this survivor's last step in the full quorum before `since` (the kill) to its first
    committed step without the victim, less one median step: the training it lost to the
    failure (the step the dead peer broke, and the wait for a quorum without it)."""
    before = [e["t"] for e in steps if e["committed"] and e["replicas"] == replicas
              and e["t"] <= since + 1.0]
    after = [e["t"] for e in steps if e["committed"] and e["replicas"] == replicas - 1
             and e["t"] > since]
    before = [t for t in before if not after or t < after[0]]
    if not before or not after:
        return None
    return max(0.0, after[0] - before[-1] - median)


def rejoined(entries, replicas):
    return any(e.get("committed") and e["replicas"] == replicas for e in entries)


def rejoin_time(steps, since, replicas, median):
    """The first step in a quorum of all `replicas` again, after the survivors went on without
    the victim (the replacement joined for it: the survivors sent it the model), less its
    predecessor, less one median step."""
    without = [i for i, e in enumerate(steps) if e["t"] > since and e["committed"]
               and e["replicas"] == replicas - 1]
    if not without:
        return None
    for prev, e in zip(steps[without[0]:], steps[without[0] + 1:]):
        if e["committed"] and e["replicas"] == replicas:
            return max(0.0, e["t"] - prev["t"] - median)
    return None


def tail(path, lines=30):
    try:
        with open(path) as f:
            return "".join(f.readlines()[-lines:])
    except FileNotFoundError:
        return ""


def drive(args):
    os.environ.setdefault("RUST_LOG", "warn")  # torchft's lighthouse and managers log each quorum
    import torch
    from torchft._torchft import LighthouseServer
    import tiny_lm

    lighthouse = LighthouseServer(bind="[::]:0", min_replicas=args.min_replicas,
                                  heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS)
    tmp = tempfile.mkdtemp(prefix="torchft-ccl-")
    procs, logs, outs = {}, {}, {}

    def start(index, name, die_at=None):
        logs[name] = os.path.join(tmp, f"{name}.log")
        outs[name] = os.path.join(tmp, f"{name}.pt")
        cmd = [sys.executable, os.path.abspath(__file__), "--replica", str(index),
               "--lighthouse", lighthouse.address(), "--log", logs[name], "--out", outs[name],
               "--steps", str(args.steps), "--pg", args.pg, "--width", str(args.width),
               "--blocks", str(args.blocks), "--min-replicas", str(args.min_replicas),
               "--step-seconds", str(args.step_seconds)]
        if die_at is not None:
            cmd += ["--die-at", str(die_at)]
        with open(os.path.join(tmp, f"{name}.out"), "w") as out:
            procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                           env=os.environ)

    def wait_for(name):
        try:
            return procs[name].wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise SystemExit(f"torchft_train: {name} did not end in {args.timeout} s; its "
                             f"output ends:\n" + tail(os.path.join(tmp, f"{name}.out")))

    deadline = time.monotonic() + args.timeout
    victim = f"replica_{args.replicas - 1}"
    try:
        for i in range(args.replicas):
            start(i, f"replica_{i}", args.kill_at if f"replica_{i}" == victim else None)
        rc = wait_for(victim)
        killed = [e for e in read_log(logs[victim]) if e.get("killed")]
        if rc != -signal.SIGKILL or not killed:
            raise SystemExit(f"torchft_train: the victim ended with {rc}, not its SIGKILL at "
                             f"step {args.kill_at}; its output ends:\n"
                             + tail(os.path.join(tmp, f"{victim}.out")))
        killed_at = killed[0]["t"]
        del procs[victim]
        time.sleep(args.replace_after)
        start(args.replicas - 1, "replacement")
        for name in list(procs):
            if name == "replacement" and not rejoined(read_log(logs[name]), args.replicas):
                procs[name].kill()  # it would wait for a quorum its peers no longer make
                raise SystemExit("torchft_train: the replacement did not rejoin before the "
                                 "survivors ended: raise --steps")
            rc = wait_for(name)
            if rc != 0:
                raise SystemExit(f"torchft_train: {name} exited with {rc}; its output ends:\n"
                                 + tail(os.path.join(tmp, f"{name}.out")))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        lighthouse.shutdown()

    finals = {name: torch.load(outs[name]) for name in procs}
    first = next(iter(finals.values()))
    spread = max(tiny_lm.max_difference(p, first) for p in finals.values())
    survivors = [f"replica_{i}" for i in range(args.replicas - 1)]
    report = {"pg": args.pg, "replicas": args.replicas, "steps": args.steps,
              "parameters_spread": spread, "survivors": {}}
    for name in survivors:
        entries = read_log(logs[name])
        steps = [e for e in entries if "committed" in e]
        gaps = [b["t"] - a["t"] for a, b in zip(steps, steps[1:])
                if a["committed"] and b["committed"]]
        median = statistics.median(gaps) if gaps else 0.0
        report["survivors"][name] = {
            "median_step_s": median,
            "lost_at_failure_s": lost_time(steps, killed_at, args.replicas, median),
            "lost_at_rejoin_s": rejoin_time(steps, killed_at, args.replicas, median),
            "failed_steps": sum(1 for e in steps if not e["committed"]),
            "steps_without_victim": sum(1 for e in steps if e["committed"] and e["t"] > killed_at
                                        and e["replicas"] == args.replicas - 1),
        }
    print(json.dumps(report, indent=1), flush=True)
    if spread != 0.0:
        raise SystemExit(f"torchft_train: the replicas ended with different parameters "
                         f"(largest difference {spread})")
    lost = [s["lost_at_failure_s"] for s in report["survivors"].values()]
    if any(x is None for x in lost):
        raise SystemExit("torchft_train: a survivor has no committed step on each side of the "
                         "failure")
    print(f"torchft on {args.pg}: {len(finals)} replicas ended equal; a survivor lost at most "
          f"{max(lost):.2f} s to the failure", flush=True)
    if args.keep:
        print(f"logs kept in {tmp}", flush=True)
    else:
        shutil.rmtree(tmp, ignore_errors=True)  # kept when the run fails, for its logs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--min-replicas", type=int, default=2)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--kill-at", type=int, default=20,
                    help="the step in whose backward pass the victim is SIGKILLed")
    ap.add_argument("--step-seconds", type=float, default=0.05,
                    help="each step lasts at least this long (the compute of a larger model)")
    ap.add_argument("--replace-after", type=float, default=1.0,
                    help="seconds between the kill and the replacement's start")
    ap.add_argument("--pg", default="ccl", choices=["ccl", "gloo"])
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=240, help="bound on the whole run, s")
    ap.add_argument("--keep", action="store_true", help="keep the replicas' logs")
    # A replica's own arguments (the driver passes them).
    ap.add_argument("--replica", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--lighthouse", help=argparse.SUPPRESS)
    ap.add_argument("--log", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--die-at", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.replicas < 2 or not 1 <= args.min_replicas < args.replicas:
        ap.error("--replicas must be at least 2 and --min-replicas below it (the survivors go "
                 "on without the victim)")
    if not 0 < args.kill_at < args.steps:
        ap.error("--kill-at must lie between 0 and --steps")
    if args.replica is not None:
        replica(args)
    else:
        drive(args)


if __name__ == "__main__":
    main()
