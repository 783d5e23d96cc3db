#!/usr/bin/env bash
# Installs, with apt-get, those of the Debian packages named on the command line that are not
# installed yet. Idempotent: does nothing (and needs no network) when all are there. Used by
# install-deps.sh and install-perf-peers.sh. Usage: apt-install-missing.sh LABEL PACKAGE...
set -euo pipefail

label=$1
shift
missing=()
for p in "$@"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "$label: all $# packages present"
  exit 0
fi

echo "$label: installing ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
