"""torch on ccl, on a GPU: the device check's torch steps. Two ways, one set of cases:
  - torch's ProcessGroupNCCL on ccl's libnccl.so.2 shim (the default);
  - ccl's own backend, ccl_torch, on CUDA tensors (--ccl-torch DIR: DIR holds the ccl_torch
    package built against this python's torch; no shim, nothing preloaded).

scripts/device-check.sh runs it with the GPU machine's own python3 and torch (a CUDA build), on
the shim of the bundle it unpacked. In processes started with the shim preloaded and
LD_BIND_NOW=1 (as tests/nccl_shim/torch_on_shim.py starts them: torch's wheels find NVIDIA's
libnccl.so.2 by RPATH, which LD_LIBRARY_PATH does not override) and the bundle's lib/ on
LD_LIBRARY_PATH (for libccl.so.0 and what it loads):
  1. 2 ranks (processes) on cuda:0, a FileStore in a temporary folder: the NCCL symbols torch
     calls bind to the shim; init_process_group("nccl", device_id=cuda:0); all_reduce (sum,
     avg), all_gather_into_tensor, reduce_scatter_tensor, broadcast (each root),
     all_to_all_single, a send/recv pair and barrier over float32, bfloat16 and int64 at 1 KiB,
     1 MiB and 64 MiB, every result against values computed on the CPU from the same formula
     (small integers, exact in every datatype, so the comparison is exact); two collectives
     issued back to back under two torch.cuda.Stream contexts; an all_reduce pair captured in a
     torch.cuda.CUDAGraph after a warmup on a side stream, replayed 3 times with new inputs;
     the 64 MiB float32 all_reduce timed (median of 20 after 5 warmups, synchronized around
     each), its busbw as nccl-tests computes it (algbw * 2(n-1)/n);
  2. the same timing on torch's own NCCL (nothing preloaded), the baseline: at 2 ranks on the
     one GPU where NCCL accepts that; NCCL before 2.30 refuses ("Duplicate GPU detected"), and
     then both libraries are timed at 1 rank (a 1-rank all_reduce moves nothing between ranks:
     that ratio compares the cost of a call, not bandwidth).
With --ccl-torch the same cases run on init_process_group("ccl_torch") (2 ranks, every CUDA
operation on ccl's device collectives through the backend's CUDA lane), timed against the same
baseline (at 1 rank, ccl_torch is timed at 1 rank too).
Prints one line, "torch_nccl_check: PASS: ...", "torch_nccl_check: FAIL: ..." or
"torch_nccl_check: skipped: ..." (this python has no torch, or torch no CUDA: exit 0), last;
progress and, on a failure, the ranks' log tails before it. Exit 0 (pass, skipped), 1 (fail),
2 (usage). Bounded: every process is killed at its part's deadline (a hang is a failure), the
whole within --budget seconds.

    torch_nccl_check.py BUNDLE_ROOT [--budget S]       the unpacked bundle: nccl/libnccl.so.2, lib/
    torch_nccl_check.py --shim FILE --lib-dir DIR      a build tree's shim and libccl's folder
    --ccl-torch DIR     ccl_torch instead of the shim (DIR: the folder holding the ccl_torch
                        package; with BUNDLE_ROOT or --lib-dir for libccl's folder)
    --sizes 1K,1M,64M   the sizes of the per-datatype cases (bytes per rank)
    --cpu-gloo, --cpu   the same cases with gloo on CPU tensors (the shim still preloaded and its
                        binding checked), or with --ccl-torch ccl_torch on CPU tensors, no
                        baseline: how this script is checked without a GPU
"""

import argparse
import ctypes
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

