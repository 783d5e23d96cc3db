# The installed package: lib/cmake/ccl/ (find_package(ccl): ccl::ccl, ccl::ccl_static) and
# lib/pkgconfig/ccl.pc. The version is the project's, which CMakeLists.txt reads from ccl.h.
# Included from CMakeLists.txt after src/, which installs the targets into the cclTargets export
# and sets CCL_PKG_DEPS.
include(CMakePackageConfigHelpers)

set(CCL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ccl)
install(EXPORT cclTargets NAMESPACE ccl:: DESTINATION ${CCL_CMAKE_DIR} FILE cclTargets.cmake)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/cclConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/cclConfig.cmake
  INSTALL_DESTINATION ${CCL_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR)
# libccl.so's SONAME changes with the major version only; the package promises the same.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cclConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cclConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/cclConfigVersion.cmake
        DESTINATION ${CCL_CMAKE_DIR})

# ccl.pc. Paths go through ${pcfiledir} so that `cmake --install --prefix P` (a prefix chosen
# after configure) gives a correct file; absolute install dirs are written as they are.
set(CCL_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${CCL_PC_DIR}")
  set(CCL_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _up /prefix/${CCL_PC_DIR} /prefix)
  string(REGEX REPLACE "/$" "" _up "${_up}")
  set(CCL_PC_PREFIX "\${pcfiledir}/${_up}")
endif()
foreach(_kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_kind}}")
    set(CCL_PC_${_kind} "${CMAKE_INSTALL_${_kind}}")
  else()
    set(CCL_PC_${_kind} "\${prefix}/${CMAKE_INSTALL_${_kind}}")
  endif()
endforeach()

# What a C program linking libccl.a needs besides it: threads, the C++ runtime (the libraries the
# C++ compiler links and the C compiler does not) and the optional libraries.
set(CCL_PC_LIBS_PRIVATE -pthread)
foreach(_lib ${CMAKE_CXX_IMPLICIT_LINK_LIBRARIES})
  if(NOT _lib IN_LIST CMAKE_C_IMPLICIT_LINK_LIBRARIES AND NOT "-l${_lib}" IN_LIST CCL_PC_LIBS_PRIVATE)
    if(_lib MATCHES "^-" OR IS_ABSOLUTE "${_lib}")
      list(APPEND CCL_PC_LIBS_PRIVATE ${_lib})
    else()
      list(APPEND CCL_PC_LIBS_PRIVATE -l${_lib})
    endif()
  endif()
endforeach()
list(JOIN CCL_PC_LIBS_PRIVATE " " CCL_PC_LIBS_PRIVATE)
set(CCL_PC_REQUIRES_PRIVATE "")
foreach(_dep ${CCL_PKG_DEPS})
  string(REGEX REPLACE "^[^=]*=" "" _module ${_dep})
  list(APPEND CCL_PC_REQUIRES_PRIVATE ${_module})
endforeach()
if(CCL_PC_REQUIRES_PRIVATE)
  list(JOIN CCL_PC_REQUIRES_PRIVATE ", " CCL_PC_REQUIRES_PRIVATE)
  set(CCL_PC_REQUIRES_PRIVATE "Requires.private: ${CCL_PC_REQUIRES_PRIVATE}")
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/ccl.pc.in ${CMAKE_CURRENT_BINARY_DIR}/ccl.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/ccl.pc DESTINATION ${CCL_PC_DIR})
