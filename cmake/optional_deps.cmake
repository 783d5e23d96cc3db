# Optional dependencies: found ones are reported in the configure summary. Issue by issue they
# gain users (hwloc: topology discovery, required by it when found; ibverbs/ucx: transports; CUDA: device memory).
option(CCL_ENABLE_IBVERBS "Build the InfiniBand verbs transport where verbs.h is found" ON)
option(CCL_ENABLE_UCX "Build the UCX transport where libucx is found" ON)
set(CCL_HAVE_HWLOC OFF)
set(CCL_HAVE_IBVERBS OFF)
set(CCL_HAVE_UCX OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC IMPORTED_TARGET hwloc)
  if(HWLOC_FOUND)
    set(CCL_HAVE_HWLOC ON)
  endif()
  # libxml2 reads and writes the topology file (src/topology/topology_xml.cc); hwloc already
  # depends on it, so it costs nothing where hwloc is installed.
  pkg_check_modules(LIBXML2 REQUIRED IMPORTED_TARGET libxml-2.0)
  # The network transports (src/transport/ib, src/transport/ucx): built when their headers are
  # found, unless turned off (-DCCL_ENABLE_IBVERBS=OFF, -DCCL_ENABLE_UCX=OFF).
  if(CCL_ENABLE_IBVERBS)
    pkg_check_modules(IBVERBS IMPORTED_TARGET libibverbs)
    if(IBVERBS_FOUND)
      set(CCL_HAVE_IBVERBS ON)
    endif()
  endif()
  if(CCL_ENABLE_UCX)
    pkg_check_modules(UCX IMPORTED_TARGET ucx)
    if(UCX_FOUND)
      set(CCL_HAVE_UCX ON)
    endif()
  endif()
endif()

# The CUDA toolkit is looked for, not required: libccl takes only cuda.h's declarations from it
# and loads the driver (libcuda.so.1) at run time, so a CUDA build runs, unchanged, where there is
# no driver. CCL_ENABLE_CUDA=OFF builds without the toolkit even where it is installed (the fuzz
# build does, and libccl with it, so that CI builds both ways).
option(CCL_ENABLE_CUDA "Build the CUDA path where the CUDA toolkit is found" ON)
set(CCL_HAVE_CUDA_TOOLKIT OFF)
if(CCL_ENABLE_CUDA)
  find_package(CUDAToolkit QUIET)
  set(CCL_HAVE_CUDA_TOOLKIT ${CUDAToolkit_FOUND})
endif()
