#!/usr/bin/env bash
# Builds, on this machine (no GPU needed), everything scripts/device-check.sh runs on a GPU, and
# packs it with the shared libraries it needs into one file to carry to the GPU machine:
#
#   scripts/device-bundle.sh [OUT]         (default .device/ccl-device.tar.xz, git-ignored)
#   then, there:  scripts/device-check.sh --bundle .device/ccl-device.tar.xz
#
# Why: the GPU machine lent to this project is a CUDA image with nvcc, CMake and ninja but none of
# ccl's build dependencies (libxml2, hwloc, GoogleTest, Google Benchmark) and no package registry,
# and its time is short (minutes), so building there is a gamble. The bundle holds
#   bin/   cuda_kernels_check, device_collectives_check, device_world_check, ccl's *_perf (every
#          collective), cclrun,
#          nccl_program (tests/nccl_shim, linked against NVIDIA's libnccl.so.2) and, where
#          NCCL_TESTS_DIR names a checkout of nccl-tests, nccl_tests_all_reduce_perf (built here
#          against NCCL's nccl.h, the CUDA runtime static, sm_90 code);
#   lib/   libccl.so.0 and every library the binaries load beyond glibc and the C++ runtime
#          (libxml2 and ICU, hwloc, ...), taken from this machine: newer glibc and libstdc++
#          run them (the GPU machine's are newer than Debian 12's);
#   nccl/  the shim's folder for LD_LIBRARY_PATH: libnccl.so.2, a link to lib/libccl_nccl.so;
#   py/    torch_nccl_check.py (tests/nccl_shim): the torch steps, run by the GPU machine's own
#          python3 and torch on nccl/libnccl.so.2 (preloaded) and lib/; not in bin/, whose every
#          file the library hunt below gives to ldd;
#   torch/ ccl_torch's sources (bindings/torch: setup.py, modules.txt, src/, ccl_torch/) and
#   include/ ccl's headers, with lib/libccl.so: the GPU machine builds ccl_torch against its own
#          torch (CCL_HOME=<the bundle> python3 setup.py build_ext --inplace), since a module
#          built here against another torch would not load there;
#   MANIFEST  the commit, the date and what was built.
# Built without UCX (its transport modules are loaded from UCX's own folder, which the bundle
# would have to carry too) and without the PyTorch backend (its sources travel instead, above).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-.device/ccl-device.tar.xz}
build=${CCL_DEVICE_BUILD_DIR:-build-device}
jobs=$(nproc)
log() { echo "device-bundle: $*" >&2; }

mkdir -p "$build"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCCL_ENABLE_UCX=OFF \
  -DCCL_BUILD_TORCH=OFF >"$build/bundle.cmake.log" 2>&1 || { tail -20 "$build/bundle.cmake.log"; exit 1; }
perfs=(all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf
       sendrecv_perf)
targets=(cuda_kernels_check device_collectives_check device_world_check "${perfs[@]}" cclrun ccl_nccl
         nccl_program)
log "building ${targets[*]} in $build/"
cmake --build "$build" -j "$jobs" --target "${targets[@]}" >"$build/bundle.build.log" 2>&1 ||
  { tail -30 "$build/bundle.build.log"; log "the build failed (is the CUDA toolkit with nccl.h there?)"; exit 1; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root=$stage/ccl-device
mkdir -p "$root/bin" "$root/lib" "$root/nccl" "$root/py" "$root/torch"
cp "$build/tests/cuda/cuda_kernels_check" "$build/tests/cuda/device_collectives_check" \
   "$build/tests/cuda/device_world_check" "$build/tools/cclrun" \
   "$build/tests/nccl_shim/nccl_program" "$root/bin/"
for p in "${perfs[@]}"; do cp "$build/perf/$p" "$root/bin/"; done
cp -L "$build/src/libccl.so.0" "$root/lib/"
# As installed: libnccl.so.2 a link to libccl_nccl.so (nccl_program checks that the library
# serving ncclAllReduce is that file).
cp -L "$build/src/nccl_shim/libccl_nccl.so" "$root/lib/"
ln -s ../lib/libccl_nccl.so "$root/nccl/libnccl.so.2"
cp tests/nccl_shim/torch_nccl_check.py "$root/py/"
ln -s libccl.so.0 "$root/lib/libccl.so"  # what setup.py links against (CCL_HOME)
cp -r include "$root/include"
cp -r bindings/torch/setup.py bindings/torch/torch_config.py bindings/torch/modules.txt \
   bindings/torch/src bindings/torch/ccl_torch "$root/torch/"

if [ -n "${NCCL_TESTS_DIR:-}" ]; then
  # nccl-tests as its README builds it, against NCCL's header and library from the toolkit; one
  # architecture (the GPU machine's Hopper) keeps the build to a few minutes on two cores.
  src=$stage/nccl-tests
  home=$stage/nccl-home
  mkdir -p "$home/include" "$home/lib"
  cp -r "$NCCL_TESTS_DIR" "$src"
  cp /usr/local/cuda/include/nccl.h "$home/include/"
  ln -s /usr/local/cuda/lib64/libnccl.so* "$home/lib/"
  log "building nccl-tests' all_reduce_perf from $NCCL_TESTS_DIR"
  make -C "$src/src" -j "$jobs" CUDA_HOME=/usr/local/cuda NCCL_HOME="$home" \
    CUDARTLIB=cudart_static NVCC_GENCODE="-gencode=arch=compute_90,code=sm_90" \
    BUILDDIR="$src/build" "$src/build/all_reduce_perf" >"$build/bundle.nccl-tests.log" 2>&1 ||
    { tail -20 "$build/bundle.nccl-tests.log"; exit 1; }
  cp "$src/build/all_reduce_perf" "$root/bin/nccl_tests_all_reduce_perf"
fi

# Every library the ELF files load, resolved here, except the loader, glibc's and the C++
# runtime's (present, and newer, wherever CUDA programs run); libnccl.so.2 is the shim's own.
system_lib='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libnccl)\.'
for elf in "$root"/bin/* "$root"/lib/libccl.so.0 "$root"/lib/libccl_nccl.so; do
  LD_LIBRARY_PATH="$root/lib" ldd "$elf" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  [[ $name =~ $system_lib ]] && continue
  [ -e "$root/lib/$name" ] || cp -L "$path" "$root/lib/$name"
done
for elf in "$root"/bin/* "$root"/lib/*.so*; do
  if LD_LIBRARY_PATH="$root/lib" ldd "$elf" | grep -q "not found"; then
    LD_LIBRARY_PATH="$root/lib" ldd "$elf" | grep "not found" >&2
    log "$elf: a library is missing"
    exit 1
  fi
done

{
  echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%FT%TZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(c++ --version | head -1)"
} >"$stage/MANIFEST"
{
  cat "$stage/MANIFEST"
  echo "files:"
  (cd "$root" && find . -type f -o -type l | sort | sed 's/^/  /')
} >"$root/MANIFEST"
mkdir -p "$(dirname "$out")"
tar -C "$stage" -cJf "$out" ccl-device
log "$out: $(du -h "$out" | cut -f1) ($(du -sh "$root" | cut -f1) unpacked)"
