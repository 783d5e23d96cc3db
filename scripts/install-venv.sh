#!/usr/bin/env bash
# Makes the project's virtual environment (.venv at the repository's root) and installs into it,
# with pip, the pinned packages of scripts/requirements-venv.txt (torch among them). Idempotent:
# does nothing, and needs no network, when every pin is installed already. pip's cache
# (~/.cache/pip) serves a reinstall without downloading.
#   VENV=DIR  another place for it (CMake finds .venv by itself; elsewhere, pass
#             -DCCL_TORCH_PYTHON=DIR/bin/python)
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$top/.venv}
requirements=$top/scripts/requirements-venv.txt

if [ ! -x "$venv/bin/python" ]; then
  echo "install-venv: creating $venv"
  python3 -m venv "$venv"
fi
# Every pin installed (pip's own check, offline): nothing to do.
pins=$(grep -E '^[A-Za-z0-9_.-]+==' "$requirements" | tr '\n' ' ')
if "$venv/bin/python" - $pins <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    try:
        have = version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if have.split("+")[0] != want:
        sys.exit(1)
PY
then
  echo "install-venv: $venv has every pin of $(basename "$requirements")"
  exit 0
fi
echo "install-venv: installing $(basename "$requirements") into $venv"
start=$(date +%s)
"$venv/bin/python" -m pip install --quiet --upgrade-strategy only-if-needed -r "$requirements"
echo "install-venv: done in $(( $(date +%s) - start )) s"
