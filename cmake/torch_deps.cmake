# Finds what bindings/torch needs: PyTorch's C++ package, an interpreter that imports torch, its
# libtorch_python and pybind11. Sets CCL_HAVE_TORCH. Debian 12: python3-torch, libtorch-dev and
# pybind11-dev, whose torch is under /usr/bin/python3 (another python3 may come first on PATH).
set(CCL_HAVE_TORCH OFF)
set(CCL_TORCH_PYTHON "" CACHE FILEPATH "The Python interpreter for ccl_torch (default: the first of python3 on PATH and /usr/bin/python3 that imports torch)")
if(NOT CCL_BUILD_TORCH OR NOT CCL_SANITIZE STREQUAL "")
  return()
endif()
find_package(Torch QUIET)
if(NOT Torch_FOUND)
  return()
endif()
set(_candidates ${CCL_TORCH_PYTHON})
find_program(_path_python3 python3)
list(APPEND _candidates ${_path_python3} /usr/bin/python3)
set(_torch_python "")
foreach(py ${_candidates})
  execute_process(COMMAND ${py} -c "import os, torch; print(os.path.dirname(torch.__file__))"
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _torch_dir ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    set(_torch_python ${py})
    break()
  endif()
endforeach()
if(_torch_python STREQUAL "")
  message(STATUS "ccl_torch: libtorch found, but no interpreter imports torch (tried ${_candidates})")
  return()
endif()
# pybind11's classic Python lookup takes the interpreter from PYTHON_EXECUTABLE.
set(PYTHON_EXECUTABLE ${_torch_python} CACHE FILEPATH "" FORCE)
find_package(pybind11 CONFIG QUIET)
find_library(CCL_TORCH_PYTHON_LIBRARY torch_python HINTS ${_torch_dir}/lib ${TORCH_INSTALL_PREFIX}/lib)
if(NOT pybind11_FOUND OR NOT CCL_TORCH_PYTHON_LIBRARY)
  message(STATUS "ccl_torch: torch found, but pybind11 (${pybind11_FOUND}) or libtorch_python "
                 "(${CCL_TORCH_PYTHON_LIBRARY}) is missing")
  return()
endif()
set(CCL_HAVE_TORCH ON)
set(CCL_TORCH_PYTHON_EXECUTABLE ${_torch_python})
set(CCL_TORCH_MODULE_SUFFIX ${PYTHON_MODULE_EXTENSION})
# TORCH_CXX_FLAGS carries -D_GLIBCXX_USE_CXX11_ABI=<0|1>, which must match libtorch's.
separate_arguments(CCL_TORCH_CXX_FLAGS UNIX_COMMAND "${TORCH_CXX_FLAGS}")
