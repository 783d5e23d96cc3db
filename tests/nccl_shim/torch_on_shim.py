"""torch's CUDA build on ccl's libnccl.so.2 shim, on a machine with or without a GPU.

torch's CUDA wheels link libnccl.so.2 (NVIDIA's, from the nvidia-nccl wheel, by RPATH). With
the shim preloaded, the loader binds libtorch_cuda.so's NCCL symbols to the shim; with
LD_BIND_NOW=1 it binds every one of them when torch is imported, so a function torch links and the
shim lacks fails the import ("undefined symbol"). This checks, in a child process started that
way:
  1. `import torch` succeeds;
  2. every nccl* symbol libtorch_cuda.so imports resolves, in the process's global scope (where
     libtorch_cuda.so's references bind), to the shim and not to NVIDIA's library (torch also
     loads the wheel's libnccl.so.2 by its path, after the shim);
  3. torch.cuda.nccl.version() is the shim's ncclGetVersion (its nccl.h's);
  4. making a ProcessGroupNCCL: on a GPU machine it is made; without a GPU torch refuses before
     NCCL is called ("no GPUs found"), which is what this machine can check.

    torch_on_shim.py SHIM_LIBRARY   (run with the interpreter whose torch is checked)
"""

import ctypes
import os
import re
import subprocess
import sys

from torch_nccl_check import serving  # the GPU check's lookup: which file serves a symbol


def child(shim):
    import torch
    import torch.distributed as dist

    shim_real = os.path.realpath(shim)
    lib = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so")
    if not os.path.exists(lib):
        sys.exit(f"torch_on_shim: {lib} is missing: torch {torch.__version__} is not a CUDA build "
                 "(scripts/requirements-venv.txt pins one)")
    undefined = subprocess.run(["nm", "-D", "--undefined-only", lib], check=True,
                               capture_output=True, text=True).stdout
    wanted = sorted({m.group(1) for m in re.finditer(r"\bU (nccl[A-Za-z0-9_]+)", undefined)})
    if len(wanted) < 20:
        sys.exit(f"torch_on_shim: only {len(wanted)} nccl symbols found in {lib}: has nm's format "
                 "changed?")

    wrong = []
    for name in wanted:
        where = serving(name)  # in the global scope, where libtorch_cuda.so's references bind
        if where != shim_real:
            wrong.append(f"{name}: {where or 'not found'}")
    if wrong:
        sys.exit("torch_on_shim: symbols torch links that do not resolve to the shim:\n  " +
                 "\n  ".join(wrong))

    version = ctypes.c_int(0)
    ctypes.CDLL(shim).ncclGetVersion(ctypes.byref(version))
    code = version.value
    expected = (code // 10000, code % 10000 // 100, code % 100)
    got = torch.cuda.nccl.version()
    if tuple(got) != expected:
        sys.exit(f"torch_on_shim: torch.cuda.nccl.version() is {got}, the shim's is {expected}")

    try:
        dist.ProcessGroupNCCL(dist.HashStore(), 0, 1)
        made = "a ProcessGroupNCCL made"
    except ValueError as e:
        if torch.cuda.is_available() or "GPU" not in str(e):
            raise
        made = "ProcessGroupNCCL refused by torch before NCCL: no GPU here"
    print(f"torch_on_shim: torch {torch.__version__} imported with LD_BIND_NOW=1 on the shim; "
          f"the {len(wanted)} nccl symbols libtorch_cuda.so imports all bind to the shim; "
          f"torch.cuda.nccl.version() {'.'.join(map(str, got))}; {made}")


def main():
    if len(sys.argv) != 2 and not (len(sys.argv) == 3 and sys.argv[2] == "--child"):
        sys.exit(__doc__)
    shim = os.path.abspath(sys.argv[1])
    if not os.path.exists(shim):
        sys.exit(f"torch_on_shim: {shim} does not exist")
    if len(sys.argv) == 3:
        child(shim)
        return
    env = dict(os.environ, LD_PRELOAD=shim, LD_BIND_NOW="1")
    run = subprocess.run([sys.executable, __file__, shim, "--child"], env=env, timeout=300)
    sys.exit(run.returncode)


if __name__ == "__main__":
    main()
