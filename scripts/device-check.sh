#!/usr/bin/env bash
# The CUDA device check (issue 18), for a machine with a GPU. Runs, on GPU 0,
#   1. cuda_kernels_check (tests/cuda): every kernel of the fatbin against the CPU kernels, bit
#      for bit, and each kernel's GB/s against cudaMemcpy device to device (the copy ceiling);
#   2. ccl's all_reduce_perf with --memory device (cudaMalloc'd buffers, a CUDA stream) at 2
#      ranks on the GPU, its busbw next to that cudaMemcpy figure;
#   3. device_collectives_check (tests/cuda) at 2, 3 and 4 ranks on that one GPU: every
#      collective x datatype x op on device buffers and CUDA streams, byte for byte against the
#      host path; and at 3 ranks with CUDA IPC off (every collective host-staged);
#   4. the NCCL ABI shim: tests/nccl_shim's C program (linked against NVIDIA's libnccl.so.2) on
#      libnccl.so.2 = libccl_nccl.so, 3 ranks in one process and 3 processes; and, where the
#      bundle has it, nccl-tests' all_reduce_perf (built against NCCL's nccl.h) on the shim with
#      device buffers (1 rank: nccl-tests puts one rank on each GPU).
# Prints one summary line ("device-check: PASS ..." or "device-check: FAIL ...") last. Without a
# GPU it says so and exits 0. Bounded: each step has a timeout; the whole takes under 8 minutes.
#
#   scripts/device-check.sh --bundle FILE   the binaries of scripts/device-bundle.sh, built on
#                                           another machine (the GPU machine lent to this
#                                           project has no build dependencies: see there)
#   scripts/device-check.sh [BUILD_DIR]     builds that bundle here first (default build-device/;
#                                           needs ccl's build dependencies and the CUDA toolkit;
#                                           NCCL_TESTS_DIR: a checkout of nccl-tests to add)
set -u
cd "$(dirname "$0")/.." || exit 2
start=$(date +%s)
log() { echo "device-check: $*"; }
# The best out-of-place busbw (column 8) of the float rows of an nccl-tests table on stdin.
best_busbw() { awk '/^ +[0-9]+ +[0-9]+ +float/ {if ($8 > b) b = $8} END {print b + 0}'; }
# sweep NAME NOTE LIBRARY_PATH COMMAND...: runs an nccl-tests style sweep (300 s at most); it
# passed with exit status 0 and no wrong element, and then adds "NAME: best busbw B GB/s NOTE" to
# the summary, else NAME to the failures.
sweep() {
  local name=$1 note=$2 out status
  out=$(bounded 300 "$3" "${@:4}" 2>&1)
  status=$?
  echo "$out" | tail -25
  if [ "$status" = 0 ] && ! grep -q "Out of bounds values : [1-9]" <<<"$out"; then
    summary+=("$name: best busbw $(best_busbw <<<"$out") GB/s$note")
  else
    failed+=("$name (status $status)")
  fi
}

bundle=""
build="build-device"
if [ "${1:-}" = --bundle ]; then
  bundle=${2:?usage: scripts/device-check.sh --bundle FILE}
  [ -f "$bundle" ] || { log "FAIL: no bundle $bundle"; exit 1; }
elif [ -n "${1:-}" ]; then
  build=$1
fi

# CCL_DEVICE_CHECK_WITHOUT_GPU=1 runs every step anyway (each then fails, saying why): how the
# script itself is checked on a machine without one.
if [ "${CCL_DEVICE_CHECK_WITHOUT_GPU:-0}" != 1 ]; then
  if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    log "no GPU here (nvidia-smi finds none): nothing to check"
    exit 0
  fi
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
else
  gpu="no GPU (CCL_DEVICE_CHECK_WITHOUT_GPU=1)"
fi
log "GPU 0: $gpu"

if [ -z "$bundle" ]; then
  bundle=$build/ccl-device.tar.xz
  if ! CCL_DEVICE_BUILD_DIR=$build timeout 420 scripts/device-bundle.sh "$bundle"; then
    log "FAIL on $gpu: building the bundle failed"
    exit 1
  fi
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
if ! tar -C "$root" -xJf "$bundle"; then
  log "FAIL on $gpu: cannot unpack $bundle"
  exit 1
