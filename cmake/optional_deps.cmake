# Optional dependencies: found ones are reported in the configure summary. Issue by issue they
# gain users (hwloc: topology; ibverbs/ucx: transports; CUDA: device memory).
set(CCL_HAVE_HWLOC OFF)
set(CCL_HAVE_IBVERBS OFF)
set(CCL_HAVE_UCX OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC IMPORTED_TARGET hwloc)
  if(HWLOC_FOUND)
    set(CCL_HAVE_HWLOC ON)
  endif()
  pkg_check_modules(IBVERBS IMPORTED_TARGET libibverbs)
  if(IBVERBS_FOUND)
    set(CCL_HAVE_IBVERBS ON)
  endif()
  pkg_check_modules(UCX IMPORTED_TARGET ucx)
  if(UCX_FOUND)
    set(CCL_HAVE_UCX ON)
  endif()
endif()

# The CUDA toolkit is looked for, not required: device support is detected at run time.
find_package(CUDAToolkit QUIET)
set(CCL_HAVE_CUDA_TOOLKIT ${CUDAToolkit_FOUND})
