# The sanitizer subset (`make asan`, `make tsan`): every test binary, test suite and test, but of
# a sweep over parameters only a few points. Tests outside the subset carry the label
# "exhaustive"; `ctest -LE exhaustive` runs the subset, `make asan-full` / `make tsan-full` run
# everything. The rule is applied to test names, so a test added later is covered without anyone
# labelling it (a test that is not part of a sweep is always in the subset):
#   - a value-parameterized GoogleTest, `Prefix/Suite.Test/Param`: of all the instances of one
#     `Prefix/Suite.Test`, in gtest's order, the first, the middle and the last stay;
#   - a process test whose name has a rank count or shape component (`.np3`, `.2x2`): of the
#     tests whose names are equal but for that component (integration.collectives.tcp.np1..np4,
#     netns.collective_set.2x1/2x2/3x1), in the order they were added, the middle one stays.
# GoogleTests get the rule through ccl_subset_gtests (at ctest time: their names are known only
# once the binary is built), process tests through ccl_subset_process_tests at the end of the
# CMakeLists.txt that adds them (tests/integration, tests/netns, perf/nccl_tests/tests; a new
# folder of process tests calls it too). docs/testing.md says the same for people adding tests.

include(${CMAKE_CURRENT_LIST_DIR}/test_subset_rule.cmake)
set(CCL_SUBSET_GTEST_SCRIPT ${CMAKE_CURRENT_LIST_DIR}/test_subset_gtest.cmake)

# After gtest_discover_tests(TARGET ... TEST_LIST LIST_VAR PROPERTIES LABELS LABELS...).
function(ccl_subset_gtests target list_var)
  set(include_file ${CMAKE_CURRENT_BINARY_DIR}/${target}_subset.cmake)
  file(WRITE ${include_file}
       "set(ccl_subset_list [==[${list_var}]==])\n"
       "set(ccl_subset_labels [==[${ARGN}]==])\n"
       "include([==[${CCL_SUBSET_GTEST_SCRIPT}]==])\n")
  # After the target's own include file (gtest_discover_tests appended it already).
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${include_file})
endfunction()

# At the end of a CMakeLists.txt that adds process tests with add_test.
function(ccl_subset_process_tests)
  get_property(tests DIRECTORY PROPERTY TESTS)
  ccl_subset_left_out(left_out "\\.(np[0-9]+|[0-9]+x[0-9]+)(\\.|$)" "\\2" middle ${tests})
  foreach(test IN LISTS left_out)
    get_test_property(${test} LABELS labels)
    if(NOT labels)
      set(labels "")
    endif()
    list(APPEND labels exhaustive)
    set_tests_properties(${test} PROPERTIES LABELS "${labels}")
  endforeach()
endfunction()
