#!/usr/bin/env bash
# The CUDA device check (issues 18 and 28), for a machine with a GPU. Runs, on GPU 0,
#   1. cuda_kernels_check (tests/cuda): every kernel of the fatbin against the CPU kernels, bit
#      for bit, and each kernel's GB/s against cudaMemcpy device to device (the copy ceiling);
#   2. at 2, 4 and 8 ranks (processes) on that one GPU:
#      - device_collectives_check: every collective x datatype x op on device buffers and CUDA
#        streams, byte for byte against the host path (the device collectives of
#        core/device/device_world.h);
#      - device_world_check: the host cost of one call on a CUDA stream, the 8-byte allreduce
#        latency, graph capture and replay, calls returning before the GPU runs them;
#      - every collective's busbw at 64 MiB (ccl's *_perf --memory device, stream mode), set
#        against the D2D ceiling of step 1;
#      and at 2 ranks with CCL_CUDA_IPC=0 (every collective staged through host memory);
#   3. the NCCL ABI shim: tests/nccl_shim's C program (linked against NVIDIA's libnccl.so.2) on
#      libnccl.so.2 = libccl_nccl.so, 3 ranks in one process and 3 processes; torch's
#      ProcessGroupNCCL on the shim (tests/nccl_shim/torch_nccl_check.py, on this machine's python3
#      and its torch: skipped, saying why, where it has no torch with CUDA): 2 ranks on GPU 0,
#      the collectives x float32/bfloat16/int64 x 1 KiB, 1 MiB, 64 MiB against the CPU, two
#      streams, a captured graph, the 64 MiB all_reduce's busbw against torch on NVIDIA's NCCL
#      (at 1 rank where NCCL refuses 2 ranks on one GPU); and, where the bundle has it,
#      nccl-tests' all_reduce_perf (built against NCCL's nccl.h) at 1 rank on the shim and on
#      NVIDIA's libnccl (the GPU image's, from the nvidia-nccl Python package, or
#      NCCL_LIBRARY_DIR), their best algbw side by side (busbw is 0 at 1 rank);
#   4. ccl's own torch backend on CUDA tensors: ccl_torch built there against that python's torch
#      (the bundle's torch/ sources, include/ and lib/), then the torch step's cases on
#      init_process_group("ccl_torch") at 2 ranks on GPU 0 (tests/nccl_shim/torch_nccl_check.py
#      --ccl-torch), two streams and a captured graph included, against torch on NVIDIA's NCCL.
# Prints one summary line ("device-check: PASS ..." or "device-check: FAIL ...") last. Without a
# GPU it says so and exits 0. Bounded: each step has a timeout; the whole takes under 10 minutes.
#
#   scripts/device-check.sh --bundle FILE   the binaries of scripts/device-bundle.sh, built on
#                                           another machine (the GPU machine lent to this
#                                           project has no build dependencies: see there)
#   scripts/device-check.sh [BUILD_DIR]     builds that bundle here first (default build-device/;
#                                           needs ccl's build dependencies and the CUDA toolkit;
#                                           NCCL_TESTS_DIR: a checkout of nccl-tests to add)
#   CCL_DEVICE_CHECK_PYTHON                 the python whose torch the torch step runs
#                                           (default python3)
set -u
cd "$(dirname "$0")/.." || exit 2
start=$(date +%s)
log() { echo "device-check: $*"; }
# best_bw COLUMN: the best out-of-place value of COLUMN (7 algbw, 8 busbw) of the float rows of an
# nccl-tests table on stdin.
best_bw() { awk -v c="$1" '/^ +[0-9]+ +[0-9]+ +float/ {if ($c > b) b = $c} END {print b + 0}'; }
# sweep NAME NOTE LIBRARY_PATH COMMAND...: runs an nccl-tests style sweep (300 s at most); it
# passed with exit status 0 and no wrong element, and then adds "NAME: best busbw B GB/s NOTE" to
# the summary, else NAME to the failures. SWEEP_BW=algbw takes the best algbw instead: at 1 rank
# an allreduce's busbw is 0 by nccl-tests' definition (algbw x 2(n-1)/n).
sweep() {
  local name=$1 note=$2 out status bw=${SWEEP_BW:-busbw} column=8
  [ "$bw" = algbw ] && column=7
  out=$(bounded 300 "$3" "${@:4}" 2>&1)
  status=$?
  echo "$out" | tail -25
  if [ "$status" = 0 ] && ! grep -q "Out of bounds values : [1-9]" <<<"$out"; then
    summary+=("$name: best $bw $(best_bw "$column" <<<"$out") GB/s$note")
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

# CCL_DEVICE_CHECK_WITHOUT_GPU=1 runs every step anyway (each then fails, saying why, but the
# ccl_torch step, which builds ccl_torch from the bundle and runs its cases on CPU tensors): how
# the script itself is checked on a machine without one.
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

copy_gbs=$(echo "$kernels_out" | sed -n 's/.*cudaMemcpy D2D \([0-9.]*\) GB\/s.*/\1/p' | head -1)
# The out-of-place busbw (column 8) of the 64 MiB float row of an nccl-tests table on stdin.
busbw_64m() { awk '$1 == 67108864 && $3 == "float" {print $8; exit}'; }
# A percentage of the copy ceiling, or "?" without one.
of_copy() { awk -v b="$1" -v c="${copy_gbs:-0}" 'BEGIN {if (c > 0) printf "%.0f%%", 100 * b / c; else print "?"}'; }

for n in 2 4 8; do
  out=$(bounded 300 "$libs" "$bin/device_collectives_check" --ranks "$n" 2>&1)
  status=$?
  echo "$out" | tail -5
  if [ $status = 0 ]; then
    summary+=("$(echo "$out" | grep -m1 '^device_collectives_check:' | sed 's/^device_collectives_check: //')")
  else
    failed+=("device_collectives_check --ranks $n (status $status)")
  fi
  out=$(bounded 300 "$libs" "$bin/device_world_check" --ranks "$n" 2>&1)
  status=$?
  echo "$out" | tail -5
  if [ $status = 0 ]; then
    summary+=("$(echo "$out" | grep -m1 '^device_world_check:' | sed 's/^device_world_check: //')")
  else
    failed+=("device_world_check --ranks $n (status $status)")
  fi
  # Each collective at 64 MiB (per rank's count argument, as nccl-tests sizes it), stream mode.
  line="$n ranks, busbw at 64 MiB (D2D ${copy_gbs:-?} GB/s):"
  for perf in all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv; do
    out=$(bounded 120 "$libs" "$bin/cclrun" -np "$n" "$bin/${perf}_perf" --memory device \
            -b 64M -e 64M -n 10 -w 3 -c 1 2>&1)
    status=$?
    bw=$(busbw_64m <<<"$out")
    if [ $status = 0 ] && [ -n "$bw" ] && ! grep -q "Out of bounds values : [1-9]" <<<"$out"; then
      line+=" $perf $bw ($(of_copy "$bw"))"
    else
      echo "$out" | tail -15
      failed+=("${perf}_perf --memory device at $n ranks (status $status)")
    fi
  done
  summary+=("$line")
done

# Every collective host-staged (CCL_CUDA_IPC=0), so that a runtime that refuses IPC (a sandbox)
# still checks that path.
out=$(CCL_CUDA_IPC=0 bounded 300 "$libs" "$bin/device_collectives_check" --ranks 2 2>&1)
status=$?
echo "$out" | tail -5
if [ $status = 0 ]; then
  summary+=("$(echo "$out" | grep -m1 '^device_collectives_check:' | sed 's/^device_collectives_check: //') (CCL_CUDA_IPC=0)")
else
  failed+=("device_collectives_check --ranks 2, CCL_CUDA_IPC=0 (status $status)")
fi

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

# torch's ProcessGroupNCCL on the shim, as a training script meets it: the GPU machine's own
# python3 and torch (a CUDA build) with the shim preloaded (the bundle's py/, or the checkout's
# for a bundle made before it had one). Its budget is what is left before 500 s (the nccl-tests
# sweeps come after), 140 s at most; it ends its own processes within that budget, so the
# timeout is for a stuck driver.
torch_check=$root/py/torch_nccl_check.py
[ -f "$torch_check" ] || torch_check=tests/nccl_shim/torch_nccl_check.py
python=${CCL_DEVICE_CHECK_PYTHON:-python3}
# A path made absolute (not resolved: a venv's python is a link to its base interpreter), since
# the ccl_torch build runs in another folder.
case $python in */*) python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")" ;; esac
# torch_step NAME BEFORE ARGS...: the torch check with what is left before BEFORE s of the
# check (120 s at most); its PASS or skip line joins the summary, anything else the failures.
torch_step() {
  local name=$1 budget out status line
  budget=$(( $2 - ($(date +%s) - start) ))
  [ "$budget" -gt 120 ] && budget=120
  if [ "$budget" -lt 60 ]; then
    summary+=("$name not run: ${budget} s of the check's 10 minutes left for it")
    return
  fi
  out=$(timeout $((budget + 20)) "$python" "$torch_check" "${@:3}" --budget "$budget" 2>&1)
  status=$?
  echo "$out" | tail -20
  line=$(grep -m1 '^torch_nccl_check: ' <<<"$out")
  if [ $status = 0 ] && [ -n "$line" ]; then
    summary+=("$(sed "s/^torch_nccl_check: PASS: //; s/^torch_nccl_check: skipped: /$name skipped: /" <<<"$line")")
  else
    failed+=("$name (status $status)")
  fi
}
torch_step "torch step" 400 "$root"

# ccl_torch, built here against this python's torch (a module built elsewhere would not load).
if [ ! -d "$root/torch" ]; then
  summary+=("ccl_torch step not run: the bundle has no torch/ (made before it had one)")
elif [ "${CCL_DEVICE_CHECK_WITHOUT_GPU:-0}" != 1 ] &&
     ! "$python" -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  summary+=("ccl_torch step skipped: $python has no torch with a GPU")
else
  # Without a GPU (the script's own check), built all the same and run on CPU tensors.
  on_cpu=()
  [ "${CCL_DEVICE_CHECK_WITHOUT_GPU:-0}" = 1 ] && on_cpu=(--cpu)
  built=$( (cd "$root/torch" && CCL_HOME=$root timeout 300 "$python" setup.py build_ext --inplace \
              --parallel "$(nproc)") 2>&1)
  if [ $? != 0 ]; then
    echo "$built" | tail -20
    failed+=("ccl_torch build against $("$python" -c 'import torch; print(torch.__version__)' 2>&1)")
  else
    torch_step "ccl_torch step" 540 "$root" --ccl-torch "$root/torch" "${on_cpu[@]}"
  fi
fi

if [ -x "$bin/nccl_tests_all_reduce_perf" ]; then
  SWEEP_BW=algbw sweep "nccl-tests all_reduce_perf on the shim, 1 rank" "" \
    "$shim_libs" "$bin/nccl_tests_all_reduce_perf" -b 8 -e 256M -f 4 -g 1 -c 1
  shim_bw=$(sed -n 's/^nccl-tests all_reduce_perf on the shim, 1 rank: best algbw \([0-9.]*\).*/\1/p' \
              < <(printf '%s\n' "${summary[@]}") | tail -1)
  # NVIDIA's own library, for the same binary: the GPU image carries it in a Python package.
  nccl_dir=${NCCL_LIBRARY_DIR:-$(python3 -c 'import nvidia.nccl, os; print(os.path.join(os.path.dirname(nvidia.nccl.__file__), "lib"))' 2>/dev/null)}
  if [ -n "$nccl_dir" ] && [ -e "$nccl_dir/libnccl.so.2" ]; then
    SWEEP_BW=algbw sweep "nccl-tests all_reduce_perf on NVIDIA's libnccl, 1 rank" "" \
      "$nccl_dir:$libs" "$bin/nccl_tests_all_reduce_perf" -b 8 -e 256M -f 4 -g 1 -c 1
    nccl_bw=$(sed -n "s/^nccl-tests all_reduce_perf on NVIDIA's libnccl, 1 rank: best algbw \([0-9.]*\).*/\1/p" \
                < <(printf '%s\n' "${summary[@]}") | tail -1)
    [ -n "$shim_bw" ] && [ -n "$nccl_bw" ] && summary+=("shim / NCCL algbw at 1 rank: $(awk -v a="$shim_bw" -v b="$nccl_bw" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "?"}')")
  else
    summary+=("NVIDIA's libnccl.so.2 not found (no nvidia-nccl package, NCCL_LIBRARY_DIR unset)")
  fi
else
  summary+=("nccl-tests not in the bundle (NCCL_TESTS_DIR unset when it was made)")
fi

took=$(( $(date +%s) - start ))
if [ ${#failed[@]} = 0 ]; then
  log "PASS on $gpu in ${took} s: $(IFS=';'; echo "${summary[*]}")"
  exit 0
fi
log "FAIL on $gpu in ${took} s: $(IFS=';'; echo "${failed[*]}")${summary[*]:+ | the rest: $(IFS=';'; echo "${summary[*]}")}"
exit 1