NAME = "torch_nccl_check"
TIMED_BYTES = 64 << 20
DTYPES = ("float32", "bfloat16", "int64")
# Symbols the check's collectives go through; each must be served by the shim.
BOUND = ("ncclGetVersion", "ncclGetUniqueId", "ncclCommInitRankConfig", "ncclAllReduce",
         "ncclAllGather", "ncclReduceScatter", "ncclBroadcast", "ncclSend", "ncclRecv",
         "ncclGroupStart", "ncclGroupEnd", "ncclCommAbort", "ncclCommDestroy")


def progress(msg):
    print(f"[{NAME}] {msg}", file=sys.stderr, flush=True)


def human(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}"
    return f"{nbytes} B"


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper()
    if text and text[-1] in mult:
        return int(text[:-1]) * mult[text[-1]]
    return int(text)


def one_line(text, limit=300):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."


# ---------------------------------------------------------------------------------------------
# In a rank's process.


class DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


def serving(name, handle=None):
    """The file whose definition of NAME the lookup finds: in the global scope (where
    libtorch_cuda.so's references bind, the preloaded shim first) without a handle."""
    libdl = ctypes.CDLL(None)
    libdl.dlsym.restype = ctypes.c_void_p
    libdl.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    libdl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(DlInfo)]
    address = libdl.dlsym(handle, name.encode())
    info = DlInfo()
    if not address or not libdl.dladdr(address, ctypes.byref(info)) or not info.dli_fname:
        return None
    return os.path.realpath(info.dli_fname.decode())


def nccl_version(library):
    version = ctypes.c_int(0)
    library.ncclGetVersion(ctypes.byref(version))
    code = version.value
    return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def check_binding(shim):
    """Every symbol of BOUND resolves to the shim (not to NVIDIA's libnccl.so.2, which torch
    loads too); returns the shim's path and NCCL version."""
    real = os.path.realpath(shim)
    wrong = []
    for name in BOUND:
        where = serving(name)
        if where != real:
            wrong.append(f"{name} -> {where or 'not found'}")
    if wrong:
        raise RuntimeError(f"NCCL symbols not served by the shim {real}: " + ", ".join(wrong))
    return f"{os.path.basename(real)}, NCCL {nccl_version(ctypes.CDLL(shim))}'s ABI"


def describe_nccl(torch):
    """Which libnccl.so.2 torch runs on without the shim (for the report)."""
    version = ".".join(map(str, torch.cuda.nccl.version()))
    where = serving("ncclAllReduce")
    if where is None:  # torch's libnccl.so.2 loaded in a local scope: ask it by its soname
        try:
            handle = ctypes.CDLL("libnccl.so.2", mode=os.RTLD_NOLOAD | os.RTLD_LAZY)._handle
            where = serving("ncclAllReduce", handle)
        except OSError:
            where = None
    if where and "site-packages/" in where:
        where = where.split("site-packages/", 1)[1]
    return f"NCCL {version}, {where or 'libnccl.so.2 (path unknown)'}"


