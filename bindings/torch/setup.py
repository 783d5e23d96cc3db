"""Builds ccl_torch's two extension modules (modules.txt) for `pip install ./bindings/torch`, the
same sources CMake builds for `make build`.

torch: the one of the interpreter pip runs under, asked through torch_config.py outside pip's
isolated build environment (or CCL_TORCH_PYTHON=/path/to/python, an interpreter that imports it).
ccl: CCL_HOME=<prefix> (an installed ccl: <prefix>/include/ccl/ccl.h, <prefix>/lib/libccl.so),
else `pkg-config ccl`, else this repository's build tree (../../build, `make build`). The modules
find libccl.so where it was found (RPATH) and torch's libraries through `import torch`."""
import os
import shutil
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


def torch_config():
    python = os.environ.get("CCL_TORCH_PYTHON", sys.executable)
    # pip's isolation lives in these variables; without them the interpreter sees its own
    # site-packages, and the torch installed there.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME", "PIP_BUILD_TRACKER")}
    out = subprocess.run([python, os.path.join(HERE, "torch_config.py")], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"ccl_torch: {python} does not import torch ({out.stderr.strip()}); install "
                 "torch >= 2.9 first, or set CCL_TORCH_PYTHON to an interpreter that has it")
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


def ccl_location():
    """(include dir, library dir) of ccl."""
    home = os.environ.get("CCL_HOME")
    if home:
        for lib in ("lib", "lib64"):
            if os.path.exists(os.path.join(home, lib, "libccl.so")):
                return os.path.join(home, "include"), os.path.join(home, lib)
        sys.exit(f"ccl_torch: CCL_HOME={home} has no lib/libccl.so")
    if shutil.which("pkg-config"):
        inc = subprocess.run(["pkg-config", "--variable=includedir", "ccl"], capture_output=True,
                             text=True)
        lib = subprocess.run(["pkg-config", "--variable=libdir", "ccl"], capture_output=True,
                             text=True)
        if inc.returncode == 0 and lib.returncode == 0:
            return inc.stdout.strip(), lib.stdout.strip()
    build_lib = os.path.join(REPO, "build", "src")
    if os.path.exists(os.path.join(build_lib, "libccl.so")):
        return os.path.join(REPO, "include"), build_lib
    sys.exit("ccl_torch: no ccl found: set CCL_HOME to an installed ccl's prefix, make "
             "`pkg-config ccl` find one, or build this repository first (make build)")


def modules():
    """{module name: [sources]} from modules.txt."""
    result = {}
    with open(os.path.join(HERE, "modules.txt")) as f:
        for line in f:
            if line.startswith("_") and ":" in line:
                name, files = line.split(":", 1)
                result[name.strip()] = [os.path.join("src", s) for s in files.split()]
    return result


torch = torch_config()
ccl_include, ccl_lib = ccl_location()
compile_args = ["-std=c++20", "-fvisibility=hidden", "-O2",
                f"-D_GLIBCXX_USE_CXX11_ABI={torch['cxx11_abi']}"]
common = dict(
    include_dirs=[ccl_include] + torch["include_dirs"].split(";") + [torch["python_include"]],
    library_dirs=[ccl_lib],
    runtime_library_dirs=[ccl_lib],
    extra_compile_args=compile_args,
    language="c++",
)
sources = modules()
torch_libs = [os.path.join(torch["library_dir"], f"lib{n}.so")
              for n in ("c10", "torch", "torch_cpu", "torch_python")]
extensions = [
    Extension("ccl_torch._C", sources["_C"], libraries=["ccl"], extra_link_args=torch_libs,
              **common),
    Extension("ccl_torch._training", sources["_training"], libraries=["ccl"], **common),
]
print(f"ccl_torch: building against torch {torch['version']} ({torch['python']}) and ccl in "
      f"{ccl_lib}", file=sys.stderr)
# One build folder per torch version: objects compiled against another torch's headers are never
# reused (setuptools would take them as up to date).
setup(packages=["ccl_torch"], ext_modules=extensions,
      options={"build": {"build_base": os.path.join("build", f"torch-{torch['version']}")}})
