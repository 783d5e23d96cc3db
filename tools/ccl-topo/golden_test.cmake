# One golden-output check of ccl-topo:
#   cmake -DCCL_TOPO=<ccl-topo> -DXML=<machine>.xml -DEXPECTED=<machine>.ccl-topo.txt
#         [-DWORK_DIR=<dir for the actual output>] [-DUPDATE=1] -P golden_test.cmake
# The output must equal EXPECTED exactly; a mismatch prints a unified diff. UPDATE=1 rewrites
# EXPECTED instead (review the change with git diff). --xml must reproduce the file itself: the
# data files are in canonical form.

function(fail)
  message(FATAL_ERROR "ccl-topo golden test (${XML}): ${ARGV}")
endfunction()

# Runs ccl-topo; sets out in the caller, fails on a non-zero status.
function(run_topo)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env --unset=CCL_TOPO_FILE --unset=CCL_DEBUG
                          ${CCL_TOPO} ${ARGV}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE o ERROR_VARIABLE e TIMEOUT 30)
  if(NOT rc EQUAL 0)
    fail("'ccl-topo ${ARGV}' exited with ${rc}: ${e}")
  endif()
  set(out "${o}" PARENT_SCOPE)
endfunction()

# Shows how `actual` differs from the file `expected_file`, then fails.
function(fail_with_diff what expected_file actual)
  if(NOT WORK_DIR)
    set(WORK_DIR ${CMAKE_CURRENT_BINARY_DIR})
  endif()
  get_filename_component(base ${expected_file} NAME)
  set(actual_file ${WORK_DIR}/${base}.actual)
  file(WRITE ${actual_file} "${actual}")
  find_program(DIFF diff)
  if(DIFF)
    execute_process(COMMAND ${DIFF} -u ${expected_file} ${actual_file} OUTPUT_VARIABLE d)
    message("${d}")
  else()
    message("expected (${expected_file}) and actual (${actual_file}) differ")
  endif()
  fail("${what} differs from ${expected_file} (actual output: ${actual_file})")
endfunction()

run_topo(--file ${XML})
if(UPDATE)
  file(WRITE ${EXPECTED} "${out}")
  message(STATUS "wrote ${EXPECTED}")
  return()
endif()
if(NOT EXISTS ${EXPECTED})
  fail("no ${EXPECTED}")
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  fail_with_diff("ccl-topo --file" ${EXPECTED} "${out}")
endif()

run_topo(--file ${XML} --xml)
file(READ ${XML} xml)
if(NOT out STREQUAL xml)
  fail_with_diff("ccl-topo --xml" ${XML} "${out}")
endif()