class Rank:
    """One rank's cases; its results go to a JSON file the parent reads (rewritten after each
    part, so that a rank that hangs or dies still says how far it got)."""

    def __init__(self, spec):
        self.spec = spec
        self.rank = spec["rank"]
        self.world = spec["world"]
        self.gpu = not spec["cpu_gloo"]
        # The process group's backend: torch's NCCL (on the shim or not), gloo (the CPU dry run
        # of the shim's cases), or ccl's own.
        self.backend = "ccl_torch" if spec.get("ccl_torch") else "nccl" if self.gpu else "gloo"
        self.res = {"rank": self.rank, "phase": "import torch", "checks": 0, "failures": [],
                    "error": None, "done": False}
        self.save()

    def save(self):
        tmp = self.spec["result"] + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.res, f)
        os.replace(tmp, self.spec["result"])

    def phase(self, name):
        self.res["phase"] = name
        self.save()

    def run(self):
        import datetime
        import torch
        import torch.distributed as dist
        self.torch, self.dist = torch, dist

        self.phase("binding")
        if self.backend == "ccl_torch":
            import ccl_torch
            code = ccl_torch.version()  # CCL_VERSION_CODE: major * 10000 + minor * 100 + patch
            self.res["library"] = f"ccl_torch on ccl {code // 10000}.{code // 100 % 100}.{code % 100}"
        elif self.spec["shim"]:
            self.res["library"] = check_binding(self.spec["shim"])
        elif self.gpu:
            self.res["library"] = describe_nccl(torch)
        if self.gpu:
            torch.cuda.set_device(0)
            torch.zeros(1, device="cuda")  # a current context before the communicator
            self.device = torch.device("cuda", 0)
        else:
            self.device = torch.device("cpu")

        self.phase("init_process_group")
        store = dist.FileStore(self.spec["store"], self.world)
        kwargs = dict(store=store, rank=self.rank, world_size=self.world,
                      timeout=datetime.timedelta(seconds=self.spec["timeout_s"]))
        if self.backend == "nccl":
            kwargs["device_id"] = self.device
        dist.init_process_group(self.backend, **kwargs)

        if self.spec["role"] == "full":
            for size in self.spec["sizes"]:
                for dtype in DTYPES:
                    self.phase(f"collectives, {dtype} {human(size)}")
                    self.collectives(getattr(torch, dtype), size)
            if self.gpu:
                self.phase("two streams")
                self.two_streams()
        self.phase("timing")
        self.res["seconds"] = self.time_all_reduce()
        if self.spec["role"] == "full" and self.gpu:
            self.phase("graph")
            self.graph()
        self.phase("destroy_process_group")
        dist.destroy_process_group()
        self.res["done"] = True
        self.save()

    # -- helpers

    def base(self, n, mod=61):
        return self.torch.arange(n, dtype=self.torch.int64) % mod

    def put(self, values, dtype):
        return values.to(dtype).to(self.device)

    def expect(self, what, got, want):
        self.res["checks"] += 1
        got = got.cpu().reshape(-1)
        want = want.to(got.dtype).reshape(-1)
        if self.torch.equal(got, want):
            return
        wrong = (got != want).nonzero().reshape(-1)
        if wrong.numel() == 0:  # shapes differ
            self.res["failures"].append(f"{what}: {got.numel()} elements, {want.numel()} expected")
            return
        i = int(wrong[0])
        self.res["failures"].append(
            f"rank {self.rank}, {what}: {wrong.numel()} of {want.numel()} elements wrong, "
            f"first [{i}] = {got[i].item()} (expected {want[i].item()})")

    # -- the cases

    def collectives(self, dtype, size):
        """Every value is a small integer (below 128 in bfloat16's 8-bit significand), so each
        result is exact in every datatype and compared bit for bit."""
        torch, dist, r, w = self.torch, self.dist, self.rank, self.world
        n = size // torch.tensor([], dtype=dtype).element_size()
        tag = f"{str(dtype).replace('torch.', '')} {human(size)}"
        b = self.base(n)
        offset = w * (w - 1) // 2  # the sum of the ranks' "+ r"

        x = self.put(b + r, dtype)
        dist.all_reduce(x)
        self.expect(f"all_reduce sum {tag}", x, b * w + offset)
        if dtype.is_floating_point and self.backend != "gloo":  # gloo has no AVG
            x = self.put(b + r, dtype)
            dist.all_reduce(x, op=dist.ReduceOp.AVG)
            self.expect(f"all_reduce avg {tag}", x, b.double() + (w - 1) / 2)

        out = torch.empty(w * n, dtype=dtype, device=self.device)
        dist.all_gather_into_tensor(out, self.put(b + r, dtype))
        self.expect(f"all_gather_into_tensor {tag}", out, torch.cat([b + k for k in range(w)]))

        bb = self.base(w * n)
        out = torch.empty(n, dtype=dtype, device=self.device)
        dist.reduce_scatter_tensor(out, self.put(bb + r, dtype))
        self.expect(f"reduce_scatter_tensor {tag}", out, bb[r * n:(r + 1) * n] * w + offset)

        for root in range(w):
            x = self.put(b + r, dtype)
            dist.broadcast(x, src=root)
            self.expect(f"broadcast root {root} {tag}", x, b + root)

        # Chunk j of rank r's input is for rank j; values stay below 128 at 2 ranks.
        c = n // w
        bc = self.base(c, 32)
        out = torch.empty(c * w, dtype=dtype, device=self.device)
        dist.all_to_all_single(out, self.put(torch.cat([bc + 32 * (r * w + j) for j in range(w)]),
                                             dtype))
        self.expect(f"all_to_all_single {tag}", out, torch.cat([bc + 32 * (j * w + r)
                                                                for j in range(w)]))

        if w >= 2 and r < 2:  # a pair: rank 0 sends first, rank 1 receives first
            peer = 1 - r
            mine = self.put(b + 7 + 2 * r, dtype)
            got = torch.empty(n, dtype=dtype, device=self.device)
            if r == 0:
                dist.send(mine, peer)
                dist.recv(got, peer)
            else:
                dist.recv(got, peer)
                dist.send(mine, peer)
            self.expect(f"send/recv {tag}", got, b + 7 + 2 * peer)

        if self.backend == "nccl":
            dist.barrier(device_ids=[0])
        else:
            dist.barrier()
        self.res["checks"] += 1

    def two_streams(self):
        """Each input changed on its own stream just before its collective, the two collectives
        issued back to back under the two streams, waited for on the default stream."""
        torch, dist, r, w = self.torch, self.dist, self.rank, self.world
        na, nb = (64 << 20) // 4, (1 << 10) // 4
        ba, bb = self.base(na), self.base(nb)
        a = self.put(ba + r, torch.float32)
        b = self.put(bb + r, torch.float32)
        torch.cuda.synchronize()
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        with torch.cuda.stream(s1):
            a.mul_(2)
            wa = dist.all_reduce(a, async_op=True)
        with torch.cuda.stream(s2):
            b.add_(1)
            wb = dist.all_reduce(b, async_op=True)
        wa.wait()
        wb.wait()
        torch.cuda.synchronize()
        offset = w * (w - 1) // 2
        self.expect("two streams: all_reduce 64 MiB on stream 1", a, 2 * (ba * w + offset))
        self.expect("two streams: all_reduce 1 KiB on stream 2", b, (bb + 1) * w + offset)

    def graph(self):
        """torch's recipe: warm up on a side stream, capture, replay with new inputs."""
        torch, dist, r, w = self.torch, self.dist, self.rank, self.world
        sizes = ((1 << 20) // 4, (64 << 20) // 4)
        bases = [self.base(n) for n in sizes]
        xs = [torch.zeros(n, dtype=torch.float32, device=self.device) for n in sizes]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                for x in xs:
                    dist.all_reduce(x)
        torch.cuda.current_stream().wait_stream(side)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for x in xs:
                dist.all_reduce(x)
        offset = w * (w - 1) // 2
        for replay in range(3):
            for x, b in zip(xs, bases):
                x.copy_(self.put(b + r + 3 * replay, torch.float32))
            g.replay()
            torch.cuda.synchronize()
            for x, b in zip(xs, bases):
                self.expect(f"graph replay {replay + 1}: all_reduce {human(4 * b.numel())}", x,
                            b * w + offset + 3 * replay * w)
        del g

    def time_all_reduce(self, warmup=5, iterations=20):
        torch, dist = self.torch, self.dist
        x = torch.ones(TIMED_BYTES // 4, dtype=torch.float32, device=self.device)
        sync = torch.cuda.synchronize if self.gpu else (lambda: None)
        for _ in range(warmup):
            dist.all_reduce(x)
        times = []
        for _ in range(iterations):
            sync()
            t = time.perf_counter()
            dist.all_reduce(x)
            sync()
            times.append(time.perf_counter() - t)
        return statistics.median(times)


def rank_main(spec_json):
    spec = json.loads(spec_json)
    rank = Rank(spec)
    try:
        rank.run()
    except BaseException as e:  # noqa: BLE001 - everything is a result here
        rank.res["error"] = one_line(f"{type(e).__name__}: {e}", 600)
        rank.save()
        traceback.print_exc()  # into the rank's log, whose end the parent shows
        sys.stderr.flush()
        # Not through the interpreter's teardown: a broken communicator may block there.
        os._exit(1)


def probe_main(cpu_gloo):
    """What the parent needs to know, without the shim; one JSON line."""
    try:
        import torch
    except Exception as e:  # noqa: BLE001
        print(json.dumps({"skip": one_line(f"no torch for {sys.executable} "
                                           f"({type(e).__name__}: {e})")}))
        return
    info = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if cpu_gloo:
        print(json.dumps(info))
        return
    if not torch.version.cuda:
        info["skip"] = f"no CUDA: torch {torch.__version__} is a CPU build"
    elif not torch.cuda.is_available():
        info["skip"] = (f"no CUDA: torch {torch.__version__} (CUDA {torch.version.cuda}) finds no "
                        "GPU (torch.cuda.is_available() is False)")
    else:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_nccl_available():
            info["skip"] = f"torch {torch.__version__} has no NCCL backend"
        else:
            info["gpu"] = torch.cuda.get_device_name(0)
            info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
    print(json.dumps(info))


# ---------------------------------------------------------------------------------------------
# The parent: starts the ranks, bounds them, reports.


class Parent:
    def __init__(self, args):
        self.args = args
        self.deadline = time.monotonic() + args.budget
        self.tmp = tempfile.mkdtemp(prefix="torch_nccl_check.")
        self.live = []  # the processes to kill if this one is stopped

    def left(self):
        return self.deadline - time.monotonic()

    def kill_all(self):
        for p in self.live:
            if p.poll() is None:
                p.kill()
        for p in self.live:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def env(self, shim, ccl_torch=False):
        env = dict(os.environ)
        env.setdefault("NCCL_DEBUG", "WARN")  # NCCL's (and the shim's) refusals in the logs
        if ccl_torch:
            env.pop("LD_PRELOAD", None)
            old = env.get("PYTHONPATH")
            env["PYTHONPATH"] = self.args.ccl_torch + (":" + old if old else "")
            old = env.get("LD_LIBRARY_PATH")
            env["LD_LIBRARY_PATH"] = (old + ":" if old else "") + self.args.lib_dir
            env.setdefault("CCL_TIMEOUT", "30")
        elif shim:
            env["LD_PRELOAD"] = shim + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
            env["LD_BIND_NOW"] = "1"
            # After what is there (the driver's folder, often), so that the bundle's libz and
            # liblzma stand in only for what the system lacks.
            old = env.get("LD_LIBRARY_PATH")
            env["LD_LIBRARY_PATH"] = (old + ":" if old else "") + self.args.lib_dir
            env.setdefault("CCL_TIMEOUT", "30")  # a wait in ccl fails before the deadline
        else:
            env.pop("LD_PRELOAD", None)
        return env

    def probe(self):
        limit = min(60.0, self.left())
        try:
            run = subprocess.run([sys.executable, __file__, "--probe"] +
                                 (["--cpu-gloo"] if self.args.cpu_gloo else []),
                                 env=self.env(None), capture_output=True, text=True,
                                 timeout=limit)
        except subprocess.TimeoutExpired:
            return None, f"`import torch` and torch.cuda.is_available() took over {limit:.0f} s"
        lines = run.stdout.strip().splitlines()
        if run.returncode != 0 or not lines:
            err = (run.stderr.strip().splitlines() or ["no output"])[-1]
            return {"skip": one_line(f"{sys.executable} -c 'import torch' fails "
                                     f"(status {run.returncode}): {err}")}, None
        return json.loads(lines[-1]), None

    def ranks(self, tag, world, shim, role, cap, show_logs=True, ccl_torch=False):
        """Runs WORLD ranks; returns (ok, reasons, results). Killed at min(cap, what is left);
        a rank that fails leaves the others 15 s; a rank that is done must exit within 15 s."""
        limit = min(cap, self.left())
        if limit < 15:
            return False, [f"{tag}: not run, {max(limit, 0):.0f} s of the budget left"], []
        progress(f"{tag}: {world} rank(s), {limit:.0f} s at most")
        store = os.path.join(self.tmp, f"{tag}.store")
        procs, logs, results = [], [], []
        for r in range(world):
            result = os.path.join(self.tmp, f"{tag}.{r}.json")
            spec = dict(rank=r, world=world, store=store, result=result, role=role,
                        shim=shim, sizes=self.args.sizes, cpu_gloo=self.args.cpu_gloo,
                        ccl_torch=ccl_torch, timeout_s=max(10, int(limit) - 5))
            log = os.path.join(self.tmp, f"{tag}.{r}.log")
            with open(log, "w") as out:
                p = subprocess.Popen([sys.executable, __file__, "--rank", json.dumps(spec)],
                                     env=self.env(shim, ccl_torch), stdout=out, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
            procs.append(p)
            self.live.append(p)
            logs.append(log)
            results.append(result)
        started = time.monotonic()
        end = started + limit
        timed_out, hung_exit = set(), set()
        done_at = {}
        while True:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes):
                break
            now = time.monotonic()
            if any(c not in (None, 0) for c in codes):
                end = min(end, now + 15)
            for r, p in enumerate(procs):
                if codes[r] is None and r not in done_at and read_json(results[r]).get("done"):
                    done_at[r] = now
                if r in done_at and codes[r] is None and now - done_at[r] > 15:
                    hung_exit.add(r)
                    end = now
            if now >= end:
                for r, p in enumerate(procs):
                    if p.poll() is None:
                        timed_out.add(r)
                        p.kill()
                for p in procs:
                    p.wait()
                break
            time.sleep(0.2)
        took = time.monotonic() - started
        got = [read_json(path) for path in results]
        reasons = []
        for r, (p, res) in enumerate(zip(procs, got)):
            where = res.get("phase", "starting")
            if r in hung_exit:
                reasons.append(f"rank {r} did not exit within 15 s of destroy_process_group")
            elif r in timed_out:
                reasons.append(f"rank {r} timed out after {took:.0f} s in {where}")
            elif p.returncode != 0:
                reasons.append(f"rank {r} failed in {where} (status {p.returncode})" +
                               (f": {res['error']}" if res.get("error") else ""))
            elif not res.get("done"):
                reasons.append(f"rank {r} exited 0 without finishing ({where})")
            reasons.extend(res.get("failures", [])[:3])
        ok = not reasons
        progress(f"{tag}: {'passed' if ok else 'failed'} in {took:.0f} s")
        if not ok and show_logs:
            for r, log in enumerate(logs):
                tail = read_tail(log, 8)
                if tail:
                    progress(f"{tag}, rank {r}'s log ends:\n" + tail)
        return ok, reasons, got

    def main(self):
        a = self.args
        info, hang = self.probe()
        if hang:
            return "FAIL", hang
        if "skip" in info:
            return "skipped", info["skip"]
        cpu = "CPU, ccl_torch" if a.ccl_torch else "CPU, gloo"
        where = cpu if a.cpu_gloo else f"cuda:0 ({info['gpu']})"
        progress(f"torch {info['torch']} (CUDA {info['cuda']}), NVIDIA's NCCL "
                 f"{info.get('nccl', '?')}, {sys.executable}; {where}")

        ok, reasons, got = self.subject_ranks(2, "full", 90)
        if not ok:
            on = "ccl_torch" if a.ccl_torch else "the shim"
            return "FAIL", f"torch {info['torch']} on {on}, 2 ranks on {where}: " + \
                "; ".join(reasons[:6])
        checks = sum(res["checks"] for res in got)
        shim_t = got[0]["seconds"]
        algbw = TIMED_BYTES / shim_t / 1e9
        if a.ccl_torch:
            group = "BackendCcl"
        elif a.cpu_gloo:
            group = "ProcessGroupGloo, the shim preloaded"
        else:
            group = "ProcessGroupNCCL on the shim"
        extra = "" if a.cpu_gloo else ", two streams, a captured graph replayed 3 times"
        ops = "sum" if a.cpu_gloo and not a.ccl_torch else "sum/avg"  # gloo has no AVG
        text = (f"torch {info['torch']} {group} ({got[0]['library']}), 2 ranks on {where}: "
                f"all_reduce {ops}, all_gather, reduce_scatter, broadcast, all_to_all, "
                "send/recv, barrier x float32/bfloat16/int64 x " +
                "/".join(human(s) for s in a.sizes) +
                f" ({checks} checks){extra} pass; all_reduce 64 MiB float32 at 2 ranks "
                f"{shim_t * 1e3:.3f} ms, busbw {algbw:.1f} GB/s")
        if a.cpu_gloo:
            return "PASS", text + " (on CPU: no baseline)"
        try:
            return "PASS", text + "; " + self.baseline(shim_t, info)
        except ShimFailure as e:
            return "FAIL", f"{e} (2 ranks passed: {text})"

    def subject_ranks(self, world, role, cap):
        """The ranks of what is checked: ccl_torch, or torch's NCCL on the shim."""
        a = self.args
        if a.ccl_torch:
            return self.ranks(f"ccl_torch-{world}", world, None, role, cap, ccl_torch=True)
        return self.ranks(f"shim-{world}", world, a.shim, role, cap)

    def baseline(self, shim_t, info):
        """torch on NVIDIA's NCCL: at 2 ranks if it accepts them on one GPU, else at 1 rank with
        the shim timed at 1 rank too. Its failures are reported, not failed: ccl is checked."""
        # NCCL before 2.30 refuses this: its ranks' logs are not shown, the reason is.
        ok, reasons, got = self.ranks("nccl-2", 2, None, "time", 40, show_logs=False)
        if ok:
            nccl_t = got[0]["seconds"]
            return (f"torch on NVIDIA's {got[0]['library']} at 2 ranks: {nccl_t * 1e3:.3f} ms, "
                    f"busbw {TIMED_BYTES / nccl_t / 1e9:.1f} GB/s; "
                    f"{'ccl_torch' if self.args.ccl_torch else 'shim'}/NCCL busbw "
                    f"{nccl_t / shim_t:.2f}")
        logs = " ".join(read_tail(os.path.join(self.tmp, f"nccl-2.{r}.log"), 200) for r in (0, 1))
        if "Duplicate GPU" in logs or any("Duplicate GPU" in x for x in reasons):
            why = (f"NVIDIA's NCCL {info.get('nccl', '?')} refuses 2 ranks on one GPU "
                   "(Duplicate GPU detected)")
        else:
            why = f"NVIDIA's NCCL failed at 2 ranks on one GPU ({one_line(reasons[0], 200)})"
        ok1, reasons1, got1 = self.ranks("nccl-1", 1, None, "time", 30)
        if not ok1:
            return f"{why}; at 1 rank it failed too ({one_line(reasons1[0], 200)}): no baseline"
        oks, reasonss, gots = self.subject_ranks(1, "time", 30)
        nccl_t = got1[0]["seconds"]
        head = (f"{why}, so at 1 rank (no data moves between ranks: the cost of a call, not "
                f"bandwidth): NCCL {nccl_t * 1e3:.3f} ms")
        ours = "ccl_torch" if self.args.ccl_torch else "shim"
        if not oks:
            # The shim (or ccl_torch) at 1 rank is ccl's: a failure there fails the check.
            raise ShimFailure(f"the {ours} at 1 rank: " + "; ".join(reasonss[:3]))
        shim1_t = gots[0]["seconds"]
        return (f"{head}, {ours} {shim1_t * 1e3:.3f} ms, {ours}/NCCL algbw "
                f"{nccl_t / shim1_t:.2f}")


class ShimFailure(Exception):
    pass


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def read_tail(path, lines):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return ""


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--rank":
        rank_main(sys.argv[2])
        return 0
    if len(sys.argv) >= 2 and sys.argv[1] == "--probe":
        probe_main("--cpu-gloo" in sys.argv)
        return 0
    parser = argparse.ArgumentParser(prog=NAME, usage=__doc__.split("\n\n")[-1],
                                     add_help=True)
    parser.add_argument("root", nargs="?", help="the unpacked bundle (nccl/, lib/)")
    parser.add_argument("--shim", help="the shim's libnccl.so.2 (default ROOT/nccl/libnccl.so.2)")
    parser.add_argument("--lib-dir", help="libccl.so.0's folder (default ROOT/lib)")
    parser.add_argument("--budget", type=float, default=140, help="seconds for everything")
    parser.add_argument("--sizes", default="1K,1M,64M")
    parser.add_argument("--cpu-gloo", "--cpu", dest="cpu_gloo", action="store_true")
    parser.add_argument("--ccl-torch", help="the folder holding the ccl_torch package")
    args = parser.parse_args()
    try:
        args.sizes = [parse_size(s) for s in args.sizes.split(",")]
    except ValueError:
        parser.error(f"--sizes: {args.sizes}")
    bad = [s for s in args.sizes if s <= 0 or s % 16]
    if bad:
        parser.error(f"--sizes: each a multiple of 16 bytes (every datatype, 2 ranks): {bad}")
    if args.root:
        args.shim = args.shim or os.path.join(args.root, "nccl", "libnccl.so.2")
        args.lib_dir = args.lib_dir or os.path.join(args.root, "lib")
    if args.ccl_torch:
        if not args.lib_dir:
            parser.error("--ccl-torch needs BUNDLE_ROOT or --lib-dir")
        args.ccl_torch = os.path.abspath(args.ccl_torch)
        if not os.path.isfile(os.path.join(args.ccl_torch, "ccl_torch", "__init__.py")):
            print(f"{NAME}: FAIL: no ccl_torch package in {args.ccl_torch}")
            return 1
        args.shim = None  # nothing preloaded: ccl_torch is the subject
    elif not args.shim or not args.lib_dir:
        parser.error("give BUNDLE_ROOT, or --shim and --lib-dir")
    args.lib_dir = os.path.abspath(args.lib_dir)
    if args.shim:
        args.shim = os.path.abspath(args.shim)
    if (args.shim and not os.path.exists(args.shim)) or not os.path.isdir(args.lib_dir):
        print(f"{NAME}: FAIL: no shim at {args.shim} or no folder {args.lib_dir}")
        return 1

    parent = Parent(args)

    def stopped(signum, _frame):
        parent.kill_all()
        shutil.rmtree(parent.tmp, ignore_errors=True)
        print(f"{NAME}: FAIL: stopped by signal {signum}", flush=True)
        os._exit(1)

    signal.signal(signal.SIGTERM, stopped)
    signal.signal(signal.SIGINT, stopped)
    try:
        verdict, text = parent.main()
    finally:
        parent.kill_all()
        shutil.rmtree(parent.tmp, ignore_errors=True)
    print(f"{NAME}: {verdict}: {text}", flush=True)
    return 1 if verdict == "FAIL" else 0


if __name__ == "__main__":
    sys.exit(main())
