# Run by ctest, after a test binary's discovered tests were added: labels "exhaustive" the
# instances of value-parameterized tests that the sanitizer subset leaves out (test_subset.cmake).
# Inputs: ccl_subset_list (the variable naming the discovered tests) and ccl_subset_labels (the
# labels they were given).
include(${CMAKE_CURRENT_LIST_DIR}/test_subset_rule.cmake)
# Prefix/Suite.Test/Param; typed tests (Suite/0.Test) and plain ones have no '/' after the '.'.
ccl_subset_left_out(_ccl_left_out "^([^.]*\\.[^/]*)/[^/]*$" "\\1" ends_and_middle
                    ${${ccl_subset_list}})
foreach(_ccl_test IN LISTS _ccl_left_out)
  set_tests_properties("${_ccl_test}" PROPERTIES LABELS "${ccl_subset_labels};exhaustive")
endforeach()
