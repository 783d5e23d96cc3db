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

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-perf-peers: all ${#packages[@]} packages present"
  exit 0
fi

echo "install-perf-peers: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
# MPICH's packages register the generic mpicc/mpirun alternatives too; perf/compare names
# mpicc.openmpi / mpirun.openmpi and mpicc.mpich / mpiexec.mpich explicitly, so either choice works.
