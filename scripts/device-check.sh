#!/usr/bin/env bash
# The CUDA device check (issue 18), for a machine with a GPU: builds the CUDA parts and runs, on
# GPU 0,
#   1. tests/cuda/cuda_kernels_check: every kernel of the fatbin against the CPU kernels, bit for
#      bit, and each kernel's GB/s against cudaMemcpy device to device (the copy ceiling);
#   2. ccl's all_reduce_perf with --memory device (cudaMalloc'd buffers, a CUDA stream) at 2
#      ranks on the GPU, its busbw next to that cudaMemcpy figure;
#   3. tests/cuda/device_collectives_check at 2, 3 and 4 ranks on that one GPU: every collective x
#      datatype x op on device buffers and CUDA streams, byte for byte against the host path;
#   4. the NCCL ABI shim: tests/nccl_shim's C program on libnccl.so.2 = libccl_nccl.so, and, when
#      NCCL_TESTS_DIR names a checkout of nccl-tests (it cannot be downloaded on the device
#      machine: carry it there), nccl-tests' all_reduce_perf built against NCCL's nccl.h and run
#      on the shim with device buffers (1 rank per GPU, as nccl-tests places them).
# Prints one summary line ("device-check: PASS ..." or "device-check: FAIL ...") last. Without a
# GPU it says so and exits 0. Bounded: each step has a timeout; the whole is meant to take under
# 8 minutes on 16 cores.
#
#   scripts/device-check.sh [BUILD_DIR]      (default build-device/)
set -u
cd "$(dirname "$0")/.." || exit 2
build=${1:-build-device}
start=$(date +%s)
log() { echo "device-check: $*"; }
# The best out-of-place busbw (column 8) of the float rows of an nccl-tests table on stdin.
best_busbw() { awk '/^ +[0-9]+ +[0-9]+ +float/ {if ($8 > b) b = $8} END {print b + 0}'; }
# A sweep's output passed: exit status 0 and no wrong element.
sweep_ok() { [ "$1" = 0 ] && ! grep -q "Out of bounds values : [1-9]" <<<"$2"; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  log "no GPU here (nvidia-smi finds none): nothing to check"
  exit 0
fi
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
log "GPU 0: $gpu"

jobs=$(nproc)
if ! timeout 360 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >"$build.cmake.log" 2>&1 ||
   ! timeout 360 cmake --build "$build" -j "$jobs" --target cuda_kernels_check \
       device_collectives_check all_reduce_perf cclrun >"$build.build.log" 2>&1; then
  tail -30 "$build.cmake.log" "$build.build.log" 2>/dev/null
  log "FAIL: the build failed"
  exit 1
fi
# The shim and its test program, where this build has them (NCCL's nccl.h found).
timeout 120 cmake --build "$build" -j "$jobs" --target ccl_nccl nccl_program cclrun \
  >>"$build.build.log" 2>&1 || true

failed=()
summary=()

kernels_out=$(timeout 300 "$build/tests/cuda/cuda_kernels_check" 2>&1)
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
out=$(timeout 300 "$build/tools/cclrun" -np 2 "$build/perf/all_reduce_perf" --memory device \
        -b 1M -e 256M -f 4 -c 1 2>&1)
status=$?
echo "$out" | tail -12
if sweep_ok "$status" "$out"; then
  best=$(best_busbw <<<"$out")
  summary+=("all_reduce_perf --memory device, 2 ranks: best busbw ${best} GB/s (cudaMemcpy D2D ${copy_gbs:-?} GB/s)")
else
  failed+=("all_reduce_perf --memory device (status $status)")
fi

for n in 2 3 4; do
  out=$(timeout 300 "$build/tests/cuda/device_collectives_check" --ranks "$n" 2>&1)
  status=$?
  echo "$out" | tail -5
  if [ $status = 0 ]; then
    summary+=("$(echo "$out" | grep -m1 '^device_collectives_check:' | sed 's/^device_collectives_check: //')")
  else
    failed+=("device_collectives_check --ranks $n (status $status)")
  fi
done

shim_dir=$(dirname "$(find "$build" -name libnccl.so.2 -print -quit 2>/dev/null)" 2>/dev/null)
if [ -n "$shim_dir" ] && [ -d "$shim_dir" ]; then
  if timeout 300 ctest --test-dir "$build" -L nccl_shim --output-on-failure >"$build.shim.log" 2>&1; then
    summary+=("NCCL shim tests pass")
  else
    tail -30 "$build.shim.log"
    failed+=("ctest -L nccl_shim")
  fi
  if [ -n "${NCCL_TESTS_DIR:-}" ] && [ -d "$NCCL_TESTS_DIR" ]; then
    # nccl-tests against NCCL's own header and library (the toolkit's), then run on the shim.
    nccl_home=$(mktemp -d)
    mkdir -p "$nccl_home/include" "$nccl_home/lib"
    cp /usr/local/cuda/include/nccl.h "$nccl_home/include/"
    ln -s /usr/local/cuda/lib64/libnccl.so* "$nccl_home/lib/" 2>/dev/null
    if timeout 300 make -C "$NCCL_TESTS_DIR" -j "$jobs" CUDA_HOME=/usr/local/cuda \
         NCCL_HOME="$nccl_home" >"$build.nccl-tests.log" 2>&1; then
      out=$(LD_LIBRARY_PATH="$shim_dir" timeout 300 \
              "$NCCL_TESTS_DIR/build/all_reduce_perf" -b 8 -e 256M -f 4 -g 1 -c 1 2>&1)
      status=$?
      echo "$out" | tail -25
      if sweep_ok "$status" "$out"; then
        best=$(best_busbw <<<"$out")
        summary+=("nccl-tests all_reduce_perf on the shim: 1 rank, best busbw ${best} GB/s")
      else
        failed+=("nccl-tests all_reduce_perf on the shim (status $status)")
      fi
    else
      tail -20 "$build.nccl-tests.log"
      failed+=("building nccl-tests")
    fi
  else
    summary+=("nccl-tests not run (NCCL_TESTS_DIR unset)")
  fi
else
  summary+=("no NCCL shim in this build")
fi

took=$(( $(date +%s) - start ))
if [ ${#failed[@]} = 0 ]; then
  log "PASS on $gpu in ${took} s: $(IFS=';'; echo "${summary[*]}")"
  exit 0
fi
log "FAIL on $gpu in ${took} s: $(IFS=';'; echo "${failed[*]}")"
exit 1
