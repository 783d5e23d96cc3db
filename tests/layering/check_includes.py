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

Inside core, the same rule holds between its rooms (src/core/<room>/), bottom up:

  launch, registration,      what launchers say, the registration cache, the flight recorder and
  diagnostics, trace,        check mode, the trace, the tuner, the recovery plane (each on its
  tuning, recovery           own, or on diagnostics' OpKind)
  call                       a call as a value, its reduction and its resolved buffers
  device                     the device collectives (plans of calls)
  stream                     streams and events: queues of calls, run through CallTarget
  comm                       the communicator and its parts
  api                        the C entry points, their guard and group calls

and no source lies loose in src/core/ beside the rooms.

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
# The rooms of core, each with the rooms it may include (besides itself and the modules below
# core). bootstrap is a module of its own (above).
CORE_ROOMS = {
    "launch": set(),
    "registration": set(),
    "diagnostics": set(),
    "trace": {"diagnostics"},
    "tuning": set(),
    "recovery": set(),
    "call": {"registration", "diagnostics"},
    "device": {"call", "registration", "diagnostics", "tuning"},
    "stream": {"call", "diagnostics"},
}
CORE_ROOMS["comm"] = set(CORE_ROOMS) | {"launch"}
CORE_ROOMS["api"] = set(CORE_ROOMS)
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path: str):
    for prefix, module in MODULES:
        if path.startswith(prefix):
            return module
    return None


def core_room_of(path: str):
    """The room of a path under src/ in core ("comm" for core/comm/comm.h), "" for a file loose
    in src/core/, None outside core's rooms."""
    if not path.startswith("core/") or path.startswith("core/bootstrap/"):
        return None
    parts = path.split("/")
    return parts[1] if len(parts) > 2 else ""


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
            my_room = core_room_of(rel)
            if my_room == "":
                violations.append(f"src/{rel}: loose in src/core/ (each source lies in a room)")
            elif my_room is not None and my_room not in CORE_ROOMS:
                violations.append(f"src/{rel}: src/core/{my_room}/ is not a known room of core")
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
                    if theirs == "core" and mine == "core" and my_room:
                        their_room = core_room_of(header)
                        if (their_room and their_room != my_room and
                                their_room not in CORE_ROOMS.get(my_room, set())):
                            violations.append(
                                f"src/{rel}:{lineno}: core/{my_room} includes \"{header}\" "
                                f"(core/{their_room} is not below core/{my_room})")
                        continue
                    if theirs is None or theirs == mine or theirs in BELOW[mine]:
                        continue
                    violations.append(f"src/{rel}:{lineno}: {mine} includes \"{header}\" "
                                      f"({theirs} is not below {mine})")
    for v in violations:
        print(v)
    print(f"{checked} files checked, {len(violations)} violation(s)")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
