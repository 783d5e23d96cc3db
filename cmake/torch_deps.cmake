# Finds what bindings/torch needs: an interpreter that imports torch 2.x, and from it torch's
# headers, libraries (libtorch_python among them), the pybind11 headers torch ships, Python's
# headers and the extension suffix (bindings/torch/torch_config.py asks it). Sets CCL_HAVE_TORCH.
#
# The interpreter: CCL_TORCH_PYTHON if set, else the project's virtual environment (.venv, where
# scripts/install-deps.sh installs the pinned torch), else python3 on PATH.
set(CCL_HAVE_TORCH OFF)
set(CCL_TORCH_PYTHON "" CACHE FILEPATH
    "The Python interpreter whose torch ccl_torch is built against (default: .venv/bin/python, then python3 on PATH)")
if(NOT CCL_BUILD_TORCH OR NOT CCL_SANITIZE STREQUAL "")
  return()
endif()
set(_candidates ${CCL_TORCH_PYTHON} ${PROJECT_SOURCE_DIR}/.venv/bin/python)
find_program(_path_python3 python3)
list(APPEND _candidates ${_path_python3})
set(_torch_python "")
foreach(py ${_candidates})
  if(NOT EXISTS ${py})
    continue()
  endif()
  execute_process(COMMAND ${py} ${PROJECT_SOURCE_DIR}/bindings/torch/torch_config.py
                  RESULT_VARIABLE _rc OUTPUT_VARIABLE _torch_config ERROR_QUIET
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_rc EQUAL 0)
    set(_torch_python ${py})
    break()
  endif()
endforeach()
if(_torch_python STREQUAL "")
  message(STATUS "ccl_torch: no interpreter imports torch (tried ${_candidates}); "
                 "scripts/install-deps.sh installs it into .venv")
  return()
endif()
string(REPLACE "\n" ";" _torch_lines "${_torch_config}")
foreach(line ${_torch_lines})
  if(line MATCHES "^([a-z_0-9]+)=(.*)$")
    set(_torch_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
  endif()
endforeach()
if(_torch_version_major LESS 2)
  message(STATUS "ccl_torch: torch ${_torch_version} under ${_torch_python} is older than 2.0 "
                 "(c10d::Backend); not built")
  return()
endif()
set(CCL_HAVE_TORCH ON)
set(CCL_TORCH_PYTHON_EXECUTABLE ${_torch_python})
set(CCL_TORCH_VERSION ${_torch_version})
set(CCL_TORCH_MODULE_SUFFIX ${_torch_module_suffix})
# torch's include dirs carry pybind11; ${_torch_python_include} is Python.h's.
set(CCL_TORCH_INCLUDE_DIRS ${_torch_include_dirs} ${_torch_python_include})
set(CCL_TORCH_DEFINITIONS _GLIBCXX_USE_CXX11_ABI=${_torch_cxx11_abi})
set(CCL_TORCH_LIBRARY_DIR ${_torch_library_dir})
set(CCL_TORCH_LIBRARIES)
foreach(lib c10 torch torch_cpu torch_python)
  set(_lib ${_torch_library_dir}/lib${lib}.so)
  if(NOT EXISTS ${_lib})
    message(STATUS "ccl_torch: ${_lib} is missing; not built")
    set(CCL_HAVE_TORCH OFF)
    return()
  endif()
  list(APPEND CCL_TORCH_LIBRARIES ${_lib})
endforeach()