fi
root=$root/ccl-device
bin=$root/bin
head -1 "$root/MANIFEST"
# The bundle's libraries first, for its binaries only (not for this script's tools, which may
# need newer libz or liblzma than the bundle's); what was there stays after them (the driver's
# folder, often).
libs="$root/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
shim_libs="$root/nccl:$libs"
# bounded SECONDS LIBRARY_PATH COMMAND...: the command under a timeout, on those libraries.
bounded() { timeout "$1" env LD_LIBRARY_PATH="$2" "${@:3}"; }

failed=()
summary=()

kernels_out=$(bounded 300 "$libs" "$bin/cuda_kernels_check" 2>&1)
status=$?
echo "$kernels_out" | tail -20
if [ $status = 0 ]; then
  summary+=("$(echo "$kernels_out" | grep -m1 '^cuda_kernels_check:' | sed 's/^cuda_kernels_check: //')")
else
  failed+=("cuda_kernels_check (status $status)")
fi

# ccl's all_reduce_perf on device buffers and a CUDA stream (--memory device), 2 ranks on the
# one GPU, its busbw set against the cudaMemcpy device-to-device figure measured above.
copy_gbs=$(echo "$kernels_out" | sed -n 's/.*cudaMemcpy D2D \([0-9.]*\) GB\/s.*/\1/p' | head -1)
sweep "all_reduce_perf --memory device, 2 ranks" " (cudaMemcpy D2D ${copy_gbs:-?} GB/s)" \
  "$libs" "$bin/cclrun" -np 2 "$bin/all_reduce_perf" --memory device -b 1M -e 256M -f 4 -c 1

# 2, 3 and 4 ranks as ccl chooses (CUDA IPC for allreduce), then 3 with CUDA IPC off: every
# collective host-staged, so that a runtime that refuses IPC (a sandbox) still checks that path.
for run in "2 1" "3 1" "4 1" "3 0"; do
  read -r n ipc <<<"$run"
  out=$(CCL_CUDA_IPC=$ipc bounded 300 "$libs" "$bin/device_collectives_check" --ranks "$n" 2>&1)
  status=$?
  echo "$out" | tail -5
  if [ $status = 0 ]; then
    summary+=("$(echo "$out" | grep -m1 '^device_collectives_check:' | sed 's/^device_collectives_check: //')$([ "$ipc" = 0 ] && echo ' (CCL_CUDA_IPC=0)')")
  else
    failed+=("device_collectives_check --ranks $n, CCL_CUDA_IPC=$ipc (status $status)")
  fi
done

# The shim as an NCCL program meets it (host buffers and the default stream, on a GPU machine
# too), as ctest's nccl_shim.program.* run it.
shim_failures=${#failed[@]}
out=$(bounded 120 "$shim_libs" "$bin/nccl_program" threads 3 2>&1)
status=$?
echo "$out" | tail -3
[ $status = 0 ] || failed+=("nccl_program threads 3 (status $status)")
id_file=$(mktemp -u)
out=$(CCL_TIMEOUT=60 bounded 150 "$shim_libs" "$bin/cclrun" --timeout 120 -np 3 \
        "$bin/nccl_program" ranks "$id_file" 2>&1)
status=$?
rm -f "$id_file"
echo "$out" | tail -3
[ $status = 0 ] || failed+=("nccl_program ranks under cclrun -np 3 (status $status)")
[ ${#failed[@]} = "$shim_failures" ] && summary+=("NCCL shim program: 3 threads and 3 ranks pass")

if [ -x "$bin/nccl_tests_all_reduce_perf" ]; then
  sweep "nccl-tests all_reduce_perf on the shim, 1 rank" "" \
    "$shim_libs" "$bin/nccl_tests_all_reduce_perf" -b 8 -e 256M -f 4 -g 1 -c 1
else
  summary+=("nccl-tests not in the bundle (NCCL_TESTS_DIR unset when it was made)")
fi

took=$(( $(date +%s) - start ))
if [ ${#failed[@]} = 0 ]; then
  log "PASS on $gpu in ${took} s: $(IFS=';'; echo "${summary[*]}")"
  exit 0
fi
log "FAIL on $gpu in ${took} s: $(IFS=';'; echo "${failed[*]}")"
exit 1
