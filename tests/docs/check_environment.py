#!/usr/bin/env python3
"""Fails if docs/environment.md is not what `ccl-info --env-markdown` prints now.

  tests/docs/check_environment.py CCL_INFO DOCS_ENVIRONMENT_MD

The page is generated from the variable table (src/base/config_table.cc); a variable added,
removed or redocumented there without regenerating the page makes this test print the unified
diff (checked-in page -> what ccl-info prints) and the command that brings the page up to date.
"""

import difflib
import subprocess
import sys


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ccl_info, page = sys.argv[1], sys.argv[2]
    result = subprocess.run([ccl_info, "--env-markdown"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=60)
    if result.returncode != 0:
        print(f"{ccl_info} --env-markdown: exit status {result.returncode}\n{result.stderr}")
        return 1
    expected = result.stdout
    try:
        with open(page, encoding="utf-8") as f:
            actual = f.read()
    except OSError as e:
        print(f"{page}: {e}")
        actual = ""
    if actual == expected:
        print(f"{page} matches ccl-info --env-markdown")
        return 0
    diff = difflib.unified_diff(actual.splitlines(keepends=True),
                                expected.splitlines(keepends=True),
                                fromfile=f"{page} (checked in)",
                                tofile="ccl-info --env-markdown (now)")
    sys.stdout.writelines(line if line.endswith("\n") else line + "\n" for line in diff)
    print(f"\n{page} is out of date with the variable table; regenerate it from the repository's"
          f" root:\n  build/tools/ccl-info --env-markdown > docs/environment.md")
    return 1


if __name__ == "__main__":
    sys.exit(main())
