"""What a build of ccl_torch needs to know about the torch it is built against, asked of the
interpreter that imports that torch. Both builds use it: CMake (cmake/torch_deps.cmake, `make
build`) and the pip build (bindings/torch/setup.py). Prints `key=value` lines; exits 1 without
torch.

Reads headers and libraries from the installed wheel (torch/include, torch/lib) rather than
through torch's CMake package, whose CUDA wheels look for a CUDA toolkit even for a CPU-only
extension."""
import os
import sys
import sysconfig


def torch_config():
    import torch

    root = os.path.dirname(torch.__file__)
    include = os.path.join(root, "include")
    version = torch.__version__.split("+")[0]
    major, minor = (int(x) for x in version.split(".")[:2])
    return {
        "version": version,
        "version_major": str(major),
        "version_minor": str(minor),
        "cxx11_abi": "1" if torch._C._GLIBCXX_USE_CXX11_ABI else "0",
        "include_dirs": ";".join([include, os.path.join(include, "torch", "csrc", "api", "include")]),
        "library_dir": os.path.join(root, "lib"),
        "python_include": sysconfig.get_paths()["include"],
        "module_suffix": sysconfig.get_config_var("EXT_SUFFIX"),
        "python": sys.executable,
    }


if __name__ == "__main__":
    try:
        config = torch_config()
    except ImportError as e:
        print(f"torch_config: {e}", file=sys.stderr)
        sys.exit(1)
    for key, value in config.items():
        print(f"{key}={value}")
