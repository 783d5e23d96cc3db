#!/usr/bin/env bash
# Installs whatever perf/compare's peers need that is missing:
# - with apt-get, Debian's MPICH (mpicc.mpich, mpiexec.mpich, next to Open MPI from
#   install-deps.sh) and iperf3 (the link limits perf/net/ measures beside ccl's network
#   transports);
# - with pip, each into a prefix of its own under .venv-peers/ (PEERS_DIR=DIR elsewhere), the
#   strongest CPU peers, as PyPI ships them (scripts/requirements-peers.txt): Intel oneCCL (its
#   CPU library and headers), Intel MPI, Open MPI 5 and MPICH 5. None of it is needed by make run
#   or make test.
# PyTorch for Gloo is the project's .venv (install-deps.sh). Idempotent: does nothing (and needs
# no network) when everything is there. Debian 12.
set -euo pipefail

packages=(
  mpich libmpich-dev
  iperf3
)

# MPICH's packages register the generic mpicc/mpirun alternatives too; perf/compare names
# mpicc.openmpi / mpirun.openmpi and mpicc.mpich / mpiexec.mpich explicitly, so either choice works.
here=$(dirname "$0")
"$here/apt-install-missing.sh" install-perf-peers "${packages[@]}"
peers=${PEERS_DIR:-$here/../.venv-peers}
# pip from the project's .venv (install-deps.sh makes it; Debian's python refuses pip).
pip=${PEERS_PIP:-$here/../.venv/bin/pip}
[ -x "$pip" ] || { echo "install-perf-peers: no $pip: run scripts/install-deps.sh first" >&2; exit 1; }
grep -E '^[a-z0-9]+:' "$here/requirements-peers.txt" | while IFS=: read -r group pins; do
  stamp=$peers/$group/.pins
  # Every pin of the group installed already (the stamp names them): nothing to do.
  if [ "$(cat "$stamp" 2>/dev/null)" = "$pins" ]; then
    echo "install-perf-peers: $peers/$group has$pins"
    continue
  fi
  echo "install-perf-peers: installing$pins into $peers/$group"
  # shellcheck disable=SC2086  # the pins are words
  "$pip" install --quiet --no-deps --ignore-installed --prefix "$peers/$group" $pins
  echo "$pins" >"$stamp"
done
# oneCCL's libccl.so.1 names libccl.so.2 as a dependency, which its wheel lacks, but takes no
# symbol from it (each it needs is the C and C++ runtimes' or Intel's libintlc's, nm -D): a link
# of that name to itself, beside it, where its RUNPATH ($ORIGIN) looks, satisfies the loader.
[ -e "$peers/oneccl/lib/libccl.so.1" ] && ln -sfn libccl.so.1 "$peers/oneccl/lib/libccl.so.2"
exit 0
