#!/usr/bin/env bash
# The shim's ABI against NCCL's header: every function nccl.h declares (ncclX and its profiling
# twin pncclX) is a defined, exported function of the shim; the shim exports nothing else (none
# of ccl's symbols: those are libccl.so's); its soname is libnccl.so.2.
#   symbols_check.sh NCCL_H SHIM_LIBRARY
set -euo pipefail
header=$1 library=$2

# nccl.h declares each function at the start of a line: "ncclResult_t  ncclX(" or
# "const char*  ncclX(".
declared=$(grep -oE '^(ncclResult_t|const char\*)[[:space:]]+p?nccl[A-Za-z0-9_]+[[:space:]]*\(' "$header" |
           sed -E 's/^(ncclResult_t|const char\*)[[:space:]]+//; s/[[:space:]]*\($//' | sort -u)
exported=$(nm -D --defined-only "$library" | awk '$2 == "T" || $2 == "W" || $2 == "i" {print $3}' |
           sed 's/@.*//' | sort -u)
every_export=$(nm -D --defined-only "$library" | awk '{print $3}' | sed 's/@.*//' | sort -u)

n=$(wc -l <<<"$declared")
if [ "$n" -lt 60 ]; then
  echo "symbols_check: only $n functions found in $header: has its format changed?"
  exit 1
fi
# Newer NCCL's functions the shim exports ahead of an older header (NCCL 2.29's grow), and the
# host calls of NCCL's device API (nccl_device/core.h, beside nccl.h since 2.28), which the shim
# may export (refusing them) for programs such as torch that link them.
ahead=$(printf '%s\n' ncclCommGetUniqueId ncclCommGrow pncclCommGetUniqueId pncclCommGrow | sort)
device_core="$(dirname "$header")/nccl_device/core.h"
if [ -f "$device_core" ]; then
  device_host=$(grep -oE '__host__[[:space:]]+ncclResult_t[[:space:]]+nccl[A-Za-z0-9_]+[[:space:]]*\(' "$device_core" |
                sed -E 's/^__host__[[:space:]]+ncclResult_t[[:space:]]+//; s/[[:space:]]*\($//')
  ahead=$(printf '%s\n%s\n' "$ahead" "$device_host" | sort -u)
fi
missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
extra=$(comm -13 <(sort -u <(echo "$declared") <(echo "$ahead")) <(echo "$every_export"))
soname=$(readelf -d "$library" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
status=0
if [ -n "$missing" ]; then
  echo "symbols_check: declared in nccl.h, not exported:" $missing
  status=1
fi
if [ -n "$extra" ]; then
  echo "symbols_check: exported, not in nccl.h:" $extra
  status=1
fi
if [ "$soname" != "libnccl.so.2" ]; then
  echo "symbols_check: soname is '$soname', not libnccl.so.2"
  status=1
fi
[ "$status" -eq 0 ] && echo "symbols_check: $n functions of nccl.h exported, nothing else; soname $soname"
exit "$status"
