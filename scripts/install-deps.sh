#!/usr/bin/env bash
# Installs whatever of ccl's build and test dependencies is missing: Debian 12's packages with
# apt-get, then the project's virtual environment (.venv: torch and the Python test tools, with
# pip; scripts/install-venv.sh). Idempotent: does nothing (and needs no network) when everything
# is there.
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
  python3-venv  # the project's virtual environment (.venv) for torch and the torch tests
)

"$(dirname "$0")/apt-install-missing.sh" install-deps "${packages[@]}"
exec "$(dirname "$0")/install-venv.sh"
