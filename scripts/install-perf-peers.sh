#!/usr/bin/env bash
# Installs, with apt-get, whatever perf/compare's peers need that is missing: MPICH (mpicc.mpich,
# mpiexec.mpich, next to Open MPI from install-deps.sh) and PyTorch for Gloo (Debian's
# python3-torch, which runs under /usr/bin/python3). Idempotent: does nothing (and needs no
# network) when everything is there. Debian 12.
set -euo pipefail

packages=(
  mpich libmpich-dev
  python3-torch
)

# MPICH's packages register the generic mpicc/mpirun alternatives too; perf/compare names
# mpicc.openmpi / mpirun.openmpi and mpicc.mpich / mpiexec.mpich explicitly, so either choice works.
exec "$(dirname "$0")/apt-install-missing.sh" install-perf-peers "${packages[@]}"
