#!/usr/bin/env bash
# Installs this build tree into a scratch prefix and uses it the way a user would.
#   install_test.sh build CMAKE BUILD_DIR EXAMPLES_DIR WORK_DIR GENERATOR CC CXX
#     cmake --install, checks the installed files, builds examples/ with find_package(ccl) and
#     allreduce.c with pkg-config (libccl.so, and libccl.a with --static's flags)
#   install_test.sh run CMAKE BUILD_DIR EXAMPLES_DIR WORK_DIR
#     runs every program built above on 2 ranks under the installed cclrun
set -euo pipefail
mode=$1 cmake=$2 build=$3 examples=$4 work=$5
prefix=$work/prefix
out=$work/examples

fail() { echo "FAIL: $*" >&2; exit 1; }
# Runs a step quietly; on failure shows its output.
step() {
  local name=$1; shift
  echo "== $name"
  if ! "$@" > "$work/step.log" 2>&1; then
    cat "$work/step.log"
    fail "$name"
  fi
}

if [ "$mode" = build ]; then
  generator=$6 cc=$7 cxx=$8
  rm -rf "$work"
  mkdir -p "$work"
  step "cmake --install" "$cmake" --install "$build" --prefix "$prefix"
  for f in include/ccl/ccl.h include/ccl/ccl.hpp lib/libccl.a lib/pkgconfig/ccl.pc \
           lib/cmake/ccl/cclConfig.cmake lib/cmake/ccl/cclConfigVersion.cmake \
           lib/cmake/ccl/cclTargets.cmake bin/cclrun bin/ccl-info; do
    [ -e "$prefix/$f" ] || fail "not installed: $f"
  done

  # The installed ccl-info finds the installed libccl.so by its RPATH, and says which version.
  info=$(env -u LD_LIBRARY_PATH "$prefix/bin/ccl-info" --version) || fail "ccl-info --version"
  version=$(echo "$info" | sed -n 's/^ccl \([0-9.]*\) (version code [0-9]*)$/\1/p')
  [ -n "$version" ] || fail "ccl-info --version printed '$info'"
  echo "installed ccl $version"
  # libccl.so -> libccl.so.MAJOR (the SONAME) -> libccl.so.VERSION
  [ -f "$prefix/lib/libccl.so.$version" ] || fail "no lib/libccl.so.$version"
  [ "$(readlink "$prefix/lib/libccl.so")" = "libccl.so.${version%%.*}" ] ||
    fail "lib/libccl.so does not point to libccl.so.${version%%.*}"

  step "configure examples/ (find_package)" "$cmake" -S "$examples" -B "$out" -G "$generator" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_PREFIX_PATH="$prefix"
  found=$(sed -n 's/^ccl_DIR:PATH=//p' "$out/CMakeCache.txt")
  [ "$found" = "$prefix/lib/cmake/ccl" ] || fail "find_package(ccl) found '$found'"
  step "build examples/" "$cmake" --build "$out"

  command -v pkg-config > /dev/null || fail "pkg-config is not installed"
  export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
  [ "$(pkg-config --modversion ccl)" = "$version" ] || fail "ccl.pc's version is not $version"
  # shellcheck disable=SC2046  # the flags are meant to be split
  step "cc allreduce.c \$(pkg-config --cflags --libs ccl)" "$cc" "$examples/allreduce.c" \
    $(pkg-config --cflags --libs ccl) -Wl,-rpath,"$prefix/lib" -o "$out/allreduce_c_pc"
  # libccl.a with what `pkg-config --static` says it needs, linked as shared libraries: a fully
  # static program is out of reach once hwloc is in (Debian ships no libudev.a).
  static_libs=$(pkg-config --static --libs ccl | sed 's/-lccl\b/-l:libccl.a/')
  # shellcheck disable=SC2086  # the flags are meant to be split
  step "cc allreduce.c libccl.a \$(pkg-config --static --libs ccl)" "$cc" "$examples/allreduce.c" \
    $(pkg-config --cflags ccl) $static_libs -o "$out/allreduce_c_pc_static"
  exit 0
fi

[ "$mode" = run ] || fail "unknown mode '$mode'"
for prog in allreduce_c allreduce_cpp allreduce_c_static allreduce_c_pc allreduce_c_pc_static; do
  echo "== cclrun -np 2 $prog"
  log=$work/$prog.log
  status=0
  env -u LD_LIBRARY_PATH "$prefix/bin/cclrun" -np 2 --timeout 60 "$out/$prog" > "$log" 2>&1 ||
    status=$?
  cat "$log"
  [ "$status" -eq 0 ] || fail "$prog exited with $status"
  [ "$(grep -c '^rank [01] of 2: allreduce ok (3 6 9 12)$' "$log")" -eq 2 ] ||
    fail "$prog: not two 'allreduce ok' lines"
done
echo "install test passed"
