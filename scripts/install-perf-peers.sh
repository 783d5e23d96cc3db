#!/usr/bin/env bash
# Installs, with apt-get, whatever perf/compare's peers need that is missing: MPICH (mpicc.mpich,
# mpiexec.mpich, next to Open MPI from install-deps.sh) and iperf3 (the link limits perf/net/
# measures beside ccl's network transports); PyTorch for Gloo is the project's .venv
# (install-deps.sh). Idempotent: does nothing (and needs no network) when everything is there.
# Debian 12.
set -euo pipefail

packages=(
  mpich libmpich-dev
  iperf3
)

# MPICH's packages register the generic mpicc/mpirun alternatives too; perf/compare names
# mpicc.openmpi / mpirun.openmpi and mpicc.mpich / mpiexec.mpich explicitly, so either choice works.
exec "$(dirname "$0")/apt-install-missing.sh" install-perf-peers "${packages[@]}"
