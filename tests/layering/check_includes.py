#!/usr/bin/env python3
"""Fails if a module of src/ includes a header of a module above it (DESIGN.md: a layer includes
only the layers below it).

The layers, bottom up (a module may include its own headers, the public ones in include/ccl/,
and those of the modules listed as below it):

  base         errors, logging, config registry, deadlines       (nothing)
  reduce       reduction kernels, src/algorithms/reduce/          base
  cuda         the CUDA driver at run time, pointer kinds, kernel    base, reduce
               launches, CUDA IPC
  bootstrap    sockets, unique ids, the rendezvous store          base
  topology     discovery, the Topology graph, orders              base, cuda (the devices'
               bus ids)
  transport    the transport interface, shm, tcp, loopback        base, bootstrap
  algorithms   schedules, the executor, the direct collectives    base, reduce, transport
  core         communicator, tuner and registry, streams, C API   all of the above
  training     the training layer (public C++ API only)           (include/ccl/ only)
  nccl_shim    NCCL's ABI (libnccl.so.2) on ccl's C API            (include/ccl/ only)

A module is known by the longest matching path prefix below src/. Prints every violation as
file:line: module includes "header" (module above), and exits 1 if there is any.

  tests/layering/check_includes.py [SRC_DIR]
"""

import os
import re
import sys

# (path prefix under src/, module), longest prefix first.
MODULES = [
    ("algorithms/reduce/", "reduce"),
    ("core/bootstrap/", "bootstrap"),
    ("base/", "base"),
    ("cuda/", "cuda"),
    ("topology/", "topology"),
    ("transport/", "transport"),
    ("algorithms/", "algorithms"),
    ("core/", "core"),
    ("training/", "training"),
    ("nccl_shim/", "nccl_shim"),
]
BELOW = {
    "base": set(),
    "reduce": {"base"},
    "cuda": {"base", "reduce"},
    "bootstrap": {"base"},
    "topology": {"base", "cuda"},
    "transport": {"base", "bootstrap"},
    "algorithms": {"base", "reduce", "transport"},
    "core": {"base", "reduce", "cuda", "bootstrap", "topology", "transport", "algorithms"},
    "training": set(),
    "nccl_shim": set(),
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path: str):
    for prefix, module in MODULES:
        if path.startswith(prefix):
            return module
    return None


def main() -> int:
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
    src = os.path.normpath(src)
    violations = []
    checked = 0
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith((".h", ".cc", ".inc")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, src)
            mine = module_of(rel)
            if mine is None:
                continue
            checked += 1
            with open(path, encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    header = m.group(1)
                    if header.startswith("ccl/"):
                        continue  # the public API
                    theirs = module_of(header)
                    if theirs is None:
                        # Relative to the including file's folder (same module).
                        theirs = module_of(os.path.relpath(os.path.join(os.path.dirname(path),
                                                                        header), src))
                    if theirs is None or theirs == mine or theirs in BELOW[mine]:
                        continue
                    violations.append(f"src/{rel}:{lineno}: {mine} includes \"{header}\" "
                                      f"({theirs} is not below {mine})")
    for v in violations:
        print(v)
    print(f"{checked} files checked, {len(violations)} include(s) of a module above")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
