# The device mesh: placement and description on synthetic layouts, DeviceMesh at 1, 2, 4 and 8
# ranks (threads of one process).
ccl_unit_test(training_mesh_test SOURCES mesh_placement_test.cc device_mesh_test.cc
              LIBS ccl_training DEVSHM)
# The placement on the saved machines of tests/data: the test reads their locality keys through
# the topology module, so it compiles the (pure) placement itself rather than link libccl beside
# the module's objects.
set(_mesh_topology_libs ccl_topology ccl_cuda ccl_reduce ccl_base)
if(CCL_HAVE_CUDA_KERNELS)
  list(APPEND _mesh_topology_libs ccl_cuda_kernels)
endif()
ccl_unit_test(training_mesh_topology_test SOURCES mesh_topology_test.cc
              ${PROJECT_SOURCE_DIR}/src/training/mesh/placement.cc LIBS ${_mesh_topology_libs})
target_compile_definitions(training_mesh_topology_test PRIVATE
  CCL_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/tests/data")
