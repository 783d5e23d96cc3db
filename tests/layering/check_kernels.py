#!/usr/bin/env python3
"""Fails if the executor or the direct collectives copy or move bytes themselves instead of through
the kernel table of the call's memory kind (src/algorithms/memory_kernels.h): a call of memcpy,
memmove, memset or std::copy in those files is a defect (a device buffer would be touched by the
CPU). Prints each as file:line and exits 1 if there is any.

  tests/layering/check_kernels.py [SRC_DIR]
"""

import os
import re
import sys

FILES = ["algorithms/executor.cc", "algorithms/executor.h", "algorithms/direct.cc",
         "algorithms/direct.h"]
FORBIDDEN = re.compile(r"\b(?:std::)?(memcpy|memmove|memset|copy_n|copy)\s*\(")


def main() -> int:
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
    bad = []
    for rel in FILES:
        with open(os.path.join(src, rel), encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                code = line.split("//", 1)[0]
                for m in FORBIDDEN.finditer(code):
                    before = code[:m.start()]
                    if before.rstrip().endswith(("->", ".")):  # kernels_->copy(...), a member
                        continue
                    bad.append(f"src/{rel}:{lineno}: {m.group(1)}( outside the kernel table")
    for b in bad:
        print(b)
    print(f"{len(FILES)} files checked, {len(bad)} copy call(s) outside the kernel table")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
