#!/usr/bin/env bash
# Installs, with apt-get, whatever of ccl's build and test dependencies is missing. Idempotent:
# does nothing (and needs no network) when everything is there. Debian 12.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libhwloc-dev hwloc libxml2-dev libudev-dev libibverbs-dev libucx-dev
  openmpi-bin libopenmpi-dev
  iproute2 procps python3
  # ccl-check's JSON reports
  nlohmann-json3-dev
  # ccl-plot's plots (and its test): Debian's matplotlib, which lives under /usr/bin/python3
  python3-matplotlib
  python3-prometheus-client  # the metrics tests parse CCL_METRICS_FILE with it (/usr/bin/python3)
  clang-format clang-tidy clang libclang-rt-14-dev
  # The torch.distributed backend (bindings/torch) and its tests: Debian's torch 1.13, which
  # lives under /usr/bin/python3.
  python3-torch libtorch-dev pybind11-dev
)

exec "$(dirname "$0")/apt-install-missing.sh" install-deps "${packages[@]}"
